"""What the kernel knows about its notebook: the notebook's path, the running cell, its identity, the recorded turns.

A kernel restart is detected by a per-process id (``KERNEL_ID``) stored in the
``meta`` of every ``user_msg`` this kernel records; what a cell then does with
the recorded turns is the rule in :mod:`nbagent.notebook.restart`.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..agent.session import Session
from ..record import events as ev
from ..record.request import request_text
from ..render.parts import Start, ToolNames
from ..state import prices
from ..state.asides import Asides
from ..state.providers import price_key
from ..state.tokens import totals
from .python_tool import NAME as PYTHON
from .restart import Turn, request_key
from .settings import Agent

KEPT_BYTES = 4 << 20  # the log lines whose events a TurnIndex keeps, at most (a Run All re-renders them without reading)
KERNEL_ID = uuid.uuid4().hex  # one per kernel process: a restart is a new process, hence a new id


def notebook_path(shell: Any) -> Path | None:
    """The path of the notebook this kernel runs, if known; ``None`` otherwise.

    ``Agent.notebook``, where set, says it; else the frontend: Jupyter Server puts it in ``JPY_SESSION_NAME``
    (ipykernel copies it to ``__session__``), VS Code sets ``__vsc_ipynb_file__`` in the user namespace; else the
    notebook :mod:`.headless` found by its logs in this kernel (see :func:`found`).
    """
    settings = next((c for c in getattr(shell, "configurables", ()) if isinstance(c, Agent)), None)
    if settings is not None and settings.notebook:
        return (Path.cwd() / Path(settings.notebook).expanduser()).absolute()
    return told_path(shell) or _FOUND.get(id(shell))


def told_path(shell: Any) -> Path | None:
    """The notebook's path as the frontend said it (``JPY_SESSION_NAME``, ``__session__``, ``__vsc_ipynb_file__``), if it did."""
    user_ns = getattr(shell, "user_ns", {}) or {}
    for candidate in (user_ns.get("__vsc_ipynb_file__"), os.environ.get("JPY_SESSION_NAME"), user_ns.get("__session__")):
        if not candidate or not isinstance(candidate, str) or not candidate.endswith(".ipynb"):
            continue
        path = Path(candidate).expanduser()
        if path.is_absolute():
            return path
        # Jupyter Server gives a path relative to its root; the kernel runs in the notebook's folder.
        for guess in (Path.cwd() / path, Path.cwd() / path.name):
            if guess.exists():
                return guess.absolute()
        return (Path.cwd() / path.name).absolute()
    return None


_FOUND: dict[int, Path] = {}  # by id(shell): the notebook headless.py found by its logs, where nobody said which


def found(shell: Any, path: Path | None) -> None:
    """Take ``path`` as the notebook of ``shell`` from now on, where nothing else says it (``None``: forget it)."""
    if path is None:
        _FOUND.pop(id(shell), None)
    else:
        _FOUND[id(shell)] = path


class CellTracker:
    """Remembers the id of the cell being executed (from the frontend's ``cellId``) via IPython's pre_run_cell event."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.cell_id: str | None = None
        self.paused = False  # while the agent runs code in the kernel, its hidden cells are not user cells

    def pre_run_cell(self, info: Any) -> None:
        """IPython event hook."""
        if not self.paused:
            self.cell_id = getattr(info, "cell_id", None) or _parent_cell_id(self.shell)

    def register(self) -> None:
        """Start listening to the shell's events."""
        self.shell.events.register("pre_run_cell", self.pre_run_cell)

    def unregister(self) -> None:
        """Stop listening."""
        try:
            self.shell.events.unregister("pre_run_cell", self.pre_run_cell)
        except ValueError:
            pass


def _parent_cell_id(shell: Any) -> str | None:
    get_parent = getattr(shell, "get_parent", None)
    if get_parent is None:
        return None
    try:
        parent = get_parent() or {}
    except Exception:
        return None
    cell_id = (parent.get("metadata") or {}).get("cellId")
    return str(cell_id) if cell_id else None


class TurnIndex:
    """The turns of one session, kept up to date by reading only the events appended since the last look.

    It also keeps where each request stands in the session (:meth:`start`), so that re-rendering a
    turn reads that turn's events only, and what the restart rule needs to match a request quickly;
    and the events of the turns it read first, up to :data:`KEPT_BYTES` of their lines (:meth:`events`),
    so that the Run All after a restart re-renders each turn without reading the log again.
    """

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.positions: dict[str, list[int]] = {}  # request_key -> positions in turns (see restart.request_positions)
        self.seq = 0
        self._starts: dict[int, Start] = {}  # by a turn's seq, where it differs from a fresh start
        self._open = ToolNames()  # calls not answered yet
        self._asides = Asides()
        self._usage = dict.fromkeys(ev.USAGE_KEYS, 0)  # the session's tokens so far: a re-rendered turn shows them as its panel did
        self._spend: dict[str, list[int]] = {}  # and its tokens by price key, for its cost (prices.py)
        self._kept: dict[int, list[ev.Event]] = {}  # by a turn's seq: its events, if every one of them is kept
        self._kept_bytes = 0
        self._keeping = True  # until the bound is reached: later turns are read from the log

    def events(self, turn: Turn) -> list[ev.Event] | None:
        """The events of ``turn`` (its request to its last event) if they are kept; None: read them from the log."""
        kept = self._kept.get(turn.seq)
        if kept is None or kept[-1]["seq"] < turn.end:
            return None
        return [event for event in kept if event["seq"] <= turn.end]

    def _keep(self, event: ev.Event, size: int) -> None:
        """Keep ``event`` with its turn's, within the bound (else its turn's, and every later turn's, are dropped)."""
        if not self.turns:
            return
        seq = self.turns[-1].seq
        if event["seq"] == seq and self._keeping:
            self._kept[seq] = []
        kept = self._kept.get(seq)
        if kept is None:
            return
        if self._kept_bytes + size > KEPT_BYTES:
            self._keeping = False
            del self._kept[seq]
            return
        self._kept_bytes += size
        kept.append(event)

    def start(self, seq: int) -> Start:
        """Where the session stood just before the request of the turn ``seq``: the calls still open, the notes to the model."""
        return self._starts.get(seq, Start(ToolNames(), Asides())).fresh()

    def update(self, session: Session) -> list[Turn]:
        """Read new events and return all turns."""
        for event, size in session.sized_events(since=self.seq):
            kind = event["type"]
            if kind == ev.USER_MSG:
                self._close()
                meta = event.get("meta") or {}
                turn = Turn(event["seq"], event["seq"], request_text(event), meta.get("cell_id"), meta.get("kernel"))
                self.positions.setdefault(request_key(turn.request), []).append(len(self.turns))
                self.turns.append(turn)
                if self._open or self._asides != Asides() or any(self._usage.values()):
                    spend = tuple((key, tuple(counts)) for key, counts in self._spend.items())
                    self._starts[turn.seq] = Start(self._open, self._asides, usage=tuple(self._usage.items()), spend=spend).fresh()
            elif self.turns and kind == ev.ASSISTANT_MSG:
                calls = [(b["id"], b["input"]["code"]) for b in event.get("content") or [] if _python_call(b)]
                if calls:
                    self.turns[-1] = replace(self.turns[-1], python_calls=self.turns[-1].python_calls + tuple(calls))
            elif self.turns and kind == ev.TOOL_RESULT and event.get("is_error"):
                self.turns[-1] = replace(self.turns[-1], failed_calls=self.turns[-1].failed_calls | {event["tool_use_id"]})
            elif kind == ev.NOTE and event.get("kind") == ev.NOTE_CELLS_INSERTED:
                self._inserted(event)
            if self.turns and _settles_asking(event):
                self.turns[-1] = replace(self.turns[-1], asking=event.get("decision") == "interrupted")
            if kind == ev.ASSISTANT_MSG:  # as the fold counts them (server compactions' tokens included)
                for key, count in totals(event.get("usage")).items():
                    self._usage[key] += count
            if kind in (ev.ASSISTANT_MSG, ev.COMPACTION):  # as the fold prices them
                prices.record(self._spend, price_key(event.get("model"), event.get("provider")), event.get("usage"))
            self._open.learn(event)
            if kind == ev.TOOL_RESULT:
                self._open.pop(str(event["tool_use_id"]), None)
            self._asides.see(event)
            self._keep(event, size)
            self.seq = event["seq"]
        self._close()
        return self.turns

    def _inserted(self, event: ev.Event) -> None:
        """A turn's calls "Insert as cells" put into the notebook (or found there already): the turn that made each learns so."""
        listed = [*(event.get("cells") or ()), *(event.get("skipped") or ())]
        ids = {str(c.get("tool_use_id")) if isinstance(c, dict) else str(c) for c in listed}
        for index, turn in enumerate(self.turns):
            mine = ids & {call for call, _ in turn.python_calls}
            if mine:
                self.turns[index] = replace(turn, inserted_calls=turn.inserted_calls | mine)

    def _close(self) -> None:
        """The last turn ends at the last event read."""
        if self.turns and self.turns[-1].end != self.seq:
            self.turns[-1] = replace(self.turns[-1], end=self.seq)


def _settles_asking(event: ev.Event) -> bool:
    """Whether ``event`` says if the turn is left asking: an approval decided or interrupted, a call started or answered."""
    if event["type"] == ev.APPROVAL:
        return event.get("decision") != "pending"
    return event["type"] in (ev.TOOL_STARTED, ev.TOOL_RESULT)


def _python_call(block: Any) -> bool:
    return block.get("type") == "tool_use" and block.get("name") == PYTHON and isinstance((block.get("input") or {}).get("code"), str)
