"""Stream deltas in the log: coalesced to a line per block at most every interval, with a flusher thread for stalled streams.

A reply that ends within the interval of its first delta writes no delta line: nothing of it was
streamed, so its ``assistant_msg`` alone says all of it (and views show that message whole).
"""

from __future__ import annotations

import contextvars
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..record import events as ev

if TYPE_CHECKING:
    from .session import Session

logger = logging.getLogger("nbagent")

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

    def __init__(self, session: Session, interval: float = DELTA_INTERVAL) -> None:
        self.session = session
        self.interval = interval
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
                FLUSHER.schedule(self, since + self.interval)

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
                FLUSHER.schedule(self, self.since + self.interval)

    def close(self, *, complete: bool) -> None:
        """Write what is left; ``complete`` (the reply ended) writes held runs too, otherwise they are dropped.

        A complete reply none of which was written leaves it all to its ``assistant_msg``.
        """
        with self._lock:
            if not self.closed:
                self.closed = True
                FLUSHER.cancel(self)
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


class _Flusher:
    """One daemon thread that writes out deltas a stalled stream left waiting."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # the thread does not survive a fork

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[DeltaWriter, float] = {}
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._wakes_at: float | None = None  # when the waiting thread wakes by itself; None: only when notified

    def schedule(self, writer: DeltaWriter, deadline: float) -> None:
        """Call ``writer.flush_due()`` at ``deadline`` (a ``time.monotonic()`` value)."""
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="nbagent-delta-flusher", daemon=True)  # shared: no one context
                self._thread.start()
            # Woken only if it would not wake in time by itself: back-to-back streams (a cancelled deadline is still
            # the thread's) cost no thread switch each.
            if self._wakes_at is None or deadline < self._wakes_at:
                self._cond.notify()
            self._due[writer] = deadline

    def cancel(self, writer: DeltaWriter) -> None:
        """Forget ``writer`` (its stream has ended)."""
        with self._cond:
            self._due.pop(writer, None)

    def stop(self) -> None:
        """End the thread (a later schedule starts a new one), for a process about to fork; streams still write at their next delta or end."""
        with self._cond:
            thread, self._stopping = self._thread, True
            self._cond.notify()
        if thread is not None:
            thread.join()
        with self._cond:
            self._thread, self._stopping = None, False

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._due and not self._stopping:
                    self._wakes_at = None
                    self._cond.wait()
                if self._stopping:
                    self._wakes_at = None
                    for writer in self._due:
                        writer.scheduled = False
                    self._due.clear()
                    return
                writer, deadline = min(self._due.items(), key=lambda item: item[1])
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._wakes_at = deadline
                    self._cond.wait(wait)
                    continue
                self._wakes_at = None  # flushing, not waiting: it looks at the deadlines again before it waits
                del self._due[writer]
            try:
                writer.context.run(writer.flush_due)
            except BaseException:  # a closed session, a full disk, a raising subscriber: the loop's next write reports it
                logger.debug("nbagent: flushing stream deltas failed", exc_info=True)


FLUSHER = _Flusher()
