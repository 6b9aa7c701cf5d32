"""One page of a log file for the events API: it seeks to the page, and reading stops at the page's end, not the log's.

The line after ``since`` is found by bisection over the log's lines (:func:`~.labels.seek`), and the
events from there are read a bounded chunk at a time (:class:`~.source.FileSource`) until ``limit``
and one more are found.  When the page reaches the log's end, its labels (``trust``, ``status``) are
the whole log's, as the listing gives them; when more events follow, they cover the log's lines up to
the page's last event, read a chunk at a time (:mod:`.labels`), and ``last_seq`` comes from the log's
last whole line.  What a page holds in memory is the page and one chunk, whatever the log's length.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..history.summary import summarize
from ..record import events as ev
from ..record import line_codec, trust
from ..record.readfile import open_regular
from ..stores import snapshot
from ..stores.file_index import snapshot_usable
from .labels import Labels, file_labels, seek
from .source import DAMAGE, Batch, FileSource


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
    """The first ``limit`` events after ``since`` (blocking): the log is read from the line before them, up to them only."""
    source, events = FileSource(path, start=seek(path, since + 1) if since else (0, 1)), list[ev.Event]()
    while True:
        batch = source.read(events[-1]["seq"] if events else since)  # on from where the last chunk stopped
        events.extend(batch.events)
        if len(events) > limit or not batch.more or batch.problem:
            break
    if len(events) > limit:
        end = events[limit - 1]["seq"]
        verdict, status = labels_upto(path, end)
        return Page(events[:limit], True, max(end + 1, last_line_seq(path)), verdict, status, batch)
    verdict, status, last = end_labels(path)
    return Page(events, False, max(last, events[-1]["seq"] if events else 0), verdict, status, batch)


def read_stored_page(store: Any, path: Path, where: str, since: int, limit: int) -> Page:
    """The same page of a database session: its rows after ``since`` through the primary key, labels from its rows in batches."""
    events, batch = list[ev.Event](), Batch()
    reading = store.read(path, since)
    try:
        for event in reading:
            events.append(event)
            if len(events) > limit:
                break
    except DAMAGE as exc:  # a database holds whole transactions: a line that fails its checks is damage
        batch = Batch(problem=str(exc), damaged=True)
    finally:
        reading.close()  # its connection
    more = len(events) > limit
    labels = Labels(where, trust.user_signer_or_none())
    for piece in store.pieces(path, events[limit - 1]["seq"] if more else None):
        labels.feed(piece)
    verdict, status = labels.result()
    if more:
        end = events[limit - 1]["seq"]
        return Page(events[:limit], True, max(end + 1, store.last_seq(path)), verdict, status, batch)
    return Page(events, False, max(labels.fold.state.seq, events[-1]["seq"] if events else 0), verdict, status, batch)


def labels_upto(path: Path, seq: int) -> tuple[str, str]:
    """Who wrote the log's lines up to event ``seq``, and the session's status there (the listing's rules on those lines)."""
    return file_labels(path, seq)


def end_labels(path: Path) -> tuple[str, str, int]:
    """The whole log's labels and its last seq: the listing's (from its snapshot) when it has a usable one, else read a chunk at a time."""
    if _has_usable_snapshot(path):
        summary = summarize(path)
        return summary.trust, summary.status, summary.events
    verdict, status = file_labels(path)
    return verdict, status, last_line_seq(path)


def _has_usable_snapshot(path: Path) -> bool:
    """Whether the listing describes the log from its snapshot (so it reads only the lines after it)."""
    found = snapshot.read_header_bytes(path)
    if found is None:
        return False
    try:
        with open_regular(path) as handle:
            return snapshot_usable(handle, *found, os.fstat(handle.fileno()).st_size, trust.user_signer_or_none())
    except OSError:
        return False


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
