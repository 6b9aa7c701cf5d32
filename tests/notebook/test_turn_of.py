"""A re-run cell reads its own turn only (a Run All of N cells stays O(N), not O(N²)), or the events the turn index kept: the same either way."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nbagent.agent.session import Session
from nbagent.notebook import kernel
from nbagent.notebook.agent_cells import turn_of
from nbagent.notebook.kernel import KEPT_BYTES, TurnIndex
from nbagent.record import events as ev
from nbagent.state.turn_work import turns
from tests.support.fake_anthropic import text, tool_use


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


@pytest.mark.parametrize("kept_bytes", [0, 1500, KEPT_BYTES], ids=["nothing kept", "the first turns kept", "all kept"])
def test_each_turn_is_the_one_a_whole_reading_finds_or_none_without_python_calls(
    session: Session, kept_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernel, "KEPT_BYTES", kept_bytes)
    whole = turns(session.events())
    index = TurnIndex()
    for work in whole:
        found = turn_of(index, session, work.seq, live=False)
        assert found == (work if work.calls else None)  # its number too: counted over the whole session
    assert turn_of(index, session, None, live=True) == (whole[-1] if whole[-1].calls else None)
    assert turn_of(index, session, None, live=False) is None and turn_of(index, session, 999, live=False) is None


@pytest.mark.parametrize("kept_bytes", [0, 1500, KEPT_BYTES], ids=["nothing kept", "the first turns kept", "all kept"])
def test_a_turn_reads_its_own_events_only_and_none_it_keeps(session: Session, kept_bytes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel, "KEPT_BYTES", kept_bytes)
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
    kept = [turn.seq for turn in listed if index.events(turn) is not None]
    expected = {0: range(0, 1), 1500: range(1, len(listed)), KEPT_BYTES: range(len(listed), len(listed) + 1)}[kept_bytes]
    assert len(kept) in expected, kept
    assert kept == [turn.seq for turn in listed[: len(kept)]]  # the first turns, up to the bound: a later one is read
    for at, turn in enumerate(listed):
        read.clear()
        turn_of(index, session, turn.seq, live=False)
        if not turn.python_calls or turn.seq in kept:
            assert read == []  # no python call (nothing to insert), or its events kept: nothing read
        else:
            stop = listed[at + 1].seq if at + 1 < len(listed) else session.seq
            assert read and min(read) >= turn.seq and max(read) <= stop, (turn.seq, read)
        events = index.events(turn)
        assert events is None or events == list(whole(turn.seq - 1))[: turn.end - turn.seq + 1]  # as the log has them


def test_a_run_all_shows_the_same_from_kept_events_as_from_the_log(shell, fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Re-rendered turns (two Run Alls in one kernel, then with nothing kept) show exactly what the log reads back to."""
    import os

    from IPython.utils.capture import capture_output

    fake.script(tool_use("python", {"code": "made = 41 + 1\nmade"}), text("It is **42**."), text("answer two"))
    cells = [("c1", "%agent make a number"), ("c2", "%agent say something")]
    for cell_id, source in cells:
        assert shell.run_cell(source, cell_id=cell_id).success

    def run_all() -> list[Any]:
        """A restart, then every cell again: what each cell showed."""
        assert shell.run_cell("%unload_ext nbagent").success
        monkeypatch.setattr(kernel, "KERNEL_ID", os.urandom(8).hex())
        assert shell.run_cell("%load_ext nbagent").success
        shown = []
        for cell_id, source in cells:
            with capture_output() as captured:
                assert shell.run_cell(source, cell_id=cell_id).success
            shown.append((captured.stdout, [output.data for output in captured.outputs]))  # a shell without a kernel prints
        return shown

    kept = run_all()
    assert "It is **42**." in kept[0][0] and "41 + 1" in kept[0][0] and "answer two" in kept[1][0]
    assert run_all() == kept
    monkeypatch.setattr(kernel, "KERNEL_ID", os.urandom(8).hex())
    monkeypatch.setattr(kernel, "KEPT_BYTES", 0)
    assert run_all() == kept  # read from the log: the same
    assert len(fake.requests) == 3
