"""The fork rules (nbagent/state/lineage.py): where a fork may start, the nearest valid points, family trees (tables)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from nbagent.record import events as ev
from nbagent.state import lineage
from nbagent.state.lineage import ForkPointError, Lineage, Member, Point


def events(*specs: tuple[str, dict[str, Any]]) -> list[ev.Event]:
    """Events with seqs 1.. (a session_start first)."""
    found = [ev.make(1, ev.SESSION_START, {"session_id": "p" * 32, "meta": {}})]
    for seq, (kind, payload) in enumerate(specs, start=2):
        found.append(ev.make(seq, kind, payload))
    return found


REQUEST = (ev.USER_MSG, {"content": "hi"})
REPLY = (ev.ASSISTANT_MSG, {"stop_reason": "end_turn", "content": [{"type": "text", "text": "hello"}]})
CALL = (ev.ASSISTANT_MSG, {"stop_reason": "tool_use", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]})
STARTED = (ev.TOOL_STARTED, {"tool_use_id": "t1", "name": "ls", "effect": "read"})
RESULT = (ev.TOOL_RESULT, {"tool_use_id": "t1", "content": "a.txt"})
NOTE_TO_MODEL = (ev.NOTE, {"kind": "kernel_restarted", "text": "restart", "to_model": "[nbagent note: restarted]"})
NOTE_FOR_PEOPLE = (ev.NOTE, {"kind": "stop", "text": "for people"})
INTERRUPT = (ev.INTERRUPTED, {"during": "model", "open_calls": []})
COMPACTING = (ev.COMPACTION_STARTED, {"keep": 2, "reason": "request"})
COMPACTED = (ev.COMPACTION, {"summary": "s", "messages": 2, "final": True})


# (events after the session_start, the seqs at rest with their turns)
POINTS = [
    pytest.param([], [(1, 0)], id="a new session: before the first turn"),
    pytest.param([REQUEST], [(1, 0)], id="a request awaiting its reply"),
    pytest.param([REQUEST, REPLY], [(1, 0), (3, 1)], id="a finished turn"),
    pytest.param([REQUEST, CALL], [(1, 0)], id="a call open"),
    pytest.param([REQUEST, CALL, STARTED], [(1, 0)], id="a call started"),
    pytest.param([REQUEST, CALL, STARTED, RESULT], [(1, 0)], id="a result awaiting the reply"),
    pytest.param([REQUEST, CALL, STARTED, RESULT, REPLY], [(1, 0), (6, 1)], id="a turn with a call, finished"),
    pytest.param([REQUEST, REPLY, NOTE_FOR_PEOPLE], [(1, 0), (3, 1), (4, 1)], id="a note for people keeps it at rest"),
    pytest.param([REQUEST, REPLY, NOTE_TO_MODEL, REQUEST], [(1, 0), (3, 1)], id="a note waiting for the next request"),
    pytest.param([REQUEST, INTERRUPT], [(1, 0)], id="an interrupted request"),
    pytest.param([REQUEST, REPLY, COMPACTING], [(1, 0), (3, 1)], id="a compaction under way"),
    # A compaction that summarised every message leaves the summary as the next request's start: the next rest is after a reply.
    pytest.param([REQUEST, REPLY, COMPACTING, COMPACTED], [(1, 0), (3, 1)], id="a compaction of everything"),
]


@pytest.mark.parametrize(("specs", "expected"), POINTS)
def test_a_fork_starts_only_where_the_session_is_at_rest(specs: list[tuple[str, dict[str, Any]]], expected: list[tuple[int, int]]) -> None:
    assert lineage.survey(events(*specs))[0] == [Point(seq, turns) for seq, turns in expected]


VALID = [Point(1, 0), Point(4, 1), Point(9, 2), Point(10, 2)]
# (at, turn, the chosen seq or the words of the refusal)
CHOICES = [
    pytest.param(None, None, 10, id="default: the last event, at rest"),
    pytest.param(4, None, 4, id="--at a point at rest"),
    pytest.param(None, 1, 4, id="--turn 1: the end of turn 1"),
    pytest.param(None, 2, 10, id="--turn 2: the last point of turn 2"),
    pytest.param(None, 0, 1, id="--turn 0: before any turn"),
    pytest.param(6, None, "event 6 is inside a turn", id="--at inside a turn"),
    pytest.param(6, None, "event 4 (after turn 1: --at 4 or --turn 1) and event 9", id="the nearest points, named"),
    pytest.param(11, None, "not in the session (it has events 1-10)", id="--at past the end"),
    pytest.param(0, None, "not in the session", id="--at 0"),
    pytest.param(None, 3, "there is no turn 3", id="--turn past the last"),
    pytest.param(None, -1, "0 or more", id="--turn negative"),
    pytest.param(4, 1, "not both", id="both"),
]


@pytest.mark.parametrize(("at", "turn", "expected"), CHOICES)
def test_the_fork_point_chosen_or_refused_with_the_nearest(at: int | None, turn: int | None, expected: int | str) -> None:
    if isinstance(expected, int):
        assert lineage.choose(VALID, 10, at=at, turn=turn).seq == expected
    else:
        with pytest.raises(ForkPointError, match=expected.replace("(", r"\(").replace(")", r"\)")):
            lineage.choose(VALID, 10, at=at, turn=turn)


def test_the_default_is_refused_when_the_last_event_is_inside_a_turn() -> None:
    with pytest.raises(ForkPointError, match="not at rest at its last event \\(12\\).*event 10"):
        lineage.choose(VALID, 12)


def test_an_unfinished_turn_names_the_turns_that_can_be_kept() -> None:
    with pytest.raises(ForkPointError, match="turn 1 did not end at rest.*0, 2"):
        lineage.choose([Point(1, 0), Point(9, 2)], 9, turn=1)


LINEAGES = [
    pytest.param({"parent": "p", "at": 3, "prefix_sha256": "x", "offset": 10, "name": "n"}, Lineage("p", 3, "x", 10, "n"), id="whole"),
    pytest.param({"parent": "p", "at": 3, "prefix_sha256": "x", "offset": 10}, Lineage("p", 3, "x", 10, ""), id="no name"),
    pytest.param(
        {"parent": "p", "at": 3, "prefix_sha256": "x", "offset": 10, "name": "n", "turns": 1, "title": "hi (fork after turn 1)"},
        Lineage("p", 3, "x", 10, "n", 1, "hi (fork after turn 1)"),
        id="its turns and title",
    ),
    pytest.param(
        {"parent": "p", "at": 3, "prefix_sha256": "x", "offset": 10, "turns": True, "title": 7},
        Lineage("p", 3, "x", 10, ""),
        id="turns and title of the wrong shape: not recorded",
    ),
    pytest.param(
        {"parent": "p", "at": 3, "prefix_sha256": "x", "offset": 10, "turns": -1}, Lineage("p", 3, "x", 10, ""), id="negative turns"
    ),
    pytest.param({"parent": "p", "at": "3", "prefix_sha256": "x", "offset": 10}, None, id="a seq that is not a number"),
    pytest.param({"parent": "p"}, None, id="incomplete"),
    pytest.param("p", None, id="not a dict"),
    pytest.param(None, None, id="absent"),
]


@pytest.mark.parametrize(("meta_fork", "expected"), LINEAGES)
def test_a_lineage_is_read_only_from_a_whole_record(meta_fork: Any, expected: Lineage | None) -> None:
    assert lineage.of_meta({"fork": meta_fork} if meta_fork is not None else {}) == expected
    if expected is not None:
        assert lineage.of_dict(expected.to_dict()) == expected


@dataclass
class Row:
    session_id: str
    lineage: Lineage | None


def fork_of(parent: str) -> Lineage:
    return Lineage(parent, 3, "x", 10, parent)


TREES = [
    pytest.param([("a", ""), ("b", "a"), ("c", "b"), ("d", "a")], [(0, "a"), (1, "b"), (2, "c"), (1, "d")], id="a family"),
    pytest.param([("c", "b"), ("a", ""), ("b", "a")], [(0, "a"), (1, "b"), (2, "c")], id="listed out of order"),
    pytest.param([("b", "gone"), ("c", "b")], [(0, "b"), (1, "c")], id="a parent not listed: its fork is a root"),
    pytest.param([("a", "b"), ("b", "a")], [(0, "a"), (1, "b")], id="a loop of parents is still listed, once"),
]


@pytest.mark.parametrize(("rows", "expected"), TREES)
def test_family_trees(rows: list[tuple[str, str]], expected: list[tuple[int, str]]) -> None:
    ordered = lineage.tree([Member(sid, parent, sid) for sid, parent in rows])
    assert [(depth, m.session_id) for depth, m in ordered] == expected


def test_a_family_is_the_root_and_every_fork_below_it() -> None:
    rows = [Row("a", None), Row("b", fork_of("a")), Row("c", fork_of("b")), Row("d", fork_of("a")), Row("x", None), Row("y", fork_of("x"))]
    assert [r.session_id for r in lineage.family_of(rows, "c")] == ["a", "b", "c", "d"]
    assert [r.session_id for r in lineage.family_of(rows, "y")] == ["x", "y"]
    assert [r.session_id for r in lineage.family_of(rows, "zzz")] == []


# Words as people count turns: "turn 1", "turns 1–3", "after turn 2"; never "turns 1-1" or an event number where turns are known.
@pytest.mark.parametrize(
    ("first", "last", "words"), [(1, 1, "turn 1"), (1, 3, "turns 1–3"), (2, 3, "turns 2–3"), (3, 3, "turn 3"), (1, 0, "no turns")]
)
def test_turn_span(first: int, last: int, words: str) -> None:
    assert lineage.turn_span(first, last) == words


@pytest.mark.parametrize(
    ("found", "words"),
    [
        (Lineage("p" * 32, 8, "x", 1, "kid", 2), "forked from kid after turn 2"),
        (Lineage("p" * 32, 1, "x", 1, "kid", 0), "forked from kid before the first turn"),
        (Lineage("p" * 32, 8, "x", 1, ""), "forked from pppppppp at event 8"),  # an older fork: its turns are not recorded
    ],
)
def test_where_a_fork_came_from_in_words(found: Lineage, words: str) -> None:
    assert found.words == words


@pytest.mark.parametrize(
    ("parent", "turns", "title"),
    [
        ("Plot sales", 2, "Plot sales (fork after turn 2)"),
        ("Plot sales", 0, "Plot sales (fork before the first turn)"),
        ("", 1, "untitled (fork after turn 1)"),
        ("Plot sales (fork after turn 2)", 3, "Plot sales (fork after turn 2) (fork after turn 3)"),  # a fork of a fork
    ],
)
def test_a_fork_has_a_title_of_its_own(parent: str, turns: int, title: str) -> None:
    assert lineage.fork_title(parent, turns) == title


@pytest.mark.parametrize(
    ("title", "limit", "shown"),
    [
        ("short", 40, "short"),
        ("a title that is much too long to be shown whole", 20, "a title that is muc…"),
        ("a long request about sales figures (fork after turn 12)", 40, "a long request abo… (fork after turn 12)"),
        ("x (fork after turn 2)", 40, "x (fork after turn 2)"),
        ("abc (fork after turn 2)", 10, "abc (fork…"),  # no room for the suffix: cut like any title
        ("a  spaced\ttitle", 40, "a spaced title"),
    ],
)
def test_a_short_title_keeps_where_a_fork_came_from(title: str, limit: int, shown: str) -> None:
    assert lineage.short_title(title, limit) == shown
    assert len(lineage.short_title(title, limit)) <= limit


def test_the_fold_gives_a_fork_its_own_title() -> None:
    from nbagent.state import fold

    forked = {"fork": Lineage("p" * 32, 3, "x", 10, "n", 1, "hi (fork after turn 1)").to_dict()}
    found = events(REQUEST, REPLY)
    found.append(ev.make(len(found) + 1, ev.SESSION_START, {"session_id": "f" * 32, "meta": forked}))
    found.append(ev.make(len(found) + 1, ev.USER_MSG, {"content": "and then?"}))
    assert fold.fold(found).title == "hi (fork after turn 1)"
    assert fold.fold(found[:3]).title == "hi"  # the parent's own: its first request
    assert [p.title for p in lineage.survey(found[:3])[0]] == ["", "hi"]
