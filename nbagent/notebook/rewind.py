"""``%agent --fork [N]`` and ``%agent --rewind N``: continue this notebook's conversation in a fork; the restart rule for them.

A fork records the cell that made it (its id, the kernel, the option) in its lineage, so a
cell run again after a kernel restart reuses the fork it made instead of making a second one
(:func:`reuse`, a pure rule; table: tests/notebook/test_rewind.py).  A rewind is honest about the kernel:
its variables, the files the agent changed and the cells it inserted are not rewound, and the
next request's note says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError

from ..agent.session import Session
from ..history.summary import notebook_key
from ..record import events as ev
from ..state.lineage import ForkPointError, turn_span
from . import kernel as nbkernel
from . import restart
from .cell_view import View
from .foreign import untrusted_warning
from .place import Place
from .registry import SessionRegistry
from .usage import usage_errors

REWOUND_NOTE = (
    "[nbagent note: the conversation was rewound to the end of turn {turn}; {left} left out of it. "
    "The Jupyter kernel was not rewound: it still holds the variables, imports and functions {those} made or changed. "
    "Files changed in {those} were not restored, and cells inserted into the notebook then are still there (they are "
    "the user's cells now).]"
)
REWOUND_TEXT = "rewound to turn {turn}: the kernel, files and inserted cells of {span} are not rewound"


def rewound_words(kept: int, had: int) -> dict[str, str]:
    """The words of a rewind that keeps ``kept`` of ``had`` turns, as people count them: ``turn 3 is``, ``turns 2–3 are``."""
    span = turn_span(kept + 1, had)
    one = kept + 1 == had
    return {"turn": str(kept), "span": span, "left": f"{span} {'is' if one else 'are'}", "those": "that turn" if one else "those turns"}


@dataclass(frozen=True)
class Made:
    """A fork a cell made: where it is, and the cell, kernel and option (``rewind 2``, ``fork -1``) that made it."""

    path: Path
    cell_id: str | None
    kernel: str
    option: str


def reuse(made: Sequence[Made], *, cell_id: str | None, option: str, kernel: str, claimed: Set[str]) -> Made | None:
    """The fork this cell made under an earlier kernel (reuse it), or None (make a new one).

    As the restart rule matches a request: same option, made by another kernel, not yet reused;
    the same cell id first, else (a cell without one, or copied) the first fork made without one.
    """
    candidates = [m for m in made if m.kernel != kernel and m.option == option and str(m.path) not in claimed]
    if cell_id:
        same = [m for m in candidates if m.cell_id == cell_id]
        if same:
            return same[-1]
    unnamed = [m for m in candidates if not m.cell_id]
    return unnamed[-1] if unnamed else None


def reused_words(name: str, yours: bool) -> str:
    """What a cell says of the fork :func:`reuse` found: continued if this user wrote it; else only what its record claims."""
    if yours:
        return f"nbagent: continuing in {name}, the fork this cell made before the kernel restart (not a second one)."
    return (
        f"nbagent: {name} is recorded as a fork made by this cell under another kernel, but it was not written by you "
        "(see the warning), so it is not continued."
    )


def asked(args: Any) -> bool:
    """Whether the cell asks for a fork (``--fork`` or ``--rewind``)."""
    return args.fork is not None or args.rewind is not None


def option_of(args: Any) -> tuple[str, int | None]:
    """What a cell asks: its option as recorded (``rewind 2``, ``fork -1``), and the turn to keep (None: all)."""
    if args.rewind is not None:
        return f"rewind {args.rewind}", int(args.rewind)
    return f"fork {args.fork}", None if args.fork < 0 else int(args.fork)


def forks_made(place: Place) -> list[Made]:
    """The forks of this notebook's sessions that record the cell that made them, oldest activity first."""
    with usage_errors():
        if place.source.url:
            key = notebook_key(place.folder)
            items = [item for item in place.source.list(notebook=key) if item.notebook == key]
        else:
            items = place.source.list(notebook=str(place.folder)) if place.folder.is_dir() else []
    found = []
    for item in items:
        by = (item.summary.get("fork") or {}).get("by") if isinstance(item.summary.get("fork"), dict) else None
        if isinstance(by, dict) and isinstance(by.get("option"), str) and isinstance(by.get("kernel"), str):
            path = place.path(item.name)
            cell = by.get("cell_id")
            found.append(Made(path, cell if isinstance(cell, str) else None, by["kernel"], by["option"]))
    return found


def switch(sessions: SessionRegistry, args: Any, cell_id: str | None) -> None:
    """Make the fork the cell ``cell_id`` asks for the notebook's current session: the one it made before a restart, or a new one."""
    option, turn = option_of(args)
    place = sessions.place()
    claimed = sessions.forks_reused  # each at most once
    found = reuse(forks_made(place), cell_id=cell_id, option=option, kernel=nbkernel.KERNEL_ID, claimed=claimed)
    if found is not None:
        claimed.add(str(found.path))
        sessions.make_current(place, found.path)
        print(reused_words(found.path.stem, sessions.opened(place, found.path).trusted), flush=True)  # opening warns if foreign
        return
    if sessions.current is None and place.latest() is None:
        raise UsageError("There is no session to fork yet in this notebook: ask something first, then --fork or --rewind it.")
    parent = sessions.for_cell(args)
    if not parent.trusted:
        raise UsageError(f"{untrusted_warning(parent)} A fork of it would not be yours to run either; trust it first.")
    had = parent.state.turns
    try:
        with usage_errors():
            # --fork without N keeps every turn: the end of the last one (a note logged after it belongs to the next)
            child = parent.fork(turn=had if turn is None else turn, by={"cell_id": cell_id, "kernel": nbkernel.KERNEL_ID, "option": option})
    except ForkPointError as exc:
        raise UsageError(f"Cannot fork {parent.path.stem} there: {exc}.") from None
    kept = child.state.turns
    words = rewound_words(kept, had)
    if kept < had:
        child.append(ev.NOTE, kind=ev.NOTE_REWOUND, text=REWOUND_TEXT.format(**words), to_model=REWOUND_NOTE.format(**words))
    sessions.add(place, child)
    sessions.make_current(place, child.path)
    claimed.add(str(child.path))
    dropped = f"; {words['left']} left out (the kernel's variables, files and inserted cells are not rewound)" if kept < had else ""
    print(
        f'nbagent: continuing in {child.path.stem}, "{child.state.title}", a fork of {parent.path.stem} keeping '
        f"{turn_span(1, kept)}{dropped}.",
        flush=True,
    )


def show_rewound(
    sessions: SessionRegistry, session: Session, args: Any, request: str, cell_id: str | None, static_view: Callable[[str, Session], View]
) -> bool:
    """After a restart, a request cell whose turn the current fork left out (rewound): show that turn from the parent; True if shown.

    Only a recorded turn of an earlier kernel after the fork point, matched as the restart rule matches
    (the cell's id and request), and only if the fork holds no turn of that cell.  Nothing is sent, run
    or restored: the kernel is rebuilt from the fork's own history only.  ``static_view`` makes the view
    (of a title and a session) the turn is shown in.
    """
    found = session.lineage
    if found is None or not request or args.new or args.resume or args.session:
        return False
    own = sessions.index(session)
    claims = sessions.claims(session.where)
    if restart.match(own.update(session), request, cell_id, nbkernel.KERNEL_ID, claims, own.positions)[0] is not None:
        return False
    place = sessions.place()
    path = place.path(found.name)
    if not place.has(path):
        return False
    parent = sessions.opened(place, path)
    if parent.id != found.parent:
        return False
    index = sessions.index(parent)
    later = [t for t in index.update(parent) if t.seq > found.at]
    matched, claimed = restart.match(later, request, cell_id, nbkernel.KERNEL_ID, sessions.claims(parent.where))
    sessions.claim(parent.where, claimed)
    if matched is None:
        return False
    view = static_view(request, parent)
    view.begin(index.start(matched.seq))
    for event in parent.events(since=matched.seq - 1):
        if event["seq"] > matched.end:
            break
        view(event)
    view.recorded(f"rewound: this turn is in {parent.path.stem}, not in the current session {session.path.stem}; not run again")
    view.finish()
    print(f"nbagent: this turn was rewound: it is in {parent.path.stem}, not in the current session {session.path.stem}.", flush=True)
    return True
