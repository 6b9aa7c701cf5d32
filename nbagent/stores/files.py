"""The file store (the default): a session is ``<notebook folder>/.nbagent/<notebook>/<session>.jsonl``."""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import LogError
from ..record import events as ev
from ..record import log_reader as reader
from ..record import trust
from ..state import lineage
from ..state.fold import State
from . import file_index, snapshot
from .base import Listed
from .writer import EventLog, FileOps, FsyncPolicy


class FileLog(EventLog):
    """The append-only file (:class:`nbagent.stores.writer.EventLog`) with its snapshot file beside it."""

    def load_snapshot(self) -> tuple[snapshot.Snapshot | None, str]:
        """The snapshot file beside the log if its header is sound, else None and why."""
        return snapshot.load(self.path)

    def write_snapshot(self, state: State, **fields: Any) -> str:
        """Write the snapshot file atomically (fsynced unless the log is written with fsync="never")."""
        return str(snapshot.write(self.path, state, ops=self.ops, durable=self.fsync_policy != "never", **fields))


class FileStore:
    """Session logs as files beside their notebooks (see :mod:`nbagent.stores.folders` for the layout)."""

    url = ""

    def __init__(self, root: str | os.PathLike[str] = ".") -> None:
        self.root = Path(root)

    def open_log(self, path: Path, *, fsync: FsyncPolicy = "turn", ops: FileOps | None = None) -> FileLog:
        """Open the log file as its one writer (a flock); refuses links and files that are not logs, writing nothing."""
        path = Path(path)
        refuse_links(path)
        reader.check_start(path)
        return FileLog(path, fsync=fsync, ops=ops)

    def read(self, path: Path, since: int = 0) -> Iterator[ev.Event]:
        """Events with ``seq > since`` from the file, without its lock."""
        return reader.read_events(path, since)

    def follow(self, path: Path, since: int = 0, *, idle_timeout: float | None = None) -> Iterator[ev.Event]:
        """Events as another process appends them (the file is polled: a file has no notifications)."""
        return reader.follow(path, since, idle_timeout=idle_timeout)

    def list(self, *, notebook: str = "", under: str = "", owner: str = "", text: str = "", limit: int | None = None) -> list[Listed]:
        """Sessions under :attr:`root` (each log is described from its snapshot and tail: there is no index); files have no owner."""
        if owner:
            return []
        found = file_index.list_files(notebook or under or self.root, text=text, user=trust.user_signer_or_none())
        return found[-limit:] if limit else found

    def family(self, session_id: str, *, under: str = "") -> builtins.list[Listed]:
        """The sessions under ``under`` (default :attr:`root`) in ``session_id``'s family of forks, oldest activity first."""
        return lineage.family_of(self.list(under=under), session_id)


def refuse_links(path: Path) -> None:
    """Refuse a log, or a file beside it (lock, snapshot, temp, torn tail), that is a symbolic link.

    A log folder that came from elsewhere could hold such links pointing at the
    user's own files, which opening, snapshotting or repairing would then overwrite.
    """
    candidates = [path]
    try:
        with os.scandir(path.parent) as entries:
            candidates += [Path(e.path) for e in entries if e.name.startswith(path.name + ".") and e.is_symlink()]
    except (FileNotFoundError, NotADirectoryError):
        pass
    for candidate in candidates:
        if candidate.is_symlink():
            raise LogError(
                f"{candidate} is a symbolic link; nbagent does not follow links for session logs or the files beside "
                "them (a log folder from elsewhere could point them at your files). Remove the link to continue."
            )
