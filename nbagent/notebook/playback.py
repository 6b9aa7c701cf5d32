"""Playing a replay: the cursor moves on with the recorded times (quiet gaps shortened), on a daemon thread.

The kernel stays free for other cells and widget messages while it plays; a scrub while playing goes
on from the new place, a change of speed from the current moment.  The widgets move at most once per
``frame`` seconds, however fast the log's events came.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import ipywidgets as widgets

from .. import threads
from ..render.timeline import Timeline

FRAME = 0.05  # seconds: playback changes the widgets at most this often (20 updates a second)
SPEEDS: tuple[tuple[str, float], ...] = (("1x", 1.0), ("2x", 2.0), ("5x", 5.0), ("20x", 20.0), ("instant", math.inf))


class Playback:
    """Play and pause for a replay (mixed into :class:`~.replay.Replay`, which holds the widgets and the position)."""

    timeline: Timeline
    frame: float
    speed: widgets.Dropdown
    play_button: widgets.Button
    _lock: Any  # threading.RLock
    _thread: threading.Thread | None
    _stop: threading.Event
    _wake: threading.Event

    @property
    def index(self) -> int:
        """The current event, 0-based."""
        raise NotImplementedError

    def go(self, index: int) -> None:
        """Move the cursor to event ``index``."""
        raise NotImplementedError

    @property
    def playing(self) -> bool:
        """Whether playback is running."""
        return self._thread is not None

    def toggle(self) -> None:
        """Play, or pause if playing."""
        if self.playing:
            self.pause()
        else:
            self.play()

    def play(self) -> None:
        """Play from the current event (from the start if at the end) on a background thread."""
        with self._lock:
            if self._thread is not None:
                return
            last = len(self.timeline) - 1
            if self.index >= last:
                self.go(0)
            if math.isinf(self.speed.value):
                self.go(last)
                return
            self._stop = threading.Event()
            self._thread = threads.thread(self._run, args=(self._stop,), name="nbagent-replay")
            self._label_play(playing=True)
            self._thread.start()

    def pause(self) -> None:
        """Stop playback; returns once the playing thread has stopped."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stop.set()
            self._wake.set()
            self._label_play(playing=False)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)

    def _run(self, stop: threading.Event) -> None:
        speed = self.speed.value
        base_time, base_clock = self.timeline.play_times[self.index], time.monotonic()
        expected = self.index
        try:
            while True:
                self._wake.clear()
                now = time.monotonic()
                played = base_time + (now - base_clock) * speed
                with self._lock:
                    if stop.is_set():
                        return
                    # Followed events may have been added: the play times of the earlier ones stay the same.
                    last, play_times = len(self.timeline) - 1, self.timeline.play_times
                    index = self.index
                    if index != expected:  # scrubbed while playing: go on from there
                        base_time, base_clock, played = play_times[index], now, play_times[index]
                    if self.speed.value != speed:
                        base_time, base_clock, speed = played, now, self.speed.value
                    if math.isinf(speed):
                        self.go(last)
                        return
                    target = self.timeline.at_play_time(played, not_before=index)
                    if target != index:
                        self.go(target)
                    expected = target
                    if target >= last:
                        return
                    wait = max(self.frame, (play_times[target + 1] - played) / speed)
                self._wake.wait(wait)
        finally:
            with self._lock:
                if self._thread is threading.current_thread():
                    self._thread = None
                    self._label_play(playing=False)

    def _label_play(self, *, playing: bool) -> None:
        self.play_button.description, self.play_button.icon = ("Pause", "pause") if playing else ("Play", "play")
