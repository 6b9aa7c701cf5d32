"""MCP servers in the notebook: ``Agent.mcp_servers``, a project ``.mcp.json`` approved in the panel, and ``%agent_mcp``.

The user's own ``Agent.mcp_servers`` run. A ``.mcp.json`` beside the notebook is used only once this user approved it
in its folder (nbagent/tools/mcp/project.py: its content, its folder, the scripts it names): the panel asks with
Approve/Decline, a decline holds for the kernel (the same file is not asked about again). Where nobody could answer
(nbclient, papermill) or ``Agent.approval`` is ``"deny"``, none of its servers start, approved or not, and a note says so.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class

from ..agent.approval import TERMINAL
from ..state.approval_rule import ApprovalRequest, Here, who_can_answer
from . import kernel as nbkernel
from .cell_view import View
from .settings import Agent

PROJECT_QUESTION = "start_project_mcp_servers"  # the panel's question about a .mcp.json (render/rows.py words it)
_declined: set[str] = set()  # .mcp.json files declined in this kernel, by approval key (content, folder, named files)


def _folder(shell: Any) -> Path:
    notebook = nbkernel.notebook_path(shell)
    return notebook.parent if notebook else Path.cwd()


def _here(shell: Any) -> Here:
    """Who could answer the running request (as the panel tells it): a kernel's front end that allows stdin, else a terminal."""
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return TERMINAL.here()
    try:
        parent = kernel.get_parent("shell") or {}
    except Exception:
        parent = {}
    return Here(kernel=True, frontend_stdin=bool((parent.get("content") or {}).get("allow_stdin", False)))


def source(shell: Any, settings: Agent, view: View | None, *, ask: bool = True, ready: Callable[[], bool] | None = None) -> Any:
    """The run's MCP servers (an McpServers, nothing started), or None when there are none; UsageError for a bad setting.

    ``ask``: a project's file not approved yet is asked about in ``view`` (else only an approved one is used).
    ``ready``: the question waits until it returns true (the request is logged), so the panel shows it under the
    request's "You:" line, not above it (:class:`AfterRequest`).
    """
    from ..tools.mcp import McpConfigError, McpServers, project
    from ..tools.mcp.config import parse

    try:
        configs = parse(settings.mcp_servers, origin="Agent.mcp_servers")
    except McpConfigError as exc:
        raise UsageError(str(exc)) from None
    notes: list[str] = []
    path = project.find(_folder(shell))
    if path is not None:
        found = None
        try:
            found = project.load(path)
        except McpConfigError as exc:
            notes.append(str(exc))
        if found is not None and found.servers:
            here = view.here() if view is not None else _here(shell)
            use = _verdict(found, settings, view if ask else None, here, notes)
            if use is None and ready is not None and view is not None:  # asked once the request is logged
                return AfterRequest(McpServers(configs, skipped=notes), found, view, ready)
            if use is None and view is not None:
                use = _ask(found, view, notes)
            if use:
                configs += _project_configs(found, configs, notes)
    if not configs and not notes:
        return None
    return McpServers(configs, skipped=notes)


class AfterRequest:
    """The run's MCP servers, with a project's .mcp.json to ask about once ``ready()`` (the request is logged): its tools join then."""

    def __init__(self, servers: Any, found: Any, view: View, ready: Callable[[], bool]) -> None:
        self.servers, self.found, self.view, self.ready = servers, found, view, ready
        self._notes: list[str] = []

    def tools(self) -> list[Any]:
        """The servers' tools (the loop reads them before each request); the first call once ready asks the question."""
        if self.found is not None and self.ready():
            found, self.found = self.found, None
            if _ask(found, self.view, self._notes):
                self.servers.configs += _project_configs(found, self.servers.configs, self._notes)
        return list(self.servers.tools())

    def notes(self) -> list[str]:
        """The notes since the last call, each once."""
        taken, self._notes[:] = list(self._notes), []
        return taken + list(self.servers.notes())

    def connections(self) -> list[Any]:
        """Each server's connection (nothing started)."""
        return list(self.servers.connections())


def _project_configs(found: Any, configs: list[Any], notes: list[str]) -> list[Any]:
    """The approved project's servers to add to ``configs``; one of a name Agent.mcp_servers already has is left out, with a note."""
    mine, added = {c.name for c in configs}, []
    for config in found.servers:
        if config.name in mine:
            notes.append(f"MCP server {config.name!r} of {found.path} is not used: Agent.mcp_servers has one of that name.")
        else:
            added.append(config)
    return added


def _verdict(found: Any, settings: Agent, view: View | None, here: Here, notes: list[str]) -> bool | None:
    """Whether this .mcp.json's servers may start without a question: where a person could answer and it was approved before.

    None: a person must be asked (:func:`_ask`, in ``view``); False, with a note, where it may not start.
    """
    from ..tools.mcp import project

    approved = project.approved(found)
    stop = "Agent.approval is 'deny'" if settings.approval == "deny" else ""
    if not stop and who_can_answer(here) == "nobody":
        stop = "nobody can answer here (a headless run)"
    if stop:  # approved or not: a project's servers start only where a person could have been asked
        if approved:
            notes.append(
                f"The MCP servers of {found.path} were not started: {stop}. A project's .mcp.json is used only where a person "
                "could be asked, even when approved; to use a server in headless runs, put it in your own Agent.mcp_servers."
            )
        else:
            notes.append(project.not_approved_note(found, stop))
        return False
    if approved:
        return True
    if found.key in _declined:
        notes.append(project.not_approved_note(found, "you declined it in this kernel"))
        return False
    if view is None or not view.shows_questions:
        notes.append(project.not_approved_note(found, "it is not approved, and nobody can approve it here"))
        return False
    return None


def _ask(found: Any, view: View, notes: list[str]) -> bool:
    """Ask in the panel whether this .mcp.json's servers may start; an approval is kept for its folder, a decline for the kernel."""
    from ..tools.mcp import project

    entries = found.raw.get("mcpServers", found.raw)
    request = ApprovalRequest(
        f"mcp-project-{found.key[:12]}",
        PROJECT_QUESTION,
        {"file": str(found.path), "folder": str(found.folder), "mcpServers": entries, "files": dict(found.files)},
        "irreversible",
        "irreversible",
        about=f"This .mcp.json beside the notebook starts these commands with your rights, in {found.folder}. {found.covers()} "
        "A change to what it covers, or the same file in another folder, asks again.",  # nbagent's words, not the file's
    )
    decision = view.ask(request)
    if decision.approved:
        project.approve(found)
        return True
    if decision.by != "nobody":
        _declined.add(found.key)
    notes.append(project.not_approved_note(found, "nobody could approve it here" if decision.by == "nobody" else "you declined it"))
    return False


def status(settings: Agent, shell: Any, *, start: bool = False) -> str:
    """``%agent_mcp``: each server, where it is configured, its state and tools (``start``: start them first)."""
    servers = source(shell, settings, None, ask=False)
    if servers is None:
        return "No MCP servers: set Agent.mcp_servers, or approve a .mcp.json beside the notebook (docs/mcp.md)."
    lines = [f"note: {text}" for text in servers.notes()]
    if start:
        servers.tools()
        lines += [f"note: {text}" for text in servers.notes()]
    for connection in servers.connections():
        config = connection.config
        state = connection.state + (f" ({connection.error})" if connection.error else "")
        restarts = f", restarted {connection.starts - 1}x" if connection.starts > 1 else ""
        lines.append(f"{config.name}  [{config.origin}]  {config.describe()}\n  state: {state}{restarts}")
        from ..tools.mcp.adapter import McpTool

        for listed in connection.tools:
            tool = McpTool(config, listed, connection, [])
            lines.append(f"    {tool.name}  ({tool.effect})")
        if connection.state == "not started":
            lines.append("    (tools listed once it starts: at the next %agent turn, or %agent_mcp start)")
    return "\n".join(lines)


@magics_class
class McpMagics(Magics):
    """``%agent_mcp``: the MCP servers, their state and tools."""

    def __init__(self, shell: Any, settings: Agent) -> None:
        super().__init__(shell)
        self.settings = settings

    @line_magic
    def agent_mcp(self, line: str = "") -> None:
        """List the MCP servers (Agent.mcp_servers and an approved .mcp.json), their state and tools; `%agent_mcp start` starts them first."""
        word = line.strip()
        if word not in ("", "start"):
            raise UsageError(f"%agent_mcp takes nothing or 'start', not {word!r}.")
        print(status(self.settings, self.shell, start=word == "start"))
