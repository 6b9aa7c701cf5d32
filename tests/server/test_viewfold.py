"""The server's views follow a session in bounded memory (nbagent/server/viewfold.py) and show exactly what a whole fold shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nbagent.agent.session import Session
from nbagent.record import events as ev
from nbagent.record.log_reader import read_events
from nbagent.server import viewfold
from nbagent.server.present import Presenter
from tests.agent.test_session import add_turns


def long_session(path: Path) -> list[dict[str, Any]]:
    """Turns, a local compaction, a server compaction, a refused reply and parallel calls, then more turns."""
    with Session.open(path, fsync="never", snapshot_every=0) as session:
        add_turns(session, 400)
        session.append(ev.COMPACTION_STARTED, keep=2, reason="trigger")
        session.append(ev.COMPACTION, summary="earlier work", messages=len(session.messages) - 2, final=True)
        add_turns(session, 300, "b")
        session.append(ev.USER_MSG, content="compact on the server")
        session.append(ev.MODEL_CALL, model="m", attempt=1)
        blocks = [{"type": "compaction", "content": "what came before"}, {"type": "text", "text": "ok"}]
        session.append(ev.ASSISTANT_MSG, content=blocks, stop_reason="end_turn", usage={"output_tokens": 3})
        add_turns(session, 200, "c")
        session.append(ev.USER_MSG, content="something refused")
        session.append(ev.ASSISTANT_MSG, content=[], stop_reason="refusal", usage={"output_tokens": 1})
        session.append(ev.USER_MSG, content="two calls")
        calls = [{"type": "tool_use", "id": f"p{i}", "name": "add", "input": {"n": i}} for i in range(2)]
        session.append(ev.ASSISTANT_MSG, content=calls, stop_reason="tool_use", usage={"output_tokens": 1})
        for i in (1, 0):
            session.append(ev.TOOL_STARTED, tool_use_id=f"p{i}", name="add", effect="read", attempt=1)
            session.append(ev.TOOL_RESULT, tool_use_id=f"p{i}", content=str(i), effect="read")
        add_turns(session, 100, "d")
    return list(read_events(path))


def records(events: list[dict[str, Any]]) -> list[bytes]:
    presenter = Presenter()
    return [presenter.frame(e).data for e in events]


def test_a_bounded_view_shows_what_the_whole_fold_shows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = long_session(tmp_path / "s.jsonl")
    bounded = records(events)
    presenter = Presenter()
    for event in events:
        presenter.record(event)
    assert len(presenter.state.messages) <= 2 * viewfold.KEEP  # the whole fold holds hundreds
    monkeypatch.setattr(viewfold, "KEEP", 10**9)
    whole = records(events)
    assert Presenter().state is not None and len(whole) == len(bounded)
    for mine, theirs in zip(bounded, whole):
        assert mine == theirs, (json.loads(mine.split(b"data: ", 1)[1]), json.loads(theirs.split(b"data: ", 1)[1]))
    statuses = {json.loads(f.split(b"data: ", 1)[1])["session"]["status"] for f in whole if b'"session"' in f}
    assert len(statuses) > 2  # the test sees the status change


def test_recent_calls_keep_the_last_calls_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(viewfold, "CALLS", 3)
    calls = viewfold.RecentCalls()
    for n in range(10):
        calls.learn({"type": ev.ASSISTANT_MSG, "content": [{"type": "tool_use", "id": f"t{n}", "name": f"tool{n}", "input": {"n": n}}]})
    assert list(calls) == ["t7", "t8", "t9"] and list(calls.inputs) == ["t7", "t8", "t9"]
