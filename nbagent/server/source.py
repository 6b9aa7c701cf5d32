"""Where the server reads a session's events: the :class:`EventSource` seam, and its file implementation on the one reader.

A second store (e.g. PostgreSQL) implements the same two methods; the shared tail (:mod:`.tail`)
and the handlers never know which store they read.
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .. import events as ev
from ..errors import LogCorruptError, LogVersionError, NotALogError
from ..reader import Reader

CHUNK = 1 << 22  # bytes read at a time


@dataclass
class Batch:
    """What one read found: the whole events after ``since``, why reading stopped early ('' if it did not), an unfinished last line."""

    events: list[ev.Event] = field(default_factory=list)
    problem: str = ""
    torn: bool = False


class EventSource(Protocol):
    """A session's events for the server: read what is there after a seq, and wait until more may have come."""

    def read(self, since: int) -> Batch:
        """The events with ``seq > since`` stored now, in order (blocking; the server calls it in a worker thread)."""
        ...

    async def wait(self, timeout: float) -> None:
        """Return when events after the last read may have come, or after ``timeout`` seconds at most."""
        ...


class FileSource:
    """A log file, read without a lock (never even probed), never written; reading goes on from where the last read stopped."""

    def __init__(self, path: Path, *, poll: float = 0.02) -> None:
        self.path = path
        self.poll = poll
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
        """Events after ``since``: only the bytes appended since the last read when it ended at ``since``."""
        reader = self._reader
        if reader is None or reader.stopped or (reader.expected or 1) - 1 != since or (self._seen and self._seen[0] != self._ino()):
            reader = self._reader = Reader(str(self.path), "follow", since=since)
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
            while True:
                data = os.pread(fd, max(CHUNK, info.st_size - reader.offset), reader.offset)
                if not data:
                    break
                before = reader.offset
                batch.events.extend(reader.feed(data))
                if reader.offset == before or len(data) < CHUNK:
                    break
        except (LogCorruptError, LogVersionError, NotALogError) as exc:
            reader.stopped = True
            batch.problem = str(exc)
        except OSError as exc:
            batch.problem = f"cannot read the log: {exc.strerror or exc}"
        finally:
            os.close(fd)
        batch.torn = bool(reader.torn)
        return batch

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
