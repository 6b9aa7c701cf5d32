"""The restart rule: what an ``%agent`` cell does with the turns its session recorded (pure; see tests/notebook/test_restart.py).

Each ``user_msg`` this kernel records carries the kernel's id, so a turn recorded
under another id was recorded before a restart (or by another kernel).  The magic
only adapts the rule: it reads the turns, calls :func:`plan`, then renders and runs.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Literal

UNFINISHED = ("model", "tools")  # frontiers of a turn that stopped before the model ended it
# What a re-rendered panel's header says after "from the log, recorded ...", by (a request follows, the turn continues).
AFTER_RECORDED = {
    (False, False): "not run again",
    (False, True): "its unfinished turn continues below",
    (True, False): "a new request follows",
}
# What the header adds when the shown turns' python code made variables the restart took (see after_recorded).
VARIABLES_GONE = "the variables its python code made went with the old kernel: run `%agent --restore` to re-run that code and get them back"
VARIABLES_RESTORED = "its python code is re-run to restore the variables it made"
# ... when that code is in the notebook already, as cells "Insert as cells" put there: running them makes the variables.
VARIABLES_IN_CELLS = "its python code is in the cells inserted from it below: running them makes its variables again"
# The note to the model before the first request after a restart (its {restored} says what --restore re-ran).
RESTART_NOTE = (
    "[nbagent note: the Jupyter kernel was restarted since the previous turn, so variables, imports and "
    "functions defined earlier in the kernel (by you or by the user) are gone unless re-created.{restored}]"
)


@dataclass(frozen=True)
class Turn:
    """One recorded request: the seqs of its user_msg and its last event, its text, the cell and kernel that recorded it."""

    seq: int
    end: int
    request: str
    cell_id: str | None = None
    kernel: str | None = None
    python_calls: tuple[tuple[str, str], ...] = ()  # (tool_use_id, code) of the python tool, in order: what --restore re-runs
    failed_calls: frozenset[str] = frozenset()
    inserted_calls: frozenset[str] = frozenset()  # calls "Insert as cells" put into the notebook (a cells_inserted note)
    asking: bool = False  # its last approval question was interrupted before anyone answered (see ask_again)


@dataclass(frozen=True)
class Cell:
    """The cell being run: its request (may be empty), its cellId and its options."""

    request: str
    cell_id: str | None = None
    new: bool = False
    resume: bool = False
    session: bool = False  # --session NAME was given
    restore: bool = False  # --restore, or Agent.restore_kernel_state


@dataclass(frozen=True)
class Claims:
    """The recorded turns this kernel has matched to cells (each at most once), and where Run All has got to."""

    seqs: frozenset[int] = frozenset()
    cursor: int = 0  # index just after the last matched turn


@dataclass(frozen=True)
class Plan:
    """What the cell does, in this order: show, restore, finish the unfinished turn, switch session, ask."""

    claims: Claims = field(default_factory=Claims)
    refuse: bool = False  # a request on a session the user did not write, by --resume or --session: a UsageError
    show_all: bool = False  # re-render every event of the session (--resume)
    show: tuple[Turn, ...] = ()  # re-render these recorded turns, in order: no model call, no tool re-run
    restore: tuple[Turn, ...] = ()  # re-run the recorded python code of these turns (the adapter runs each once)
    unfinished: Literal["leave", "continue", "explain"] = "leave"  # explain: the session is not the user's, say how
    new_session: bool = False  # the request starts a new session of the user's own
    ask: bool = False  # send the cell's request as a new turn
    note: bool = False  # prefix the restart note: the first new turn since this session's kernel was restarted
    mention_restore: bool = False  # the restart note says how many turns --restore re-ran
    restore_only: bool = False  # the cell only restores: say so if there was nothing to restore


def plan(
    turns: Sequence[Turn],
    cell: Cell,
    *,
    trusted: bool,
    frontier: str,
    kernel: str,
    claims: Claims,
    positions: Mapping[str, Sequence[int]] | None = None,
) -> Plan:
    """What ``cell`` does with the ``turns`` of its session, as the kernel ``kernel`` that has made ``claims``.

    ``--resume`` re-renders everything, then continues an unfinished turn or asks the request. Otherwise a
    request matched to turns of an earlier kernel re-renders them (every turn that cell recorded with that
    request), and continues the last only if it is the session's last, unfinished turn. A cell whose turn
    was interrupted while asking approval, re-run unchanged, asks again (:func:`ask_again`). Anything else
    asks anew. A session the user did not write (``trusted`` false) is never continued, and a new request
    on it starts a new session of the user's own.
    ``positions``: :func:`request_positions` of ``turns``, if the caller keeps them (else they are worked out).
    """
    finish: Literal["continue", "explain"] = "continue" if trusted else "explain"
    if not trusted and cell.request and (cell.resume or cell.session):
        return Plan(claims, refuse=True)
    others = tuple(t for t in turns if t.kernel != kernel) if cell.restore else ()
    if cell.resume:
        return Plan(
            Claims(claims.seqs | {t.seq for t in turns}, len(turns)),
            show_all=True,
            restore=others,
            unfinished=finish if frontier in UNFINISHED and not cell.request else "leave",
            ask=bool(cell.request),
            note=bool(cell.request) and after_restart(turns, kernel),
        )
    wanted = cell.request and not cell.new
    matched, claims = matches(turns, cell.request, cell.cell_id, kernel, claims, positions) if wanted else ((), claims)
    if matched:
        last = matched[-1] == turns[-1] and frontier in UNFINISHED
        return Plan(claims, show=matched, restore=matched if cell.restore else (), unfinished=finish if last else "leave")
    again = ask_again(turns, cell, frontier) if wanted else None
    if again is not None:  # its turn goes on at its frontier: the same call is asked again, nothing new is sent
        claims = Claims(claims.seqs | {again.seq}, claims.cursor)
        return Plan(claims, show=(again,), restore=(again,) if cell.restore and again.kernel != kernel else (), unfinished=finish)
    if not trusted and cell.request:
        return Plan(claims, new_session=True, ask=True)
    return Plan(
        claims,
        restore=others,
        ask=bool(cell.request),
        note=bool(cell.request) and after_restart(turns, kernel),
        mention_restore=bool(cell.request) and cell.restore,
        restore_only=not cell.request,
    )


def after_recorded(plan: Plan, turns: Sequence[Turn], kernel: str, restored: Set[int] = frozenset()) -> str:
    """What a re-rendered panel's header says after "from the log, recorded ...": what follows, and whether the variables are back.

    ``turns``: the session's turns; ``restored``: the seqs of the turns this kernel has already restored.
    """
    then = AFTER_RECORDED[(plan.ask, plan.unfinished == "continue")]
    shown = [t for t in plan.show or (tuple(turns) if plan.show_all else ()) if t.kernel != kernel]
    made = [t for t in shown if any(call not in t.failed_calls | t.inserted_calls for call, _ in t.python_calls)]
    if not made:  # no code that made variables, or all of it is in the notebook's cells: no --restore to suggest
        in_cells = any(call in t.inserted_calls and call not in t.failed_calls for t in shown for call, _ in t.python_calls)
        return f"{then}; {VARIABLES_IN_CELLS}" if in_cells else then
    back = set(restored) | {t.seq for t in plan.restore}
    return f"{then}; {VARIABLES_RESTORED if all(t.seq in back for t in made) else VARIABLES_GONE}"


def match(
    turns: Sequence[Turn],
    request: str,
    cell_id: str | None,
    kernel: str,
    claims: Claims,
    positions: Mapping[str, Sequence[int]] | None = None,
) -> tuple[Turn | None, Claims]:
    """The earlier kernel's turn a re-run cell recorded (``None``: the cell asks anew), and the claims with it."""
    # Only the turns of the same request are looked at: a Run All of N cells costs each cell the same, not O(N).
    at = (positions if positions is not None else request_positions(turns)).get(request_key(request), ())
    candidates = [(i, turns[i]) for i in at if turns[i].kernel != kernel and turns[i].seq not in claims.seqs]
    chosen = None
    if cell_id:
        chosen = next(((i, t) for i, t in candidates if t.cell_id == cell_id), None)
        if chosen is None:
            # Recorded with another cell id: the cell was copied or edited; only a turn without an id may match.
            candidates = [(i, t) for i, t in candidates if not t.cell_id]
    if chosen is None:
        # Run All re-runs the cells in order: the first candidate after the last match, else the first.
        chosen = next(((i, t) for i, t in candidates if i >= claims.cursor), None) or next(iter(candidates), None)
    if chosen is None:
        return None, claims
    index, turn = chosen
    return turn, Claims(claims.seqs | {turn.seq}, index + 1)


def matches(
    turns: Sequence[Turn],
    request: str,
    cell_id: str | None,
    kernel: str,
    claims: Claims,
    positions: Mapping[str, Sequence[int]] | None = None,
) -> tuple[tuple[Turn, ...], Claims]:
    """Every earlier kernel's turn a re-run cell recorded, in order (``()``: the cell asks anew), and the claims with them.

    The first is :func:`match`'s; matched by the cell's id, the later unclaimed turns of that id and request follow
    (a cell run again with the same request in one kernel's life recorded one turn each time).
    """
    first, claims = match(turns, request, cell_id, kernel, claims, positions)
    if first is None:
        return (), claims
    if not cell_id or first.cell_id != cell_id:
        return (first,), claims
    at = (positions if positions is not None else request_positions(turns)).get(request_key(request), ())
    more = [i for i in at if turns[i].seq > first.seq and turns[i].cell_id == cell_id and turns[i].kernel != kernel]
    more = [i for i in more if turns[i].seq not in claims.seqs]
    if not more:
        return (first,), claims
    return (first, *(turns[i] for i in more)), Claims(claims.seqs | {turns[i].seq for i in more}, more[-1] + 1)


def ask_again(turns: Sequence[Turn], cell: Cell, frontier: str) -> Turn | None:
    """The session's last turn, if the cell re-runs it to ask again the approval question an interrupt left unanswered.

    Only that turn's own cell (by its id, where both have one) with its request unchanged (up to whitespace), and only
    while the call is still open (frontier ``tools``): an edited request is a new one, and the call is settled as not run.
    """
    if not turns or frontier != "tools" or not turns[-1].asking:
        return None
    last = turns[-1]
    if not same_request(last.request, cell.request):
        return None
    if cell.cell_id and last.cell_id and cell.cell_id != last.cell_id:
        return None
    return last


def request_positions(turns: Sequence[Turn]) -> dict[str, list[int]]:
    """Where each request (up to whitespace) was recorded: positions in ``turns``, in order."""
    found: dict[str, list[int]] = {}
    for i, turn in enumerate(turns):
        found.setdefault(request_key(turn.request), []).append(i)
    return found


def after_restart(turns: Sequence[Turn], kernel: str) -> bool:
    """Whether the next turn is the first after a restart: turns from a kernel, none from this one."""
    return any(t.kernel for t in turns) and not any(t.kernel == kernel for t in turns)


def same_request(a: str, b: str) -> bool:
    """Requests compare equal up to whitespace."""
    return request_key(a) == request_key(b)


@functools.lru_cache(maxsize=4096)
def request_key(text: str) -> str:
    """A request as compared: up to whitespace."""
    return " ".join(text.split())
