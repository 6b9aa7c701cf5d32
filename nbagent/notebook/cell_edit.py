"""The live document over the cells comm: ``read_notebook`` of the browser's cells, and ``propose_cell_edit`` with its diff.

Both need nbagent's browser extension (docs/cells.md); without it ``read_notebook`` reads the saved file and
``propose_cell_edit`` is not offered. A reply the kernel waits for while the ``%agent`` cell runs arrives through
the comm pump (:mod:`.pump`), as approval clicks do.
"""

from __future__ import annotations

from typing import Any

from ..record import redact
from ..render.html import approval_html
from ..render.parts import esc
from ..state.approval_rule import ApprovalRequest
from ..tools.clipping import clipped
from ..tools.decorator import Tool
from .cells import CellLog, CellRun
from .cells_comm import Bridge, Message
from .cells_protocol import edit
from .edit_view import diff_html as diff_html
from .edit_view import diff_lines as diff_lines
from .edit_view import question_html

NAME = "propose_cell_edit"
REPLY_TIMEOUT = 10.0  # seconds the kernel waits for the browser's answer
MAX_CHARS = 20_000  # characters of one read_notebook answer (as notebook_tools.MAX_CHARS)
MAX_SOURCE = 4_000  # characters of one cell's source in it
CHANGED = "the cell changed since the proposal"
DESCRIPTION = (
    "Propose new source for one cell of the user's notebook, by its cell id (read_notebook shows each cell's id). "
    "The user sees a diff of every changed line and approves or declines it; approved, the cell's source is "
    "replaced in the notebook (an ordinary edit the user can undo) and nothing is run. Use it to fix or improve a "
    "cell the user wrote rather than re-running its code yourself. Declined, leave that cell alone."
)
NO_REPLY = (
    "[The browser's document could not be read just now (no answer in time, or the kernel cannot read one while the "
    "agent runs here), so this is the notebook as last saved: edits not yet saved are not in it.]\n"
)


def read_live(bridge: Bridge | None) -> tuple[str | None, str]:
    """The notebook as it is in the browser now (None without the extension or a reply), and a note for the saved file's answer."""
    if bridge is None or not bridge.present:
        return None, ""
    reply = bridge.request({"type": "read_request"}, REPLY_TIMEOUT)
    if reply is None or reply.get("type") != "notebook":
        return None, NO_REPLY
    return redact.text(document(reply)), ""


def document(reply: Message, *, budget: int = MAX_CHARS) -> str:
    """A ``notebook`` message as read_notebook's answer: each cell with its id, source and outputs' text, bounded."""
    cells = reply["cells"]
    unsaved = sum(1 for c in reply["cells"] if c["dirty"])
    head = (
        f"Notebook {reply['path'] or '(untitled)'}, as it is in the browser now (unsaved edits and current outputs "
        f"included{f'; {unsaved} cell(s) changed since the last save' if unsaved else ''}): {len(cells)} cells."
    )
    parts = [head]
    used = len(head)
    for number, cell in enumerate(cells, 1):
        text = _cell(number, cell)
        if len(parts) > 1 and used + len(text) > budget:
            parts.append(f"[cells {number} to {len(cells)} left out: over {budget:,} characters]")
            break
        parts.append(clipped(text, budget) if used + len(text) > budget else text)
        used += len(text)
    return "\n\n".join(parts)


def _cell(number: int, cell: Message) -> str:
    kind = cell["cell_type"]
    count = cell["execution_count"]
    ran = "" if kind != "code" else (f" · In [{count}]" if isinstance(count, int) else " · never run")
    lines = [
        f"[cell {number} · {kind} · id {cell['id']}{ran}{' · unsaved edits' if cell['dirty'] else ''}]",
        clipped(cell["source"], MAX_SOURCE),
    ]
    if cell["outputs_text"]:
        lines += ["[output]", clipped(cell["outputs_text"].rstrip("\n"), MAX_SOURCE)]
    return "\n".join(lines)


class Proposals:
    """propose_cell_edit through one bridge: the cell's source when the diff was shown, then the edit once approved.

    ``log``: the kernel's cells (an applied edit fixes their errors, for ``{Err}``); ``fixing``: the error a running
    ``%agent --fix`` turn is about (its applied edit fixes it, and the browser offers to run the cell).
    """

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge
        self.log: CellLog | None = None
        self.fixing: CellRun | None = None
        self._shown: dict[tuple[str, str], tuple[int, str]] = {}  # (cell_id, new_source) -> its position and source, as shown
        self._views: dict[str, Message] = {}  # tool_use_id -> the edit as the cell itself shows it (cells_protocol.edit)

    def current(self, cell_id: str) -> tuple[int, str]:
        """The cell's position (from 1) and source in the browser now; a ToolError if the browser did not answer or has no such cell."""
        from anthropic.lib.tools import ToolError  # here: the SDK is loaded by the run that asks (%load_ext never loads it)

        reply = self.bridge.request({"type": "read_request"}, REPLY_TIMEOUT)
        if reply is None or reply.get("type") != "notebook":
            raise ToolError("The cell could not be read from the browser just now, so nothing was changed.")
        for position, cell in enumerate(reply["cells"], 1):
            if cell["id"] == cell_id:
                return position, str(cell["source"])
        raise ToolError(f"The notebook has no cell with id {cell_id!r}; read_notebook shows the cells' ids.")

    def question_html(self, request: ApprovalRequest) -> str:
        """The whole question of a proposed edit: the cell by position and first line, one coloured diff ('' for other tools)."""
        if request.tool_name != NAME:
            return ""
        from anthropic.lib.tools import ToolError

        cell_id, new = str(request.input.get("cell_id", "")), str(request.input.get("new_source", ""))
        try:
            position, old = self.current(cell_id)
        except ToolError as exc:  # the call as any other's, and why there is no diff
            note = f'<div class="nbagent-note">{esc(str(exc))}</div>'
            return approval_html(request.tool_name, request.input, request.reason) + note
        self._shown[(cell_id, new)] = (position, old)
        self._views[request.tool_use_id] = edit(cell_id, diff_html(old, new))
        return question_html(position, old, new)

    def view(self, tool_use_id: str) -> Message | None:
        """The edit a question waiting asks about, as the cell itself shows it (None for any other question)."""
        return self._views.pop(tool_use_id, None)

    def apply(self, cell_id: str, new_source: str) -> str:
        """Send the approved edit; what the model is told."""
        from anthropic.lib.tools import ToolError

        shown = self._shown.pop((cell_id, new_source), None)
        position, old = shown if shown is not None else self.current(cell_id)  # approved unseen: asked as text, or by a function
        where = f"cell {position} (id {cell_id})"
        if old == new_source:
            return f"The {where} already has this source; nothing was changed."
        message: Message = {"type": "apply_edit", "cell_id": cell_id, "old_source": old, "new_source": new_source}
        if self.fixing is not None:
            message["offer_run"] = True  # the browser offers a Run button at the fixed cell; nothing runs unless clicked
        reply = self.bridge.request(message, REPLY_TIMEOUT)
        if reply is None:
            raise ToolError("The browser did not answer: the edit may not have been applied; read_notebook shows the cell now.")
        if reply.get("type") == "error":
            raise ToolError(f"The browser refused the edit: {reply.get('error')}")
        if not reply.get("ok"):
            raise ToolError(f"The edit was not applied: {reply.get('reason') or CHANGED}.")
        if self.log is not None:
            self.log.edited(cell_id, self.fixing)  # its error is not {Err} any more
        return f"The user approved the edit; {where} now has the new source (it was not run)."

    def tool(self) -> Tool:
        """The ``propose_cell_edit`` tool (effect "irreversible", and asked even under approval "auto"; "deny" refuses it)."""

        def propose_cell_edit(cell_id: str, new_source: str) -> str:
            """Propose new source for one notebook cell.

            Args:
                cell_id: The id of the cell to change, as read_notebook shows it.
                new_source: The cell's whole new source.
            """
            return self.apply(cell_id, new_source)

        tool = Tool(propose_cell_edit, effect="irreversible", name=NAME, description=DESCRIPTION)
        tool.asks_always = True  # it rewrites a cell the user wrote: asked with its diff under "ask" and "auto" alike
        return tool


def live_reader(bridge: Bridge | None) -> Any:
    """The ``live`` reader notebook_tools' read_notebook takes (see :func:`read_live`)."""
    return lambda: read_live(bridge)
