"""The append-only event log on disk: the one writer, with its lock, fsync policy and tail repair (reading is :mod:`nbagent.record.log_reader`)."""

from __future__ import annotations

import os
import stat
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import filelock

from ..errors import LogCorruptError, LogError, LogLockedError, LogWriteError
from ..record.log_reader import Scan, scan
from ..record.readfile import open_regular, read_regular

FsyncPolicy = Literal["always", "turn", "never"]
FSYNC_POLICIES: tuple[str, ...] = ("always", "turn", "never")
# What a second writer is told, by every store.
LOCKED = (
    "{where} is open for writing in another process or session (a second kernel on this notebook?). "
    "Close that session or stop that kernel, or open a new session here."
)


@dataclass(frozen=True)
class Repair:
    """A torn tail that opening the log cut off and kept aside."""

    offset: int
    length: int
    kept: Path
    reason: str


def make_folder(folder: Path) -> None:
    """Create ``folder`` and its missing parents, each owner-only (``mkdir(parents=True)`` gives parents the umask's mode)."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir(mode=0o700, exist_ok=True)


class FileOps:
    """The file system calls the log and its snapshots make; the default is plain ``os`` (tests pass a fault-injecting one)."""

    open = staticmethod(os.open)
    close = staticmethod(os.close)
    write = staticmethod(os.write)
    pread = staticmethod(os.pread)
    fsync = staticmethod(os.fsync)
    ftruncate = staticmethod(os.ftruncate)
    fstat = staticmethod(os.fstat)
    replace = staticmethod(os.replace)
    unlink = staticmethod(os.unlink)

    def fsync_dir(self, path: str | os.PathLike[str]) -> None:
        """Make the folder's entries (files created, renamed or removed in it) durable."""
        fd = self.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self.fsync(fd)
        finally:
            self.close(fd)

    def write_all(self, fd: int, data: bytes | memoryview) -> None:
        """Write all of ``data``, continuing after short writes."""
        view = memoryview(data)
        while view:
            view = view[self.write(fd, view) :]


OS_FILES = FileOps()


class EventLog:
    """The one writer of a log file: holds its lock and an open handle, appends lines, fsyncs by policy."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: FsyncPolicy = "turn", ops: FileOps | None = None) -> None:
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync must be one of {', '.join(FSYNC_POLICIES)}; got {fsync!r}")
        self.path = Path(path)
        self.ops = OS_FILES if ops is None else ops
        self.fsync_policy = fsync
        self.repair: Repair | None = None
        self._failed: BaseException | None = None
        make_folder(self.path.parent)
        self._lock = filelock.FileLock(str(self.path) + ".lock", mode=0o600, timeout=0)
        try:
            self._lock.acquire()
        except filelock.Timeout:
            raise LogLockedError(LOCKED.format(where=self.path)) from None
        try:
            created = not self.path.exists()
            # No link followed and no wait on a FIFO: check_start refused both, but the file may have been swapped since.
            flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
            self._fd = self.ops.open(self.path, flags, 0o600)
            try:
                info = self.ops.fstat(self._fd)
                if not stat.S_ISREG(info.st_mode):
                    raise LogError(f"{self.path} is not a regular file; nbagent does not open it. Remove it to continue.")
                if created:
                    self.ops.fsync_dir(self.path.parent)
                self.size = info.st_size
                # What is already there is the earlier writer's to have synced: closing a log
                # this handle never wrote to costs no fsync.
                self._synced_size = self.size
            except BaseException as exc:
                self.ops.close(self._fd)
                if isinstance(exc, OSError):
                    raise LogWriteError(f"creating {self.path} failed: {exc}. Open the session again to retry.") from exc
                raise
        except BaseException:
            self._lock.release()
            raise

    def fileno(self) -> int:
        """The open file descriptor."""
        return self._fd

    @property
    def where(self) -> str:
        """How messages name this log: its path."""
        return str(self.path)

    def refresh(self) -> None:
        """Learn the size again from the file (after an append was cut short in memory)."""
        self.size = self.ops.fstat(self._fd).st_size

    def read(self, start: int = 0, stop: int | None = None) -> bytes:
        """Bytes of the file from ``start`` to ``stop`` (default: the end); after :meth:`close`, read by path."""
        stop = self.size if stop is None else stop
        if self._fd < 0:
            with open_regular(self.path) as handle:
                handle.seek(start)
                return handle.read(max(0, stop - start))
        chunks, pos = [], start
        while pos < stop:
            chunk = self.ops.pread(self._fd, min(stop - pos, 1 << 24), pos)
            if not chunk:
                break
            chunks.append(chunk)
            pos += len(chunk)
        return b"".join(chunks)

    @property
    def failed(self) -> BaseException | None:
        """The write or fsync error that made this log refuse writes, if any."""
        return self._failed

    def recover(self, start: int = 0, first_seq: int = 1) -> Scan:
        """Check the log from ``start``, cut off and keep aside a torn tail; offsets in the result are absolute.

        Damage before the tail raises :class:`LogCorruptError` with a copy of the whole file kept beside it.
        """
        try:
            result = scan(self.read(start), path=str(self.path), first_seq=first_seq, base_offset=start)
        except LogCorruptError as err:
            raise LogCorruptError(err.path, err.line, err.offset, err.reason, kept=self._keep_damaged()) from None
        if result.torn and self._failed is None:  # a log that refuses writes is only read, never repaired
            offset = start + result.end
            kept = self.path.with_name(f"{self.path.name}.torn-{offset}")
            try:
                self._write_side_file(kept, result.torn)
                # The kept copy's folder entry must be durable before the log loses those bytes.
                self.ops.fsync_dir(self.path.parent)
                self.ops.ftruncate(self._fd, offset)
                self.ops.fsync(self._fd)
            except OSError as exc:
                self._failed = exc
                raise LogWriteError(
                    f"cutting off the torn last line of {self.path} failed: {exc}. No whole event was lost; "
                    "open the session again to retry."
                ) from exc
            self.size = self._synced_size = offset
            self.repair = Repair(offset, len(result.torn), kept, result.torn_reason)
        result.end += start
        result.last_start += start
        return result

    def _write_side_file(self, path: Path, data: bytes) -> None:
        fd = self.ops.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            self.ops.write_all(fd, data)
            self.ops.fsync(fd)
        finally:
            self.ops.close(fd)

    def _keep_damaged(self) -> str | None:
        """Copy the whole damaged log beside it (named by its checksum, so reopening adds no copies); None if that fails."""
        data = self.read(0)
        kept = self.path.with_name(f"{self.path.name}.damaged-{zlib.crc32(data):08x}")
        try:
            if not (kept.exists() and read_regular(kept) == data):
                self._write_side_file(kept, data)
                self.ops.fsync_dir(self.path.parent)
        except OSError:
            return None
        return str(kept)

    def append(self, line: bytes, *, durable: bool) -> None:
        """Write one encoded line; fsync it if the policy says this event must be durable."""
        if self._failed is not None:
            raise LogWriteError(
                f"{self.path} refused a write because an earlier write or fsync failed ({self._failed}). "
                "Close and reopen the session: opening checks the log and cuts any partial line."
            )
        try:
            ops = self.ops
            written = ops.write(self._fd, line)
            if written != len(line):
                ops.write_all(self._fd, line[written:])
            self.size += len(line)
            if self.fsync_policy == "always" or (durable and self.fsync_policy == "turn"):
                ops.fsync(self._fd)
                self._synced_size = self.size
        except OSError as exc:
            self._failed = exc
            raise LogWriteError(f"writing {self.path} failed: {exc}. The log now refuses writes; reopen the session.") from exc

    def sync(self) -> None:
        """Force everything written so far to disk (no fsync if this handle wrote nothing since the last)."""
        if self._failed is None and self.fsync_policy != "never" and self._synced_size != self.size:
            try:
                self.ops.fsync(self._fd)
                self._synced_size = self.size
            except OSError as exc:
                self._failed = exc
                raise LogWriteError(f"syncing {self.path} failed: {exc}. The log now refuses writes; reopen the session.") from exc

    def close(self) -> None:
        """Sync, close the handle and release the lock."""
        if self._fd < 0:
            return
        try:
            self.sync()
        finally:
            self.ops.close(self._fd)
            self._fd = -1
            self._lock.release()
