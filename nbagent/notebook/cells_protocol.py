"""The ``nbagent.cells`` comm's message shapes (docs/cells.md, "Comm protocol v1"): one check for every browser message.

Pure rules only (table tests in tests/notebook/test_insert.py and tests/notebook/test_pages.py); the comm itself is
:mod:`.cells_comm`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TARGET = "nbagent.cells"
VERSION = 1
MAX_ID = 200  # characters of an id, a session name, a cell id, a tool_use_id
MAX_TEXT = 1_000  # characters of a reason, an error, an extension version
MAX_SOURCE = 1_000_000  # characters of one cell's source
MAX_OUTPUTS_TEXT = 20_000  # characters of one cell's outputs as text (the browser clips them)
MAX_CELLS = 10_000  # cells in one message
MAX_PATH = 4_096
MAX_HTML = 5_000_000  # characters of an approval question's HTML (a proposed edit's diff of a long cell included)
CELL_TYPES = ("code", "markdown", "raw")

Message = dict[str, Any]
Check = Callable[[Any], str]  # '' when the value is good, else what is wrong with it


def _str(limit: int) -> Check:
    return lambda v: "" if isinstance(v, str) and len(v) <= limit else f"a string of at most {limit:,} characters"


def _int(low: int = 0) -> Check:
    return lambda v: "" if isinstance(v, int) and not isinstance(v, bool) and v >= low else f"an integer of at least {low}"


def _bool(v: Any) -> str:
    return "" if isinstance(v, bool) else "true or false"


def _optional_int(v: Any) -> str:
    return "" if v is None else _int(0)(v)


def _one_of(*choices: str) -> Check:
    return lambda v: "" if v in choices else f"one of {', '.join(choices)}"


def _list(item: Check, limit: int = MAX_CELLS) -> Check:
    def check(v: Any) -> str:
        if not isinstance(v, list) or len(v) > limit:
            return f"a list of at most {limit:,} items"
        for i, x in enumerate(v):
            wrong = item(x)
            if wrong:
                return f"a list whose item {i} is {wrong}"
        return ""

    return check


def _object(required: dict[str, Check], optional: dict[str, Check] | None = None) -> Check:
    optional = optional or {}

    def check(v: Any) -> str:
        if not isinstance(v, dict):
            return "an object"
        extra = sorted(set(v) - set(required) - set(optional))
        if extra:
            return f"an object without the keys {extra}"
        for key in required:
            if key not in v:
                return f"an object with {key!r}"
        for key, rule in {**required, **optional}.items():
            if key in v:
                wrong = rule(v[key])
                if wrong:
                    return f"an object whose {key!r} is {wrong}"
        return ""

    return check


ID = _str(MAX_ID)
MAX_MARKERS = 100  # final-transcript markers of one cell in a catch_up
MARKER = _object({"session": ID, "from": _int(0), "to": _int(0)})  # a final transcript's (reopen.metadata)
HEADER = {"v": lambda v: "" if v == VERSION and not isinstance(v, bool) else f"{VERSION}", "type": _str(40)}
# What the browser may send (docs/cells.md, "Comm protocol v1"): type -> its keys besides v and type.
FROM_BROWSER: dict[str, tuple[dict[str, Check], dict[str, Check]]] = {
    "hello": ({"extension": _str(MAX_TEXT)}, {"path": _str(MAX_PATH), "collaborative": _bool}),
    "insert_request": ({"id": ID, "session": ID, "turn": _int(1)}, {"tool_use_id": ID}),
    "inserted": (
        {
            "id": ID,
            "session": ID,
            "cells": _list(_object({"tool_use_id": ID, "cell_id": ID, "index": _int(0)})),
            "skipped": _list(ID),
        },
        {},
    ),
    "notebook": (
        {
            "id": ID,
            "path": _str(MAX_PATH),
            "cells": _list(
                _object(
                    {
                        "id": ID,
                        "cell_type": _one_of(*CELL_TYPES),
                        "source": _str(MAX_SOURCE),
                        "execution_count": _optional_int,
                        "outputs_text": _str(MAX_OUTPUTS_TEXT),
                        "dirty": _bool,
                    }
                )
            ),
        },
        {},
    ),
    "edit_result": ({"id": ID, "ok": _bool}, {"reason": _str(MAX_TEXT)}),
    "approval_answer": ({"id": ID, "session": ID, "tool_use_id": ID, "approved": _bool}, {}),
    "catch_up": ({"id": ID, "cells": _list(_object({"id": ID, "source": _str(MAX_SOURCE), "markers": _list(MARKER, MAX_MARKERS)}))}, {}),
    "transcripts_written": ({"id": ID, "written": _list(ID), "skipped": _list(ID)}, {}),
    "error": ({"error": _str(MAX_TEXT)}, {"id": ID}),
}
REPLIES = ("notebook", "edit_result", "error")  # answers to a request the kernel waits for


def problem(message: Any) -> str:
    """What is wrong with a message from the browser ('' when it is of a documented shape): a pure rule."""
    if not isinstance(message, dict):
        return "a message must be a JSON object"
    for key, rule in HEADER.items():
        if key not in message or rule(message[key]):
            return f"a message needs {key!r} = {rule(None) if key == 'v' else 'a type name'}"
    kind = message["type"]
    if kind not in FROM_BROWSER:
        return f"unknown message type {str(kind)[:40]!r}"
    required, optional = FROM_BROWSER[kind]
    wrong = _object({**required, **{k: lambda v: "" for k in HEADER}}, optional)(message)
    return f"{kind}: must be {wrong}" if wrong else ""


def error(text: str, request_id: str | None = None) -> Message:
    """The error message for a refused message (its id echoed when it had a valid one)."""
    message: Message = {"v": VERSION, "type": "error", "error": text[:MAX_TEXT]}
    if request_id is not None:
        message["id"] = request_id
    return message


def message_id(message: Any) -> str | None:
    """A message's id, when it has one that is a short string."""
    value = message.get("id") if isinstance(message, dict) else None
    return value if isinstance(value, str) and len(value) <= MAX_ID else None


DECISIONS = ("approved", "declined", "interrupted")  # an approval_decided's decision


def edit(cell_id: str, diff_html: str) -> Message:
    """A proposed edit as the cell itself shows it (an ``approval_waiting``'s ``edit``): the cell it changes, and its diff."""
    return {"cell_id": cell_id, "diff_html": diff_html}


def approval_waiting(session: str, tool_use_id: str, question_html: str, cell_id: str | None, proposed: Message | None = None) -> Message:
    """The message telling a page that a question waits (``cell_id``: the cell running the turn, when known).

    ``proposed``: the question is a proposed cell edit (:func:`edit`), shown at the cell it changes where the page has it.
    """
    message: Message = {"v": VERSION, "type": "approval_waiting", "session": session, "tool_use_id": tool_use_id}
    message["question_html"] = question_html
    if cell_id:
        message["cell_id"] = cell_id
    if proposed is not None and len(proposed["cell_id"]) <= MAX_ID and len(proposed["diff_html"]) <= MAX_HTML:
        message["edit"] = proposed
    return message


def approval_decided(session: str, tool_use_id: str, decision: str, by: str) -> Message:
    """The message telling every page how a question ended."""
    if decision not in DECISIONS:
        raise ValueError(f"decision must be one of {', '.join(DECISIONS)}, not {decision!r}")
    return {
        "v": VERSION,
        "type": "approval_decided",
        "session": session,
        "tool_use_id": tool_use_id,
        "decision": decision,
        "by": by[:MAX_ID],
    }


def fits(session: str, tool_use_id: str, question_html: str, cell_id: str | None) -> bool:
    """Whether a question can go to the pages within the protocol's limits (else only the page running the cell asks it)."""
    return len(session) <= MAX_ID and len(tool_use_id) <= MAX_ID and len(cell_id or "") <= MAX_ID and len(question_html) <= MAX_HTML
