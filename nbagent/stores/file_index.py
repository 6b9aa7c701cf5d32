"""The file store's listing: the logs below a folder, each described from its snapshot header and the lines after it.

There is no index of files: a log is described from its snapshot's header when that header
is this user's for exactly this log, plus the events after it; otherwise by folding the log.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import HistoryError, LogCorruptError, LogVersionError, NotALogError
from ..record import signing
from ..record.log_reader import iter_events, scan
from ..record.readfile import open_regular
from ..state import fold, lineage
from . import folders as store
from . import snapshot
from .base import Listed

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


def snapshot_usable(handle: Any, header: dict[str, Any], header_body: bytes, size: int, user: signing.Signer | None) -> bool:
    """Whether the snapshot's last line is really in this log and it was written by this user for this log (small reads)."""

    def read(start: int, end: int) -> bytes:
        handle.seek(start)
        return bytes(handle.read(end - start))

    summary = header.get("summary")
    if header.get("v") != snapshot.VERSION or not isinstance(summary, dict) or "session_id" not in summary:
        return False
    return not (snapshot.disagreement(header, read, size) or snapshot.unauthentic(header, header_body, user, read))


def of_state(item: Listed, state: fold.State, source: str) -> Listed:
    """``item`` described by a folded state."""
    item.session_id, item.title, item.created, item.last_ts = state.session_id, state.title, state.created, state.last_ts
    item.turns, item.events, item.state, item.source = state.turns, state.seq, state, source
    item.summary = {**snapshot.summary(state), "seq": state.seq}
    item.lineage = lineage.of_meta(state.meta)
    return item


def describe(path: Path, user: signing.Signer | None) -> Listed:
    """One log as a listing row: from its snapshot header and the events after it, or a whole read; ``problem`` if it cannot be read."""
    item = Listed(session_name(path), str(path), notebook_of(path), source="log")  # a file: never an index row
    try:
        with open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            found = snapshot.read_header_bytes(path)
            header = found[0] if found is not None else None
            if found is not None and header is not None and snapshot_usable(handle, *found, size, user):
                handle.seek(int(header["offset"]))
                tail_events = list(iter_events(handle.read(), path=str(path), first_seq=int(header["seq"]) + 1))
                head = header["summary"]
                if not tail_events:
                    item.session_id, item.title = head["session_id"], head.get("title", "")
                    item.created, item.last_ts = head.get("created", 0.0), head.get("last_ts", 0.0)
                    item.turns, item.events, item.source = head.get("turns", 0), int(header["seq"]), "snapshot"
                    item.summary = {**head, "seq": int(header["seq"])}
                    item.lineage = lineage.of_dict(head.get("fork"))
                    return item
                loaded, _why = snapshot.load(path)
                if loaded is not None:
                    try:
                        if tail_events[0]["seq"] == loaded.seq + 1:  # a summary needs only the state line, not the messages
                            return of_state(item, fold.fold(tail_events, loaded.state()), "snapshot")
                    except (OSError, ValueError, TypeError, KeyError):
                        pass
            handle.seek(0)
            data = handle.read()
        return of_state(item, fold.fold(scan(data, path=str(path)).events), "log")  # scan: the not-a-log rule too
    except LogCorruptError as exc:
        item.problem = f"damaged log (line {exc.line}, byte {exc.offset}): run nbagent verify"
    except LogVersionError:
        item.problem = "written by a newer nbagent (upgrade to read it)"
    except NotALogError as exc:
        item.problem = f"not an nbagent log ({exc.reason})"
    except OSError as exc:
        item.problem = f"unreadable ({exc.strerror or exc})"
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        item.problem = f"damaged log ({type(exc).__name__}): run nbagent verify"
    return item


def list_files(root: str | os.PathLike[str], *, text: str = "", user: signing.Signer | None = None) -> list[Listed]:
    """The logs under ``root`` described, oldest activity first; ``text`` keeps those whose title holds it."""
    found = [describe(path, user) for path in find_logs(root)]
    if text:
        found = [item for item in found if text.lower() in item.title.lower()]
    return sorted(found, key=lambda item: (item.last_ts, item.name))
