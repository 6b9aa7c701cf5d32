"""The stop-reason rule (nbagent.state.stops): its table, the fold that applies it, and each stop reason end to end through the real SDK."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pytest

import nbagent
from nbagent.record import events as ev
from nbagent.state import context as ctx
from nbagent.state import stops
from nbagent.state.fold import fold
from nbagent.tools.builtin import file_tools
from tests.support.fake_anthropic import FakeAnthropic, RecordedRequest, Reply, cut_tool_use, refusal, text, tool_use

pytestmark = pytest.mark.sdk  # run again against the SDK floor in CI (.ci/run)

MODEL = "claude-test"

# stop_reason, has tool calls, cut replies asked again so far -> action, reply kept, note given
TABLE = [
    ("end_turn", False, 0, "done", True, False),
    ("end_turn", True, 0, "tools", True, False),
    ("stop_sequence", False, 0, "done", True, False),
    ("tool_use", True, 0, "tools", True, False),
    (None, True, 0, "tools", True, False),  # a log from before stop reasons were recorded
    ("pause_turn", False, 0, "continue", True, False),
    ("max_tokens", False, 0, "done", True, True),  # a cut answer is kept, and the user told
    ("max_tokens", True, 0, "again", False, True),  # a cut call never runs: asked again with more room
    ("max_tokens", True, 1, "stopped", False, True),  # once only
    ("model_context_window_exceeded", False, 0, "done", True, True),  # "treat the response as truncated": the answer stands
    ("model_context_window_exceeded", True, 0, "compact", False, True),
    ("model_context_window_exceeded", True, 1, "stopped", False, True),
    ("refusal", False, 0, "refused", False, True),
    ("refusal", True, 0, "refused", False, True),
    ("a_future_reason", True, 0, "stopped", False, True),
    ("a_future_reason", False, 0, "stopped", False, True),
]


@pytest.mark.parametrize(("stop_reason", "calls", "again", "action", "keep", "noted"), TABLE)
def test_the_stop_rule(stop_reason: str | None, calls: bool, again: int, action: str, keep: bool, noted: bool) -> None:
    stop = stops.rule(stop_reason, calls, again)
    assert (stop.action, stop.keep, bool(stop.note)) == (action, keep, noted)
    assert stop.runs_calls == (action == "tools")
    if stop_reason not in stops.KNOWN and stop_reason is not None:
        assert repr(stop_reason) in stop.note


def test_a_refusal_note_carries_its_details_bounded() -> None:
    details = {"type": "refusal", "category": "cyber", "explanation": "x" * 1000}
    note = stops.rule("refusal", False, 0, stops.refusal_detail(details)).note
    assert "cyber; xxx" in note and len(stops.refusal_detail(details)) == 400
    assert stops.refusal_detail(None) == stops.refusal_detail({"category": None}) == ""


# The fold ----------------------------------------------------------------------------------------
def events(*specs: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"seq": n, "ts": 0.0, "type": kind, **payload} for n, (kind, payload) in enumerate(specs, 1)]


CALL = {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {"path": "a.py", "content": "import os\nos.remo"}}


def test_a_cut_call_is_never_opened_and_the_reply_is_left_out() -> None:
    state = fold(
        events(
            (ev.SESSION_START, {"session_id": "s"}),
            (ev.USER_MSG, {"content": "write it"}),
            (ev.ASSISTANT_MSG, {"content": [CALL], "stop_reason": "max_tokens", "usage": {"output_tokens": 9}}),
        )
    )
    assert state.open_calls == {} and state.frontier == "model" and state.stop_action == "again"
    assert list(state.messages) == [{"role": "user", "content": "write it"}]
    assert state.usage["output_tokens"] == 9  # billed all the same


def test_a_refused_turn_leaves_the_request_but_not_earlier_turns() -> None:
    state = fold(
        events(
            (ev.SESSION_START, {"session_id": "s"}),
            (ev.USER_MSG, {"content": "first"}),
            (ev.ASSISTANT_MSG, {"content": [{"type": "text", "text": "one"}], "stop_reason": "end_turn"}),
            (ev.USER_MSG, {"content": "second"}),
            (ev.ASSISTANT_MSG, {"content": [dict(CALL, input={"path": "b"})], "stop_reason": "tool_use"}),
            (ev.TOOL_RESULT, {"tool_use_id": "toolu_1", "content": "ok"}),
            (ev.ASSISTANT_MSG, {"content": [{"type": "text", "text": "Hel"}], "stop_reason": "refusal"}),
        )
    )
    assert [m["content"] for m in state.messages] == ["first", [{"type": "text", "text": "one"}]]
    assert state.frontier == "done" and state.final_text.startswith("Claude's safety system declined")
    state = fold(events((ev.USER_MSG, {"content": "third"})), state)
    assert state.frontier == "model" and state.messages[-1] == {"role": "user", "content": "third"}


# End to end through the real SDK ----------------------------------------------------------------
def run(session: nbagent.Session, client: anthropic.Anthropic, prompt: str | None = None, **kw: Any) -> str:
    return nbagent.run(session, prompt, client=client, model=MODEL, **kw)


def notes(session: nbagent.Session) -> list[dict[str, Any]]:
    return [e for e in session.events() if e["type"] == ev.NOTE and e.get("kind") == "stop"]


def test_a_write_cut_at_max_tokens_never_writes_and_is_asked_again_with_more_room(
    fake: FakeAnthropic, client: anthropic.Anthropic, session_in: Any, tmp_path: Path
) -> None:
    target = tmp_path / "work" / "a.py"
    target.parent.mkdir()
    whole = {"path": "a.py", "content": "import os\nos.remove('x')\n"}
    fake.script(cut_tool_use("write_file", whole, at=40), tool_use("write_file", whole), text("written"))
    with session_in() as session:
        answer = run(session, client, "write a.py", tools=file_tools(target.parent), approval="auto", max_tokens=1000)
        assert answer == "written"
        assert [n["action"] for n in notes(session)] == ["again"]
    assert target.read_text() == whole["content"]  # the whole call, once; never the cut one
    first, again, last = (r.body for r in fake.requests)
    assert (first["max_tokens"], again["max_tokens"], last["max_tokens"]) == (1000, 2000, 1000)
    assert again["messages"] == first["messages"] == [{"role": "user", "content": "write a.py"}]


def test_a_call_cut_twice_stops_the_turn_and_nothing_runs(
    fake: FakeAnthropic, client: anthropic.Anthropic, session_in: Any, tmp_path: Path
) -> None:
    fake.script(*[cut_tool_use("write_file", {"path": "a.py", "content": "x" * 200}, at=30) for _ in range(2)])
    with session_in() as session:
        answer = run(session, client, "write", tools=file_tools(tmp_path), approval="auto")
        assert "cut off at max_tokens inside a tool call again" in answer
        assert [e["type"] for e in session.events()].count(ev.TOOL_STARTED) == 0
        fake.script(text("fine"))
        assert run(session, client, "smaller please", tools=file_tools(tmp_path)) == "fine"
    assert not (tmp_path / "a.py").exists()
    assert fake.requests[-1].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "write"}, {"type": "text", "text": "smaller please"}]}
    ]


def test_a_refusal_runs_nothing_and_its_turn_is_not_resent(fake: FakeAnthropic, client: anthropic.Anthropic, session_in: Any) -> None:
    fake.script(text("ok"), refusal("Sure, here is how to"), text("sure"))
    with session_in() as session:
        run(session, client, "hello")
        answer = run(session, client, "something refused")
        assert "declined" in answer and "cyber" in answer
        assert session.state.frontier == "done"
        assert run(session, client, "something else") == "sure"
        recorded = [e for e in session.events() if e["type"] == ev.ASSISTANT_MSG][1]
        assert recorded["stop_reason"] == "refusal" and recorded["stop_details"]["category"] == "cyber"  # the log keeps it
    sent = fake.requests[-1].body["messages"]
    assert "something refused" not in json.dumps(sent) and "here is how" not in json.dumps(sent)
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]


def test_a_full_context_window_compacts_then_asks_again(fake: FakeAnthropic, client: anthropic.Anthropic, session_in: Any) -> None:
    def reply(request: RecordedRequest) -> Reply:
        if ctx.SUMMARY_INSTRUCTIONS in json.dumps(request.body):
            return text("Summary: numbered questions, numbered answers.")
        if len(request.body["messages"]) >= 5 and not any("Summary:" in json.dumps(m) for m in request.body["messages"]):
            return cut_tool_use("lookup", {"name": "x" * 50}, at=10, stop_reason="model_context_window_exceeded")
        return text(f"answer {len(request.body['messages'])} " + "words " * 40)

    fake.responder = reply
    settings = nbagent.ContextSettings(compact="local", keep_tokens=60, trigger=10**6)
    with session_in() as session:
        for n in range(3):
            run(session, client, f"question {n}", context=settings)
        assert session.state.compactions == 1
        assert [n["action"] for n in notes(session)] == ["compact"]
        started = [e for e in session.events() if e["type"] == ev.COMPACTION_STARTED]
        assert [e["reason"] for e in started] == ["context_window_exceeded"]


def test_an_unknown_stop_reason_ends_the_turn_with_a_message(fake: FakeAnthropic, client: anthropic.Anthropic, session_in: Any) -> None:
    fake.script(Reply([CALL], "a_future_reason"))
    with session_in() as session:
        answer = run(session, client, "go", tools=file_tools(None), approval="auto")
        assert "'a_future_reason'" in answer and session.state.frontier == "done"


def test_a_resume_after_the_cut_reply_reaches_the_same_decision(
    fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path, tmp_path: Path
) -> None:
    """The decision is the fold's: a process that died right after logging the cut reply resumes by asking again, with more room."""
    whole = {"path": "b.py", "content": "print(1)\n"}
    with nbagent.Session.open(log_path) as session:
        session.append(ev.USER_MSG, content="write b.py")
        session.append(ev.MODEL_CALL, model=MODEL, attempt=1)
        session.append(ev.ASSISTANT_MSG, content=[dict(CALL, input={"path": "b.py", "content": "pri"})], stop_reason="max_tokens", usage={})
    fake.script(tool_use("write_file", whole), text("done"))
    with nbagent.Session.open(log_path) as session:
        assert run(session, client, tools=file_tools(tmp_path), approval="auto", max_tokens=700) == "done"
    assert fake.requests[0].body["max_tokens"] == 1400 and (tmp_path / "b.py").read_text() == "print(1)\n"


@pytest.fixture
def session_in(log_path: Path) -> Any:
    return lambda: nbagent.Session.open(log_path)


# A crash after each logged decision (a real child process, SIGKILL) ---------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("kill_after", ["assistant_msg:1", "note:1"], ids=["after-the-cut-reply", "after-its-note"])
def test_a_kill_after_the_cut_reply_resumes_to_the_same_decision(tmp_path: Path, kill_after: str) -> None:
    """SIGKILL once the cut reply (then its stop note) is durable: the resumed process asks again with more room; the cut call never runs."""
    import signal

    from tests.campaigns.test_crash import Zygote
    from tests.support.crash_tools import read_effects

    def respond(request: RecordedRequest) -> Reply:
        if len(request.body["messages"]) == 1 and request.body["max_tokens"] == 8192:
            return cut_tool_use("append_note", {"text": "a note that is cut off in the middle"}, at=20)
        if len(request.body["messages"]) == 1:
            return tool_use("append_note", {"text": "whole"}, id="toolu_whole")
        return text("noted")

    log, effects = tmp_path / "session.jsonl", tmp_path / "effects.jsonl"
    zygote = Zygote()
    try:
        with FakeAnthropic() as fake:
            fake.responder = respond
            fake._httpd.handle_error = lambda *_: None  # the killed child resets its connection
            common = [str(log), str(effects), fake.base_url, "--approval", "auto"]
            first = zygote.spawn([*common, "--prompt", "note it", "--pause-after", kill_after], tmp_path / "first.stderr")
            first.wait_until(lambda: any(line.startswith("READY") for line in first.lines), "the pause after " + kill_after)
            assert first.kill() == -signal.SIGKILL
            assert len(fake.requests) == 1
            resumed = zygote.spawn(common, tmp_path / "resumed.stderr")
            assert resumed.finish() == "noted"
            assert [r.body["max_tokens"] for r in fake.requests] == [8192, 16384, 8192]
    finally:
        zygote.close()
    applied = [e["args"] for e in read_effects(effects) if e["tool"] == "append_note" and e["kind"] == "applied"]
    assert applied == [{"text": "whole"}]  # the cut call never ran, before the kill or after
    notes = [e for e in nbagent.read_events(log) if e["type"] == ev.NOTE and e.get("kind") == "stop"]
    assert [n["action"] for n in notes] == ["again"]  # logged once: a resume does not log the decision twice


@pytest.mark.parametrize(
    ("max_tokens", "model", "room"),
    [
        (8192, "claude-test", 16384),
        (8192, "claude-haiku-4-5", 16384),
        (40_000, "claude-haiku-4-5", 64_000),
        (64_000, "claude-haiku-4-5", 64_000),
    ],
)
def test_more_room_stops_at_the_models_maximum_output(max_tokens: int, model: str, room: int) -> None:
    from nbagent.state import model_table as models

    assert stops.more_room(max_tokens, models.lookup(model)) == room
