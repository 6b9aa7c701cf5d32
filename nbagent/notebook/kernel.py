"""What the kernel knows about its notebook: the notebook's path, the running cell, restarts, and which turn a cell recorded.

A kernel restart is detected by a per-process id (``KERNEL_ID``) stored in the
``meta`` of every ``user_msg`` this kernel records: a turn recorded under
another id was recorded before a restart (or by another kernel).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import events as ev
from ..session import Session

KERNEL_ID = uuid.uuid4().hex  # one per kernel process: a restart is a new process, hence a new id
PYTHON_TOOL = "python"


def notebook_path(shell: Any) -> Path | None:
    """The path of the notebook this kernel runs, if the frontend said so; ``None`` otherwise.

    Jupyter Server puts it in ``JPY_SESSION_NAME`` (ipykernel copies it to ``__session__``);
    VS Code sets ``__vsc_ipynb_file__`` in the user namespace.
    """
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


@dataclass
class Turn:
    """One request and everything recorded after it, up to the next request."""

    seq: int  # seq of its user_msg
    end: int  # seq of its last event
    request: str
    cell_id: str | None
    kernel: str | None
    python_calls: list[tuple[str, str]] = field(default_factory=list)  # (tool_use_id, code), in order
    failed_calls: set[str] = field(default_factory=set)


def request_text(event: ev.Event) -> str:
    """The user's request in a user_msg (without any note nbagent prepended)."""
    meta = event.get("meta") or {}
    if isinstance(meta.get("request"), str):
        return meta["request"]
    content = event.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


def same_request(a: str, b: str) -> bool:
    """Requests compare equal up to whitespace."""
    return " ".join(a.split()) == " ".join(b.split())


class TurnIndex:
    """The turns of one session, kept up to date by reading only the events appended since the last look."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.seq = 0

    def update(self, session: Session) -> list[Turn]:
        """Read new events and return all turns."""
        for event in session.events(since=self.seq):
            self.seq = event["seq"]
            kind = event["type"]
            if kind == ev.USER_MSG:
                meta = event.get("meta") or {}
                self.turns.append(Turn(event["seq"], event["seq"], request_text(event), meta.get("cell_id"), meta.get("kernel")))
                continue
            if not self.turns:
                continue
            turn = self.turns[-1]
            turn.end = event["seq"]
            if kind == ev.ASSISTANT_MSG:
                for block in event.get("content") or []:
                    if block.get("type") == "tool_use" and block.get("name") == PYTHON_TOOL:
                        code = (block.get("input") or {}).get("code")
                        if isinstance(code, str):
                            turn.python_calls.append((block["id"], code))
            elif kind == ev.TOOL_RESULT and event.get("is_error"):
                turn.failed_calls.add(event["tool_use_id"])
        return self.turns


class Matcher:
    """Matches a re-run ``%agent`` cell to the turn it recorded before a restart; each turn at most once per kernel."""

    def __init__(self) -> None:
        self.claimed: set[int] = set()
        self.cursor = 0  # index just after the last matched turn: Run All replays in order

    def match(self, turns: list[Turn], request: str, cell_id: str | None) -> Turn | None:
        """The earlier kernel's turn this cell recorded, or ``None`` (then the cell asks anew)."""
        candidates = [
            (i, t) for i, t in enumerate(turns) if t.kernel != KERNEL_ID and t.seq not in self.claimed and same_request(t.request, request)
        ]
        chosen = None
        if cell_id:
            chosen = next(((i, t) for i, t in candidates if t.cell_id == cell_id), None)
            if chosen is None:
                # Recorded with another cell id: the cell was copied or edited; only a turn without an id may match.
                candidates = [(i, t) for i, t in candidates if not t.cell_id]
        if chosen is None:
            chosen = next(((i, t) for i, t in candidates if i >= self.cursor), None) or next(iter(candidates), None)
        if chosen is None:
            return None
        index, turn = chosen
        self.claimed.add(turn.seq)
        self.cursor = index + 1
        return turn

    def claim_all(self, turns: list[Turn]) -> None:
        """Mark every turn as seen (after ``--resume`` re-rendered them all)."""
        self.claimed.update(t.seq for t in turns)
        self.cursor = len(turns)


def recorded_by_another_kernel(turns: list[Turn]) -> bool:
    """Whether this session has turns from a kernel and none from this one: the next turn is the first after a restart."""
    return any(t.kernel for t in turns) and not any(t.kernel == KERNEL_ID for t in turns)
