"""Stream deltas in the log: coalesced to a line per block at most every interval, with a flusher thread for stalled streams (flusher.py).

A reply that ends within the interval of its first delta writes no delta line: nothing of it was
streamed, so its ``assistant_msg`` alone says all of it (and views show that message whole).
"""

from __future__ import annotations

import contextvars
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..record import events as ev
from .flusher import Flusher
from .flusher import make as make_flusher

if TYPE_CHECKING:
    from .session import Session

# Streamed text reaches the log, and the views that follow it, at most this late (seconds).
DELTA_INTERVAL = 0.05


class DeltaWriter:
    """Logs a reply's stream deltas, coalesced, and never cutting a run of key-alphabet characters.

    A model streams a few characters at a time; a log line for each would make
    deltas most of the log and most of a turn's cost.  Deltas are gathered and
    written together ``interval`` after the first of them arrived (by the next
    delta, or by the background flusher if the stream stalls), and at the end if
    any of the reply was written before: a view following the log sees text at
    most ``interval`` late.  A reply that ended sooner is left to its
    ``assistant_msg``, a line the loop writes next anyway.

    Redaction works on whole lines, so a secret streamed in pieces could slip past
    it if it were written piecewise.  Every secret shape nbagent redacts is a run
    of ``[A-Za-z0-9_-]``, so lines are cut only elsewhere until the block ends.
    """

    _OPEN_RUN = re.compile(r"[A-Za-z0-9_\-]*\Z")
    KINDS = frozenset({"text", "partial_json", "thinking"})

    def __init__(self, session: Session, interval: float = DELTA_INTERVAL, flusher: Flusher | None = None) -> None:
        self.session = session
        self.interval = interval
        self.flusher = flusher or FLUSHER
        self.pending: dict[tuple[int, str], list[str]] = {}  # pieces not written yet, joined when written
        self.block = 0  # index of the content block being streamed
        self.ended: set[int] = set()  # blocks that have ended: written whole, no run held back
        self.wrote = False  # a delta line of this reply is in the log (views have streamed it)
        self.since: float | None = None  # when the oldest unwritten delta arrived
        self.scheduled = False
        self.closed = False
        self._lock = threading.Lock()
        self.context = contextvars.copy_context()  # the flusher writes in it: see nbagent.threads

    def __call__(self, delta: dict[str, Any]) -> None:
        index = delta.get("index", 0)
        with self._lock:
            if index != self.block:  # the previous block has ended: written whole with the next line
                self.ended.add(self.block)
                self.block = index
            pending = self.pending
            for kind, piece in delta.items():
                if kind in self.KINDS:
                    pieces = pending.get((index, kind))
                    if pieces is None:
                        pending[(index, kind)] = [piece]
                    else:
                        pieces.append(piece)  # a list: joining every piece into a string was quadratic in the block
            now = time.monotonic()
            since = self.since
            if since is None:
                self.since = since = now
            if now - since >= self.interval:
                self._write()
                return
            if not self.scheduled:
                self.scheduled = True
                self.flusher.schedule(self, since + self.interval)

    def flush_due(self) -> None:
        """Write what has waited an interval (called by the flusher when the stream stalls)."""
        with self._lock:
            self.scheduled = False
            if self.closed or self.since is None:
                return
            if time.monotonic() - self.since >= self.interval:
                self._write()
            else:  # written meanwhile, and more came since
                self.scheduled = True
                self.flusher.schedule(self, self.since + self.interval)

    def close(self, *, complete: bool) -> None:
        """Write what is left; ``complete`` (the reply ended) writes held runs too, otherwise they are dropped.

        A complete reply none of which was written leaves it all to its ``assistant_msg``.
        """
        with self._lock:
            if not self.closed:
                self.closed = True
                self.flusher.cancel(self)
                if self.wrote or not complete:
                    self._write(lambda key: complete)
                self.pending.clear()

    def _write(self, whole: Callable[[tuple[int, str]], bool] = lambda key: False) -> None:
        """Append a delta line per block and kind; keep back an unfinished key-alphabet run unless its block ended or ``whole(key)``."""
        self.since = None
        for key, pieces in list(self.pending.items()):
            text = "".join(pieces)
            cut = len(text) if key[0] in self.ended or whole(key) else self._OPEN_RUN.search(text).start()  # type: ignore[union-attr]
            if cut:
                self.wrote = True
                self.session.append(ev.DELTA, index=key[0], **{key[1]: text[:cut]})
            if cut == len(text):
                del self.pending[key]
            else:
                self.pending[key] = [text[cut:]]


FLUSHER: Flusher = make_flusher()  # one thread for every stream of the process
