"""The offline demo model and a real one never write into one session: a change between them goes to another session.

Claude would otherwise read the demo's replies as its own (and its session keep the demo's title), and the demo
would answer under Claude's. The rules are pure (table: tests/notebook/test_model_kind.py); :func:`session_for` is
the magic's adapter: a request whose session was written by the other kind goes to the most recently active session of
this notebook the wanted kind wrote (so a Run All after a restart finds each cell's recorded turns), else a new one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from IPython.core.error import UsageError

from ..agent.session import Session
from ..history import session_name
from ..history.summary import notebook_summaries
from ..model.claude import DemoModel
from .usage import usage_errors

Kind = Literal["", "demo", "real"]  # "": no model has answered in the session yet
DEMO_NAME = DemoModel.name
WHO: dict[str, str] = {"demo": "the offline demo model", "real": "Claude"}


def kind_of(models: Iterable[str]) -> Kind:
    """Who wrote a session's replies, from the models it recorded (its priced models, its last model call)."""
    names = {m for m in models if m}
    if not names:
        return ""
    return "demo" if names == {DEMO_NAME} else "real"


def wanted(demo: bool) -> Kind:
    """The kind the settings ask for (``Agent.demo``)."""
    return "demo" if demo else "real"


def rule(recorded: Kind, asked: Kind, *, named: bool) -> Literal["continue", "switch", "refuse"]:
    """What a new request does with a session ``recorded`` wrote: continue it, go to another, or (a session the cell named) refuse."""
    if not recorded or recorded == asked:
        return "continue"
    return "refuse" if named else "switch"


@dataclass(frozen=True)
class Candidate:
    """One of the notebook's sessions: its path, who wrote its replies, whether its lines are this user's."""

    path: Path
    kind: Kind
    yours: bool


def pick(candidates: Sequence[Candidate], asked: Kind, *, leaving: Path) -> Path | None:
    """The most recently active session (``candidates``: oldest activity first) ``asked`` wrote and this user signed; None: a new one."""
    for found in reversed(candidates):
        if found.path != leaving and found.kind == asked and found.yours:
            return found.path
    return None


def switch_line(leaving: str, going: str, asked: Kind, *, new: bool) -> str:
    """The one line a cell prints when its request goes to another session for this reason."""
    other = "real" if asked == "demo" else "demo"
    where = f"a new session, {going}" if new else f"{going}, the latest session {WHO[asked]} wrote"
    return (
        f"nbagent: {leaving} was written by {WHO[other]}, so this request to {WHO[asked]} goes to {where}: the two never "
        f"share a session (`%config Agent.demo = {other == 'demo'}` goes back to {leaving})."
    )


def refusal(name: str, recorded: Kind, asked: Kind) -> str:
    """Why a session the cell named is not continued by the other kind of model, and what to do instead."""
    return (
        f"{name} was written by {WHO[recorded]}, so {WHO[asked]} does not continue it (it would read those replies as its "
        f"own). `%agent --new ...` starts a new session, or `%config Agent.demo = {recorded == 'demo'}` continues this one."
    )


def of_session(session: Session) -> Kind:
    """Who wrote an open session's replies."""
    state = session.state
    return kind_of([*state.spend, state.model])


def session_for(sessions: Any, session: Session, demo: bool, *, named: bool) -> tuple[Session, str] | None:
    """The session a new request goes to when ``session`` was written by the other kind, and the line saying so; None: ``session``.

    ``sessions``: the kernel's SessionRegistry (the session found becomes current); ``named``: the cell chose the
    session (``--resume``, ``--session``, ``--fork``, ``--rewind``), which is refused rather than left.
    """
    recorded, asked = of_session(session), wanted(demo)
    verdict = rule(recorded, asked, named=named)
    if verdict == "continue":
        return None
    if verdict == "refuse":
        raise UsageError(refusal(session.path.stem, recorded, asked))
    place = sessions.place()
    with usage_errors():
        listed = notebook_summaries(place.source, place.folder)
    candidates = [
        Candidate(Path(s.path) if not place.source.url else place.path(s.name), kind_of(s.spend or ()), s.trust == "yours") for s in listed
    ]
    path = pick(candidates, asked, leaving=session.path)
    new = path is None
    path = path or place.new_path()
    chosen = sessions.opened(place, path)
    sessions.make_current(place, path)
    return chosen, switch_line(session.path.stem, session_name(path), asked, new=new)
