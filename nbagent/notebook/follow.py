"""Following a session for a view in the kernel: events as their writer stores them, through the store seam, in batches.

``Store.follow`` waits for LISTEN/NOTIFY on a database (no polling) and polls a file; it catches up
from ``since`` first, so nothing is missed and nothing comes twice.  A daemon thread runs it; the
events are handed on at most every ``frame`` seconds, and never more often than four times the time the view
took with the last batch (a view rebuilds what it shows per batch: a long session costs more per batch).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from .. import threads
from ..errors import NbagentError
from ..record import events as ev
from ..stores import Store

FRAME = 0.2  # seconds: followed events are handed on at most this often
RENEW = 30.0  # seconds without an event after which the store's follow starts again from the last one (so a stop is noticed)


class Follower:
    """Hands ``on_events`` each batch of events after ``since`` as they are written, until :meth:`stop`; ``on_stop(why)`` on an error."""

    def __init__(
        self,
        store: Store,
        path: Path,
        since: int,
        on_events: Callable[[list[ev.Event]], None],
        on_stop: Callable[[str], None],
        *,
        frame: float = FRAME,
        renew: float = RENEW,
    ) -> None:
        self.store, self.path, self.since = store, path, since
        self.on_events, self.on_stop = on_events, on_stop
        self.frame, self.renew = frame, renew
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._order = threading.Lock()  # batches are handed on one at a time, in order
        self._pending: list[ev.Event] = []
        self._timer: threading.Timer | None = None
        self._spent = 0.0  # seconds the view took with the last batch
        self._thread = threads.thread(self._run, name="nbagent-follow")
        self._thread.start()

    @property
    def stopped(self) -> bool:
        """Whether it was stopped (or stopped itself on an error)."""
        return self._stopped.is_set()

    def stop(self) -> None:
        """Hand on nothing more; the thread ends at its next event, or within ``renew`` seconds of quiet."""
        self._stopped.set()
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()

    def _run(self) -> None:
        try:
            while not self._stopped.is_set():
                # Quiet for `renew` seconds, the store's follow returns; it starts again from the last event seen.
                for event in self.store.follow(self.path, since=self.since, idle_timeout=self.renew):
                    if self._stopped.is_set():
                        return
                    self.since = event["seq"]
                    self._keep(event)
        except (NbagentError, OSError) as exc:  # never silently: the view says why it stopped
            if not self._stopped.is_set():
                self._hand_on(last=True)
                self._stopped.set()
                self.on_stop(str(exc))

    def _keep(self, event: ev.Event) -> None:
        with self._lock:
            self._pending.append(event)
            if self._timer is None:
                self._timer = threads.timer(max(self.frame, 4 * self._spent), self._hand_on)
                self._timer.start()

    def _hand_on(self, *, last: bool = False) -> None:
        with self._order:
            with self._lock:
                batch, self._pending = self._pending, []
                if not last:
                    self._timer = None
            if batch and not self._stopped.is_set():
                start = time.monotonic()
                self.on_events(batch)
                self._spent = time.monotonic() - start
