"""The append-only event log on disk: one writer, checksummed lines, an fsync policy, tail repair."""

from __future__ import annotations

import os
import re
import stat
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import filelock

from . import events as ev
from .errors import LogCorruptError, LogLockedError, LogVersionError, LogWriteError, NotALogError
from .fold import USAGE_KEYS

FsyncPolicy = Literal["always", "turn", "never"]
FSYNC_POLICIES: tuple[str, ...] = ("always", "turn", "never")


@dataclass
class Scan:
    """What reading a stretch of log found: the good events, where they end, and any torn tail."""

    events: list[ev.Event]
    end: int
    last_start: int = 0
    torn: bytes = b""
    torn_reason: str = ""


@dataclass(frozen=True)
class Repair:
    """A torn tail that opening the log cut off and kept aside."""

    offset: int
    length: int
    kept: Path
    reason: str


HEADER_LIMIT = 1 << 16  # a session_start line is never longer (Session.open refuses bigger meta)
_PRINTABLE = re.compile(rb"[\x20-\x7e]*")
_HEADER_LEADS = tuple(b'{"v":%d,"seq":1,"ts":' % v for v in ev.KNOWN_VERSIONS)


def start_problem(head: bytes) -> str:
    """Why a file beginning with ``head`` (its first 64 KiB, or all of it) is not an nbagent log ('' if it may be one).

    The one rule for what may be opened as a log: an empty file is a new log; a
    header line is a complete, checksum-valid ``session_start`` record with seq 1;
    a file cut inside its first line is a torn new log only if those bytes begin a
    header line; a damaged first line followed by valid records is a damaged log
    (the reader says where).  Anything else is not a log and is never written to.
    """
    if not head:
        return ""
    nl = head.find(b"\n", 0, HEADER_LIMIT + 1)
    if nl < 0:
        first = head[: HEADER_LIMIT + 1]
        if (
            len(first) <= HEADER_LIMIT
            and _PRINTABLE.fullmatch(first)
            and any(lead.startswith(first) or first.startswith(lead) for lead in _HEADER_LEADS)
        ):
            return ""
        return "its first line is not an nbagent record"
    try:
        event = ev.decode(head[:nl])
        problem = "" if event["seq"] == 1 and event["type"] == ev.SESSION_START else "its first line is not a session_start record"
    except ev.BadLine:
        problem = "its first line is not a checksummed nbagent record"
    if problem and _later_line_is_valid(head, nl + 1):
        return ""
    return problem


def check_start(path: str | os.PathLike[str]) -> None:
    """Raise :class:`NotALogError` unless ``path`` is missing, empty or begins like a log; reads the first 64 KiB, writes nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return
    except OSError:
        if os.path.islink(path):
            raise NotALogError(str(path), "it is a symbolic link") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotALogError(str(path), "it is not a regular file")
        head = os.pread(fd, HEADER_LIMIT + 1, 0)
    finally:
        os.close(fd)
    problem = start_problem(head)
    if problem:
        raise NotALogError(str(path), problem)


def make_folder(folder: Path) -> None:
    """Create ``folder`` and its missing parents, each owner-only (``mkdir(parents=True)`` gives parents the umask's mode)."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir(mode=0o700, exist_ok=True)


def _line_end(data: bytes, pos: int, path: str, line: int, base_offset: int) -> int:
    """Where the line at ``pos`` ends (-1: no newline yet); a line over ``MAX_LINE`` is refused, never read whole."""
    nl = data.find(b"\n", pos, pos + ev.MAX_LINE + 1)
    if nl < 0 and len(data) - pos > ev.MAX_LINE:
        raise LogCorruptError(path, line, base_offset + pos, f"the line is longer than the {ev.MAX_LINE >> 20} MiB limit")
    return nl


def _later_line_is_valid(data: bytes, pos: int) -> bool:
    """Whether any whole line starting at ``pos`` or later passes its checks."""
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            return False
        try:
            ev.decode(data[pos:nl])
            return True
        except ev.BadLine:
            pos = nl + 1


def _glued(data: bytes, pos: int, end: int) -> bool:
    """Whether the bad line ``data[pos:end]`` is two whole valid events joined by one damaged newline byte.

    A crash tears only what was written last; it cannot turn the newline between two
    whole lines into another byte, so that is damage, not a torn tail.
    """
    marker = data.find(b',"crc":"', pos, end)
    while marker >= 0:
        stop = marker + len(',"crc":"00000000"}')
        if stop < end:
            try:
                ev.decode(data[pos:stop])
                ev.decode(data[stop + 1 : end])
                return True
            except ev.BadLine:
                pass
        marker = data.find(b',"crc":"', marker + 1, end)
    return False


def _is_blocks(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(b, dict) and isinstance(b.get("text", ""), str) for b in value)


def _shape_problem(event: ev.Event) -> str:
    """Why a line with a valid checksum still cannot be folded (a hand-made or foreign log), or ''."""
    kind = event["type"]
    if not isinstance(kind, str) or not isinstance(event.get("ts", 0.0), (int, float)):
        return "the event has no valid type or timestamp"
    if kind == ev.SESSION_START:
        ok = isinstance(event.get("session_id"), str) and isinstance(event.get("meta") or {}, dict)
    elif kind == ev.USER_MSG:
        ok = isinstance(event.get("content"), str) or _is_blocks(event.get("content"))
    elif kind == ev.ASSISTANT_MSG:
        content, usage = event.get("content"), event.get("usage") or {}
        ok = (
            _is_blocks(content)
            and all(
                isinstance(b.get("id"), str) and isinstance(b.get("name"), str) and isinstance(b.get("input", {}), dict)
                for b in content
                if b.get("type") == "tool_use"
            )
            and isinstance(usage, dict)
            and all(isinstance(usage.get(k) or 0, int) for k in USAGE_KEYS)
        )
    elif kind in (ev.TOOL_STARTED, ev.TOOL_RESULT):
        ok = isinstance(event.get("tool_use_id"), str) and (
            kind == ev.TOOL_STARTED or isinstance(event.get("content"), str) or _is_blocks(event.get("content"))
        )
    elif kind == ev.DELTA:
        ok = isinstance(event.get("text", ""), str)
    else:
        ok = True
    return "" if ok else f"a {kind} event is missing fields or has fields of the wrong type"


def scan(data: bytes, *, path: str, first_seq: int = 1, base_offset: int = 0) -> Scan:
    """Check log bytes line by line (``data`` starts at ``base_offset`` in the file, at event ``first_seq``).

    Damage that nothing valid follows is a torn tail (returned, not raised): a
    crash can only tear what was being written last.  Damage followed by a
    valid line, a gap in ``seq`` or a newer schema raise.
    """
    found: list[ev.Event] = []
    pos, last_start, expected = 0, 0, first_seq  # one event per line, so line number == expected seq
    size = len(data)
    problem = start_problem(data) if first_seq == 1 else ""
    if problem:
        raise NotALogError(path, problem)
    while pos < size:
        nl = _line_end(data, pos, path, expected, base_offset)
        if nl < 0:
            return Scan(found, pos, last_start, data[pos:], "the last line has no newline (a write was cut short)")
        try:
            event = ev.decode(data[pos:nl])
        except ev.BadLine as bad:
            if not _later_line_is_valid(data, nl + 1) and not _glued(data, pos, nl):
                return Scan(found, pos, last_start, data[pos:], f"the last line is torn: {bad}")
            raise LogCorruptError(path, expected, base_offset + pos, str(bad)) from None
        version = event.get("v")
        if not isinstance(version, int) or version not in ev.KNOWN_VERSIONS:
            raise LogVersionError(
                f"{path} line {expected} uses log schema v{version}, but this nbagent reads up to "
                f"v{ev.SCHEMA_VERSION}. Upgrade nbagent (pip install -U nbagent) to open it; the file was not changed."
            )
        if event["seq"] != expected:
            raise LogCorruptError(path, expected, base_offset + pos, f"expected seq {expected} but found seq {event['seq']}")
        problem = _shape_problem(event)
        if problem:
            raise LogCorruptError(path, expected, base_offset + pos, problem)
        found.append(event)
        last_start, pos, expected = pos, nl + 1, expected + 1
    return Scan(found, pos, last_start)


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

    def write_all(self, fd: int, data: bytes) -> None:
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
            raise LogLockedError(
                f"{self.path} is open for writing in another process or session (a second kernel on this "
                "notebook?). Close that session or stop that kernel, or open a new session here."
            ) from None
        try:
            created = not self.path.exists()
            self._fd = self.ops.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            try:
                if created:
                    self.ops.fsync_dir(self.path.parent)
                self.size = self.ops.fstat(self._fd).st_size
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

    def read(self, start: int = 0, stop: int | None = None) -> bytes:
        """Bytes of the file from ``start`` to ``stop`` (default: the end)."""
        stop = self.size if stop is None else stop
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
            kept = self._keep_damaged()
            raise LogCorruptError(err.path, err.line, err.offset, err.reason, kept=kept) from None
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
            if not (kept.exists() and kept.read_bytes() == data):
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


def iter_events(data: bytes, *, path: str, since: int = 0) -> Iterator[ev.Event]:
    """Events with ``seq > since`` from log bytes; stops quietly at a torn or unfinished tail."""
    pos, size, line_no = 0, len(data), 1
    expected: int | None = None
    while pos < size:
        nl = _line_end(data, pos, path, line_no, 0)
        if nl < 0:
            return
        line = data[pos:nl]
        seq = ev.line_seq(line)
        # Lines up to ``since`` are skipped unparsed, but only while their seqs run on by one:
        # a damaged seq digit must not get a line skipped unchecked.
        if seq is None or seq > since or seq < 1 or (expected is not None and seq != expected):
            try:
                event = ev.decode(line)
            except ev.BadLine as bad:
                if _later_line_is_valid(data, nl + 1) or _glued(data, pos, nl):
                    raise LogCorruptError(path, line_no, pos, str(bad)) from None
                return
            problem = _shape_problem(event)
            if problem:
                raise LogCorruptError(path, line_no, pos, problem)
            seq = event["seq"]
            if seq > since:
                yield event
        expected = seq + 1
        pos, line_no = nl + 1, line_no + 1


def read_events(path: str | os.PathLike[str], since: int = 0) -> Iterator[ev.Event]:
    """Read a log without locking it (another process may be writing it)."""
    data = Path(path).read_bytes()
    yield from iter_events(data, path=str(path), since=since)


def follow(path: str | os.PathLike[str], since: int = 0, *, poll: float = 0.1, idle_timeout: float | None = None) -> Iterator[ev.Event]:
    """Yield events with ``seq > since`` as another process appends them (like ``tail -f``)."""
    # Only whole, valid lines are consumed; anything after them is read again on the next poll,
    # because a torn tail may still be cut off and replaced by a new writer (see EventLog.recover).
    offset, line_no, last_new = 0, 1, time.monotonic()
    with open(path, "rb") as handle:
        while True:
            handle.seek(offset)
            data = handle.read()
            pos, new = 0, False
            while True:
                nl = data.find(b"\n", pos)
                if nl < 0:
                    break
                line = data[pos:nl]
                seq = ev.line_seq(line)
                if seq is None or seq > since or seq != line_no:  # follow reads from the start: line_no is absolute
                    try:
                        event = ev.decode(line)
                    except ev.BadLine as bad:
                        if _later_line_is_valid(data, nl + 1):
                            raise LogCorruptError(str(path), line_no, offset + pos, str(bad)) from None
                        break  # torn for now: wait for the line to be finished or repaired
                    if event["seq"] > since:
                        since, new = event["seq"], True
                        yield event
                pos, line_no = nl + 1, line_no + 1
            offset += pos
            if new:
                last_new = time.monotonic()
            elif idle_timeout is not None and time.monotonic() - last_new > idle_timeout:
                return
            else:
                time.sleep(poll)
