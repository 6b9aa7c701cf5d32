"""Where session logs live: a folder per notebook, a file per session, names that cannot escape it.

The logs of ``path/to/analysis.ipynb`` live in ``path/to/.nbagent/analysis.ipynb/``,
one ``<session>.jsonl`` per session (with its ``.snapshot`` and ``.lock`` beside it),
so two notebooks in one folder never share a log.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import NbagentError

STORE_DIR = ".nbagent"
LOG_SUFFIX = ".jsonl"
UNTITLED = "untitled"
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def log_dir_for(notebook: str | os.PathLike[str] | None, *, base: str | os.PathLike[str] | None = None) -> Path:
    """The folder of a notebook's logs; without a known notebook, ``<cwd>/.nbagent/untitled``.

    ``base`` (a configured log folder) replaces ``<notebook folder>/.nbagent``.
    """
    if notebook is None:
        folder, name = Path.cwd(), UNTITLED
    else:
        path = Path(notebook).expanduser().absolute()
        folder, name = path.parent, path.name
    root = Path(base).expanduser().absolute() if base is not None else folder / STORE_DIR
    return root / name


def check_name(name: str) -> str:
    """Return ``name`` if it is a safe session name, else raise a clear error."""
    if not isinstance(name, str) or not _SAFE_NAME.fullmatch(name):
        raise NbagentError(
            f"{name!r} is not a valid session name: use 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit (no '/', '..' or spaces)."
        )
    if name in (".", "..") or ".." in name:
        raise NbagentError(f"{name!r} is not a valid session name: it may not contain '..'.")
    return name


def new_name() -> str:
    """A fresh session name that sorts by creation time, e.g. ``20261202-113705-a1b2``."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


def check_folder(folder: Path) -> Path:
    """Return ``folder`` (``<root>/.nbagent/<notebook>``) unless it or its ``.nbagent`` parent is a symbolic link.

    A repository can carry such a link, pointing the logs (and the repair of a torn
    tail, the lock and snapshot files) at files elsewhere.
    """
    for part in (folder, folder.parent):
        if part.is_symlink():
            raise NbagentError(
                f"{part} is a symbolic link; nbagent does not follow links for its log folders (a cloned folder could "
                "point them at your files). Remove the link, or set Agent.log_dir to a real folder."
            )
    return folder


def log_path(folder: Path, name: str) -> Path:
    """The log file of session ``name`` in ``folder``; refuses names or links that lead outside it."""
    path = check_folder(folder) / (check_name(name) + LOG_SUFFIX)
    if path.is_symlink():
        raise NbagentError(f"{path} is a symbolic link; nbagent does not follow links for session logs.")
    return path


@dataclass(frozen=True)
class StoredSession:
    """A session log found on disk."""

    name: str
    path: Path
    modified: float


def list_sessions(folder: Path) -> list[StoredSession]:
    """Session logs in ``folder``, oldest first (by last modification); none in a linked folder (see :func:`check_folder`)."""
    if folder.is_symlink() or folder.parent.is_symlink() or not folder.is_dir():
        return []
    found = []
    for entry in os.scandir(folder):
        if entry.name.endswith(LOG_SUFFIX) and entry.is_file(follow_symlinks=False):
            name = entry.name[: -len(LOG_SUFFIX)]
            if _SAFE_NAME.fullmatch(name):
                found.append(StoredSession(name, Path(entry.path), entry.stat().st_mtime))
    return sorted(found, key=lambda s: (s.modified, s.name))
