"""What one ``%agent`` run is built from: its view, its model, its approval policy and its tools, from the settings."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ..agent import approval as approvals
from ..agent.session import Session
from ..errors import NbagentError
from ..model import clients
from ..model.claude import AnthropicModel, DemoModel, Model, has_api_key
from ..tools import builtin as toolkit
from ..tools.decorator import Tool
from . import kernel as nbkernel
from . import python_tool as pytool
from .agent_cells import cells_for
from .settings import Agent, context_settings, thinking_setting
from .usage import usage_errors

if TYPE_CHECKING:
    from .notebook_context import NotebookContext


def view(shell: Any, title: str, *, live: bool = True, session: Session | None = None) -> Any:
    """The run's view: the live panel in a kernel, a static panel for a re-rendered turn, text in a terminal."""
    # Each view is imported when first needed: %load_ext stays quick, and a re-rendered turn loads no widgets.
    if getattr(shell, "kernel", None) is None:
        from .panel import TextView

        return TextView(stream=sys.stdout)
    if not live:
        from .output import StaticPanel

        return StaticPanel(title)  # no widgets: nothing in it will change
    from ..render.page_links import kernel_page_url
    from .panel import Panel

    notebook = nbkernel.notebook_path(shell)
    panel = Panel(title, link=kernel_page_url(str(notebook), session.path.stem) if notebook and session else "")
    cells = cells_for(shell)
    if cells is not None:
        panel.explain = cells.proposals.diff_html  # a proposed cell edit's approval shows its diff
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
        raise UsageError(NO_KEY if settings.provider == "anthropic" else str(exc)) from None


def problem(settings: Agent, args: Any) -> UsageError | None:
    """Why a run with these settings and options cannot start (no key, settings that do not fit), or None.

    Checked before a session is opened or created or a panel shown: a request that cannot start shows its error alone.
    """
    if not settings.demo and settings.provider == "anthropic" and not has_api_key():
        return UsageError(NO_KEY)  # the model itself is made later: a client costs ~30 ms, a re-rendered cell ~2 ms
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


def approval(settings: Agent, args: Any, view: Any) -> Any:
    """The run's approval policy: the panel's buttons are the person who answers where there is one."""
    mode = args.approval or settings.approval
    ask = getattr(view, "ask", None)
    if mode == "deny" or ask is None:
        return mode
    # "auto" approves the user's own new calls; a foreign call or a repeat of unknown outcome still needs a click.
    return approvals.auto(ask) if mode == "auto" else ask


def tools(shell: Any, settings: Agent, context: NotebookContext | None = None) -> list[Tool]:
    """The tools ``Agent.tools`` names (python in this kernel, the notebook's, the file and shell tools), then the user's own ``@tool`` values.

    The notebook tools (notebook_history, inspect_variable, read_notebook) read the magics' notebook ``context``: its
    ``CellLog`` and ``VariableWatch`` (notebook_context.NotebookContext); without one they are not offered.
    """
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
