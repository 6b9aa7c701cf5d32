"""One page of a log file for the events API: reading stops at the page's end, not the log's.

The events after ``since`` are read a bounded chunk at a time (:class:`~.source.FileSource`)
until ``limit`` and one more are found.  When the page reaches the log's end, its labels
(``trust``, ``status``) are the whole log's, as the listing gives them; when more events follow,
they cover the log's lines up to the page's last event (a first page of a long log reads that
page, not the log), and ``last_seq`` comes from the log's last whole line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..history.summary import from_state, summarize
from ..record import events as ev
from ..record import line_codec, trust
from ..record.log_reader import scan
from ..state import fold
from ..stores import Listed
from .source import CHUNK, Batch, FileSource


@dataclass
class Page:
    """The events of a page, whether more follow, the last seq of the log, its labels, and why reading stopped early."""

    events: list[ev.Event]
    more: bool
    last_seq: int
    trust: str
    status: str
    batch: Batch


def read_page(path: Path, since: int, limit: int) -> Page:
    """The first ``limit`` events after ``since`` (blocking): only the log up to them is read, a chunk at a time."""
    source, events = FileSource(path), list[ev.Event]()
    while True:
        batch = source.read(events[-1]["seq"] if events else since)  # on from where the last chunk stopped
        events.extend(batch.events)
        if len(events) > limit or not batch.more or batch.problem:
            break
    if len(events) > limit:
        end = events[limit - 1]["seq"]
        verdict, status = labels_upto(path, end)
        return Page(events[:limit], True, max(end + 1, last_line_seq(path)), verdict, status, batch)
    summary = summarize(path)
    last = max(summary.events, events[-1]["seq"] if events else 0)
    return Page(events, False, last, summary.trust, summary.status, batch)


def _prefix(path: Path, lines: int) -> bytes:
    """The log's first ``lines`` whole lines."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        data, count, at = bytearray(), 0, 0
        while count < lines and (chunk := os.pread(fd, CHUNK, len(data))):
            data += chunk
            while count < lines and (at := data.find(b"\n", at) + 1):
                count += 1
        return bytes(data[:at] if count == lines else data)
    finally:
        os.close(fd)


def labels_upto(path: Path, seq: int) -> tuple[str, str]:
    """Who wrote the log's lines up to event ``seq``, and the session's status there (the listing's rules on those lines)."""
    data = _prefix(path, seq)
    found = scan(data, path=str(path))
    summary = Listed("", str(path))
    try:
        from_state(summary, fold.fold(found.events))
    except (KeyError, TypeError, ValueError) as exc:
        summary.pending = f"damaged log ({type(exc).__name__}): run nbagent verify"
    return trust.check_log(data, user=trust.user_signer_or_none()).verdict if data else "", summary.status


def last_line_seq(path: Path) -> int:
    """The seq of the log's last whole line, read from its end (0 if none can be found)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        size, want = os.fstat(fd).st_size, 1 << 16
        while True:
            start = max(0, size - want)
            data = os.pread(fd, size - start, start)
            end = data.rfind(b"\n")
            begin = data.rfind(b"\n", 0, max(0, end)) + 1
            if end >= 0 and (begin > 0 or start == 0):
                return line_codec.line_seq(data[begin:end]) or 0
            if start == 0 or want > ev.MAX_LINE:
                return 0
            want *= 4
    finally:
        os.close(fd)
