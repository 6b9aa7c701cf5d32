"""What one ``%agent`` run is built from: its view, its model, its approval policy, its tools and its loop, from the settings."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ..agent import approval as approvals
from ..agent.session import Session
from ..errors import NbagentError
from ..model import clients
from ..model.claude import AnthropicModel, DemoModel, Model, has_api_key
from ..tools.decorator import Tool
from . import kernel as nbkernel
from . import mcp_servers
from . import python_tool as pytool
from .agent_cells import cells_for
from .cell_view import View
from .outcomes import NoKey
from .settings import Agent, context_settings, thinking_setting
from .usage import usage_errors

if TYPE_CHECKING:
    from ..agent.loop import Loop
    from .notebook_context import NotebookContext


def view(shell: Any, title: str, *, live: bool = True, session: Session | None = None) -> View:
    """The run's view: the live panel in a kernel, a static panel for a re-rendered turn, text in a terminal."""
    # Each view is imported when first needed: %load_ext stays quick, and a re-rendered turn loads no widgets.
    if getattr(shell, "kernel", None) is None:
        from .text_view import TextView

        return TextView(stream=sys.stdout)
    if not live:
        from .output import StaticPanel

        return StaticPanel(title)  # no widgets: nothing in it will change
    from ..render.page_links import kernel_page_url
    from .panel import Panel

    notebook = nbkernel.notebook_path(shell)
    cells = cells_for(shell)
    panel = Panel(
        title,
        link=kernel_page_url(str(notebook), session.path.stem) if notebook and session else "",
        session=session.path.stem if session else "",
        cell_id=cells.tracker.cell_id if cells is not None else None,  # the %agent cell (pre_run_cell saw its id)
    )
    if cells is not None:
        panel.describe = cells.proposals.question_html  # a proposed cell edit asks with the cell's position and its diff
        panel.pages = cells.bridge  # a question also waits on every notebook page on the kernel (docs/cells.md)
    panel.show()
    return panel


# Never a way that writes the key into a cell or its output: the notebook file keeps both (and %env echoes it).
NO_KEY = (
    "No Anthropic API key in this kernel's environment. Set ANTHROPIC_API_KEY outside the notebook "
    "(a notebook saves its cells and their output, so never type the key into one):\n"
    "  - for every kernel: `export ANTHROPIC_API_KEY=...` in the shell that starts Jupyter (or in its profile, "
    "e.g. ~/.bashrc), then restart Jupyter;\n"
    "  - for this kernel only, typed into a password box: "
    "`import os, getpass; os.environ['ANTHROPIC_API_KEY'] = getpass.getpass('Anthropic API key: ')`.\n"
    "Or try the offline demo model (not Claude): `%config Agent.demo = True`."
)


def model(settings: Agent, args: Any) -> Model:
    """Claude by the name given (``--model``, else ``Agent.model``), or the offline demo model."""
    if settings.demo:
        return DemoModel()
    try:
        return AnthropicModel(args.model or settings.model, provider=settings.provider)
    except NbagentError as exc:  # a cloud's: no credentials found, or its libraries missing (providers.py says which)
        raise (NoKey(NO_KEY) if settings.provider == "anthropic" else UsageError(str(exc))) from None


def problem(settings: Agent, args: Any) -> UsageError | None:
    """Why a run with these settings and options cannot start (no key, settings that do not fit), or None.

    Checked before a session is opened or created or a panel shown: a request that cannot start shows its error alone.
    """
    if not settings.demo and settings.provider == "anthropic" and not has_api_key():
        return NoKey(NO_KEY)  # said calmly (outcomes.py); the model itself is made later: a client costs ~30 ms, a re-rendered cell ~2 ms
    missing = None if settings.demo else clients.problem(settings.provider)  # a cloud's libraries not installed
    if missing:
        return UsageError(missing)
    name = DemoModel.name if settings.demo else args.model or settings.model
    try:
        with usage_errors():
            context_settings(settings, name)
            thinking_setting(settings, name)
    except UsageError as err:
        return err
    return None


def approval(settings: Agent, args: Any, view: View | None) -> approvals.Ask:
    """The run's approval policy: the mode (``--approval``, else ``Agent.approval``), asking in ``view`` (None: the terminal)."""
    return approvals.resolve(args.approval or settings.approval, view if view is not None else approvals.TERMINAL)


def loop(
    shell: Any,
    settings: Agent,
    context: NotebookContext,
    session: Session,
    args: Any,
    view: View | None,
    *,
    budgets: Mapping[str, Any] | None = None,
    request: bool = False,
) -> Loop:
    """The agent loop of a cell, as the ``Agent`` settings and the magic's options say; ``budgets``: the budget options it sets.

    ``request``: the run logs a new request first; a question about a project's .mcp.json waits for it (drawn under "You:").
    """
    from ..agent.loop import Loop  # the loop and the built-in tools are loaded by the first real run: a re-rendered cell needs neither

    chosen = model(settings, args)
    turns = session.state.turns
    ready = (lambda: session.state.turns > turns) if request else None
    return Loop(
        session,
        tools=tools(shell, settings, context),  # the notebook tools read its cells and variables
        model=chosen,
        approval=approval(settings, args, view),
        system=settings.system_prompt,
        max_tokens=settings.max_tokens,
        retries=settings.retries,
        max_retry_wait=settings.max_retry_wait or None,  # 0: no cap
        parallel=settings.parallel_tools,
        context=context_settings(settings, chosen.name),
        thinking=thinking_setting(settings, chosen.name),
        mcp_servers=mcp_servers.source(shell, settings, view, ready=ready),  # a project .mcp.json is asked about in the panel
        setting_names="Agent.{name}",  # how an error names a budget option
        **(budgets or {}),
    )


def tools(shell: Any, settings: Agent, context: NotebookContext | None = None) -> list[Tool]:
    """The tools ``Agent.tools`` names (python in this kernel, the notebook's, the file and shell tools), then the user's own ``@tool`` values.

    The notebook tools (notebook_history, inspect_variable, read_notebook) read the magics' notebook ``context``: its
    ``CellLog`` and ``VariableWatch`` (notebook_context.NotebookContext); without one they are not offered.
    """
    from ..tools import builtin as toolkit  # its tools are made at import, each through the SDK

    wanted = set(settings.tools)  # known names only: Agent checks them when they are set
    chosen: dict[str, Tool] = {}
    if pytool.NAME in wanted:
        chosen[pytool.NAME] = pytool.python_tool(shell)
    if context is not None:
        from .cell_edit import live_reader
        from .notebook_tools import notebook_tools  # imported when first needed: %load_ext stays quick

        cells = cells_for(shell)
        bridge = cells.bridge if cells is not None else None
        offered = notebook_tools(shell, context.cells, context.variables, settings.notebook_context_exclude, live_reader(bridge))
        if cells is not None and cells.bridge.present:  # proposing an edit needs the browser extension (docs/cells.md)
            offered.append(cells.proposals.tool())
        chosen.update((t.name, t) for t in offered if t.name in wanted)
    notebook = nbkernel.notebook_path(shell)
    root = Path(settings.workspace).expanduser() if settings.workspace else (notebook.parent if notebook else Path.cwd())
    protected = [Path(settings.log_dir).expanduser()] if settings.log_dir else []
    for builtin in toolkit.default_tools(root=root, protected=protected):
        if builtin.name in wanted:
            chosen[builtin.name] = builtin
    if settings.user_tools:
        for name, value in list(shell.user_ns.items()):
            if isinstance(value, Tool) and not name.startswith("_"):
                chosen[value.name] = value  # the user's own tool wins over a built-in of the same name
    return list(chosen.values())
