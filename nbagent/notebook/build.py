"""What one ``%agent`` run is built from: its view, its model, its approval policy and its tools, from the settings."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError

from .. import approval as approvals
from .. import toolkit
from ..errors import NbagentError
from ..model import AnthropicModel, DemoModel, Model
from ..session import Session
from ..tools import Tool
from . import kernel as nbkernel
from . import python_tool as pytool
from .settings import Agent


def view(shell: Any, title: str, *, live: bool = True, session: Session | None = None) -> Any:
    """The run's view: the live panel in a kernel, a static panel for a re-rendered turn, text in a terminal."""
    # Each view is imported when first needed: %load_ext stays quick, and a re-rendered turn loads no widgets.
    if getattr(shell, "kernel", None) is None:
        from .panel import TextView

        return TextView(stream=sys.stdout)
    if not live:
        from .output import StaticPanel

        return StaticPanel(title)  # no widgets: nothing in it will change
    from ..server.links import kernel_page_url
    from .panel import Panel

    notebook = nbkernel.notebook_path(shell)
    panel = Panel(title, link=kernel_page_url(str(notebook), session.path.stem) if notebook and session else "")
    panel.show()
    return panel


def model(settings: Agent, args: Any) -> Model:
    """Claude by the name given (``--model``, else ``Agent.model``), or the offline demo model."""
    if settings.demo:
        return DemoModel()
    try:
        return AnthropicModel(args.model or settings.model)
    except NbagentError:
        raise UsageError(
            "No Anthropic API key: set ANTHROPIC_API_KEY in the kernel's environment (e.g. `%env ANTHROPIC_API_KEY=...`), "
            "or try the offline demo model (not Claude) with `%config Agent.demo = True`."
        ) from None


def approval(settings: Agent, args: Any, view: Any) -> Any:
    """The run's approval policy: the panel's buttons are the person who answers where there is one."""
    mode = args.approval or settings.approval
    ask = getattr(view, "ask", None)
    if mode == "deny" or ask is None:
        return mode
    # "auto" approves the user's own new calls; a foreign call or a repeat of unknown outcome still needs a click.
    return approvals.auto(ask) if mode == "auto" else ask


def tools(shell: Any, settings: Agent) -> list[Tool]:
    """The tools ``Agent.tools`` names (python in this kernel, the file and shell tools), then the user's own ``@tool`` values."""
    wanted = set(settings.tools)  # known names only: Agent checks them when they are set
    chosen: dict[str, Tool] = {}
    if pytool.NAME in wanted:
        chosen[pytool.NAME] = pytool.python_tool(shell)
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
