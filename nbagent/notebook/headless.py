"""Which notebook a kernel runs when nobody said (nbconvert, nbclient, papermill): the one whose logs hold its requests.

A kernel that knows its notebook's path (``JPY_SESSION_NAME``, VS Code, ``Agent.notebook``) never looks. Otherwise
an ``%agent`` cell's request is looked for in the log folders of the notebooks beside the kernel's working folder
(``.nbagent/<name>.ipynb/``, or ``Agent.log_dir``'s, whose ``<name>.ipynb`` is in the working folder): the notebook
whose latest session (the one a new kernel continues) holds this kernel's requests, in order, is this one
(:func:`fitting`, pure). Several: refused, naming ``Agent.notebook``; none: the ``untitled`` folder as before, and
the panel says the path is unknown and how to name it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from IPython.core.error import UsageError

from ..errors import NbagentError
from ..record import events as ev
from ..record.log_reader import read_events
from ..record.request import request_text
from ..stores import folders as store
from .restart import request_key

NOTEBOOK_SUFFIX = ".ipynb"
HOW = '%config Agent.notebook = "{name}"'  # the setting that names the notebook (a cell before the first %agent)
SECTION = "docs/notebook.md, 'Agent notebooks in CI'"


def fitting(candidates: Mapping[str, Sequence[str]], seen: Sequence[str]) -> tuple[str, ...]:
    """The candidates whose record holds ``seen``, sorted: those that can be this kernel's notebook.

    ``candidates``: a notebook's name -> the requests its latest session recorded, in order. ``seen``: the requests
    this kernel's ``%agent`` cells made while its notebook was unknown, in order, the current cell's last. A request
    no candidate holds (a cell added since the notebook was last run) is left out; every other must be held, in
    that order, and the current one must be held. Requests compare up to whitespace.
    """
    if not seen:
        return ()
    records = {name: [request_key(r) for r in recorded] for name, recorded in candidates.items()}
    known = {key for record in records.values() for key in record}
    if request_key(seen[-1]) not in known:
        return ()
    wanted = [key for key in map(request_key, seen) if key in known]
    return tuple(sorted(name for name, record in records.items() if _in_order(wanted, record)))


def _in_order(wanted: Sequence[str], record: Sequence[str]) -> bool:
    """Whether ``wanted`` is a subsequence of ``record``."""
    rest = iter(record)
    return all(key in rest for key in wanted)  # each `in` consumes the iterator up to the match


def shown(folder: Path) -> str:
    """A folder as a message names it: relative to the working folder where it is inside it."""
    return str(folder.relative_to(Path.cwd())) if folder.is_relative_to(Path.cwd()) else str(folder)


def ambiguous(names: Sequence[str], folder: Path) -> str:
    """Why a cell is refused when the logs of several notebooks hold its requests, and how to name the notebook."""
    return (
        f"This kernel was not told its notebook's path (nbconvert, nbclient and papermill do not say it), and the logs of "
        f"{len(names)} notebooks in {shown(folder)} hold this request: {', '.join(names)}. nbagent does not guess which one "
        f"this is. Name it in a cell before the first %agent cell: `{HOW.format(name=names[0])}` (or run with "
        f"JPY_SESSION_NAME set to the notebook's path). Nothing was sent or written. See {SECTION}."
    )


def unknown(folder: Path) -> str:
    """What a cell's panel says when its session goes to the ``untitled`` folder because the notebook's path is unknown."""
    return (
        f"this kernel was not told its notebook's path, and no notebook's log beside it holds this request, so its "
        f"sessions are those of {shown(folder)}. If this is a saved notebook run headless, name it: "
        f"`{HOW.format(name='<name>.ipynb')}` (or set JPY_SESSION_NAME); {SECTION}"
    )


def found_line(name: str, folder: Path) -> str:
    """The line a cell prints when the notebook was found by its logs."""
    return (
        f"nbagent: this kernel was not told its notebook's path; of the notebooks' logs in {shown(folder)} only those of "
        f"{name} hold this request, so its sessions are used (`{HOW.format(name=name)}` says so explicitly)."
    )


class Finder:
    """This kernel's search for its notebook: the requests its cells made so far, what each log held, the note for the panel."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.note = ""  # for the panel of the cell whose session goes to the untitled folder
        self._read: dict[Path, tuple[tuple[int, int], tuple[str, ...]]] = {}  # by log: (size, mtime_ns), its requests

    def locate(self, request: str, base: Path, cwd: Path, fallback: Path) -> str | None:
        """The name of the notebook whose logs in ``base`` hold this kernel's requests with ``request`` last.

        ``None``: no log holds it (``note`` then says so, naming ``fallback``, the folder used instead). Several:
        a UsageError naming them; the request is kept for the next cell to narrow (a cell run again counts once).
        """
        self.note = ""
        again = bool(self.seen) and request_key(self.seen[-1]) == request_key(request)  # the last cell, run again
        seen = self.seen if again else [*self.seen, request]
        names = fitting(self.candidates(base, cwd), seen)
        if len(names) == 1:
            return names[0]
        self.seen = seen
        if names:
            raise UsageError(ambiguous(names, base))
        self.note = unknown(fallback)
        return None

    def candidates(self, base: Path, cwd: Path) -> dict[str, tuple[str, ...]]:
        """The notebooks in ``cwd`` with a log folder in ``base``: each one's latest session's requests, in order."""
        if base.is_symlink() or not base.is_dir():
            return {}
        found: dict[str, tuple[str, ...]] = {}
        for entry in sorted(os.scandir(base), key=lambda e: e.name):
            if not entry.name.endswith(NOTEBOOK_SUFFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            if not (cwd / entry.name).is_file():
                continue  # the log folder of a notebook that is not here (renamed, deleted, elsewhere)
            sessions = store.list_sessions(Path(entry.path))
            if sessions:
                found[entry.name] = self._requests(sessions[-1].path)
        return found

    def _requests(self, path: Path) -> tuple[str, ...]:
        """The requests a log recorded, in order (none if it cannot be read: it cannot be re-rendered either)."""
        try:
            stat = path.stat()
            mark = (stat.st_size, stat.st_mtime_ns)
            if path in self._read and self._read[path][0] == mark:
                return self._read[path][1]
            requests = tuple(request_text(e) for e in read_events(path) if e["type"] == ev.USER_MSG)
        except (NbagentError, OSError, ValueError):
            return ()
        self._read[path] = (mark, requests)
        return requests
