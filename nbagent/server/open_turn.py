"""A session's running turn, as a notebook page needs it to show the turn live under its cell (docs/server.md).

A log file: its listing summary (a fold) says whether the last turn is unfinished; only then is the log read once
more, with the server's one reader (:class:`~.source.FileSource`, a bounded chunk at a time, keeping nothing but
the last request), for the turn's first event: the fold's state keeps no event's seq or metadata.

A database session: its index row knows whether the turn ended only once the session was closed; a session its
kernel holds open ("open, or not closed cleanly") is read through the store and folded as it is read (the bounded
:class:`~.viewfold.ViewFold`), so it gets the same answer as the same events in a log file.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import LogError
from ..history.summary import from_state
from ..record import events as ev
from ..record.request import request_text
from ..stores import Listed
from .source import FileSource
from .viewfold import ViewFold

# An unfinished session whose last turn still ended: nothing runs there (the listing's words, history/summary.py).
ENDED = ("no request yet", "interrupted", "stopped at its budget", "damaged log", "written by a newer nbagent", "not an nbagent log")


def last_request(events: Iterable[ev.Event]) -> dict[str, Any] | None:
    """``{seq, cell_id, request}`` of the last ``user_msg`` among ``events`` (None if there is none)."""
    found: dict[str, Any] | None = None
    for event in events:
        if event.get("type") != ev.USER_MSG:
            continue
        meta = event.get("meta") or {}
        cell = meta.get("cell_id") if isinstance(meta, dict) else None
        found = {"seq": int(event["seq"]), "cell_id": cell if isinstance(cell, str) and cell else None, "request": request_text(event)}
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


def stored_open_turn(summary: Listed, store: Any, path: Path) -> dict[str, Any] | None:
    """The unfinished last turn of a database session (its index row ``summary``, its key ``path``), as :func:`open_turn` (blocking)."""
    if not runs(summary):  # a closed session's index row says how its last turn stands
        return None
    fold, found = ViewFold(), None
    try:
        for event in store.read(path):
            fold.apply(event)
            found = last_request([event]) or found
    except LogError:  # damaged, or the database cannot be read now: no live view (the row says what the index knows)
        return None
    folded = Listed(summary.name, summary.path)
    try:
        from_state(folded, fold.state)
    except (KeyError, TypeError, ValueError):
        return None
    return found if runs(folded) else None
