"""A session's running turn, as a notebook page needs it to show the turn live under its cell (docs/server.md).

The listing's summary (the fold) says whether the last turn is unfinished; only then is the log read once more,
with the server's one reader (:class:`~.source.FileSource`, a bounded chunk at a time, keeping nothing but the
last request), for the turn's first event: the fold's state keeps no event's seq or metadata.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..record import events as ev
from ..stores import Listed
from .source import FileSource

# An unfinished session whose last turn still ended: nothing runs there (the listing's words, history/summary.py).
ENDED = ("no request yet", "interrupted", "stopped at its budget", "damaged log", "written by a newer nbagent", "not an nbagent log")


def request_of(event: ev.Event) -> str:
    """The user's request in a ``user_msg`` (without any note nbagent prepended): the kernel's rule (notebook/kernel.py)."""
    meta = event.get("meta") or {}
    if isinstance(meta, dict) and isinstance(meta.get("request"), str):
        return str(meta["request"])
    content = event.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))


def last_request(events: Iterable[ev.Event]) -> dict[str, Any] | None:
    """``{seq, cell_id, request}`` of the last ``user_msg`` among ``events`` (None if there is none)."""
    found: dict[str, Any] | None = None
    for event in events:
        if event.get("type") != ev.USER_MSG:
            continue
        meta = event.get("meta") or {}
        cell = meta.get("cell_id") if isinstance(meta, dict) else None
        found = {"seq": int(event["seq"]), "cell_id": cell if isinstance(cell, str) and cell else None, "request": request_of(event)}
    return found


def runs(summary: Listed) -> bool:
    """Whether the summary says the session's last turn has not ended (it may be running now)."""
    if summary.complete or summary.turns < 1 or summary.problem:
        return False
    return not summary.pending.startswith(ENDED)


def open_turn(summary: Listed, log: Path) -> dict[str, Any] | None:
    """The unfinished last turn of a log file: ``{seq, cell_id, request}`` of its request, or None (see the module's docstring)."""
    if not runs(summary):
        return None
    source, since, found = FileSource(log), 0, None
    while True:
        batch = source.read(since)
        found = last_request(batch.events) or found
        if batch.events:
            since = batch.events[-1]["seq"]
        if not batch.more or batch.problem:
            break
    return found
