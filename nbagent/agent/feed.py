"""A session's events read back from its log, and handed live to subscribers in seq order."""

from __future__ import annotations

import bisect
import collections
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Protocol

from ..record import events as ev
from ..record.log_reader import Reader, iter_events
from ..stores import Log

logger = logging.getLogger("nbagent")
MARK_EVERY = 64  # the session remembers where every 64th line starts: reading from the middle skips at most 63 lines
FIRST_CHUNK = 1 << 14  # bytes read first; each further read is twice the last, so a reader that stops early reads little


class Marks:
    """Where some whole lines of the log start (seq → byte offset), learned as lines are appended or read; seq 1 is at 0.

    Every 64th line, and every request (``user_msg``): re-rendering one turn reads from its first line.
    """

    def __init__(self) -> None:
        self.seqs: list[int] = [1]
        self.starts: list[int] = [0]
        self._lock = threading.Lock()  # its own: readers note lines outside the session's lock, and never wait on it

    def note(self, seq: int, start: int) -> None:
        """Remember that the line of ``seq`` starts at byte ``start``."""
        with self._lock:
            at = bisect.bisect_left(self.seqs, seq)
            if at == len(self.seqs) or self.seqs[at] != seq:
                self.seqs.insert(at, seq)
                self.starts.insert(at, start)

    def before(self, seq: int) -> tuple[int, int]:
        """The known line nearest at or before ``seq``: its seq and where it starts."""
        with self._lock:
            at = bisect.bisect_right(self.seqs, seq) - 1
            return self.seqs[at], self.starts[at]


class Subscriber(Protocol):
    """Anything that wants every event of a session, in order: the log's live views."""

    def __call__(self, event: ev.Event) -> None: ...


class Feed:
    """A session's reading and watching: events from the log (from the nearest mark), then live to each subscriber."""

    def __init__(self, log: Log, lock: threading.RLock, where: str, seq: Callable[[], int]) -> None:
        self._log = log
        self._lock = lock  # the session's: the writer holds it while it appends and publishes
        self._where = where
        self._seq = seq  # the seq of the session's last event
        # Only ever whole lines before the end of the log; replaced (never trimmed) when the session re-reads it.
        self.marks = Marks()
        self._subscribers: list[Subscriber] = []
        self._outbox: collections.deque[ev.Event] = collections.deque()
        self._publishing = False

    def note(self, seq: int, start: int, kind: str) -> None:
        """Remember where the line of ``seq`` (of type ``kind``) starts if it is a mark (the writer, under the lock)."""
        if _marked(seq, kind):
            self.marks.note(seq, start)

    def forget(self) -> None:
        """Forget every line start learned so far (the log's tail may have been cut)."""
        self.marks = Marks()

    def events(self, since: int) -> Iterator[ev.Event]:
        """Events with ``seq > since`` up to the log's end now (taken under the lock), read and parsed as they are iterated."""
        return (event for event, _ in self.sized_events(since))

    def sized_events(self, since: int) -> Iterator[tuple[ev.Event, int]]:
        """:meth:`events`, each with the length of its line in bytes."""
        with self._lock:
            marks, first, start = self._start_of(since + 1)
            end = self._log.size
        return self._read(marks, since=since, first=first, start=start, end=end)

    def _start_of(self, seq: int) -> tuple[Marks, int, int]:
        """Where to start reading for ``seq`` (the marks, and a known line at or before it: its seq and offset); under the lock."""
        first, start = self.marks.before(seq)
        if start > self._log.size:  # never read from past the end, whatever cut it: forget the marks and read from the start
            self.marks, first, start = Marks(), 1, 0
        return self.marks, first, start

    def _read(self, marks: Marks, *, since: int, first: int, start: int, end: int) -> Iterator[tuple[ev.Event, int]]:
        """Events with ``seq > since`` (each with its line's length) in the log's whole lines from ``start`` (the line of ``first``) to ``end``, noting where lines start.

        The bytes are read in growing chunks as the events are taken, so a caller that stops
        after a few events (one turn of a long log) does not read the rest.
        """
        reader = Reader(self._where, since=since, expected=first, offset=start, last_start=start)
        chunk = FIRST_CHUNK
        while reader.offset < end:
            before = reader.offset
            stop = min(before + chunk, end)
            for event in reader.feed(self._log.read(before, stop)):
                seq = event["seq"]
                if _marked(seq, event["type"]):
                    marks.note(seq, reader.last_start)
                yield event, reader.offset - reader.last_start
            if reader.offset == before and stop == end:
                return  # no whole line before ``end`` (only a cut could leave that): the reader has said why
            chunk *= 2

    def subscribe(self, callback: Subscriber, since: int = 0) -> Callable[[], None]:
        """Deliver every event with ``seq > since``, from the log then live, none missed or repeated; returns an unsubscribe function."""
        with self._lock:
            end = self._log.size
            marks, first, start = self._start_of(since + 1)
        last = since
        try:
            # Catch up outside the lock so a long history does not stall the writer ...
            for event, _ in self._read(marks, since=last, first=first, start=start, end=end):
                callback(event)
                last = event["seq"]
            # ... then take the few events appended meanwhile and go live, atomically.
            with self._lock:
                for event in iter_events(self._log.read(end, self._log.size), path=self._where, since=last, first_seq=None):
                    callback(event)
                live = callback if since <= self._seq() else _after(since, callback)
                self._subscribers.append(live)
        except Exception:
            logger.exception("nbagent: subscriber %r raised while catching up; detached", callback)
            return lambda: None

        def unsubscribe() -> None:
            with self._lock:
                if live in self._subscribers:
                    self._subscribers.remove(live)

        return unsubscribe

    def publish(self, event: ev.Event) -> None:
        """Hand a just-written event to every subscriber (the writer, under the lock); one that raises is detached."""
        if not self._subscribers:
            return
        # A subscriber may append from inside its callback: queue that event behind this
        # one so that every subscriber still sees events in seq order.
        self._outbox.append(event)
        if self._publishing:
            return
        self._publishing = True
        try:
            while self._outbox:
                queued = self._outbox.popleft()
                for callback in list(self._subscribers):
                    try:
                        callback(queued)
                    except Exception:
                        logger.exception("nbagent: subscriber %r raised on event %d; detached", callback, queued["seq"])
                        if callback in self._subscribers:  # it may have unsubscribed itself before raising
                            self._subscribers.remove(callback)
        finally:
            self._publishing = False

    def close(self) -> None:
        """Detach every subscriber."""
        self._subscribers.clear()


def _marked(seq: int, kind: str) -> bool:
    """Whether where the line of ``seq`` starts is worth remembering."""
    return seq % MARK_EVERY == 1 or kind == ev.USER_MSG


def _after(since: int, callback: Subscriber) -> Subscriber:
    """``callback`` for live events with ``seq > since`` only (a subscriber that joined ahead of the log)."""

    def deliver(event: ev.Event) -> None:
        if event["seq"] > since:
            callback(event)

    return deliver
