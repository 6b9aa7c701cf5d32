"""Where a session was forked from, and where a fork may start: pure rules (tables: tests/state/test_lineage.py).

A fork's log begins with its parent's lines up to the fork point, byte for byte, then its
own ``session_start`` (its id, with ``meta.fork`` naming the parent); see docs/log-format.md, Forks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from ..record import events as ev
from . import fold

FORK_KEY = "fork"  # the key of a session_start's meta that makes it a fork's


@dataclass(frozen=True)
class Lineage:
    """A fork's parent: its session id and name, the seq forked at, the SHA-256 and length of the parent's bytes up to there."""

    parent: str
    at: int
    prefix_sha256: str
    offset: int  # where the fork's own session_start line begins (the length of the inherited bytes)
    name: str = ""  # the parent's session name when the fork was made
    turns: int | None = None  # the parent's turns it keeps (None: not recorded, a fork an older nbagent made)
    title: str = ""  # the fork's own title (fork_title), which the fold gives its state ('': the parent's first request)

    def to_dict(self) -> dict[str, Any]:
        """As ``meta.fork`` holds it."""
        found = {"parent": self.parent, "at": self.at, "prefix_sha256": self.prefix_sha256, "offset": self.offset, "name": self.name}
        if self.turns is not None:
            found["turns"] = self.turns
        if self.title:
            found["title"] = self.title
        return found

    @property
    def point_words(self) -> str:
        """Where it was forked, as people count: ``after turn 2`` (``at event 12`` where the turns are not recorded)."""
        return after_turn(self.turns) if self.turns is not None else f"at event {self.at}"

    @property
    def words(self) -> str:
        """How views say it: ``forked from 20261204-101500-a1b2 after turn 2``."""
        return f"forked from {self.name or self.parent[:8]} {self.point_words}"


# Words, as people count turns (tables: tests/state/test_lineage.py) ------------------------------------------------
def turn_span(first: int, last: int) -> str:
    """Turns ``first`` to ``last``: ``turn 3``, ``turns 1–3``, ``no turns`` (an empty span)."""
    if last < first:
        return "no turns"
    return f"turn {first}" if first == last else f"turns {first}–{last}"


def after_turn(turns: int) -> str:
    """The point after ``turns`` turns: ``after turn 2``, or ``before the first turn``."""
    return f"after turn {turns}" if turns > 0 else "before the first turn"


_FORK_SUFFIX = re.compile(r" \(fork (?:after turn \d+|before the first turn)\)$")


def fork_title(parent_title: str, turns: int) -> str:
    """A fork's own title: its parent's, then where it was forked: ``Plot sales (fork after turn 2)``."""
    return f"{parent_title or 'untitled'} (fork {after_turn(turns)})"


def short_title(title: str, limit: int) -> str:
    """A title in at most ``limit`` characters, keeping a fork's ``(fork after turn N)`` whole (its parent's title is cut)."""
    title = " ".join(title.split())
    found = _FORK_SUFFIX.search(title)
    if len(title) <= limit or found is None or len(found.group()) + 2 > limit:
        return title if len(title) <= limit else title[: limit - 1] + "…"
    base = title[: found.start()]
    room = limit - len(found.group())
    return (base if len(base) <= room else base[: room - 1] + "…") + found.group()


def of_meta(meta: Mapping[str, Any] | None) -> Lineage | None:
    """The lineage a ``session_start``'s meta (or a state's, or a snapshot summary's ``fork``) records; None if not a fork's."""
    found = (meta or {}).get(FORK_KEY)
    return of_dict(found)


def of_dict(found: Any) -> Lineage | None:
    """A :class:`Lineage` from its dict form, or None if it is not one."""
    if not isinstance(found, dict):
        return None
    parent, at, digest, offset = found.get("parent"), found.get("at"), found.get("prefix_sha256"), found.get("offset")
    if not (isinstance(parent, str) and isinstance(at, int) and isinstance(digest, str) and isinstance(offset, int)):
        return None
    name, turns, title = found.get("name"), found.get("turns"), found.get("title")
    return Lineage(
        parent,
        at,
        digest,
        offset,
        name if isinstance(name, str) else "",
        turns if isinstance(turns, int) and not isinstance(turns, bool) and turns >= 0 else None,
        title if isinstance(title, str) else "",
    )


# Fork points -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Point:
    """A seq a fork may keep events up to: the session is at rest there, after ``turns`` turns."""

    seq: int
    turns: int
    title: str = field(default="", compare=False)  # the session's title there (what a fork's own title starts with)


def at_rest(state: fold.State) -> bool:
    """Whether a fork may start after the events folded into ``state``: no call open, no turn or compaction unfinished, no note waiting."""
    return (
        state.frontier in ("done", "empty")
        and not state.open_calls
        and state.compacting is None
        and not state.pending_notes
        and not state.unanswered_interrupt
    )


def survey(events: Iterable[ev.Event]) -> tuple[list[Point], int]:
    """The points at rest of ``events`` (a whole log, in order), and how many turns it holds in all."""
    state = fold.State()
    found = []
    for event in events:
        fold.apply(state, event)
        if at_rest(state):
            found.append(Point(event["seq"], state.turns, state.title))
    return found, state.turns


class ForkPointError(ValueError):
    """A fork point that is not at rest, or a turn that does not exist; the message names the nearest valid points."""


def _nearest(valid: Sequence[Point], seq: int) -> str:
    before = [p for p in valid if p.seq < seq]
    after = [p for p in valid if p.seq > seq]
    named = [p for p in (before[-1] if before else None, after[0] if after else None) if p is not None]
    if not named:
        return "it has no point a fork can start from"
    return "the nearest points a fork can start from are " + " and ".join(
        f"event {p.seq} ({after_turn(p.turns)}: --at {p.seq} or --turn {p.turns})" for p in named
    )


def choose(valid: Sequence[Point], last_seq: int, *, at: int | None = None, turn: int | None = None, turns: int = 0) -> Point:
    """The fork point ``at`` (a seq) or ``turn`` (keep turns 1 to N) names, or the latest one; ForkPointError says why not.

    ``turns``: how many turns the session holds (a turn past the last one at rest may exist, unfinished).
    """
    if at is not None and turn is not None:
        raise ForkPointError("give either a seq (--at) or a turn (--turn), not both")
    if turn is not None:
        if turn < 0:
            raise ForkPointError(f"turn {turn}: give a turn number of 0 or more (0 keeps no turn)")
        kept = [p for p in valid if p.turns == turn]
        if kept:
            return kept[-1]
        turns = max(turns, *(p.turns for p in valid), 0)
        if turn <= turns:
            return _unfinished_turn(valid, turn)
        raise ForkPointError(f"the session has {turns} turn(s); there is no turn {turn} to keep")
    if at is None:
        if valid and valid[-1].seq == last_seq:
            return valid[-1]
        raise ForkPointError(f"the session is not at rest at its last event ({last_seq}); {_nearest(valid, last_seq)}")
    if not 1 <= at <= last_seq:
        raise ForkPointError(f"event {at} is not in the session (it has events 1-{last_seq})")
    for point in valid:
        if point.seq == at:
            return point
    return _refuse(valid, at)


def _unfinished_turn(valid: Sequence[Point], turn: int) -> Point:
    ends = sorted({p.turns for p in valid})
    raise ForkPointError(
        f"turn {turn} did not end at rest (a tool call was open, or it was interrupted); turns a fork can keep: "
        + ", ".join(str(t) for t in ends)
    )


def _refuse(valid: Sequence[Point], at: int) -> Point:
    raise ForkPointError(
        f"event {at} is inside a turn (a tool call open, a reply awaited, or a note waiting for the next request); {_nearest(valid, at)}"
    )


# Families ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Member:
    """A session in a family tree: its id, its parent's id ('' for a root) and whatever the caller lists it as."""

    session_id: str
    parent: str
    item: Any


def tree(members: Sequence[Member]) -> list[tuple[int, Member]]:
    """Members in tree order with their depth: each root (a session whose parent is not listed), then its forks below it, in listed order."""
    listed = {m.session_id for m in members}
    children: dict[str, list[Member]] = {}
    roots = []
    for member in members:
        if member.parent and member.parent in listed and member.parent != member.session_id:
            children.setdefault(member.parent, []).append(member)
        else:
            roots.append(member)
    ordered: list[tuple[int, Member]] = []
    seen: set[str] = set()

    def walk(member: Member, depth: int) -> None:
        if member.session_id in seen:
            return
        seen.add(member.session_id)
        ordered.append((depth, member))
        for child in children.get(member.session_id, []):
            walk(child, depth + 1)

    for root in roots:
        walk(root, 0)
    for member in members:  # a loop of parents (hand-made logs) has no root: list its members anyway
        walk(member, 0)
    return ordered


class Listing(Protocol):
    """A listing row that may be a fork (a store's ``Listed``)."""

    session_id: str
    lineage: Lineage | None


L = TypeVar("L", bound=Listing)


def family_of(items: Sequence[L], session_id: str) -> list[L]:
    """The rows of ``session_id``'s family, in listed order: its root ancestor (the oldest listed) and every fork below it."""
    by_id = {item.session_id: item for item in items}
    root, seen = session_id, {session_id}
    while (item := by_id.get(root)) is not None and item.lineage is not None and item.lineage.parent in by_id:
        if item.lineage.parent in seen:
            break
        root = item.lineage.parent
        seen.add(root)
    kin, grew = {root}, True
    while grew:  # every row whose parent is in the family joins it
        grew = False
        for item in items:
            if item.session_id not in kin and item.lineage is not None and item.lineage.parent in kin:
                kin.add(item.session_id)
                grew = True
    return [item for item in items if item.session_id in kin]
