"""A log's labels (who wrote its lines, the session's status) computed a piece at a time, and seeking a line by its seq.

The events API labels a page with the listing's rules applied to the log's lines up to the page's
end.  :class:`Labels` takes those lines in pieces (a file read :data:`~.source.CHUNK` at a time, a
database session's rows a batch at a time): the trust check (:class:`nbagent.record.trust.Checker`)
and a bounded fold (:class:`~.viewfold.ViewFold`) keep only their counters, so labelling a page costs
one piece of memory whatever the log's length.  :func:`seek` finds where a line of a log file starts
by bisection over its lines (their seqs increase by one), so ``events?since=N`` reads from there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..history.summary import from_state
from ..record import line_codec, trust
from ..record.log_reader import Reader
from ..stores import Listed, snapshot
from .source import CHUNK, DAMAGE
from .viewfold import ViewFold

PROBE = 1 << 16  # bytes read at each step of a bisection (a longer line ends the bisection there)


class Labels:
    """Who wrote the lines fed so far and the session's status after them (the listing's rules), in bounded memory."""

    def __init__(self, where: str, user: Any) -> None:
        self.checker = trust.Checker(user=user)
        self.reader = Reader(where)
        self.fold = ViewFold()
        self.damage = ""  # why the events stopped being folded (damage), '' if they did not

    def feed(self, data: bytes) -> None:
        """The log's next whole lines."""
        self.checker.feed(data)
        if self.damage:
            return
        try:
            for event in self.reader.feed(data):
                self.fold.apply(event)
        except DAMAGE as exc:
            self.damage = str(exc)

    @property
    def lines(self) -> int:
        """Lines fed so far."""
        return self.checker.line

    def result(self) -> tuple[str, str]:
        """``(trust verdict, status)``: '' for the verdict of no line."""
        summary = Listed("", "")
        try:
            from_state(summary, self.fold.state)
        except (KeyError, TypeError, ValueError) as exc:
            summary.pending = f"damaged log ({type(exc).__name__}): run nbagent verify"
        if self.damage:
            summary.complete, summary.pending = False, "damaged log: run nbagent verify"
        return (self.checker.report.verdict if self.lines else ""), summary.status


def file_labels(path: Path, lines: int | None = None) -> tuple[str, str]:
    """The labels of a log file's first ``lines`` lines (None: all its whole lines), read a chunk at a time."""
    labels = Labels(str(path), trust.user_signer_or_none())
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        rest, at = b"", 0
        while lines is None or labels.lines < lines:
            chunk = os.pread(fd, CHUNK, at)
            if not chunk:
                break
            at += len(chunk)
            data = rest + chunk
            cut = _cut(data, None if lines is None else lines - labels.lines)
            labels.feed(data[:cut])
            rest = data[cut:]
    finally:
        os.close(fd)
    return labels.result()


def _cut(data: bytes, wanted: int | None) -> int:
    """Where ``data``'s first ``wanted`` whole lines end (None: all its whole lines)."""
    if wanted is None:
        return data.rfind(b"\n") + 1
    at = 0
    while wanted and (found := data.find(b"\n", at)) >= 0:
        at, wanted = found + 1, wanted - 1
    return at


def seek(path: Path, seq: int) -> tuple[int, int]:
    """``(offset, seq)`` of a line of the log file at or before the line of ``seq``: where to read from to reach it.

    Bisection over the file's lines, each step reading :data:`PROBE` bytes at a point and the seq at
    the start of the first line after it (no line is parsed); the snapshot header, when there is one,
    is a first known line.  The reader started there checks that the seqs run on from it.
    """
    lo, lo_seq = 0, 1
    header = snapshot.read_header_bytes(path)
    if header is not None:
        try:
            known, known_seq = int(header[0]["offset"]), int(header[0]["seq"]) + 1
        except (KeyError, TypeError, ValueError):
            known, known_seq = 0, 1
        if 0 < known_seq <= seq:
            lo, lo_seq = known, known_seq
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        hi = os.fstat(fd).st_size
        if lo and not _line_at(fd, lo, lo_seq):  # a snapshot of another log, or of this one before it was replaced
            lo, lo_seq = 0, 1
        while hi - lo > PROBE:
            mid = (lo + hi) // 2
            data = os.pread(fd, PROBE, mid)
            first = data.find(b"\n") + 1
            end = data.find(b"\n", first) if first else -1
            found = line_codec.line_seq(data[first:end]) if end > 0 else None
            if found is None or found <= lo_seq:  # a long line, or not a line of this log's order: stop here
                break
            if found <= seq:
                lo, lo_seq = mid + first, found
            else:
                hi = mid
        return lo, lo_seq
    finally:
        os.close(fd)


def _line_at(fd: int, offset: int, seq: int) -> bool:
    """Whether the line of ``seq`` starts at ``offset``."""
    data = os.pread(fd, PROBE, offset - 1)
    end = data.find(b"\n", 1)
    return data[:1] == b"\n" and end > 0 and line_codec.line_seq(data[1:end]) == seq
