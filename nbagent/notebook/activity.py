"""What a running panel's header shows besides its status: the working / waiting mark, and a retry wait counting down.

A retry waits as long as the API asked (``retry-after``, nbagent/model/retries.py), which may be minutes; the
``model_error`` event logs the wait once (``retry_in``), and :class:`Countdown` redraws the status each second from
it until the next event, so the panel says how long is left (render/view.py words it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .. import threads
from ..record import events as ev
from ..render.parts import esc
from ..render.view import retry_words

WORKING = "working…"  # the header's mark while the turn runs (the kernel's own status may read idle: docs/notebook.md)
WAITING = "waiting for your approval ↓"  # ... and while a question below waits for the user
TICK = 1.0  # seconds between two redraws of a countdown


def activity_html(*, waiting: bool) -> str:
    """The header's mark of a turn that runs: working, or waiting for the user's approval (below); plain text, no colour of its own.

    It floats at the right of the header's first line: no line of its own, so the transcript that replaces the
    panel (without it) is as high as the panel was.
    """
    if waiting:
        return f'<div class="nbagent-activity nbagent-activity-waiting" role="status">{esc(WAITING)}</div>'
    return f'<div class="nbagent-activity" role="status">{esc(WORKING)}</div>'


class Countdown:
    """Counts a retry wait down in a status line, once a second, until the next event (or :meth:`stop`)."""

    def __init__(self, lock: threading.RLock, show: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> None:
        self.lock, self.show, self.clock = lock, show, clock  # show(status) is called holding ``lock``
        self._end: float | None = None
        self._timer: threading.Timer | None = None

    def follow(self, event: ev.Event) -> None:
        """Start counting down after a ``model_error`` that waits (``retry_in``); any other event ends a countdown."""
        with self.lock:
            self.stop()
            wait: Any = event.get("retry_in") if event.get("type") == ev.MODEL_ERROR else None
            if isinstance(wait, (int, float)) and wait >= 1:
                self._end = self.clock() + wait
                self._schedule()

    def _schedule(self) -> None:
        self._timer = threads.timer(TICK, self._tick)
        self._timer.start()

    def _tick(self) -> None:
        with self.lock:
            if self._end is None:
                return
            left = self._end - self.clock()
            if left <= 0.5:  # the retry is about to start: its model_call event sets the status
                self._end, self._timer = None, None
                return
            self.show(retry_words(left))
            self._schedule()

    def stop(self) -> None:
        """End the countdown, if one runs."""
        with self.lock:
            self._end = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
