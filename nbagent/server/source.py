"""Where the server reads a session's events: the :class:`EventSource` seam, on a log file or on a database store.

:class:`FileSource` reads a file with the one reader; :class:`StoreSource` reads a session of a
PostgreSQL store through the store's watch (LISTEN/NOTIFY, no polling).  The shared tail
(:mod:`.tail`) and the handlers never know which one they read.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..errors import LogCorruptError, LogError, LogVersionError, NotALogError
from ..history.summary import trust_of
from ..record import events as ev
from ..record import trust
from ..record.log_reader import Reader

CHUNK = 1 << 20  # bytes of log one read takes at most (more only for one longer line): what a read holds stays small
RETRY_MAX = 30.0  # seconds between two attempts to reach a database that went away, at most
DAMAGE = (LogCorruptError, LogVersionError, NotALogError)
log = logging.getLogger("nbagent.server")


@dataclass
class Batch:
    """What one read found: the whole events after ``since``, why reading stopped early ('' if it did not), an unfinished last line."""

    events: list[ev.Event] = field(default_factory=list)
    problem: str = ""
    torn: bool = False
    damaged: bool = False  # the problem is damage in the log itself (not a failure to read it now)
    more: bool = False  # reading stopped at its bound (:data:`CHUNK`): more may be there now; read again at once


class EventSource(Protocol):
    """A session's events for the server: read what is there after a seq, and wait until more may have come."""

    def read(self, since: int) -> Batch:
        """The events with ``seq > since`` stored now, in order, or the first of them (``more``) (blocking; in a worker thread)."""
        ...

    async def wait(self, timeout: float) -> None:
        """Return when events after the last read may have come, or after ``timeout`` seconds at most."""
        ...

    def trust(self) -> str:
        """Who wrote the lines (``yours``, ``unsigned``, ``other key``, ``altered``, ``mixed``; ``unknown`` if unreadable); blocking."""
        ...

    def close(self) -> None:
        """Let go of what the source holds open (a no-op for a file)."""
        ...


class FileSource:
    """A log file, read without a lock (never even probed), never written; reading goes on from where the last read stopped."""

    def __init__(self, path: Path, *, poll: float = 0.02, start: tuple[int, int] = (0, 1)) -> None:
        self.path = path
        self.poll = poll
        self.start = start  # (offset, seq) of the line a first read starts from (labels.seek finds one)
        self._reader: Reader | None = None
        self._seen: tuple[int, int, int] | None = None  # (inode, size, mtime) at the last read
        self.reads = 0  # how many times the file was read (the benchmark and tests count them)

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            info = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return None
        return info.st_ino, info.st_size, info.st_mtime_ns

    def read(self, since: int) -> Batch:
        """Events after ``since``, from about :data:`CHUNK` bytes: the reading goes on where the last one stopped if it was not past ``since``."""
        reader = self._reader
        if reader is None or reader.stopped or (reader.expected or 1) - 1 > since or (self._seen and self._seen[0] != self._ino()):
            offset, seq = self.start if self._reader is None and self.start[1] <= since + 1 else (0, 1)
            reader = self._reader = Reader(str(self.path), "follow", since=since, expected=seq, offset=offset, last_start=offset)
        reader.since = since  # the lines up to it are skipped unparsed
        batch = Batch()
        self.reads += 1
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            batch.problem = f"cannot read the log: {exc.strerror or exc}"
            return batch
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                batch.problem = "the log is not a regular file"
                return batch
            self._seen = (info.st_ino, info.st_size, info.st_mtime_ns)
            want = CHUNK
            while data := os.pread(fd, want, reader.offset):
                before = reader.offset
                batch.events.extend(reader.feed(data))
                if reader.offset != before or len(data) < want:
                    batch.more = len(data) == want and not reader.stopped
                    break
                want *= 2  # not one whole line in it: a longer line (the reader refuses one past its limit)
        except (LogCorruptError, LogVersionError, NotALogError) as exc:
            reader.stopped = True
            batch.problem, batch.damaged = str(exc), True
        except OSError as exc:
            batch.problem = f"cannot read the log: {exc.strerror or exc}"
        finally:
            os.close(fd)
        batch.torn = bool(reader.torn) and not batch.more  # a line cut by the bound is read whole next time
        return batch

    def trust(self) -> str:
        """The listing's check (a snapshot signed by this user vouches for the lines before it), with this user's key if any."""
        try:
            return trust_of(self.path, user=trust.user_signer_or_none()).verdict
        except (OSError, ValueError):
            return "unknown"

    def close(self) -> None:
        """Nothing is held open between reads."""

    def _ino(self) -> int:
        found = self._stat()
        return found[0] if found else -1

    async def wait(self, timeout: float) -> None:
        """Poll the file's size and time every ``poll`` seconds until they differ from the last read's."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._stat() != self._seen:
                return
            await asyncio.sleep(min(self.poll, max(0.0, deadline - time.monotonic())))


class StoreSource:
    """A session in a database store, read through the store's watch: a LISTEN on its own connection wakes :meth:`wait`.

    Nothing is polled: :meth:`wait` hands the listening socket to the event loop and returns when a
    commit's NOTIFY (or the connection's end) makes it readable.  The writer's lock is never taken.
    When the database goes away, reading reports it as the batch's problem (logged once) and is
    tried again after ``retry`` seconds, doubling up to 30; the watch is opened again (LISTEN
    before reading), so what was committed meanwhile comes with no gap.  ``listen=False`` reads
    once per call without a watch (a catch-up read).
    """

    def __init__(self, store: Any, path: Path, *, listen: bool = True, retry: float = 1.0) -> None:
        self.store, self.path, self.listen, self.retry = store, Path(path), listen, retry
        self.where: str = store.where(self.path)
        self.reads = 0  # how many times the table was read (tests and the tails API count them)
        self.down = ""  # why the database cannot be read now ('' when it can)
        self._watch: Any = None
        self._broken = False  # the listening connection failed: the next read opens a new watch
        self._closed = False
        self._delay = retry
        self._lock = threading.Lock()  # reads (worker threads) and closing never overlap on a connection

    def read(self, since: int) -> Batch:
        """The events committed after ``since``; damage stops at the damaged event, an unreachable database is the problem."""
        with self._lock:
            if self._closed:
                return Batch(problem="the session is no longer followed")
            self.reads += 1
            try:
                batch = Batch(self._events(since))
            except DAMAGE as exc:
                batch = self._up_to_damage(since, exc)
            except LogError as exc:
                batch = self._unreachable(exc)
            finally:
                if self._closed:
                    self._drop()
        if self.down and not batch.problem:
            log.info("nbagent: %s can be read again", self.where)
            self.down, self._delay = "", self.retry
        return batch

    def _events(self, since: int) -> list[ev.Event]:
        if not self.listen:
            return list(self.store.read(self.path, since))
        if self._watch is not None and not self._broken:
            try:
                return list(self._watch.read(since))
            except DAMAGE:
                raise
            except LogError:
                pass  # its connection was lost since the last read (e.g. the database restarted): once more on new ones
        self._drop()
        self._watch = self.store.watch(self.path)  # LISTEN first: a commit after it always wakes the next wait
        self._broken = False
        return list(self._watch.read(since))

    def _up_to_damage(self, since: int, damage: Exception) -> Batch:
        """The events before the damaged one (the watch reads in batches and raises for the batch): read them one by one."""
        batch = Batch(problem=str(damage), damaged=True)
        try:
            for event in self.store.read(self.path, since):
                batch.events.append(event)
        except DAMAGE:
            pass
        except LogError as exc:
            return self._unreachable(exc)
        return batch

    def _unreachable(self, exc: LogError) -> Batch:
        self._drop()
        if not self.down:
            log.warning("nbagent: following %s: %s", self.where, " ".join(str(exc).split()))
        self.down = f"the database cannot be read now: {exc}"
        return Batch(problem=self.down)

    def _drop(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            try:
                watch.close()
            except Exception:  # noqa: BLE001 - a connection that is already gone
                pass

    async def wait(self, timeout: float) -> None:
        """Until the listening socket is readable (a NOTIFY came), or ``timeout``; after a failure, the reconnection delay."""
        watch = self._watch
        if watch is None or self._broken or self._closed:  # read again at once after a lost connection, then back off
            await asyncio.sleep(min(timeout, 0.0 if self._broken and not self.down else self._delay))
            if self.down:
                self._delay = min(self._delay * 2, RETRY_MAX)
            return
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        fd = watch.fileno()

        def readable() -> None:
            if not woken.done():
                woken.set_result(None)

        loop.add_reader(fd, readable)
        try:
            await asyncio.wait_for(woken, timeout)
        except asyncio.TimeoutError:
            return
        finally:
            loop.remove_reader(fd)
        try:
            # Take the notifications off the socket (it is readable: this does not block).  Readable with none
            # means the connection ended (a restart, a terminated backend): the next read opens a new watch.
            self._broken = not watch.wait_blocking(0)
        except Exception:  # noqa: BLE001 - the connection ended: the same
            self._broken = True

    def trust(self) -> str:
        """Who wrote the lines, checked over the whole log's bytes exactly as for a file; ``unknown`` if it cannot be read."""
        try:
            checker = trust.Checker(user=trust.user_signer_or_none())
            for piece in self.store.pieces(self.path):  # a batch of rows at a time: memory stays small whatever the length
                checker.feed(piece)
            return checker.report.verdict
        except (LogError, ValueError):
            return "unknown"

    def close(self) -> None:
        """Close the watch's connections (now, or when the read in progress ends)."""
        self._closed = True
        if self._lock.acquire(blocking=False):
            try:
                self._drop()
            finally:
                self._lock.release()
