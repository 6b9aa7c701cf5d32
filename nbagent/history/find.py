"""Finding session logs on disk (below a folder, in a notebook's log folder) and reading one whole."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from .. import events as ev
from .. import store
from ..errors import HistoryError
from ..reader import Scan, scan
from ..readfile import read_log_bytes
from ..stores import FILES, Store

NOTEBOOK_SUFFIX = ".ipynb"
# Folders never searched for session logs (besides hidden ones other than .nbagent).
_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", "venv"})


def _log_folders_below(root: Path) -> Iterator[Path]:
    """Every ``.nbagent/<notebook>/`` folder below ``root`` (hidden and vendored folders are skipped)."""
    for top, dirs, _files in os.walk(root):
        if os.path.basename(top) == store.STORE_DIR:
            for name in sorted(dirs):
                yield Path(top) / name
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if (d == store.STORE_DIR or not d.startswith(".")) and d not in _SKIP_DIRS)


def find_logs(path: str | os.PathLike[str]) -> list[Path]:
    """Session logs under ``path``: a log file, a notebook, a log folder, or a folder holding notebooks."""
    target = Path(path).expanduser()
    if not target.exists():
        raise HistoryError(f"{target}: no such file or folder.")
    if target.is_file():
        if target.name.endswith(store.LOG_SUFFIX):
            return [target]
        if target.suffix == NOTEBOOK_SUFFIX:
            return [s.path for s in store.list_sessions(store.log_dir_for(target))]
        raise HistoryError(f"{target} is neither a notebook (.ipynb) nor a session log (.jsonl).")
    if not os.access(target, os.R_OK | os.X_OK):
        raise HistoryError(f"{target}: permission denied (cannot read this folder).")
    found = [s.path for s in store.list_sessions(target)]  # the folder itself may be a log folder
    for child in sorted(target.glob("*" + NOTEBOOK_SUFFIX)):  # or a configured log root (Agent.log_dir)
        if child.is_dir() and not child.is_symlink():
            found.extend(s.path for s in store.list_sessions(child))
    for folder in _log_folders_below(target):
        found.extend(s.path for s in store.list_sessions(folder))
    return list(dict.fromkeys(found))


def session_name(path: Path) -> str:
    """The session's name: its log file name without ``.jsonl``."""
    return path.name[: -len(store.LOG_SUFFIX)] if path.name.endswith(store.LOG_SUFFIX) else path.name


def notebook_of(path: Path) -> str:
    """The notebook a log belongs to (``<folder>/.nbagent/<notebook>/<session>.jsonl``), or ''."""
    folder = path.parent
    if folder.parent.name == store.STORE_DIR:
        return str(folder.parent.parent / folder.name)
    return ""


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
