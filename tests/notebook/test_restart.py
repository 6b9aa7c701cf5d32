"""The restart rule, every case: what an ``%agent`` cell does with the turns its session recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent.notebook.kernel import TurnIndex
from nbagent.notebook.restart import Cell, Claims, Plan, Turn, match, plan, request_positions
from nbagent.record import events as ev
from nbagent.state.asides import Asides

ME, OLD = "this-kernel", "old-kernel"
A = Turn(1, 4, "load data", "cell-a", OLD)
B = Turn(5, 9, "plot it", "cell-b", OLD)
MINE = Turn(10, 12, "mine", "cell-m", ME)
SAME_A, SAME_B = Turn(1, 4, "same", "cell-a", OLD), Turn(5, 9, "same", "cell-b", OLD)
GO1, OTHER, GO2 = Turn(1, 4, "go", None, OLD), Turn(5, 9, "other", None, OLD), Turn(10, 14, "go", None, OLD)
SCRIPTED = Turn(1, 3, "from a script")  # recorded by nbagent.run, not by a kernel
AB = [A, B]
# One cell run again with its request unchanged in the same kernel (each run asked anew): a turn each time.
AGAIN1, AGAIN2, MINE_AGAIN = (
    Turn(10, 14, "load data", "cell-a", OLD),
    Turn(15, 19, "load data", "cell-a", OLD),
    Turn(10, 14, "load data", "cell-a", ME),
)
# The last turn was interrupted while it asked approval for a call (which did not run), in this kernel or an earlier one.
ASKING, ASKING_OLD = Turn(5, 9, "clean up", "cell-c", ME, asking=True), Turn(5, 9, "clean up", "cell-c", OLD, asking=True)


def seen(*seqs: int, cursor: int) -> Claims:
    """The turns this kernel has claimed, and the Run All cursor."""
    return Claims(frozenset(seqs), cursor)


NONE = Claims()
# the recorded turns, the cell, trusted, frontier, claims so far  ->  the plan
CASES = [
    # A re-run cell after a restart shows the turn it recorded again, no model call: matched by its cellId ...
    (AB, Cell("plot it", "cell-b"), True, "done", NONE, Plan(seen(5, cursor=2), show=(B,))),
    # ... which picks between cells of the same text, and wins over the Run All order;
    ([SAME_A, SAME_B], Cell("same", "cell-b"), True, "done", NONE, Plan(seen(5, cursor=2), show=(SAME_B,))),
    (AB, Cell("load data", "cell-a"), True, "done", seen(5, cursor=2), Plan(seen(1, 5, cursor=1), show=(A,))),
    # whitespace does not count; a cell without a cellId, or a turn recorded without one, matches by text;
    (AB, Cell(" load\n  data ", "cell-a"), True, "done", NONE, Plan(seen(1, cursor=1), show=(A,))),
    (AB, Cell("load data"), True, "done", NONE, Plan(seen(1, cursor=1), show=(A,))),
    ([GO1], Cell("go", "cell-x"), True, "done", NONE, Plan(seen(1, cursor=1), show=(GO1,))),
    # a turn of a script (no kernel id) matches too.
    ([SCRIPTED], Cell("from a script"), True, "done", NONE, Plan(seen(1, cursor=1), show=(SCRIPTED,))),
    # Not the cell that recorded it -- a copy (another cellId), an edited request, a turn already claimed,
    # a turn of this kernel's -- asks anew; the first new turn since the restart carries the note.
    (AB, Cell("load data", "cell-copy"), True, "done", NONE, Plan(ask=True, note=True)),
    (AB, Cell("load the data", "cell-a"), True, "done", NONE, Plan(ask=True, note=True)),
    (AB, Cell("load data", "cell-a"), True, "done", seen(1, cursor=1), Plan(seen(1, cursor=1), ask=True, note=True)),
    ([MINE], Cell("mine", "cell-m"), True, "done", NONE, Plan(ask=True)),
    # Run All without cellIds (classic Notebook): the duplicate after the last match, else the first unclaimed.
    ([GO1, OTHER, GO2], Cell("go"), True, "done", seen(1, 5, cursor=2), Plan(seen(1, 5, 10, cursor=3), show=(GO2,))),
    ([GO1, OTHER, GO2], Cell("go"), True, "done", seen(5, cursor=2), Plan(seen(5, 10, cursor=3), show=(GO2,))),
    ([GO1, OTHER, GO2], Cell("go"), True, "done", seen(10, cursor=3), Plan(seen(1, 10, cursor=1), show=(GO1,))),
    # The last turn, unfinished (a crash, an interrupt): the user's own continues; a foreign one is shown, not continued.
    (AB, Cell("plot it", "cell-b"), True, "tools", NONE, Plan(seen(5, cursor=2), show=(B,), unfinished="continue")),
    (AB, Cell("load data", "cell-a"), True, "model", NONE, Plan(seen(1, cursor=1), show=(A,))),
    (AB, Cell("plot it", "cell-b"), False, "model", NONE, Plan(seen(5, cursor=2), show=(B,), unfinished="explain")),
    # A cell that recorded several turns (run again unchanged in one kernel's life) re-renders them all, in order,
    # other cells' turns in between left out; the last one continues if it is the session's last, unfinished turn.
    ([A, B, AGAIN1], Cell("load data", "cell-a"), True, "done", NONE, Plan(seen(1, 10, cursor=3), show=(A, AGAIN1))),
    (
        [A, AGAIN1, AGAIN2],
        Cell("load data", "cell-a"),
        True,
        "tools",
        NONE,
        Plan(seen(1, 10, 15, cursor=3), show=(A, AGAIN1, AGAIN2), unfinished="continue"),
    ),
    (
        [A, B, AGAIN1],
        Cell("load data", "cell-a", restore=True),
        True,
        "done",
        NONE,
        Plan(seen(1, 10, cursor=3), show=(A, AGAIN1), restore=(A, AGAIN1)),
    ),
    # ... those not claimed yet, of an earlier kernel, and of that cell and request only; without cell ids, one turn a run.
    ([A, B, AGAIN1], Cell("load data", "cell-a"), True, "done", seen(1, cursor=1), Plan(seen(1, 10, cursor=3), show=(AGAIN1,))),
    ([A, MINE_AGAIN], Cell("load data", "cell-a"), True, "done", NONE, Plan(seen(1, cursor=1), show=(A,))),
    ([A, B, AGAIN1], Cell("load data", "cell-copy"), True, "done", NONE, Plan(ask=True, note=True)),
    ([A, B, AGAIN1], Cell("load data"), True, "done", NONE, Plan(seen(1, cursor=1), show=(A,))),
    # A turn interrupted while it asked approval: its cell re-run unchanged (up to whitespace) shows it and asks the same
    # call again, in the same kernel too; an edited request, another cell, or a turn no longer waiting asks anew (and the
    # loop settles the open call as not run).
    ([A, ASKING], Cell("clean up", "cell-c"), True, "tools", NONE, Plan(seen(5, cursor=0), show=(ASKING,), unfinished="continue")),
    ([A, ASKING], Cell(" clean\n up", "cell-c"), True, "tools", NONE, Plan(seen(5, cursor=0), show=(ASKING,), unfinished="continue")),
    ([A, ASKING], Cell("clean up", restore=True), True, "tools", NONE, Plan(seen(5, cursor=0), show=(ASKING,), unfinished="continue")),
    ([A, ASKING], Cell("clean up everything", "cell-c"), True, "tools", NONE, Plan(ask=True)),
    ([A, ASKING], Cell("clean up", "cell-x"), True, "tools", NONE, Plan(ask=True)),
    ([A, ASKING], Cell("clean up", "cell-c"), True, "model", NONE, Plan(ask=True)),
    ([A, ASKING], Cell("clean up", "cell-c", new=True), True, "tools", NONE, Plan(ask=True)),
    ([ASKING, A], Cell("clean up", "cell-c"), True, "tools", NONE, Plan(ask=True)),
    ([A, Turn(5, 9, "clean up", "cell-c", ME)], Cell("clean up", "cell-c"), True, "tools", NONE, Plan(ask=True)),
    # ... after a restart it is matched as any unfinished last turn; claimed already (asked again, interrupted again), it still is.
    ([A, ASKING_OLD], Cell("clean up", "cell-c"), True, "tools", NONE, Plan(seen(5, cursor=2), show=(ASKING_OLD,), unfinished="continue")),
    (
        [A, ASKING_OLD],
        Cell("clean up", "cell-c", restore=True),
        True,
        "tools",
        seen(5, cursor=2),
        Plan(seen(5, cursor=2), show=(ASKING_OLD,), restore=(ASKING_OLD,), unfinished="continue"),
    ),
    (
        [A, ASKING_OLD],
        Cell("clean up", "cell-c"),
        False,
        "tools",
        seen(5, cursor=2),
        Plan(seen(5, cursor=2), show=(ASKING_OLD,), unfinished="explain"),
    ),
    # A session the user did not write: a new request starts a session of their own; by --resume or --session it is refused.
    (AB, Cell("tidy up", "cell-c"), False, "done", NONE, Plan(new_session=True, ask=True)),
    (AB, Cell("more", resume=True), False, "done", NONE, Plan(refuse=True)),
    (AB, Cell("more", session=True), False, "done", seen(1, cursor=1), Plan(seen(1, cursor=1), refuse=True)),
    # Without a request it is shown, or restored (the adapter skips calls the user did not sign), never refused.
    (AB, Cell("", resume=True), False, "tools", NONE, Plan(seen(1, 5, cursor=2), show_all=True, unfinished="explain")),
    (AB, Cell("", restore=True), False, "done", NONE, Plan(restore=(A, B), restore_only=True)),
    (AB, Cell("", session=True, restore=True), False, "done", NONE, Plan(restore=(A, B), restore_only=True)),
    # --resume re-renders everything and claims every turn, then continues an unfinished turn or asks the request
    # (which settles any open calls); --restore with it restores the turns of other kernels.
    (AB, Cell("", resume=True), True, "done", NONE, Plan(seen(1, 5, cursor=2), show_all=True)),
    (AB, Cell("", resume=True), True, "model", NONE, Plan(seen(1, 5, cursor=2), show_all=True, unfinished="continue")),
    (AB, Cell("more", resume=True), True, "tools", NONE, Plan(seen(1, 5, cursor=2), show_all=True, ask=True, note=True)),
    ([A, MINE], Cell("more", resume=True), True, "done", NONE, Plan(seen(1, 10, cursor=2), show_all=True, ask=True)),
    ([A, MINE], Cell("", resume=True, restore=True), True, "done", NONE, Plan(seen(1, 10, cursor=2), show_all=True, restore=(A,))),
    ([], Cell("", resume=True), True, "empty", NONE, Plan(show_all=True)),
    # --new: a fresh session; it never matches.
    ([], Cell("load data", "cell-a", new=True), True, "empty", NONE, Plan(ask=True)),
    (AB, Cell("load data", "cell-a", new=True), True, "done", NONE, Plan(ask=True, note=True)),
    # --restore re-runs the python code of other kernels' turns: alone, before a new request (the note says so),
    # or of the matched turn only.
    ([A, MINE], Cell("", restore=True), True, "done", NONE, Plan(restore=(A,), restore_only=True)),
    ([MINE], Cell("", restore=True), True, "done", NONE, Plan(restore_only=True)),
    ([A], Cell("next", restore=True), True, "done", NONE, Plan(restore=(A,), ask=True, note=True, mention_restore=True)),
    (AB, Cell("plot it", "cell-b", restore=True), True, "done", NONE, Plan(seen(5, cursor=2), show=(B,), restore=(B,))),
    # The restart note only when there are turns from another kernel and none from this one.
    ([], Cell("hi"), True, "empty", NONE, Plan(ask=True)),
    ([A, MINE], Cell("hi"), True, "done", NONE, Plan(ask=True)),
    ([SCRIPTED], Cell("hi"), True, "done", NONE, Plan(ask=True)),
]


@pytest.mark.parametrize("turns, cell, trusted, frontier, claims, expected", CASES)
def test_plan(turns: list[Turn], cell: Cell, trusted: bool, frontier: str, claims: Claims, expected: Plan) -> None:
    assert plan(turns, cell, trusted=trusted, frontier=frontier, kernel=ME, claims=claims) == expected


def run_all(turns: list[Turn], cells: list[Cell]) -> list[int | None]:
    """The seq each cell was matched to, running them in order in one kernel."""
    claims, seen = Claims(), []
    for cell in cells:
        turn, claims = match(turns, cell.request, cell.cell_id, ME, claims)
        seen.append(turn.seq if turn else None)
    return seen


# recorded turns, the cells run in order  ->  the turn each re-renders (None: asks anew)
SEQUENCES = [
    # Run All twice over cells without ids: each turn once, in order; the second pass asks anew.
    ([GO1, OTHER, GO2], [Cell("go"), Cell("other"), Cell("go")] * 2, [1, 5, 10, None, None, None]),
    # Run from the middle: the duplicate after the last match first, then the one before it.
    ([GO1, OTHER, GO2], [Cell("other"), Cell("go"), Cell("go")], [5, 10, 1]),
    # Cells run out of order in JupyterLab: the cellIds decide.
    ([SAME_A, SAME_B], [Cell("same", "cell-b"), Cell("same", "cell-a"), Cell("same", "cell-b")], [5, 1, None]),
    # A deleted cell: the others still find their turns.
    ([A, B], [Cell("plot it", "cell-b")], [5]),
    # Two copies of a cell: the original re-renders, the copy asks anew.
    ([A], [Cell("load data", "cell-copy"), Cell("load data", "cell-a")], [None, 1]),
]


@pytest.mark.parametrize("turns, cells, expected", SEQUENCES)
def test_each_turn_is_claimed_at_most_once_per_kernel(turns: list[Turn], cells: list[Cell], expected: list[int | None]) -> None:
    assert run_all(turns, cells) == expected


def test_the_turn_index_reads_turns_incrementally(tmp_path: Path) -> None:
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        noted = [{"type": "text", "text": "[nbagent note: restarted]"}, {"type": "text", "text": "make z"}]
        session.append(ev.USER_MSG, content=noted, meta={"request": "make z", "kernel": OLD, "cell_id": "cell-a"})
        calls = [("toolu_1", "python", {"code": "z = 1"}), ("toolu_2", "shell", {"command": "ls"}), ("toolu_3", "python", {"code": "1/0"})]
        content = [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
        session.append(ev.ASSISTANT_MSG, content=content, stop_reason="tool_use", usage={})
        for tool_use_id, _, _ in calls:
            session.append(ev.TOOL_RESULT, tool_use_id=tool_use_id, content="x", **({"is_error": True} if tool_use_id == "toolu_3" else {}))
        index = TurnIndex()
        [first] = index.update(session)
        assert first == Turn(2, 6, "make z", "cell-a", OLD, (("toolu_1", "z = 1"), ("toolu_3", "1/0")), frozenset({"toolu_3"}))
        session.append(ev.ASSISTANT_MSG, content=[{"type": "text", "text": "done"}], stop_reason="end_turn", usage={})
        session.append(ev.USER_MSG, content="plain text")
        assert index.update(session) == [Turn(2, 7, *first_fields(first)), Turn(8, 8, "plain text")]
        session.append(ev.NOTE, kind="x", text="y")
        assert [t.end for t in index.update(session)] == [7, 9]


def first_fields(turn: Turn) -> tuple:
    return (turn.request, turn.cell_id, turn.kernel, turn.python_calls, turn.failed_calls)


def test_the_turn_index_knows_where_each_request_starts(tmp_path: Path) -> None:
    """A re-rendered turn reads only its own events: the index says which calls were open and which notes came before it."""
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        session.append(ev.NOTE, kind="kernel_restarted", to_model="[restarted]")  # before the first request
        first = session.append(ev.USER_MSG, content="one")["seq"]
        call = {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {"command": "sleep 9"}}
        session.append(ev.ASSISTANT_MSG, content=[call], stop_reason="tool_use", usage={})
        session.append(ev.INTERRUPTED, during="tools", open_calls=["toolu_1"])
        second = session.append(ev.USER_MSG, content="two")["seq"]  # its call is still open
        session.append(ev.TOOL_RESULT, tool_use_id="toolu_1", content="cancelled", is_error=True)
        session.append(ev.ASSISTANT_MSG, content=[{"type": "text", "text": "ok"}], stop_reason="end_turn", usage={})
        third = session.append(ev.USER_MSG, content="three")["seq"]
        session.append(ev.INTERRUPTED, during="model", open_calls=[])  # before any reply
        fourth = session.append(ev.USER_MSG, content="four")["seq"]
        index = TurnIndex()
        index.update(session)
    starts = {seq: index.start(seq) for seq in (first, second, third, fourth)}
    assert starts[first].asides.notes == ["[restarted]"] and not starts[first].names
    assert dict(starts[second].names) == {"toolu_1": "shell"} and not starts[second].asides.unanswered_interrupt
    assert not starts[third].names and starts[third].asides == Asides()
    assert starts[fourth].asides.unanswered_interrupt and starts[fourth].asides.notes == []
    starts[fourth].asides.notes.append("changed by a view")
    assert index.start(fourth).asides.notes == []  # each caller gets its own copy


def test_a_request_is_matched_among_its_own_recorded_turns_only() -> None:
    """The positions the index keeps give the same matches as working them out."""
    turns = [Turn(i * 3 + 1, i * 3 + 3, f"step {i % 7}", None, OLD) for i in range(50)]
    index_positions = request_positions(turns)
    assert index_positions["step 3"] == [3, 10, 17, 24, 31, 38, 45]
    claims, kept, worked_out = Claims(), [], []
    for n in range(60):
        turn, claims = match(turns, f"step  {n % 7} ", None, ME, claims, index_positions)
        kept.append(turn)
    claims = Claims()
    for n in range(60):
        turn, claims = match(turns, f"step {n % 7}", None, ME, claims)
        worked_out.append(turn)
    assert kept == worked_out and sum(t is not None for t in kept) == 50


def test_the_turn_index_knows_a_turn_left_asking(tmp_path: Path) -> None:
    """A turn is left asking from an approval interrupted before anyone answered until a decision, a start or a result."""
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        index = TurnIndex()
        session.append(ev.USER_MSG, content="clean up", meta={"request": "clean up", "kernel": ME, "cell_id": "cell-c"})
        call = {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {"command": "rm -r build"}}
        session.append(ev.ASSISTANT_MSG, content=[call], stop_reason="tool_use", usage={})
        asked = {"tool_use_id": "toolu_1", "reason": "irreversible"}
        steps: list[tuple[str, dict[str, Any], bool]] = [
            (ev.APPROVAL, {**asked, "decision": "pending", "question": "rm?"}, False),
            (ev.APPROVAL, {**asked, "decision": "interrupted"}, True),
            (ev.INTERRUPTED, {"during": "tools", "open_calls": ["toolu_1"]}, True),
            (ev.APPROVAL, {**asked, "decision": "pending", "question": "rm?"}, True),  # asked again: still waiting
            (ev.APPROVAL, {**asked, "decision": "approved", "by": "panel"}, False),
            (ev.APPROVAL, {**asked, "decision": "interrupted"}, True),
            (ev.TOOL_STARTED, {"tool_use_id": "toolu_1", "name": "shell", "effect": "irreversible"}, False),
            (ev.APPROVAL, {**asked, "decision": "interrupted"}, True),
            (ev.TOOL_RESULT, {"tool_use_id": "toolu_1", "content": "Not run", "is_error": True}, False),
        ]
        for kind, payload, asking in steps:
            session.append(kind, **payload)
            assert [t.asking for t in index.update(session)] == [asking], (kind, payload)
