"""Reading one session log whole; finding logs on disk is the file store's (:mod:`nbagent.stores.file_index`)."""

from __future__ import annotations

from pathlib import Path

from ..errors import HistoryError
from ..record import events as ev
from ..record.log_reader import Scan, scan
from ..record.readfile import read_log_bytes
from ..stores import FILES, Store
from ..stores.file_index import NOTEBOOK_SUFFIX, find_logs, notebook_of, session_name

__all__ = ["NOTEBOOK_SUFFIX", "find_logs", "notebook_of", "read_all", "read_bytes", "read_log", "session_name"]


def read_bytes(path: Path, source: Store = FILES) -> bytes:
    """A whole log's bytes, from a file or (``source`` a database store) its rows, without locking it."""
    if source.url:
        from ..stores.postgres import PostgresStore

        assert isinstance(source, PostgresStore)
        return source.read_bytes(path)
    try:
        return read_log_bytes(path)
    except OSError as exc:
        raise HistoryError(f"cannot read {path}: {exc.strerror or exc}.") from None


def read_log(path: Path, source: Store = FILES) -> Scan:
    """Read and check a whole log without locking it: its events, and any torn tail (raises on damage before it)."""
    from ..stores import session_url

    return scan(read_bytes(path, source), path=session_url(source, path))


def read_all(path: Path, source: Store = FILES) -> list[ev.Event]:
    """Every event of a log (raises LogCorruptError / LogVersionError on damage), without locking it."""
    return read_log(path, source).events
