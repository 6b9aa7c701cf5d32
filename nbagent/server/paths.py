"""From API paths to session logs on disk, refusing anything outside the server's root (or the configured log folder).

API paths are the Jupyter contents API's: relative to the server's root, ``/``-separated.  A path
with a ``..`` part is refused as it stands; a path that leads outside the root through a symbolic
link is refused once resolved.  Logs are found only where the notebook extension writes them:
``<folder>/.nbagent/<notebook file>/<session>.jsonl`` beside the notebook, or
``<log_dir>/<notebook file>/<session>.jsonl`` under the server's ``log_dir`` setting.

With a database store (the ``store`` setting), a session there is named by its notebook as stored
(an absolute path): a notebook outside the root, or one with no such log file, is looked up in the
database's index.  A database session is not a file: the root does not confine it; the database
decides what the server's role may see.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import LogError, NbagentError
from ..history.database import stored_under
from ..history.find import NOTEBOOK_SUFFIX, find_logs, notebook_of
from ..stores import Listed
from ..stores import folders as store

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


class Unavailable(Refused):
    """The database store cannot be reached or read: a 503."""

    def __init__(self, exc: Exception) -> None:
        super().__init__(503, " ".join(str(exc).split()) + " (the database sessions cannot be served now; try again later)")


@dataclass(frozen=True)
class Stored:
    """A session of the server's database store: its notebook as stored and its name."""

    store: Any
    notebook: str
    name: str

    @property
    def path(self) -> Path:
        """The session's key in the store (the file path it stands for)."""
        from ..stores.postgres import key_path

        return key_path(self.notebook, self.name)

    @property
    def where(self) -> str:
        """Its full name, ``<store url>#<notebook>/<session>``."""
        return f"{self.store.url}#{self.notebook}/{self.name}"


@dataclass(frozen=True)
class Roots:
    """The server's root folder, the configured log folder ('' if none), and the database store (None if none)."""

    root: Path
    log_dir: Path | None = None
    allow_hidden: bool = False
    store: Any = None  # a PostgreSQL store (nbagent.stores.postgres.PostgresStore), or None: files only

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

    def session(self, notebook: str, session: str) -> Path | Stored:
        """A session's log file, or its database session (blocking with a store: call it in a worker thread).

        With a store, a notebook given as an absolute path outside the root names a database session;
        any other names the log file if there is one, and else the database session of that notebook
        (a relative path: the notebook at that path under the root).
        """
        if self.store is None:
            return self.log_file(notebook, session)
        absolute = notebook.startswith("/")
        if absolute and not self.in_root(notebook):
            return self.stored(notebook, session)
        try:
            return self.log_file(notebook, session)
        except Refused as refused:
            if refused.status != 404:
                raise
            if absolute:
                return self.stored(notebook, session)
            parts = split_api_path(notebook)
            for top in dict.fromkeys((str(self.root), os.path.realpath(self.root))):
                try:
                    return self.stored(str(Path(top, *parts)), session)
                except Refused as missing:
                    if missing.status != 404:
                        raise
            raise

    def in_root(self, absolute: str) -> bool:
        """Whether an absolute path (as a string, links not followed) is below the root (as given or resolved)."""
        return any(absolute.startswith(top.rstrip("/") + "/") for top in {str(self.root), os.path.realpath(self.root)})

    def stored(self, notebook: str, session: str) -> Stored:
        """The database session of a notebook (as stored) and a name, found in the store's index; 400, 404, or 503."""
        if len(notebook) > MAX_PATH or "\0" in notebook:
            raise Refused(400, "the notebook is not a valid path")
        try:
            store.check_name(session)
        except NbagentError as exc:
            raise Refused(400, str(exc)) from None
        try:
            found = self.store.list(notebook=notebook)
        except LogError as exc:
            raise Unavailable(exc) from None
        if any(item.notebook == notebook and item.name == session for item in found):
            return Stored(self.store, notebook, session)
        raise Refused(404, f"no session {session!r} for notebook {notebook!r} (neither a log file nor in {self.store.url})")

    def stored_under(self, api_path: str, limit: int) -> list[Listed]:
        """The database sessions a listing of ``api_path`` shows, from the store's index (no event is read).

        '' lists the ``limit`` most recently active; a notebook (absolute as stored, or relative to the
        root) its sessions; a folder the sessions of the notebooks below it.
        """
        path = api_path.strip()
        if not path:
            candidates: set[str] = set()
        elif path.startswith("/"):
            split_api_path(path)
            candidates = {path.rstrip("/")}
        else:
            parts = split_api_path(path)
            candidates = {str(Path(top, *parts)) for top in (str(self.root), os.path.realpath(self.root))}
        try:
            return stored_under(self.store, candidates, limit=limit)  # the CLI's rule for NBAGENT_STORE too
        except LogError as exc:
            raise Unavailable(exc) from None

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
