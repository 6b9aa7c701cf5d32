"""The "Insert as cells" output of a re-run cell reads its own turn only: a Run All of N cells stays O(N), not O(N²)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nbagent.agent.session import Session
from nbagent.notebook.agent_cells import turn_of
from nbagent.notebook.kernel import TurnIndex
from nbagent.record import events as ev
from nbagent.state.turn_work import turns


def python_call(key: str, code: str) -> dict[str, object]:
    return {"type": "tool_use", "id": key, "name": "python", "input": {"code": code}}


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    """Thirteen turns: every third calls python (the call of turn 4 raised), the others only answer."""
    with Session.open(tmp_path / "s.jsonl", fsync="never") as opened:
        for n in range(1, 14):
            opened.append(ev.USER_MSG, content=f"request {n}", meta={"cell_id": f"cell-{n}"})
            if n % 3 == 1:
                key = f"toolu_{n}"
                opened.append(ev.ASSISTANT_MSG, content=[python_call(key, f"x{n} = {n}")], stop_reason="tool_use", usage={})
                opened.append(ev.TOOL_STARTED, tool_use_id=key, name="python", effect="write", attempt=1)
                opened.append(ev.TOOL_RESULT, tool_use_id=key, content=[{"type": "text", "text": "ok"}], is_error=n == 4)
            opened.append(ev.ASSISTANT_MSG, content=[{"type": "text", "text": f"answer {n}"}], stop_reason="end_turn", usage={})
        yield opened


def test_each_turn_is_the_one_a_whole_reading_finds_or_none_without_python_calls(session: Session) -> None:
    whole = turns(session.events())
    index = TurnIndex()
    for work in whole:
        found = turn_of(index, session, work.seq, live=False)
        assert found == (work if work.calls else None)  # its number too: counted over the whole session
    assert turn_of(index, session, None, live=True) == (whole[-1] if whole[-1].calls else None)
    assert turn_of(index, session, None, live=False) is None and turn_of(index, session, 999, live=False) is None


def test_a_turn_reads_its_own_events_only(session: Session) -> None:
    index = TurnIndex()
    index.update(session)  # the first cell after a restart reads the session once
    read: list[int] = []
    whole = session.events

    def counted(since: int = 0) -> Iterator[ev.Event]:
        for event in whole(since):
            read.append(event["seq"])
            yield event

    session.events = counted  # type: ignore[method-assign]
    listed = index.turns
    for at, turn in enumerate(listed):
        read.clear()
        turn_of(index, session, turn.seq, live=False)
        if not turn.python_calls:
            assert read == []  # no python call: nothing to insert, nothing read
        else:
            stop = listed[at + 1].seq if at + 1 < len(listed) else session.seq
            assert read and min(read) >= turn.seq and max(read) <= stop, (turn.seq, read)
