"""The fold: hand-built event sequences for each event type, and property tests over random sessions and crash points."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent import Session
from nbagent import read_events as nbagent_read
from nbagent.record import events as ev
from nbagent.record import line_codec
from nbagent.state.asides import INTERRUPTED_NOTE, Asides, request_notes
from nbagent.state.fold import APPLY, State, apply, fold


class Log:
    """Builds a list of events with consecutive seqs, as the loop would append them."""

    def __init__(self) -> None:
        self.events: list[ev.Event] = []
        self.add(ev.SESSION_START, session_id="s1", meta={"notebook": "n.ipynb"})

    def add(self, event_type: str, /, **payload: Any) -> ev.Event:
        event = ev.make(len(self.events) + 1, event_type, payload)
        event["ts"] = 1_800_000_000.0 + event["seq"]  # deterministic, so hypothesis can replay a case
        self.events.append(event)
        return event

    def assistant(self, *blocks: dict[str, Any], stop: str = "end_turn", usage: dict[str, int] | None = None) -> None:
        self.add(ev.ASSISTANT_MSG, message_id="m", model="claude-test", content=list(blocks), stop_reason=stop, usage=usage or {})

    def state(self) -> State:
        return fold(self.events)


def text(s: str) -> dict[str, Any]:
    return {"type": "text", "text": s}


def use(tid: str, name: str = "add", **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": args}


# Hand-built sequences -------------------------------------------------------------------------------
def test_a_new_session_is_empty() -> None:
    state = Log().state()
    assert state.session_id == "s1" and state.meta == {"notebook": "n.ipynb"} and state.seq == 1
    assert state.messages == [] and state.frontier == "empty" and state.turns == 0 and state.title == ""
    assert fold([]).frontier == "empty"


def test_a_user_turn_then_an_answer() -> None:
    log = Log()
    log.add(ev.USER_MSG, content="  What is\n in   data.csv? " + "x" * 100)
    state = log.state()
    assert state.messages == [{"role": "user", "content": "  What is\n in   data.csv? " + "x" * 100}]
    assert state.frontier == "model" and state.status == "model" and state.turns == 1
    assert state.title == ("What is in data.csv? " + "x" * 100)[:80]
    log.add(ev.MODEL_CALL, model="claude-test", attempt=1)
    log.assistant(text("It holds sales."), usage={"input_tokens": 10, "output_tokens": 4})
    state = log.state()
    assert state.messages[-1] == {"role": "assistant", "content": [text("It holds sales.")]}
    assert state.frontier == "done" and state.status == "done" and state.final_text == "It holds sales."
    log.add(ev.USER_MSG, content=[text("second question")])
    state = log.state()
    assert state.turns == 2 and state.title.startswith("What is")  # the first request names the session
    assert state.messages[-1] == {"role": "user", "content": [text("second question")]}


def test_tool_calls_open_count_starts_and_results_merge_into_one_user_message() -> None:
    log = Log()
    log.add(ev.USER_MSG, content="add things")
    log.assistant(text("I'll add."), use("t1", a=1, b=2), use("t2", a=3, b=4), stop="tool_use")
    state = log.state()
    assert state.frontier == "tools" and state.status == "tools"
    assert state.open_calls == {
        "t1": {"name": "add", "input": {"a": 1, "b": 2}, "started": 0},
        "t2": {"name": "add", "input": {"a": 3, "b": 4}, "started": 0},
    }
    log.add(ev.TOOL_STARTED, tool_use_id="t1", name="add", effect="write", attempt=1)
    log.add(ev.TOOL_STARTED, tool_use_id="t1", name="add", effect="write", attempt=2)
    log.add(ev.TOOL_STARTED, tool_use_id="unknown", name="add", effect="write", attempt=1)  # ignored
    assert log.state().open_calls["t1"]["started"] == 2 and log.state().open_calls["t2"]["started"] == 0
    log.add(ev.TOOL_RESULT, tool_use_id="t1", content="3")
    state = log.state()
    assert list(state.open_calls) == ["t2"] and state.frontier == "tools"
    log.add(ev.TOOL_RESULT, tool_use_id="t2", content=[text("boom")], is_error=True)
    state = log.state()
    assert state.open_calls == {} and state.frontier == "model" and state.status == "model"
    assert state.messages[-1] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "3"},
            {"type": "tool_result", "tool_use_id": "t2", "content": [text("boom")], "is_error": True},
        ],
    }
    assert len(state.messages) == 3
    # A new request after the results joins the same user message (roles must alternate).
    log.add(ev.USER_MSG, content="and now?")
    state = log.state()
    assert len(state.messages) == 3 and state.turns == 2
    assert state.messages[-1]["content"][-1] == text("and now?")
    assert [b["type"] for b in state.messages[-1]["content"]] == ["tool_result", "tool_result", "text"]


def test_usage_totals_add_up_over_replies() -> None:
    log = Log()
    log.add(ev.USER_MSG, content="q")
    log.assistant(use("t1"), stop="tool_use", usage={"input_tokens": 100, "output_tokens": 7, "cache_creation_input_tokens": 50})
    log.add(ev.TOOL_RESULT, tool_use_id="t1", content="ok")
    log.assistant(text("done"), usage={"input_tokens": 3, "output_tokens": 9, "cache_read_input_tokens": 150, "server_tool_use": 1})
    assert log.state().usage == {
        "input_tokens": 103,
        "output_tokens": 16,
        "cache_creation_input_tokens": 50,
        "cache_read_input_tokens": 150,
    }


def test_pause_turn_means_call_the_model_again() -> None:
    log = Log()
    log.add(ev.USER_MSG, content="search the web")
    log.assistant(text("searching..."), stop="pause_turn")
    state = log.state()
    assert state.frontier == "model" and state.status == "model" and state.stop_reason == "pause_turn"
    log.assistant(text("found it"))
    assert log.state().frontier == "done"


def test_deltas_go_to_partial_never_to_messages() -> None:
    log = Log()
    log.add(ev.USER_MSG, content="q")
    log.add(ev.MODEL_CALL, model="m", attempt=1)
    log.add(ev.DELTA, index=0, text="Hel")
    log.add(ev.DELTA, index=0, text="lo")
    log.add(ev.DELTA, index=1, partial_json='{"a":')
    state = log.state()
    assert state.partial == ["Hel", "lo"] and len(state.messages) == 1 and state.frontier == "model"
    log.add(ev.MODEL_CALL, model="m", attempt=2)  # a retried call starts a fresh stream
    assert log.state().partial == []
    log.add(ev.DELTA, index=0, text="Hi")
    log.assistant(text("Hi"))
    assert log.state().partial == [] and log.state().messages[-1]["content"] == [text("Hi")]


def test_model_errors_and_interruptions_leave_messages_alone() -> None:
    log = Log()
    log.add(ev.USER_MSG, content="q")
    log.add(ev.MODEL_CALL, model="m", attempt=1)
    log.add(ev.DELTA, index=0, text="par")
    log.add(ev.MODEL_ERROR, message="overloaded", status=529, kind="overloaded_error", retryable=True, attempt=1)
    state = log.state()
    assert state.model_errors == 1 and state.status == "error" and state.frontier == "model" and len(state.messages) == 1
    log.add(ev.INTERRUPTED, during="model", open_calls=[])
    state = log.state()
    assert state.status == "interrupted" and state.partial == [] and state.frontier == "model"
    log.assistant(use("t1"), stop="tool_use")
    log.add(ev.TOOL_STARTED, tool_use_id="t1", name="add", effect="write", attempt=1)
    log.add(ev.INTERRUPTED, during="tools", open_calls=["t1"])
    state = log.state()
    assert state.status == "interrupted" and state.frontier == "tools" and state.open_calls["t1"]["started"] == 1
    for kind, payload in [
        (ev.APPROVAL, {"tool_use_id": "t1", "reason": "unknown_outcome", "decision": "pending", "question": "?"}),
        (ev.NOTE, {"text": "a front end's note"}),
    ]:
        before = copy.deepcopy(log.state().messages)
        log.add(kind, **payload)
        assert log.state().messages == before


def test_the_fold_has_one_step_for_every_event_type_and_ignores_others() -> None:
    assert set(APPLY) == set(ev.EVENT_TYPES)
    log = Log()
    log.add(ev.USER_MSG, content="q")
    before = log.state()
    after = apply(copy.deepcopy(before), {"v": 2, "seq": 3, "ts": 1_800_000_003.0, "type": "from_a_newer_nbagent", "content": "x"})
    assert after.seq == 3 and after.messages == before.messages and after.status == before.status


def test_fold_does_not_change_the_events() -> None:
    log = Log()
    log.add(ev.USER_MSG, content=[text("q")])
    log.assistant(use("t1"), use("t2"), stop="tool_use")
    log.add(ev.TOOL_STARTED, tool_use_id="t1", name="add", effect="write", attempt=1)
    log.add(ev.TOOL_RESULT, tool_use_id="t1", content="1")
    log.add(ev.TOOL_RESULT, tool_use_id="t2", content="2")
    log.add(ev.USER_MSG, content=[text("more")])
    before = copy.deepcopy(log.events)
    fold(log.events)
    fold(log.events)
    assert log.events == before


# Notes to the model and the interruption note: the rule, as a table ---------------------------------------
MARK = INTERRUPTED_NOTE
RESTART = "[nbagent note: the kernel restarted.]"
Step = tuple[str, dict[str, Any]]


def q(words: str) -> Step:
    return (ev.USER_MSG, {"content": words})


def answer(*blocks: dict[str, Any], stop: str = "end_turn") -> Step:
    return (ev.ASSISTANT_MSG, {"content": list(blocks) or [text("an answer")], "stop_reason": stop, "usage": {}})


CALL = answer(use("t1"), stop="tool_use")
STREAM: list[Step] = [(ev.MODEL_CALL, {"attempt": 1}), (ev.DELTA, {"index": 0, "text": "half an ans"})]
SETTLED = (ev.TOOL_RESULT, {"tool_use_id": "t1", "content": "not run", "is_error": True, "abandoned": "not_started"})


def interrupted(during: str, **extra: Any) -> Step:
    return (ev.INTERRUPTED, {"during": during, "open_calls": ["t1"] if during == "tools" else [], **extra})


# (the events after the first request, then the next request; the blocks of the message that request ends up in)
NOTE_CASES: dict[str, tuple[list[Step], list[str]]] = {
    "not interrupted": ([*STREAM, answer()], ["q2"]),
    "interrupted while the model streams, before any reply": ([*STREAM, interrupted("model")], ["q1", MARK, "q2"]),
    "interrupted before the model was called": ([interrupted("model")], ["q1", MARK, "q2"]),
    "interrupted while a tool ran: the settled call tells the model": (
        [CALL, (ev.TOOL_STARTED, {"tool_use_id": "t1", "name": "add", "effect": "write"}), interrupted("tools"), SETTLED],
        ["tool_result", "q2"],
    ),
    "interrupted waiting for approval": (
        [CALL, (ev.APPROVAL, {"tool_use_id": "t1", "decision": "pending", "question": "?"}), interrupted("tools"), SETTLED],
        ["tool_result", "q2"],
    ),
    "interrupted while the model answers the tool results": (
        [CALL, (ev.TOOL_RESULT, {"tool_use_id": "t1", "content": "3"}), *STREAM, interrupted("model")],
        ["tool_result", MARK, "q2"],
    ),
    "interrupted, then resumed without a new request and answered": ([interrupted("model"), *STREAM, answer()], ["q2"]),
    "interrupted twice before an answer": ([interrupted("model"), q("again"), interrupted("model")], ["q1", MARK, "again", MARK, "q2"]),
    "an interruption read from a v2 log (mark false)": ([interrupted("model", mark=False)], ["q1", "q2"]),
    "a model error is not an interruption": ([(ev.MODEL_ERROR, {"message": "bad request", "retryable": False})], ["q1", "q2"]),
    "a note to the model goes before the request": (
        [answer(), (ev.NOTE, {"kind": "kernel_restarted", "to_model": RESTART})],
        [RESTART, "q2"],
    ),
    "the interruption note first, then the notes to the model": (
        [interrupted("model"), (ev.NOTE, {"kind": "kernel_restarted", "to_model": RESTART})],
        ["q1", MARK, RESTART, "q2"],
    ),
    "a note to the model waits for a request, through a resumed turn": (
        [(ev.NOTE, {"to_model": RESTART}), *STREAM, answer()],
        [RESTART, "q2"],
    ),
    "a note for people only is not sent": ([answer(), (ev.NOTE, {"kind": "x", "text": "hello"})], ["q2"]),
}


def blocks_of(content: Any) -> list[str]:
    return [content] if isinstance(content, str) else [b.get("text", b["type"]) for b in content]


@pytest.mark.parametrize("case", list(NOTE_CASES))
def test_what_the_fold_puts_before_a_request(case: str) -> None:
    steps, expected = NOTE_CASES[case]
    log = Log()
    for kind, payload in [q("q1"), *steps, q("q2")]:
        log.add(kind, **payload)
    state = log.state()
    assert blocks_of(state.messages[-1]["content"]) == expected
    assert state.pending_notes == [] and not state.unanswered_interrupt
    assert state.title == "q1"  # notes never name the session
    before = fold(log.events[:-1])
    sent = request_notes(before.pending_notes, before.unanswered_interrupt)
    assert expected[-1 - len(sent) :] == [*sent, "q2"]
    # A view follows the same rule from the events alone (and from the state, when it starts mid-session).
    for k in range(len(log.events) - 1):
        asides = Asides.of_state(fold(log.events[:k])) if k else Asides()
        for event in log.events[k:-1]:
            asides.see(event)
        assert asides.see(log.events[-1]) == sent, k


def test_a_v2_log_folds_as_it_did(tmp_path: Path) -> None:
    """The v2_to_v3 migration: a v2 interruption leaves no note for the next request, a v2 note is never sent."""
    records = [
        {"type": "session_start", "session_id": "s"},
        {"type": "user_msg", "content": "q1"},
        {"type": "interrupted", "during": "model", "open_calls": []},
        {"type": "note", "kind": "x", "to_model": "[nbagent note: from a hand-made v2 log]"},
        {"type": "user_msg", "content": "q2"},
    ]
    path = tmp_path / "v2.jsonl"
    path.write_bytes(b"".join(line_codec.encode({"v": 2, "seq": i, "ts": 1.0 + i, **r})[0] for i, r in enumerate(records, 1)))
    events = list(nbagent_read(path))
    assert {e["v"] for e in events} == {2} and events[2]["mark"] is False and "to_model" not in events[3]
    assert fold(events).messages == [{"role": "user", "content": [text("q1"), text("q2")]}]


# Property tests -----------------------------------------------------------------------------------
SOME_TEXT = st.text(alphabet=st.sampled_from('ab \u00e9\u2028\n"\\'), min_size=1, max_size=8)
USAGE = st.fixed_dictionaries(
    {"input_tokens": st.integers(0, 500), "output_tokens": st.integers(0, 500)}, optional={"cache_read_input_tokens": st.integers(0, 500)}
)


@st.composite
def sessions(draw: st.DrawFn) -> list[ev.Event]:
    """A random event sequence the loop could write: turns, streams, tool calls, results, errors, interruptions."""
    log = Log()
    phase = "idle"  # idle: waiting for a request | model: the model is due | tools: calls are open
    open_ids: list[str] = []
    next_id = 0
    for _ in range(draw(st.integers(0, 30))):
        choices = ["user"]
        if phase == "model":
            choices += ["reply", "reply", "tools", "tools", "error", "interrupt", "pause"]
        if phase == "tools":
            choices += ["result", "result", "result", "start", "interrupt", "approval"]
        choices.append("note")
        action = draw(st.sampled_from(choices))
        if action == "user":
            for tid in open_ids:  # the loop answers abandoned calls before a new request
                log.add(ev.TOOL_RESULT, tool_use_id=tid, content="not run: the user moved on", is_error=True)
            open_ids = []
            content = draw(st.one_of(SOME_TEXT, st.lists(SOME_TEXT.map(text), min_size=1, max_size=2)))
            log.add(ev.USER_MSG, content=content)
            phase = "model"
        elif action in ("reply", "tools", "pause"):
            log.add(ev.MODEL_CALL, model="m", attempt=1)
            for piece in draw(st.lists(SOME_TEXT, max_size=3)):
                log.add(ev.DELTA, index=0, text=piece)
            blocks = [text(draw(SOME_TEXT))]
            stop = {"reply": "end_turn", "pause": "pause_turn", "tools": "tool_use"}[action]
            if action == "tools":
                for _ in range(draw(st.integers(1, 3))):
                    next_id += 1
                    blocks.append(use(f"toolu_{next_id:03d}", x=draw(st.integers(0, 9))))
                    open_ids.append(blocks[-1]["id"])
            log.assistant(*blocks, stop=stop, usage=draw(USAGE))
            phase = "tools" if open_ids else ("model" if action == "pause" else "idle")
        elif action == "error":
            log.add(ev.MODEL_CALL, model="m", attempt=1)
            log.add(ev.MODEL_ERROR, message="overloaded", status=529, kind="overloaded_error", retryable=True, attempt=1)
        elif action == "interrupt":
            log.add(ev.INTERRUPTED, during=phase, open_calls=list(open_ids))
        elif action == "note":
            to_model = {"to_model": f"[nbagent note: {draw(SOME_TEXT)}]"} if draw(st.booleans()) else {}
            log.add(ev.NOTE, text=draw(SOME_TEXT), **to_model)
        elif action == "approval":
            log.add(ev.APPROVAL, tool_use_id=open_ids[0], reason="irreversible", decision="pending", question="?")
        elif action == "start":
            tid = draw(st.sampled_from(open_ids))
            log.add(ev.TOOL_STARTED, tool_use_id=tid, name="add", effect=draw(st.sampled_from(["read", "write"])), attempt=1)
        elif action == "result":
            tid = open_ids.pop(draw(st.integers(0, len(open_ids) - 1)))
            log.add(ev.TOOL_RESULT, tool_use_id=tid, content=draw(SOME_TEXT), **({"is_error": True} if draw(st.booleans()) else {}))
            phase = "tools" if open_ids else "model"
    return log.events


def assert_valid_for_the_api(events: list[ev.Event], state: State) -> None:
    """Roles alternate (a pause_turn reply may be continued by another), and every tool_use is answered next."""
    messages = state.messages
    stops = [e["stop_reason"] for e in events if e["type"] == ev.ASSISTANT_MSG]
    assistant_no = -1
    for i, message in enumerate(messages):
        assert message["role"] in ("user", "assistant")
        assert message["content"], "empty content"
        if message["role"] == "assistant":
            assistant_no += 1
        if i == 0:
            assert message["role"] == "user"
            continue
        previous = messages[i - 1]
        if message["role"] == previous["role"]:
            assert message["role"] == "assistant" and stops[assistant_no - 1] == "pause_turn", f"roles do not alternate at {i}"
        blocks = message["content"] if isinstance(message["content"], list) else []
        asked = [b["id"] for b in previous["content"] if b.get("type") == "tool_use"] if previous["role"] == "assistant" else []
        answered = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
        if message["role"] == "user":
            assert set(answered) <= set(asked) and len(answered) == len(set(answered))
            if i < len(messages) - 1 or any(b.get("type") == "text" for b in blocks):
                assert sorted(answered) == sorted(asked), f"tool_use left unanswered before message {i}"
            else:
                assert sorted(state.open_calls) == sorted(set(asked) - set(answered) - set(state.held))
            # results come before any text in a user message
            kinds = [b.get("type") for b in blocks]
            assert kinds == sorted(kinds, key=lambda k: k != "tool_result")
        else:
            assert not asked, f"an assistant message follows unanswered tool_use at {i}"
    if messages and messages[-1]["role"] == "assistant":
        asked = [b["id"] for b in messages[-1]["content"] if b.get("type") == "tool_use"]
        assert list(state.open_calls) == [i for i in asked if i not in state.held]  # a result held for an earlier call is not open


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow  # hypothesis-heavy
@SETTINGS
@given(sessions())
def test_incremental_apply_equals_a_fresh_fold(events: list[ev.Event]) -> None:
    state = State()
    for k, event in enumerate(events, 1):
        apply(state, event)
        fresh = fold(events[:k])
        assert state == fresh
        assert state.frontier == fresh.frontier
        assert_valid_for_the_api(events[:k], state)


@pytest.mark.slow  # hypothesis-heavy
@SETTINGS
@given(sessions())
def test_views_show_the_notes_the_fold_sends(events: list[ev.Event]) -> None:
    asides, state = Asides(), State()
    for event in events:
        sent = request_notes(state.pending_notes, state.unanswered_interrupt) if event["type"] == ev.USER_MSG else []
        assert asides.see(event) == sent
        apply(state, event)
        assert Asides.of_state(state) == asides


@pytest.mark.slow  # hypothesis-heavy
@SETTINGS
@given(sessions())
def test_state_round_trips_through_json(events: list[ev.Event]) -> None:
    state = fold(events)
    back = State.from_dict(json.loads(json.dumps(state.to_dict())))
    assert back == state and back.frontier == state.frontier
    # and the copy is independent: folding more into it leaves the original alone
    before = copy.deepcopy(state)
    apply(back, ev.make(state.seq + 1, ev.USER_MSG, {"content": "more"}))
    assert state == before


@pytest.mark.slow  # hypothesis-heavy: a reopen per crash point
@settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.data())
def test_every_crash_point_reopens_to_the_fold_of_its_prefix(events: list[ev.Event], data: st.DataObject) -> None:
    lines = [line_codec.encode(dict(e))[0] for e in events]
    blob = b"".join(lines)
    ends = [sum(len(line) for line in lines[:k]) for k in range(len(lines) + 1)]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.jsonl"
        for k in range(1, len(lines) + 1):  # a crash right after event k
            path.write_bytes(blob[: ends[k]])
            with Session.open(path, fsync="never", snapshot_every=0) as session:
                assert session.repair is None and session.seq == k
                assert session.messages == fold(events[:k]).messages
                assert session.state.open_calls == fold(events[:k]).open_calls
        # a crash in the middle of writing a line: the torn part is cut, the rest is the fold of what came before
        cut = 1 + data.draw(st.integers(0, 2**32), label="cut") % max(1, len(blob) - 1)
        k = max(i for i, end in enumerate(ends) if end <= cut)
        path.write_bytes(blob[:cut])
        with Session.open(path, fsync="never", snapshot_every=0) as session:
            assert (session.repair is not None) == (cut != ends[k])
            expected = fold(events[:k]) if k else fold(events[:1])  # an empty log starts a new session
            assert session.messages == expected.messages
            if k:
                assert session.state == fold(events[:k])


@pytest.mark.slow  # hypothesis-heavy
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.data())
def test_a_snapshot_plus_the_events_after_it_is_the_fold_of_every_event(events: list[ev.Event], data: st.DataObject) -> None:
    """Snapshot after event p, resume and snapshot again after event q (splicing the still-encoded messages), resume at the end."""
    lines = [line_codec.encode(dict(e))[0] for e in events]
    first = data.draw(st.integers(1, len(lines)), label="first snapshot after event")
    second = data.draw(st.integers(first, len(lines)), label="second snapshot after event")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.jsonl"
        path.write_bytes(b"".join(lines[:first]))
        with Session.open(path, fsync="never", snapshot_every=0) as session:
            session.snapshot()
        encoded = max(len(fold(events[:first]).messages) - 1, 0)
        for upto in (second, len(lines)):
            with path.open("ab") as log:
                log.write(b"".join(lines[path.read_bytes().count(b"\n") : upto]))
            with Session.open(path, fsync="never", snapshot_every=0) as session:
                expected, state = fold(events[:upto]), session.state
                assert session.snapshot_note == ""
                # Ready without decoding the messages: what the loop and listings need first.
                assert (state.frontier, state.open_calls, state.usage, state.title, state.status, state.seq, len(state.messages)) == (
                    expected.frontier,
                    expected.open_calls,
                    expected.usage,
                    expected.title,
                    expected.status,
                    expected.seq,
                    len(expected.messages),
                )
                assert state.messages.encoded == encoded
                if upto == second:
                    session.snapshot()
                    assert state.messages.encoded == encoded  # the new snapshot spliced them in still encoded
                    encoded = max(len(expected.messages) - 1, 0)
                assert state == expected and state.messages == expected.messages
                assert state.to_dict() == expected.to_dict()
                assert session.snapshot_note == ""  # the messages came from the snapshot, not from the log
