"""The file store (the default): a session is ``<notebook folder>/.nbagent/<notebook>/<session>.jsonl``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .. import events as ev
from .. import reader, snapshot
from ..errors import LogError
from ..fold import State
from ..log import EventLog, FileOps, FsyncPolicy
from .base import Listed


class FileLog(EventLog):
    """The append-only file (:class:`nbagent.log.EventLog`) with its snapshot file beside it."""

    def load_snapshot(self) -> tuple[snapshot.Snapshot | None, str]:
        """The snapshot file beside the log if its header is sound, else None and why."""
        return snapshot.load(self.path)

    def write_snapshot(self, state: State, **fields: Any) -> str:
        """Write the snapshot file atomically (fsynced unless the log is written with fsync="never")."""
        return str(snapshot.write(self.path, state, ops=self.ops, durable=self.fsync_policy != "never", **fields))


class FileStore:
    """Session logs as files beside their notebooks (see :mod:`nbagent.store` for the layout)."""

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
        """Sessions under :attr:`root` (each log is summarised from its snapshot and tail: there is no index)."""
        from .. import history

        found = []
        for s in history.list_summaries(notebook or under or self.root):
            if owner or (text and text.lower() not in s.title.lower()):
                continue
            found.append(Listed(s.name, s.path, s.notebook, s.session_id, s.title, s.created, s.last_ts, s.turns, s.events))
        return found[-limit:] if limit else found


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
