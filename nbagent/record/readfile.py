"""Opening a log, or a file beside it, for reading: only a regular file, no link followed, never blocking.

A log folder can come from elsewhere (a clone, a shared folder) and hold a FIFO, a
device or a symbolic link where a snapshot, a log or a kept copy should be. Opening a
FIFO for reading waits for a writer that never comes, so every read of such a file
goes through :func:`open_regular`: ``O_NOFOLLOW`` (a link is refused, not followed),
``O_NONBLOCK`` (opening a FIFO returns at once) and ``S_ISREG`` checked on the opened
descriptor (so a file swapped after a check is still caught).
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

from .events import MAX_LINE

CHUNK = 1 << 20


class NotRegularFile(OSError):
    """The path is a symbolic link, a FIFO, a device or a folder: nbagent does not read it."""

    def __init__(self, path: str | os.PathLike[str], what: str) -> None:
        super().__init__(errno.EINVAL, f"{what}, not a regular file; nbagent does not read it", os.fspath(path))
        self.what = what

    def __str__(self) -> str:
        return f"{self.filename} is {self.what}, not a regular file; nbagent does not read it"


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a special file"


def open_fd(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor of ``path`` if it is a regular file (FileNotFoundError if absent, NotRegularFile if not regular)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP and os.path.islink(path):
            raise NotRegularFile(path, "a symbolic link") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(path, _kind(mode))
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """``open(path, "rb")`` for a regular file only (see :func:`open_fd`)."""
    return open(open_fd(path), "rb", closefd=True)


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The whole of a regular file (see :func:`open_fd`)."""
    with open_regular(path) as handle:
        return handle.read()


def read_log_bytes(path: str | os.PathLike[str], *, line_limit: int = MAX_LINE, chunk: int = CHUNK) -> bytes:
    """A log's bytes, read until its end or until a line is longer than ``line_limit`` (see :func:`read_lines`)."""
    with open_regular(path) as handle:
        return read_lines(handle, line_limit=line_limit, chunk=chunk)


def read_lines(handle: BinaryIO, *, line_limit: int = MAX_LINE, chunk: int = CHUNK) -> bytes:
    """The rest of ``handle``, or its bytes up to where a line is longer than ``line_limit``.

    When reading stops early, the bytes hold more than ``line_limit`` bytes after their
    last newline, so :class:`nbagent.record.log_reader.Reader` refuses that line exactly as it would
    in the whole file, without the rest of the file read into memory.
    """
    chunks: list[bytes] = []
    since_newline = 0  # bytes read since the last newline
    while piece := handle.read(chunk):
        chunks.append(piece)
        nl = piece.rfind(b"\n")
        since_newline = len(piece) - nl - 1 if nl >= 0 else since_newline + len(piece)
        if since_newline > line_limit:
            break
    return b"".join(chunks)
