"""This kernel's registry of the notebook's sessions: the open ones, the current one, and what the restart rule keeps of each.

The magics, the cells feature (:mod:`.agent_cells`) and forks (:mod:`.rewind`) open and switch sessions only
through it, so a session is open once per kernel and "current" means one thing.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

from IPython.core.error import UsageError

from ..agent.session import Session
from ..stores.writer import FsyncPolicy, make_folder
from . import kernel as nbkernel
from .foreign import untrusted_warning
from .headless import Finder, found_line
from .place import Place, place_of, unchecked_place_of
from .restart import Claims
from .settings import Agent
from .usage import WRITABLE, usage_errors


class SessionRegistry:
    """The notebook's sessions in this kernel, by store and path (see :attr:`Place.key`), and the one the next cell uses."""

    def __init__(self, shell: Any, settings: Agent) -> None:
        self.shell = shell
        self.settings = settings
        self.current: Path | None = None  # the session the next cell continues, in current_place
        self.current_place: tuple[str, Path] | None = None
        self.forks_reused: set[str] = set()  # the forks a cell made under an earlier kernel and this kernel took up (rewind.py)
        self._open: dict[tuple[str, Path], Session] = {}  # by (store URL, path)
        self._indexes: dict[str, nbkernel.TurnIndex] = {}  # by Session.where (a file, or <url>#<notebook>/<session>)
        self._claims: dict[str, Claims] = {}
        self._restored: dict[str, set[int]] = {}
        self.finder = Finder()  # which notebook this is, where nobody said (headless.py)

    def place(self) -> Place:
        """Where this notebook's sessions are: the store (``Agent.store``) and its log folder (see :mod:`.place`)."""
        return place_of(self.shell, self.settings)

    def locate(self, request: str) -> str:
        """Before a cell with ``request`` (empty: a cell that names its session) opens a session: the notebook by its logs (headless.py).

        Only in a kernel that has no session yet and does not know its notebook, with log files: the one notebook
        beside it whose logs hold its requests becomes its notebook. Returns the note for the panel when none does
        (its session goes to the untitled folder); a UsageError when several do.
        """
        self.finder.note = ""
        if not request or self.current is not None or getattr(self.shell, "kernel", None) is None:
            return ""
        if nbkernel.notebook_path(self.shell) is not None:
            return ""
        place = unchecked_place_of(self.shell, self.settings)
        if place.source.url:
            return ""  # a database's sessions: name the notebook (Agent.notebook or JPY_SESSION_NAME)
        cwd = Path.cwd()
        base = place.folder.parent  # <cwd>/.nbagent, or Agent.log_dir
        name = self.finder.locate(request, base, cwd, place.folder)
        if name is not None:
            nbkernel.found(self.shell, cwd / name)
            print(found_line(name, base), flush=True)
        return self.finder.note

    def sessions(self) -> list[Session]:
        """The sessions opened in this kernel (some may be closed since)."""
        return list(self._open.values())

    def named(self, name: str) -> Session | None:
        """The open session of this name, if one is."""
        return next((s for s in self._open.values() if s.path.stem == name and not s.closed), None)

    def current_in(self, place: Place) -> Path | None:
        """The current session's path, if it is of ``place``."""
        return self.current if self.current_place == place.key else None

    def has_any(self, args: Any) -> bool:
        """Whether the cell names a session or the notebook has one to work on (for --compact, --drop-thinking)."""
        return bool(args.session or args.resume or self.current is not None or self.place().latest())

    def current_session(self) -> Session | None:
        """The current session if it is open and the settings still lead to it (its folder was checked when it was opened)."""
        place = unchecked_place_of(self.shell, self.settings)
        if self.current is None or place.key != self.current_place:
            return None
        return self._known(place, self.current)

    def for_cell(self, args: Any, problem: UsageError | None = None) -> Session:
        """The session this cell uses, opened and made current; ``problem`` (why no request can start) is raised rather than create one."""
        chosen = bool(args.resume or args.session or args.new)
        if self.current is not None and not chosen:
            current = self.current_session()
            if current is not None:
                return current
        place = self.place()
        if self.current is not None and self.current_place != place.key:
            self.current = None  # Agent.store, Agent.log_dir (or the notebook) changed: its own sessions apply
        latest = None if chosen or self.current is not None else place.latest()
        if args.resume:
            path = place.find(args.resume, write=True)[1]
        elif args.session:
            path = place.path(args.session)
        elif self.current is not None and not args.new:
            path = self.current
        else:
            path = latest or place.new_path()  # after a restart, the most recently active session of this notebook
        if self._known(place, path) is None and problem is not None and not place.has(path):
            raise problem  # a new session's cell can only ask: nothing is created for a request that cannot start
        session = self.opened(place, path)
        self.make_current(place, path)
        return session

    def opened(self, place: Place, path: Path) -> Session:
        """The session at ``path`` of ``place``, opened now unless it is open (a new one is created)."""
        session = self._known(place, path)
        if session is None:
            session = self._open[(place.source.url, path)] = self._open_log(place, path)
        return session

    def add(self, place: Place, session: Session) -> None:
        """Keep a session opened elsewhere (a fork) as one of ``place``'s."""
        self._open[(place.source.url, session.path)] = session

    def make_current(self, place: Place, path: Path) -> None:
        """Make the session at ``path`` of ``place`` the one the next cell continues."""
        self.current, self.current_place = path, place.key

    def index(self, session: Session) -> nbkernel.TurnIndex:
        """The session's turns as this kernel has read them (kept up to date by ``TurnIndex.update``)."""
        return self._indexes.setdefault(session.where, nbkernel.TurnIndex())

    def claims(self, where: str) -> Claims:
        """The recorded turns of the session ``where`` that this kernel's cells have claimed (the restart rule's)."""
        return self._claims.get(where, Claims())

    def claim(self, where: str, claims: Claims) -> None:
        """Record the restart rule's claims for the session ``where``."""
        self._claims[where] = claims

    def restored(self, where: str) -> set[int]:
        """The turns of the session ``where`` whose python code this kernel re-ran (updated by the caller)."""
        return self._restored.setdefault(where, set())

    def close(self) -> None:
        """Close every open session (releasing their locks)."""
        for session in self._open.values():
            session.close()
        self._open.clear()
        nbkernel.found(self.shell, None)

    def _known(self, place: Place, path: Path) -> Session | None:
        session = self._open.get((place.source.url, path))
        return session if session is not None and not session.closed else None

    def _open_log(self, place: Place, path: Path) -> Session:
        if not place.source.url:  # a database needs no folder on disk
            with usage_errors(oserror=f"Cannot create the log folder {path.parent}: {{reason}}. {WRITABLE}"):
                make_folder(path.parent)  # .nbagent too is owner-only (mkdir(parents=True) gives parents the umask's mode)
        with usage_errors(oserror=f"Cannot write the session log {path}: {{reason}}. {WRITABLE}"):
            session = Session.open(
                path,
                fsync=cast(FsyncPolicy, self.settings.fsync),
                meta={"notebook": str(nbkernel.notebook_path(self.shell) or "")},
                store=place.source,
            )
        if not session.trusted:
            print(untrusted_warning(session), file=sys.stdout, flush=True)
        return session
