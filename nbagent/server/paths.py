"""From API paths to session logs on disk, refusing anything outside the server's root (or the configured log folder).

API paths are the Jupyter contents API's: relative to the server's root, ``/``-separated.  A path
with a ``..`` part is refused as it stands; a path that leads outside the root through a symbolic
link is refused once resolved.  Logs are found only where the notebook extension writes them:
``<folder>/.nbagent/<notebook file>/<session>.jsonl`` beside the notebook, or
``<log_dir>/<notebook file>/<session>.jsonl`` under the server's ``log_dir`` setting.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .. import store
from ..errors import NbagentError
from ..history.find import NOTEBOOK_SUFFIX, find_logs, notebook_of

_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", "venv"})
MAX_PATH = 4096


class Refused(Exception):
    """A request the server answers with a 4xx and this message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def split_api_path(path: str) -> list[str]:
    """The parts of an API path (leading and trailing ``/`` ignored); refuses ``..``, NUL and absurd lengths."""
    if len(path) > MAX_PATH or "\0" in path:
        raise Refused(400, "the path is not a valid file path")
    parts = [p for p in path.strip("/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Refused(400, f"the path {path!r} contains '..'; give a path inside the server's root folder")
    return parts


def inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` (resolved, links followed) is ``folder`` (resolved) or below it."""
    real, top = os.path.realpath(path), os.path.realpath(folder)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class Roots:
    """The server's root folder, and the configured log folder ('' if none)."""

    root: Path
    log_dir: Path | None = None
    allow_hidden: bool = False

    def local(self, api_path: str, *, must_exist: bool = True) -> Path:
        """The file or folder of an API path, inside the root (links included); 404 if ``must_exist`` and it is not there.

        An absolute path inside the root (what a kernel knows of its notebook) is taken as the API path it is.
        """
        for top in {str(self.root), os.path.realpath(self.root)}:
            if api_path.startswith(top.rstrip("/") + "/"):
                api_path = api_path[len(top.rstrip("/")) + 1 :]
                break
        parts = split_api_path(api_path)
        if not self.allow_hidden and any(p.startswith(".") for p in parts):
            raise Refused(404, f"{api_path!r}: hidden files and folders are not served (ServerApp's contents manager allow_hidden is off)")
        target = self.root.joinpath(*parts)
        if not inside(target if os.path.lexists(target) else target.parent, self.root):
            raise Refused(403, f"{api_path!r} leads outside the server's root folder (through a link); it is not served")
        if must_exist and not target.exists():
            raise Refused(404, f"{api_path!r}: no such notebook or folder under the server's root")
        return target

    def api_path(self, local: Path | str) -> str:
        """The API path (relative to the root, ``/``-separated) of a local path under the root."""
        return Path(os.path.relpath(local, self.root)).as_posix() if local else ""

    def folders_for(self, notebook: Path) -> Iterator[tuple[Path, Path]]:
        """The log folders of a notebook, each with the folder it must stay inside: beside it, then under ``log_dir``."""
        yield store.log_dir_for(notebook), self.root
        if self.log_dir is not None:
            yield store.log_dir_for(notebook, base=self.log_dir), self.log_dir

    def log_file(self, notebook_api_path: str, session: str) -> Path:
        """The log of ``session`` of a notebook; 400 for a bad name, 403 for a link, 404 if there is none."""
        if not notebook_api_path.endswith(NOTEBOOK_SUFFIX):
            raise Refused(400, f"{notebook_api_path!r} is not a notebook path (it should end with {NOTEBOOK_SUFFIX})")
        notebook = self.local(notebook_api_path, must_exist=False)
        try:
            store.check_name(session)
        except NbagentError as exc:
            raise Refused(400, str(exc)) from None
        for folder, top in self.folders_for(notebook):
            try:
                path = store.log_path(folder, session)
            except NbagentError as exc:
                raise Refused(403, f"{exc}".replace(str(self.root), "<root>")) from None
            if os.path.lexists(path):
                if not inside(path, top):
                    raise Refused(403, f"the log of session {session!r} leads outside its folder; it is not served")
                if not stat.S_ISREG(os.lstat(path).st_mode):
                    raise Refused(403, f"the log of session {session!r} is not a regular file; it is not served")
                return path
        raise Refused(404, f"no session {session!r} for notebook {notebook_api_path!r}")

    def logs_under(self, api_path: str) -> list[tuple[str, Path]]:
        """(notebook API path, log file) of every session of a notebook, or of the notebooks below a folder."""
        target = self.local(api_path)
        if target.is_file() and target.suffix != NOTEBOOK_SUFFIX:
            raise Refused(400, f"{api_path!r} is neither a folder nor a notebook ({NOTEBOOK_SUFFIX})")
        found: dict[Path, str] = {}
        if target.is_file():
            for folder, top in self.folders_for(target):
                for stored in store.list_sessions(folder):
                    if inside(stored.path, top):
                        found.setdefault(stored.path, self.api_path(target))
            return [(nb, path) for path, nb in found.items()]
        for path in find_logs(target):  # beside the notebooks: .nbagent/<notebook>/ folders (links are not followed)
            beside = notebook_of(path)
            if beside and inside(path, self.root):
                found.setdefault(path, self.api_path(beside))
        if self.log_dir is not None:
            for notebook in notebooks_below(target, self.allow_hidden):
                for stored in store.list_sessions(store.log_dir_for(notebook, base=self.log_dir)):
                    if inside(stored.path, self.log_dir):
                        found.setdefault(stored.path, self.api_path(notebook))
        return [(nb, path) for path, nb in found.items()]

    def shown_path(self, log: Path) -> str:
        """Where a log is, as a response shows it: relative to the root, or to ``log_dir`` (never another absolute path)."""
        if inside(log, self.root):
            return self.api_path(log)
        if self.log_dir is not None and inside(log, self.log_dir):
            return "log_dir:" + Path(os.path.relpath(log, self.log_dir)).as_posix()
        return log.name


def notebooks_below(folder: Path, allow_hidden: bool = False) -> Iterator[Path]:
    """Notebook files below ``folder`` (links to folders are not followed; hidden and vendored folders are skipped)."""
    for top, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if (allow_hidden or not d.startswith(".")) and d not in _SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(NOTEBOOK_SUFFIX):
                yield Path(top) / name
