"""The ``Agent`` settings of the notebook front end (traitlets): ``%config Agent.<name> = ...`` or a config file."""

from __future__ import annotations

from typing import Any

from traitlets import Bool, Enum, Int, List, TraitError, Unicode, validate
from traitlets.config import Configurable

from ..approval import APPROVAL_MODES
from ..model import DEFAULT_MODEL
from . import python_tool as pytool

DEFAULT_SYSTEM_PROMPT = (
    "You are an assistant working inside the user's Jupyter notebook. Use the `python` tool to run code in the "
    "notebook's kernel (its variables are shared with the user's cells) and the file tools to look at files. "
    "Be concise; show results rather than describing them."
)
BUILTIN_TOOLS = (pytool.NAME, "read_file", "write_file", "edit_file", "list_files", "shell")


class Agent(Configurable):
    """Settings of the notebook agent: ``%config Agent.<name> = ...`` or ``c.Agent.<name> = ...`` in a config file."""

    model = Unicode(DEFAULT_MODEL, help="Claude model name to use (overridden per cell by --model).").tag(config=True)
    max_tokens = Int(8192, help="Maximum tokens in one model reply.").tag(config=True)
    system_prompt = Unicode(DEFAULT_SYSTEM_PROMPT, help="System prompt sent with every model call.").tag(config=True)
    approval = Enum(
        APPROVAL_MODES,
        "ask",
        help="Who approves irreversible tool calls and repeats of interrupted calls: 'ask' (buttons in the panel; "
        "declined where nobody can answer, e.g. nbclient/papermill), 'auto' (always yes), 'deny' (always no).",
    ).tag(config=True)
    fsync = Enum(
        ("always", "turn", "never"),
        "turn",
        help="When the log is fsynced: every event, at each durable step of a turn (default), or never.",
    ).tag(config=True)
    log_dir = Unicode(
        "",
        help="Folder for session logs. Empty (default): '.nbagent/<notebook name>/' beside the notebook; "
        "otherwise '<log_dir>/<notebook name>/'.",
    ).tag(config=True)
    demo = Bool(False, help="Use the offline demo model (not Claude) instead of the Anthropic API; for trying nbagent without a key.").tag(
        config=True
    )
    tools = List(
        Unicode(),
        list(BUILTIN_TOOLS),
        help=f"Built-in tools offered to the model, a subset of {', '.join(BUILTIN_TOOLS)}.",
    ).tag(config=True)
    user_tools = Bool(True, help="Also offer the @nbagent.tool functions defined in the notebook's namespace.").tag(config=True)
    workspace = Unicode(
        "",
        help="Folder the file tools (read_file, write_file, edit_file, list_files) work in. Empty (default): the "
        "notebook's folder. A path outside it asks first under 'ask', runs under 'auto', is refused under 'deny'; "
        "the log folder .nbagent/ is never read or written by them. The python and shell tools are not confined.",
    ).tag(config=True)
    restore_kernel_state = Bool(
        False,
        help="After a kernel restart, re-run the agent's recorded `python` tool code (never other tools) "
        "to restore the variables it made; per cell with --restore.",
    ).tag(config=True)
    retries = Int(2, help="Extra attempts for a model call that fails with a retryable error.").tag(config=True)

    @validate("tools")
    def _known_tools(self, proposal: Any) -> list[str]:
        unknown = sorted(set(proposal["value"]) - set(BUILTIN_TOOLS))
        if unknown:
            raise TraitError(f"Agent.tools has unknown names {unknown}; choose from {', '.join(BUILTIN_TOOLS)}.")
        return proposal["value"]
