"""What each turn of a session did with the ``python`` tool: its calls in order, their recorded results, its final answer.

A pure reading of events (no IPython): the notebook front end builds cells from it (notebook/insert.py), and
its labels name each call on the "Insert as cells" buttons.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..record import events as ev

PYTHON = "python"  # the notebook's python tool (notebook/python_tool.NAME; not imported: the engine never imports IPython)


@dataclass(frozen=True)
class Call:
    """One python call of a turn: its code and what it returned (content blocks as logged); ``ok`` once it ran without raising."""

    tool_use_id: str
    code: str
    content: tuple[dict[str, Any], ...] = ()
    ok: bool = False


@dataclass(frozen=True)
class TurnWork:
    """One turn (a ``user_msg`` and what followed it): its number from 1, where it is in the log, its ``%agent`` cell, calls, answer."""

    number: int
    seq: int
    end: int
    cell_id: str = ""
    calls: tuple[Call, ...] = ()
    answer: str = ""

    @property
    def done(self) -> tuple[Call, ...]:
        """The calls that ran without raising, in order: the ones that become cells."""
        return tuple(c for c in self.calls if c.ok)


def turns(events: Iterable[ev.Event], *, tool: str = PYTHON) -> list[TurnWork]:
    """Every turn of ``events`` (a session's, in order) with its ``tool`` calls and their results, and its final answer."""
    found: list[TurnWork] = []
    calls: dict[str, Call] = {}
    order: list[str] = []
    current: dict[str, Any] | None = None

    def close() -> None:
        if current is not None:
            found.append(TurnWork(calls=tuple(calls[i] for i in order), **current))

    for event in events:
        kind = event.get("type")
        if kind == ev.USER_MSG:
            close()
            calls, order = {}, []
            meta = event.get("meta") or {}
            cell = meta.get("cell_id") if isinstance(meta, dict) else None
            current = {"number": len(found) + 1, "seq": event["seq"], "end": event["seq"], "cell_id": cell if isinstance(cell, str) else ""}
            continue
        if current is None:
            continue
        current["end"] = event["seq"]
        if kind == ev.ASSISTANT_MSG:
            texts = []
            for block in event.get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    texts.append(block["text"])
                code = (block.get("input") or {}).get("code") if isinstance(block.get("input"), dict) else None
                if block.get("type") == "tool_use" and block.get("name") == tool and isinstance(code, str):
                    key = str(block.get("id"))
                    if key not in calls:
                        order.append(key)
                    calls[key] = Call(key, code)
            if texts:
                current["answer"] = "".join(texts).strip()
        elif kind == ev.TOOL_RESULT and str(event.get("tool_use_id")) in calls:
            key = str(event["tool_use_id"])
            content = event.get("content")
            blocks = (
                tuple(b for b in content if isinstance(b, dict)) if isinstance(content, list) else ({"type": "text", "text": str(content)},)
            )
            ok = not event.get("is_error") and not event.get("abandoned")
            calls[key] = Call(key, calls[key].code, blocks, ok)
    close()
    return found


def turn(events: Iterable[ev.Event], number: int, *, tool: str = PYTHON) -> TurnWork | None:
    """Turn ``number`` (from 1) of a session's events, or None."""
    found = turns(events, tool=tool)
    return found[number - 1] if 1 <= number <= len(found) else None


def label(call: Call) -> str:
    """A call in a few words for its button: 'ran python', 'ran python · 1 plot', 'ran python · 2 plots'."""
    images = sum(1 for b in call.content if b.get("type") == "image")
    if not images:
        return "ran python"
    return f"ran python · {images} plot{'s' if images != 1 else ''}"
