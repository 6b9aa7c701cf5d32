"""A turn's work as notebook cells, and the "Insert as cells" output: pure rules (table tests: tests/notebook/test_insert.py).

Each python call that ran without raising becomes a code cell with the outputs recorded at the time (as if the cell
had run: its printed text, its plots); optionally a markdown cell with the turn's final answer. A call that raised is
not a cell (its code and error stay in the transcript). The metadata names the session, the call and the turn, which
is how the browser extension never inserts a call twice (docs/cells.md).
"""

from __future__ import annotations

from typing import Any

from ..state.image_limits import IMAGE_TYPES
from ..state.turn_work import Call, TurnWork, label

MIME = "application/vnd.nbagent.cells+json"
STDERR = "[stderr]\n"  # how the python tool labels what the code wrote to stderr (python_tool._joined)
NO_OUTPUT = "(no output)"
MODES = ("off", "ask", "code", "code+summary")  # Agent.cells
FALLBACK = (
    "Cells can't be inserted in this front end (the nbagent JupyterLab / Notebook 7 extension is not here). "
    "Run %agent_cells in a new cell to put this turn's code into the next cell."
)


def summary_id(session: str, turn: int) -> str:
    """The ``tool_use_id`` in the metadata of a turn's answer cell (it has no call of its own)."""
    return f"summary:{session}:{turn}"


def metadata(session: str, tool_use_id: str, turn: int) -> dict[str, Any]:
    """An inserted cell's metadata: which session, call and turn it comes from."""
    return {"nbagent": {"session": session, "tool_use_id": tool_use_id, "turn": turn}}


def outputs(call: Call) -> list[dict[str, Any]]:
    """The call's recorded result as nbformat 4 outputs: text as stdout and stderr streams, images as display data."""
    found: list[dict[str, Any]] = []
    for block in call.content:
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            found += _streams(block["text"])
        elif kind == "image":
            source = block.get("source") or {}
            mime, data = source.get("media_type"), source.get("data")
            if source.get("type") == "base64" and mime in IMAGE_TYPES and isinstance(data, str):
                found.append({"output_type": "display_data", "data": {mime: data, "text/plain": "<Figure>"}, "metadata": {}})
    return found


def _streams(text: str) -> list[dict[str, Any]]:
    if text == NO_OUTPUT or not text:
        return []
    out, err = text, ""
    if text.startswith(STDERR):
        out, err = "", text[len(STDERR) :]
    elif "\n" + STDERR in text:
        out, _, err = text.partition("\n" + STDERR)
    found = []
    for name, part in (("stdout", out), ("stderr", err)):
        if part:
            found.append({"output_type": "stream", "name": name, "text": part if part.endswith("\n") else part + "\n"})
    return found


def cells(work: TurnWork, session: str, *, summary: bool = False, only: str | None = None) -> list[dict[str, Any]]:
    """The cells of a turn, in order, as the ``insert`` message carries them; ``only``: one call's cell."""
    found = [
        {
            "tool_use_id": call.tool_use_id,
            "cell_type": "code",
            "source": call.code,
            "outputs": outputs(call),
            "metadata": metadata(session, call.tool_use_id, work.number),
        }
        for call in work.done
        if only is None or call.tool_use_id == only
    ]
    if summary and only is None and work.answer:
        key = summary_id(session, work.number)
        found.append(
            {
                "tool_use_id": key,
                "cell_type": "markdown",
                "source": work.answer,
                "outputs": [],
                "metadata": metadata(session, key, work.number),
            }
        )
    return found


def button(work: TurnWork, session: str) -> dict[str, Any] | None:
    """The "Insert as cells" output of a turn (the extension draws it; ``text/plain`` elsewhere), or None when it ran no python."""
    calls = work.done
    if not calls:
        return None
    return {
        MIME: {
            "v": 1,
            "session": session,
            "turn": work.number,
            "calls": [{"tool_use_id": c.tool_use_id, "label": label(c)} for c in calls],
        },
        "text/plain": f"{FALLBACK} ({len(calls)} python call{'s' if len(calls) != 1 else ''} in this turn)",
    }


def recorded(work: TurnWork, cells_sent: list[str]) -> str:
    """The words of the log's note for cells inserted (what people read in every view)."""
    count = len(cells_sent)
    return f"inserted {count} cell{'s' if count != 1 else ''} of turn {work.number} into the notebook"
