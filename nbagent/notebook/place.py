"""Where this notebook's sessions are: the store (``Agent.store``) and the folder that keys them, listed and found by name.

With the file store a notebook's sessions are the log files of its folder, ``.nbagent/<notebook>/``;
with a database they are the rows its index keys by this notebook, each standing for the file path
it would have (``Agent.log_dir`` applies to files only).  Names are resolved by the one resolver,
:func:`nbagent.history.resolve_in_notebook`; the listings are :mod:`nbagent.history.summary`'s.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, TextIO

from IPython.core.error import UsageError

from .. import history
from ..agent.session import Session
from ..history.resolve import resolve_in_notebook
from ..history.summary import notebook_key, notebook_sessions, notebook_summaries
from ..stores import Store, get_store, session_url
from ..stores import folders as store
from . import kernel as nbkernel
from .usage import usage_errors


@dataclass(frozen=True)
class Place:
    """A notebook's sessions: in ``source``, keyed by ``folder`` (the log folder of the files, or what a database keys them by)."""

    source: Store
    folder: Path

    @property
    def key(self) -> tuple[str, Path]:
        """What identifies the place (a different store or folder means different sessions)."""
        return self.source.url, self.folder

    def describe(self) -> str:
        """``in <folder>``, or ``of <notebook> in <store URL>``."""
        if self.source.url:
            return f"of {notebook_key(self.folder)} in {self.source.url}"
        return f"in {self.folder}"

    def sessions(self) -> list[store.StoredSession]:
        """This notebook's sessions, oldest activity first."""
        with usage_errors():
            return notebook_sessions(self.source, self.folder)

    def has(self, path: Path) -> bool:
        """Whether the session at ``path`` has been created (a log file, or a database's row)."""
        if not self.source.url:
            return path.exists()
        return any(found.path == path for found in self.sessions())

    def latest(self) -> Path | None:
        """The most recently active session's path (what a new kernel continues), if any."""
        found = self.sessions()
        return found[-1].path if found else None

    def path(self, name: str) -> Path:
        """The path of this notebook's session ``name`` (which may not exist yet)."""
        with usage_errors():
            return store.log_path(self.folder, name) if not self.source.url else self.folder / (store.check_name(name) + store.LOG_SUFFIX)

    def new_path(self) -> Path:
        """A fresh session's path."""
        return self.path(store.new_name())

    def find(self, spec: str, *, write: bool, hint: str = "See %agent_sessions.") -> tuple[Store, Path]:
        """An existing session named by ``spec`` (a name, a path, a store URL): its store and path; a UsageError if none."""
        with usage_errors(hint):
            return resolve_in_notebook(spec, folder=self.folder, source=self.source, write=write)

    def name_of(self, path: Path) -> str:
        """How listings name a session of this place: its file path, or ``<url>#<notebook>/<session>``."""
        return session_url(self.source, path)


def place_of(shell: Any, settings: Any) -> Place:
    """The place of the notebook ``shell`` runs, as the ``Agent`` settings say (a folder that is a symbolic link is refused)."""
    place = unchecked_place_of(shell, settings)
    if not place.source.url:
        with usage_errors():
            store.check_folder(place.folder)
    return place


def unchecked_place_of(shell: Any, settings: Any) -> Place:
    """:func:`place_of` without looking at the disk: to tell whether the settings still lead to a session already open."""
    notebook = nbkernel.notebook_path(shell)
    with usage_errors():
        source = get_store(settings.store or None)
    log_dir = None if source.url else settings.log_dir or None
    relative = notebook is None or not notebook.is_absolute() or (log_dir is not None and not log_dir.startswith(("/", "~")))
    return Place(source, _log_dir(notebook, log_dir, Path.cwd() if relative else None))


@lru_cache(maxsize=16)
def _log_dir(notebook: Path | None, log_dir: str | None, cwd: Path | None) -> Path:
    """The log folder of these settings (and working folder, where one is relative to it), found once: every cell asks."""
    return store.log_dir_for(notebook, base=log_dir)


def print_sessions(
    place: Place,
    current: Path | None,
    notebook: str,
    held: Iterable[Session] = (),
    out: TextIO | None = None,
    *,
    notes: Iterable[str] = (),
    html: bool = False,
) -> None:
    """``%agent_sessions``: the table of this notebook's sessions (``current`` starred) and where the live view is.

    ``held``: the sessions this kernel has open (a database's index learns their status when they close); ``notes``:
    lines printed after the table (the turns that ended while no page showed them: reopen_comm.unseen_line);
    ``html``: the table is displayed as HTML with its text beside it (a notebook), else printed (a terminal).
    """
    out = out or sys.stdout
    states = {session.where: session.state for session in held if not session.closed}
    with usage_errors():
        summaries = notebook_summaries(place.source, place.folder, open_states=states)
    if not summaries:
        print(f"No agent sessions yet {place.describe()}.", file=out)
        return
    caption, starred = f"Sessions {place.describe()} (* = current):", place.name_of(current) if current else ""
    if html:
        from IPython.display import display

        from .session_table import SessionTable

        display(SessionTable(caption, summaries, starred))
    else:
        print(caption, file=out)
        history.write_table(summaries, out, current=starred)
    from ..render.page_links import where_to_open  # the live view on the Jupyter server (nbagent.server); a pure function

    shown = history.session_name(current) if current else summaries[-1].name
    print(where_to_open(notebook, shown), file=out)
    for note in notes:
        print(note, file=out)


def replay_of(place: Place, spec: str) -> Any:
    """``%agent_replay [SESSION]``: the replay of the named session (default: the latest), following it as it is written."""
    from .replay import Replay

    if not spec:
        latest = place.latest()
        if latest is None:
            raise UsageError(f"No agent sessions {place.describe()} to replay. Give a log path: `%agent_replay path/to/session.jsonl`.")
        source, path = place.source, latest
    else:
        source, path = place.find(spec, write=False, hint="See %agent_sessions, or give the path of a .jsonl log.")
    # A damaged or newer-schema log, or one with no events yet: its own message says it all.
    with usage_errors(hints=(), oserror=f"Cannot read the session log {path}: {{reason}}."):
        replay = Replay.from_store(source, path)
    replay.follow()
    return replay
