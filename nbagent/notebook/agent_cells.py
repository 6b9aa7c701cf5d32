"""The agent's work as notebook cells, in the magics: the comm's host, the button after a turn, ``Agent.cells``, ``%agent_cells``.

The rules are elsewhere: which calls a turn made (:mod:`nbagent.state.turn_work`), the cells and the button
(:mod:`.insert`), the messages (:mod:`.cells_comm`). A session this user did not write never inserts a cell.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import logging
from typing import Any

from IPython.core.error import UsageError

from .._version import __version__
from ..agent.session import Session
from ..record import events as ev
from ..state.turn_work import TurnWork, turns
from . import insert
from .cell_edit import Proposals
from .cell_view import View
from .cells_comm import Bridge, Message
from .foreign import calls_not_signed_by_user
from .kernel import CellTracker, TurnIndex
from .registry import SessionRegistry

logger = logging.getLogger("nbagent")
KIND = ev.NOTE_CELLS_INSERTED  # the note recording what was inserted, and where
NO_EXTENSION = (
    "nbagent: Agent.cells = {mode!r}, but cells can't be inserted in this front end (the nbagent extension for "
    "JupyterLab and Notebook 7 is not connected); %agent_cells puts this turn's code into the next cell."
)
_loaded: dict[int, AgentCells] = {}  # by id() of the shell: the tools and the panel ask whether the extension is here


def cells_for(shell: Any) -> AgentCells | None:
    """The cells feature of a shell with nbagent loaded (None before ``%load_ext nbagent``)."""
    return _loaded.get(id(shell))


class AgentCells:
    """The cells feature of one shell's magics (a :class:`~.cells_comm.Host` for its bridge): its sessions, and the cell running."""

    def __init__(self, sessions: SessionRegistry, tracker: CellTracker) -> None:
        self.sessions = sessions
        self.shell: Any = sessions.shell  # IPython types register_magic_function through a decorator mypy reads wrongly
        self.tracker = tracker
        self.bridge = Bridge(self, __version__)
        self.proposals = Proposals(self.bridge)
        self.bridge.edit_of = self.proposals.view  # a proposed edit's question is also shown at the cell it changes
        self._turns: dict[str, int] = {}  # insert id -> the turn it carries

    def register(self) -> None:
        """Answer the comm target (in a kernel) and add ``%agent_cells``."""
        _loaded[id(self.shell)] = self
        self.bridge.register()
        self.shell.register_magic_function(self.agent_cells, "line", "agent_cells")

    def unregister(self) -> None:
        """Undo :meth:`register`."""
        _loaded.pop(id(self.shell), None)
        self.bridge.unregister()
        self.shell.magics_manager.magics["line"].pop("agent_cells", None)

    # Sessions ------------------------------------------------------------------------------------------
    def _session(self, name: str) -> Session:
        """This notebook's session ``name``, open; a ValueError for the browser if there is none or it is not the user's."""
        session = self.sessions.named(name)
        if session is None:
            place = self.sessions.place()
            try:
                path = place.path(name)
            except UsageError:
                raise ValueError(f"{name!r} is not a session name") from None
            if not place.has(path):
                raise ValueError(f"this notebook has no session {name!r}")
            session = self.sessions.opened(place, path)
        if not session.trusted:
            raise ValueError(
                f"the session {name} was not written by you: its calls are never inserted as cells "
                f"(`nbagent trust {session.where}` in a terminal vouches for it)"
            )
        return session

    def _work(self, session: Session, turn: int) -> TurnWork:
        found = turns(session.events())
        if not 1 <= turn <= len(found):
            raise ValueError(f"the session {session.path.stem} has no turn {turn}")
        work = found[turn - 1]
        unsigned = calls_not_signed_by_user(session)  # belt and braces: a trusted session has none
        if unsigned:
            raise ValueError(f"turn {turn} has calls in lines not written by you: they are never inserted")
        return work

    # The comm's host -------------------------------------------------------------------------------------
    def insert_request(self, message: Message) -> None:
        """The user pressed "Insert as cells" (or one call's button): send the turn's cells to insert."""
        name, only = message["session"], message.get("tool_use_id")
        session = self._session(name)
        work = self._work(session, message["turn"])
        if only is not None and only not in {c.tool_use_id for c in work.done}:
            raise ValueError(f"turn {work.number} has no successful python call {only}")
        self._send(session, work, only=only, request_id=message["id"])

    def _send(self, session: Session, work: TurnWork, *, only: str | None = None, request_id: str | None = None) -> str | None:
        anchor = work.cell_id or (self.tracker.cell_id or "")
        if not anchor:
            raise ValueError("the %agent cell of this turn is not known (the front end sent no cell id), so there is nowhere to insert")
        cells = insert.cells(work, session.path.stem, summary=self.sessions.settings.cells == "code+summary", only=only)
        if not cells:
            raise ValueError(f"turn {work.number} ran no python call that succeeded: there is nothing to insert")
        sent = self.bridge.insert(session.path.stem, anchor, cells, request_id)
        if sent is not None:
            self._turns[sent] = work.number
        return sent

    def inserted(self, message: Message, sent: Message) -> None:
        """The browser inserted cells: record which, and where, in the session's log."""
        offered = {c["tool_use_id"] for c in sent["cells"]}
        named = [c["tool_use_id"] for c in message["cells"]] + list(message["skipped"])
        if not set(named) <= offered:
            raise ValueError("the reply names cells that were not sent")
        session = self._session(message["session"])
        turn = self._turns.pop(message["id"], 0)
        count, skipped = len(message["cells"]), len(message["skipped"])
        if not count:
            return  # all already in the notebook (the button says so): nothing happened to record
        words = f"inserted {count} cell{'s' if count != 1 else ''} of turn {turn} below the %agent cell"
        session.append(
            ev.NOTE,
            kind=KIND,
            text=words + (f"; {skipped} already in the notebook" if skipped else ""),
            turn=turn,
            anchor=sent["anchor_cell_id"],
            cells=message["cells"],
            skipped=message["skipped"],
        )

    # After a cell ----------------------------------------------------------------------------------------
    def after(self, session: Session, view: View, *, live: bool) -> None:
        """After an ``%agent`` cell: the "Insert as cells" output of its turn, and with ``Agent.cells`` 'code' an insert now."""
        try:
            self._after(session, view, live=live)
        except Exception as exc:  # never hides what the cell did
            logger.warning("nbagent: the cells of this turn could not be offered: %s: %s", type(exc).__name__, exc)

    def _after(self, session: Session, view: View, *, live: bool) -> None:
        mode = self.sessions.settings.cells
        if mode == "off" or getattr(self.shell, "kernel", None) is None or not session.trusted:
            return  # terminal IPython: no outputs to draw in; a foreign session: never inserted
        seen = [e["seq"] for e in view.events if e.get("type") == ev.USER_MSG]
        # A live cell's own request is the last it saw (--resume shows the session's earlier turns first).
        mine = seen[-1] if live and seen else seen[0] if seen else None
        work = turn_of(self.sessions.index(session), session, mine, live=live)
        if work is None or not work.done:
            return
        bundle = insert.button(work, session.path.stem)
        if bundle is None:
            return
        from IPython.display import display

        display(bundle, raw=True)
        if live and mode in ("code", "code+summary"):
            if not self.bridge.present:
                print(NO_EXTENSION.format(mode=mode), flush=True)
                return
            try:
                self._send(session, work)
            except ValueError as exc:
                print(f"nbagent: cells not inserted: {exc}.", flush=True)

    # %agent_cells ------------------------------------------------------------------------------------------
    def agent_cells(self, line: str = "") -> None:
        """Put the code of the last turn's python calls into the next cell (where the front end supports it).

        For front ends without nbagent's extension (VS Code, Colab, classic Notebook, terminal IPython): the
        calls that raised are left out; JupyterLab and Notebook 7 with the extension have "Insert as cells".
        """
        session = self.sessions.current_session()
        if session is None:
            latest = self.sessions.place().latest()
            if latest is None:
                raise UsageError("There is no agent session in this notebook yet: %agent_cells copies the code of its last turn.")
            session = self._session_or_usage(latest.stem)
        if not session.trusted:
            raise UsageError(f"The session {session.path.stem} was not written by you: its code is never put into cells.")
        work = next((t for t in reversed(turns(session.events())) if t.done), None)
        if work is None:
            raise UsageError(f"No turn of {session.path.stem} ran python code that succeeded: there is no code to put in a cell.")
        code = "\n\n".join(c.code.rstrip("\n") for c in work.done)
        self.shell.set_next_input(code, replace=False)
        print(
            f"nbagent: the code of {len(work.done)} python call(s) of turn {work.number} is in the next cell (where this front end supports it)."
        )

    def _session_or_usage(self, name: str) -> Session:
        try:
            return self._session(name)
        except ValueError as exc:
            raise UsageError(f"nbagent: {exc}.") from None


def turn_of(index: TurnIndex, session: Session, seq: int | None, *, live: bool) -> TurnWork | None:
    """The turn whose request is ``seq`` (None: a live cell's, the session's last), read from its own events only.

    ``index`` (the session's, brought up to date here) says where the turn is and whether it called python at all: a
    re-run cell's turn without python calls reads nothing, and none reads the turns before it (a Run All stays O(N)).
    """
    listed = index.update(session)  # reads only the events appended since it last looked
    if seq is None and not (live and listed):
        return None
    at = len(listed) - 1 if seq is None else bisect.bisect_left(listed, seq, key=lambda t: t.seq)
    if at >= len(listed) or (seq is not None and listed[at].seq != seq) or not listed[at].python_calls:
        return None
    end = listed[at + 1].seq if at + 1 < len(listed) else None
    kept = index.events(listed[at])
    events = kept if kept is not None else session.events(since=listed[at].seq - 1)
    found = turns(itertools.takewhile(lambda e: end is None or e["seq"] < end, events))
    return dataclasses.replace(found[0], number=at + 1) if found else None
