"""The one thread that writes out the deltas a stalled stream left waiting, woken at each stream's deadline.

Two ways to wait, one behaviour. On Linux the thread waits on a kernel timer (a ``timerfd``) that each
stream arms, and disarms when it ends in time: the thread wakes only for a stream that actually
stalled. Elsewhere it waits on a condition with a timeout, so it also wakes at the deadline of a
stream that has already ended. Each wake needs the GIL while the stream's thread is busy; waking at
every deadline cost about 0.1 ms of CPU per request when streams ended at once (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import contextvars
import logging
import os
import sys
import threading
import time
from typing import Protocol

logger = logging.getLogger("nbagent")


class Flushable(Protocol):
    """A stream's delta writer, as the flusher sees it (nbagent.agent.deltas.DeltaWriter)."""

    context: contextvars.Context  # the flusher writes in it: see nbagent.threads
    scheduled: bool

    def flush_due(self) -> None:
        """Write what has waited an interval (called once its deadline has passed)."""


class Flusher(Protocol):
    """Calls ``writer.flush_due()`` once a deadline passes, unless the writer is cancelled first."""

    def schedule(self, writer: Flushable, deadline: float) -> None:
        """Call ``writer.flush_due()`` at ``deadline`` (a ``time.monotonic()`` value)."""

    def cancel(self, writer: Flushable) -> None:
        """Forget ``writer`` (its stream has ended)."""

    def stop(self) -> None:
        """End the thread (a later schedule starts a new one), for a process about to fork."""


def _drop(due: dict[Flushable, float]) -> None:
    """Forget every waiting writer, which schedules itself again at its next delta."""
    for writer in due:
        writer.scheduled = False
    due.clear()


def _flush(writers: list[Flushable]) -> None:
    for writer in writers:
        try:
            writer.context.run(writer.flush_due)
        except BaseException:  # a closed session, a full disk, a raising subscriber: the loop's next write reports it
            logger.debug("nbagent: flushing stream deltas failed", exc_info=True)


class ConditionFlusher:
    """A thread waiting on a condition until the earliest deadline, woken early only for an earlier one."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # the thread does not survive a fork

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[Flushable, float] = {}
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._wakes_at: float | None = None  # when the waiting thread wakes by itself; None: only when notified

    def schedule(self, writer: Flushable, deadline: float) -> None:
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

    def cancel(self, writer: Flushable) -> None:
        """Forget ``writer`` (its stream has ended)."""
        with self._cond:
            self._due.pop(writer, None)

    def stop(self) -> None:
        """End the thread (a later schedule starts a new one); streams still write at their next delta or end."""
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
                    _drop(self._due)
                    return
                writer, deadline = min(self._due.items(), key=lambda item: item[1])
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._wakes_at = deadline
                    self._cond.wait(wait)
                    continue
                self._wakes_at = None  # flushing, not waiting: it looks at the deadlines again before it waits
                del self._due[writer]
            _flush([writer])


class _TimerFd:
    """A one-shot ``CLOCK_MONOTONIC`` timerfd (Linux) set to absolute ``time.monotonic()`` deadlines, through ``ctypes``.

    ``os.timerfd_*`` would do from Python 3.13; the C library's own functions serve every supported Python alike.
    """

    def __init__(self) -> None:
        import ctypes

        class Timespec(ctypes.Structure):
            _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]

        class Itimerspec(ctypes.Structure):
            _fields_ = [("it_interval", Timespec), ("it_value", Timespec)]

        libc = ctypes.PyDLL(None, use_errno=True)  # PyDLL keeps the GIL: these calls never block
        libc.timerfd_create.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.timerfd_settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(Itimerspec), ctypes.c_void_p]
        self._spec = Itimerspec()
        self._settime, self._pointer, self._errno = libc.timerfd_settime, ctypes.pointer(self._spec), ctypes.get_errno
        fd = libc.timerfd_create(time.CLOCK_MONOTONIC, os.O_CLOEXEC)  # TFD_CLOEXEC is O_CLOEXEC
        if fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self.fd: int = fd

    def set(self, deadline: float | None) -> None:
        """Fire at ``deadline``; None: disarm (a timer already fired and not read is forgotten too)."""
        self._set_ns(0 if deadline is None else int(deadline * 1e9) + 1)  # rounded up: never before the deadline

    def fire_now(self) -> None:
        """Fire at once (a deadline long past)."""
        self._set_ns(1)

    def _set_ns(self, at: int) -> None:
        self._spec.it_value.tv_sec, self._spec.it_value.tv_nsec = divmod(at, 1_000_000_000)
        if self._settime(self.fd, _TIMER_ABSTIME, self._pointer, None):
            raise OSError(self._errno(), "timerfd_settime failed")

    def wait(self) -> None:
        """Block, without the GIL, until the timer fires."""
        os.read(self.fd, 8)

    def close(self) -> None:
        """Close the descriptor."""
        os.close(self.fd)


_TIMER_ABSTIME = 1  # TFD_TIMER_ABSTIME: the time set is a deadline on the timer's clock, not a delay


class TimerFlusher:
    """A thread blocked on a timerfd set to the earliest deadline: a stream that ends in time re-arms it, never wakes it."""

    def __init__(self, timer: _TimerFd | None = None) -> None:
        self._timer = timer  # made at the first schedule if not given
        self._reset()
        os.register_at_fork(after_in_child=self._forget)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._due: dict[Flushable, float] = {}
        self._armed: float | None = None  # the deadline the timer is set to
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.wakes = 0  # times the timer woke the thread

    def _forget(self) -> None:
        """In a forked child: the timer is the parent's too (a shared descriptor), so close this copy, never set it."""
        if self._timer is not None:
            try:
                self._timer.close()
            except OSError:
                pass
        self._timer = None
        self._reset()

    def schedule(self, writer: Flushable, deadline: float) -> None:
        """Call ``writer.flush_due()`` at ``deadline`` (a ``time.monotonic()`` value)."""
        with self._lock:
            if self._thread is None:
                if self._timer is None:
                    self._timer = _TimerFd()
                self._thread = threading.Thread(target=self._run, args=(self._timer,), name="nbagent-delta-flusher", daemon=True)
                self._thread.start()
            self._due[writer] = deadline
            if self._armed is None or deadline < self._armed:
                self._arm(deadline)

    def cancel(self, writer: Flushable) -> None:
        """Forget ``writer``, and move the timer to the next deadline (or disarm it): its thread sleeps on."""
        with self._lock:
            if self._due.pop(writer, None) is not None and not self._stopping:
                self._arm(min(self._due.values(), default=None))

    def _arm(self, deadline: float | None) -> None:
        if deadline != self._armed:
            assert self._timer is not None
            self._timer.set(deadline)
            self._armed = deadline

    def stop(self) -> None:
        """End the thread (a later schedule starts a new one); streams still write at their next delta or end."""
        with self._lock:
            thread, self._stopping = self._thread, True
            if thread is not None and self._timer is not None:
                self._timer.fire_now()
                self._armed = 0.0  # long past: a schedule meanwhile does not set it later
        if thread is not None:
            thread.join()
        with self._lock:  # the thread read the timer's firing: it is disarmed
            _drop(self._due)
            self._thread, self._stopping, self._armed = None, False, None

    def _run(self, timer: _TimerFd) -> None:
        while True:
            try:
                timer.wait()
            except OSError:  # never seen: the next schedule starts a thread and a timer anew
                logger.warning("nbagent: the delta flusher's timer failed; starting it again", exc_info=True)
                with self._lock:
                    self._thread, self._timer, self._armed = None, None, None
                try:
                    timer.close()
                except OSError:
                    pass
                return
            with self._lock:
                if self._stopping:
                    return
                self.wakes += 1
                now = time.monotonic()
                ready = [writer for writer, deadline in self._due.items() if deadline <= now]
                for writer in ready:
                    del self._due[writer]
                self._armed = None  # fired: a one-shot timer is disarmed
                self._arm(min(self._due.values(), default=None))
            _flush(ready)


def timer_available(platform: str = sys.platform) -> bool:
    """Whether this system has the kernel timer :class:`TimerFlusher` waits on (Linux, with a 64-bit C ``long``)."""
    return platform.startswith("linux") and sys.maxsize > 2**32


def make() -> Flusher:
    """The flusher for this system: :class:`TimerFlusher` where a timerfd can be made, else :class:`ConditionFlusher`."""
    if timer_available():
        try:
            return TimerFlusher(_TimerFd())  # the probe's timer is the one the thread waits on
        except (ImportError, OSError, AttributeError):  # no ctypes, or a C library without timerfd: a condition instead
            logger.debug("nbagent: no timerfd here; the delta flusher waits on a condition", exc_info=True)
    return ConditionFlusher()
