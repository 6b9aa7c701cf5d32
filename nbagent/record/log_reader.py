"""The one log reader: every reader of the project walks log bytes here, with one set of rules.

A line is checked for its length limit, checksum, JSON, sequence number, schema
version (older versions are upgraded by :data:`nbagent.record.events.MIGRATIONS`) and
shape (:func:`nbagent.record.events.shape_problem`); the file's first line must make it
a log at all (:func:`start_problem`).  Damage that nothing valid follows is a
torn tail: a crash can only tear what was being written last.  The *mode* says
what a problem does:

- ``tolerant``: a torn tail ends the reading and is kept in :attr:`Reader.torn`;
  any other problem raises (``LogCorruptError``, ``LogVersionError``, ``NotALogError``).
- ``strict``: a torn tail raises too (the bytes must be whole, e.g. up to a snapshot).
- ``follow``: as ``tolerant``, and feeding the reader again later goes on from
  where it stopped, so a torn tail can still be finished or repaired by its writer.
- ``report``: nothing raises; every problem is listed in :attr:`Reader.problems`
  and reading goes on wherever it can (``nbagent verify``).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from ..errors import LogCorruptError, LogVersionError, NotALogError
from . import events as ev
from . import line_codec
from .readfile import NotRegularFile, open_fd, open_regular, read_log_bytes

Mode = Literal["tolerant", "strict", "follow", "report"]
HEADER_LIMIT = 1 << 16  # a session_start line is never longer (Session.open refuses bigger meta)
_PRINTABLE = re.compile(rb"[\x20-\x7e]*")
_HEADER_LEADS = tuple(b'{"v":%d,"seq":1,"ts":' % v for v in ev.KNOWN_VERSIONS)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a log, and exactly where (``line`` is 1-based, ``offset`` in bytes)."""

    line: int
    offset: int
    message: str


@dataclass
class Reader:
    """Reads the bytes of one log from ``offset`` (the byte) and ``expected`` (the seq there; None: whatever comes)."""

    path: str
    mode: Mode = "tolerant"
    since: int = 0
    expected: int | None = 1
    offset: int = 0
    last_start: int = 0  # where the last good line starts
    torn: bytes = b""
    torn_reason: str = ""
    problems: list[Problem] = field(default_factory=list)
    stopped: bool = False  # report mode: a problem that ends the reading was found

    def feed(self, data: bytes) -> Iterator[ev.Event]:
        """Check ``data``, the file's bytes from :attr:`offset` on, and yield its events with ``seq > since``."""
        self.torn, self.torn_reason = b"", ""
        if self.stopped:
            return
        base = self.offset
        if base == 0 and self.expected == 1:
            problem = start_problem(data)
            if problem:
                self._fail(NotALogError(self.path, problem), 1, 0, f"not an nbagent log: {problem}", stop=True)
                return
        pos, size = 0, len(data)
        while pos < size:
            line_no, at = self.expected or 0, base + pos
            nl = data.find(b"\n", pos, pos + ev.MAX_LINE + 1)
            if nl < 0 and size - pos > ev.MAX_LINE:
                reason = f"the line is longer than the {ev.MAX_LINE >> 20} MiB limit; nbagent refuses to read it"
                self._fail(LogCorruptError(self.path, line_no, at, reason), line_no, at, reason, stop=True)
                return
            if nl < 0:
                self._torn(data[pos:], "the last line has no newline (a write was cut short)", line_no, at)
                return
            line = data[pos:nl]
            seq = line_codec.line_seq(line) if self.since else None
            if seq is not None and seq <= self.since and seq == self.expected:  # already seen: skipped unparsed
                self._advance(at, base + nl + 1, seq)
                pos = nl + 1
                continue
            try:
                event = line_codec.decode(line)
            except line_codec.BadLine as bad:
                if not (_later_line_is_valid(data, nl + 1) or _glued(data, pos, nl)):
                    self._torn(data[pos:], f"the last line is torn: {bad}", line_no, at)
                    return
                self._fail(LogCorruptError(self.path, line_no, at, str(bad)), line_no, at, f"damaged line: {bad}")
                if self.mode != "report":
                    return
                self.offset, self.expected = base + nl + 1, line_no + 1
                pos = nl + 1
                continue
            checked = self._check(event, line_no, at)
            if checked is None:
                return
            event = checked
            self._advance(at, base + nl + 1, event["seq"])
            pos = nl + 1
            if event["seq"] > self.since:
                yield event

    def _check(self, event: ev.Event, line_no: int, at: int) -> ev.Event | None:
        """Version, sequence and shape of a decoded line: the event in the current schema, or None if reading must stop here."""
        version = event.get("v")
        if not isinstance(version, int) or version not in ev.KNOWN_VERSIONS:
            message = f"uses log schema v{version}, newer than this nbagent reads (v{ev.SCHEMA_VERSION})"
            error = LogVersionError(
                f"{self.path} line {line_no} {message}. Upgrade nbagent (pip install -U nbagent) to read it; the file was not changed."
            )
            self._fail(error, line_no, at, f"{message}; upgrade nbagent to read this log", stop=True)
            return None
        event = ev.upgrade(event)
        if self.expected is not None and event["seq"] != self.expected:
            reason = f"expected seq {self.expected} but found seq {event['seq']}"
            self._fail(LogCorruptError(self.path, line_no, at, reason), line_no, at, reason)
            if self.mode != "report":
                return None
        problem = ev.shape_problem(event)
        if problem:
            self._fail(LogCorruptError(self.path, line_no, at, problem), line_no, at, problem)
            return event if self.mode == "report" else None
        return event

    def _advance(self, start: int, end: int, seq: int) -> None:
        self.last_start, self.offset, self.expected = start, end, seq + 1

    def _torn(self, tail: bytes, reason: str, line_no: int, at: int) -> None:
        if self.mode == "strict":
            raise LogCorruptError(self.path, line_no, at, reason)
        if self.mode == "report":
            note = f"torn tail: {reason} ({len(tail)} bytes; opening the session cuts them off and keeps them in a .torn file)"
            self.problems.append(Problem(line_no, at, note))
            self.stopped = True
        self.torn, self.torn_reason = tail, reason

    def _fail(self, error: Exception, line_no: int, at: int, message: str, *, stop: bool = False) -> None:
        if self.mode != "report":
            raise error
        self.problems.append(Problem(line_no, at, message))
        self.stopped = self.stopped or stop


# The ways to read a log ------------------------------------------------------------------------------
@dataclass
class Scan:
    """What reading a stretch of log found: the good events, where they end, and any torn tail."""

    events: list[ev.Event]
    end: int
    last_start: int = 0
    torn: bytes = b""
    torn_reason: str = ""


def scan(data: bytes, *, path: str, first_seq: int = 1, base_offset: int = 0, mode: Mode = "tolerant") -> Scan:
    """Read log bytes whole (``data`` starts at ``base_offset`` in the file, at event ``first_seq``); offsets are into ``data``."""
    reader = Reader(path, mode, expected=first_seq, offset=base_offset, last_start=base_offset)
    found = list(reader.feed(data))
    return Scan(found, reader.offset - base_offset, reader.last_start - base_offset, reader.torn, reader.torn_reason)


def iter_events(data: bytes, *, path: str, since: int = 0, first_seq: int | None = 1) -> Iterator[ev.Event]:
    """Events with ``seq > since`` from log bytes (``first_seq`` None: a stretch from the middle); stops at a torn tail."""
    return Reader(path, since=since, expected=first_seq).feed(data)


def read_events(path: str | os.PathLike[str], since: int = 0) -> Iterator[ev.Event]:
    """Read a log without locking it (another process may be writing it); a torn tail is left out."""
    data = read_log_bytes(path)
    yield from iter_events(data, path=str(path), since=since)


def follow(path: str | os.PathLike[str], since: int = 0, *, poll: float = 0.1, idle_timeout: float | None = None) -> Iterator[ev.Event]:
    """Yield events with ``seq > since`` as another process appends them (like ``tail -f``)."""
    reader = Reader(str(path), "follow", since=since)
    last_new = time.monotonic()
    with open_regular(path) as handle:
        while True:
            handle.seek(reader.offset)
            before = reader.offset
            yield from reader.feed(handle.read())
            if reader.offset != before:
                last_new = time.monotonic()
            elif idle_timeout is not None and time.monotonic() - last_new > idle_timeout:
                return
            else:
                time.sleep(poll)


def whole_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """``(offset, line)`` of every line that has its newline, unchecked (the signature check reads lines this way)."""
    pos = 0
    while (nl := data.find(b"\n", pos)) >= 0:
        yield pos, data[pos:nl]
        pos = nl + 1


# What may be read as a log at all ---------------------------------------------------------------------
def start_problem(head: bytes) -> str:
    """Why a file beginning with ``head`` (its first 64 KiB, or all of it) is not an nbagent log ('' if it may be one).

    An empty file is a new log; a header line is a complete, checksum-valid
    ``session_start`` record with seq 1; a file cut inside its first line is a torn
    new log only if those bytes begin a header line; a damaged first line followed
    by valid records is a damaged log (the reader says where).  Anything else is not
    a log and is never written to.
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
        event = line_codec.decode(head[:nl])
        problem = "" if event["seq"] == 1 and event["type"] == ev.SESSION_START else "its first line is not a session_start record"
    except line_codec.BadLine:
        problem = "its first line is not a checksummed nbagent record"
    if problem and _later_line_is_valid(head, nl + 1):
        return ""
    return problem


def check_start(path: str | os.PathLike[str]) -> None:
    """Raise :class:`NotALogError` unless ``path`` is missing, empty or begins like a log; reads the first 64 KiB, writes nothing."""
    try:
        fd = open_fd(path)
    except FileNotFoundError:
        return
    except NotRegularFile as exc:
        raise NotALogError(str(path), f"it is {exc.what}, not a regular file") from None
    try:
        head = os.pread(fd, HEADER_LIMIT + 1, 0)
    finally:
        os.close(fd)
    problem = start_problem(head)
    if problem:
        raise NotALogError(str(path), problem)


def _later_line_is_valid(data: bytes, pos: int) -> bool:
    """Whether any whole line starting at ``pos`` or later passes its checks."""
    while (nl := data.find(b"\n", pos)) >= 0:
        try:
            line_codec.decode(data[pos:nl])
            return True
        except line_codec.BadLine:
            pos = nl + 1
    return False


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
                line_codec.decode(data[pos:stop])
                line_codec.decode(data[stop + 1 : end])
                return True
            except line_codec.BadLine:
                pass
        marker = data.find(b',"crc":"', marker + 1, end)
    return False
