"""The agent loop against the real SDK and the fake server: turns, tools, replay rules at the frontier, approvals, interrupts."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.lib.tools import ToolError

import nbagent
from nbagent.record import events as ev
from nbagent.state.decide import UNKNOWN_OUTCOME
from nbagent.tools.decorator import idempotency_key
from tests.support.fake_anthropic import FakeAnthropic, Reply, error, stream_error, text, tool_use, tool_uses
from tests.support.raw_stream import checked, stream_of

pytestmark = pytest.mark.sdk  # run again against the SDK floor in CI (.ci/run)

MODEL = "claude-test"


class Effects:
    """Side effects the test tools performed, in order: (tool name, arguments, key or None)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], str | None]] = []

    def count(self, name: str) -> int:
        return sum(1 for call in self.calls if call[0] == name)


@pytest.fixture
def effects() -> Effects:
    return Effects()


@pytest.fixture
def tools(effects: Effects) -> list[nbagent.Tool]:
    """One tool of each kind replay treats differently."""

    @nbagent.tool(effect="read")
    def lookup(name: str) -> str:
        """Look up a value by name.

        Args:
            name: The name to look up.
        """
        effects.calls.append(("lookup", {"name": name}, None))
        return f"value of {name}"

    @nbagent.tool
    def append_note(text: str) -> str:
        """Append a note to the notebook's log (a side effect).

        Args:
            text: The note.
        """
        effects.calls.append(("append_note", {"text": text}, None))
        return f"noted {text}"

    @nbagent.tool
    def charge(amount: int, idempotency_key: str) -> str:
        """Charge an amount, safely repeatable with the same key.

        Args:
            amount: How much to charge, in cents.
        """
        effects.calls.append(("charge", {"amount": amount}, idempotency_key))
        return f"charged {amount}"

    @nbagent.tool(effect="irreversible")
    def delete_table(table: str) -> str:
        """Drop a table for good.

        Args:
            table: Which table.
        """
        effects.calls.append(("delete_table", {"table": table}, None))
        return f"dropped {table}"

    return [lookup, append_note, charge, delete_table]


@pytest.fixture
def session(log_path: Path) -> Any:
    with nbagent.Session.open(log_path) as opened:
        yield opened


def go(session: nbagent.Session, client: anthropic.Anthropic, prompt: str | None = None, **kw: Any) -> str:
    """nbagent.run with the real SDK client pointed at the fake."""
    return nbagent.run(session, prompt, client=client, model=MODEL, **kw)


def of_type(session: nbagent.Session, kind: str) -> list[dict[str, Any]]:
    return [e for e in session.events() if e["type"] == kind]


def results(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in message["content"] if b.get("type") == "tool_result"]


def tool_turn(session: nbagent.Session, *calls: tuple[str, dict[str, Any], str], text_before: str = "On it.") -> None:
    """Record, as the loop would, a user request and an assistant message asking for ``calls`` (name, input, id)."""
    session.append(ev.USER_MSG, content="do the job")
    session.append(ev.MODEL_CALL, model=MODEL, attempt=1)
    content: list[dict[str, Any]] = [{"type": "text", "text": text_before}]
    content += [{"type": "tool_use", "id": tid, "name": name, "input": args} for name, args, tid in calls]
    session.append(ev.ASSISTANT_MSG, message_id="msg_rec", model=MODEL, content=content, stop_reason="tool_use", usage={})


def started(session: nbagent.Session, tid: str, name: str, effect: str, key: bool = False) -> None:
    """Record a tool_started as the loop would."""
    payload: dict[str, Any] = {"tool_use_id": tid, "name": name, "effect": effect, "attempt": 1}
    if key:
        payload["idempotency_key"] = idempotency_key(session.id, tid)
    session.append(ev.TOOL_STARTED, **payload)


# Plain turns --------------------------------------------------------------------------------------
def test_plain_text_turn(fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session) -> None:
    fake.script(text("Hello there, how can I help?"))
    # An interval no stream outlasts, even on a loaded machine (the default 50 ms failed once in CI).
    assert go(session, client, "hi", delta_interval=3600) == "Hello there, how can I help?"
    assert session.messages == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello there, how can I help?"}]},
    ]
    assert len(fake.requests) == 1 and fake.requests[0].body["messages"] == [{"role": "user", "content": "hi"}]
    kinds = [e["type"] for e in session.events()]
    # the first turn records the context settings the fold clips tool results by
    assert kinds[:4] == ["session_start", "context", "user_msg", "model_call"] and kinds[-1] == "assistant_msg"
    assert of_type(session, ev.DELTA) == []  # streamed within the delta interval: its assistant_msg alone says it
    assert session.state.frontier == "done" and session.state.status == "done"


def test_tool_turn(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool], effects: Effects
) -> None:
    fake.script(tool_use("lookup", {"name": "pi"}, id="toolu_a", text="Let me look."), text("Pi is about 3.14."))
    assert go(session, client, "what is pi?", tools=tools) == "Pi is about 3.14."
    assert effects.calls == [("lookup", {"name": "pi"}, None)]
    second = fake.requests[1].body["messages"]
    assert second[1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_a", "name": "lookup", "input": {"name": "pi"}},
        ],
    }
    assert second[2] == {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "value of pi"}]}
    assert session.messages == second + [{"role": "assistant", "content": [{"type": "text", "text": "Pi is about 3.14."}]}]


def test_parallel_tool_calls_answered_in_one_user_message_in_order(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool], effects: Effects
) -> None:
    fake.script(tool_uses([("lookup", {"name": "a"}, "toolu_1"), ("append_note", {"text": "b"}, "toolu_2")]), text("done"))
    go(session, client, "both", tools=tools)
    assert [c[0] for c in effects.calls] == ["lookup", "append_note"]
    last = fake.requests[1].body["messages"][-1]
    assert last["role"] == "user"
    assert [(b["tool_use_id"], b["content"]) for b in results(last)] == [("toolu_1", "value of a"), ("toolu_2", "noted b")]
    assert len(fake.requests[1].body["messages"]) == 3


def test_request_carries_schemas_cache_control_system_and_max_tokens(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool]
) -> None:
    fake.script(text("ok"))
    go(session, client, "hi", tools=tools, system="You are terse.", max_tokens=321)
    body = fake.requests[0].body
    assert body["model"] == MODEL and body["max_tokens"] == 321 and body["system"] == "You are terse." and body["stream"] is True
    assert body["cache_control"] == {"type": "ephemeral"}
    by_name = {t["name"]: t for t in body["tools"]}
    assert list(by_name) == ["lookup", "append_note", "charge", "delete_table"]
    assert by_name["lookup"]["description"].startswith("Look up a value by name.")
    schema = by_name["lookup"]["input_schema"]
    assert schema["type"] == "object" and schema["required"] == ["name"]
    assert schema["properties"]["name"]["type"] == "string"
    assert schema["properties"]["name"]["description"] == "The name to look up."
    charge = by_name["charge"]["input_schema"]
    assert set(charge["properties"]) == {"amount"} and charge["required"] == ["amount"]
    assert charge["properties"]["amount"]["type"] == "integer"
    assert "idempotency_key" not in str(body)


# Replay rules at the frontier -------------------------------------------------------------------------
def test_completed_turn_is_not_requested_again(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool], effects: Effects
) -> None:
    tool_turn(session, ("append_note", {"text": "x"}, "toolu_a"))
    started(session, "toolu_a", "append_note", "write")
    session.append(ev.TOOL_RESULT, tool_use_id="toolu_a", content="noted x (recorded)")
    session.append(ev.ASSISTANT_MSG, content=[{"type": "text", "text": "All done."}], stop_reason="end_turn", usage={})
    before = session.messages
    assert go(session, client, tools=tools) == "All done."
    assert fake.requests == [] and effects.calls == []
    assert session.messages == before


def test_completed_call_is_not_rerun_and_recorded_messages_are_sent_verbatim(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool], effects: Effects
) -> None:
    tool_turn(session, ("append_note", {"text": "x"}, "toolu_a"), ("lookup", {"name": "y"}, "toolu_b"), text_before="Two things.")
    started(session, "toolu_a", "append_note", "write")
    session.append(ev.TOOL_RESULT, tool_use_id="toolu_a", content="noted x (recorded)")
    recorded = [dict(m) for m in session.messages]
    fake.script(text("Finished."))
    assert go(session, client, tools=tools) == "Finished."
    assert effects.calls == [("lookup", {"name": "y"}, None)]  # only the dangling call ran
    sent = fake.requests[0].body["messages"]
    assert sent[:2] == recorded[:2]  # the recorded user and assistant messages, exactly
    assert results(sent[2]) == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "noted x (recorded)"},
        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "value of y"},
    ]
    assert len(fake.requests) == 1


def test_trailing_user_turn_calls_the_model(fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session) -> None:
    session.append(ev.USER_MSG, content="are you there?")
    fake.script(text("Yes."))
    assert go(session, client) == "Yes."
    assert [r.body["messages"] for r in fake.requests] == [[{"role": "user", "content": "are you there?"}]]


def test_cut_off_stream_is_discarded_and_requested_again(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session
) -> None:
    session.append(ev.USER_MSG, content="tell me")
    session.append(ev.MODEL_CALL, model=MODEL, attempt=1)
    session.append(ev.DELTA, index=0, text="Half a sen")
    assert session.state.partial == ["Half a sen"]
    fake.script(text("A whole sentence."))
    assert go(session, client) == "A whole sentence."
    assert fake.requests[0].body["messages"] == [{"role": "user", "content": "tell me"}]
    assert session.messages[-1] == {"role": "assistant", "content": [{"type": "text", "text": "A whole sentence."}]}
    assert "Half a sen" not in str(session.messages)


def test_dangling_call_without_tool_started_runs(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool], effects: Effects
) -> None:
    tool_turn(session, ("append_note", {"text": "x"}, "toolu_a"))
    fake.script(text("ok"))
    go(session, client, tools=tools, approval="deny")  # no approval is needed: it never started
    assert effects.calls == [("append_note", {"text": "x"}, None)]
    assert of_type(session, ev.APPROVAL) == []
    assert results(fake.requests[0].body["messages"][-1]) == [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "noted x"}]


def test_started_read_call_runs_again(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool], effects: Effects
) -> None:
    tool_turn(session, ("lookup", {"name": "x"}, "toolu_a"))
    started(session, "toolu_a", "lookup", "read")
    fake.script(text("ok"))
    go(session, client, tools=tools, approval="deny")
    assert effects.calls == [("lookup", {"name": "x"}, None)]
    assert [e["attempt"] for e in of_type(session, ev.TOOL_STARTED)] == [1, 2]
    assert of_type(session, ev.APPROVAL) == []


def test_started_keyed_call_runs_again_with_the_recorded_key(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool], effects: Effects
) -> None:
    tool_turn(session, ("charge", {"amount": 5}, "toolu_a"))
    started(session, "toolu_a", "charge", "write", key=True)
    recorded_key = of_type(session, ev.TOOL_STARTED)[0]["idempotency_key"]
    fake.script(text("ok"))
    go(session, client, tools=tools, approval="deny")
    assert effects.calls == [("charge", {"amount": 5}, recorded_key)]
    assert [e["idempotency_key"] for e in of_type(session, ev.TOOL_STARTED)] == [recorded_key, recorded_key]
    assert of_type(session, ev.APPROVAL) == []


def test_key_is_stable_across_an_interrupt_and_a_new_process_view(fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path) -> None:
    keys: list[str] = []

    @nbagent.tool
    def pay(amount: int, idempotency_key: str) -> str:
        """Pay once.

        Args:
            amount: Cents.
        """
        keys.append(idempotency_key)
        if len(keys) == 1:
            raise KeyboardInterrupt  # the user pressed interrupt while the payment was in flight
        return "paid"

    fake.script(tool_use("pay", {"amount": 3}, id="toolu_p"), text("Paid."))
    with nbagent.Session.open(log_path) as session:
        with pytest.raises(nbagent.Interrupted):
            go(session, client, "pay", tools=[pay])
        session_id = session.id
    with nbagent.Session.open(log_path) as session:  # reopened: the key comes from the log, not from memory
        assert go(session, client, tools=[pay]) == "Paid."
    assert keys == [idempotency_key(session_id, "toolu_p")] * 2
    assert len(fake.requests) == 2


@pytest.mark.parametrize("approval", ["deny", "ask"])
def test_started_unkeyed_write_is_not_repeated_when_declined(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool], effects: Effects, approval: str
) -> None:
    tool_turn(session, ("append_note", {"text": "x"}, "toolu_a"))
    started(session, "toolu_a", "append_note", "write")
    fake.script(text("I see the note may or may not exist."))
    go(session, client, tools=tools, approval=approval)  # pytest's stdin is no TTY: "ask" cannot ask anyone
    assert effects.calls == []
    [result] = results(fake.requests[0].body["messages"][-1])
    assert result["is_error"] is True and result["content"].startswith(UNKNOWN_OUTCOME)
    assert "outcome is unknown" in result["content"]
    if approval == "ask":
        assert "nobody can answer" in result["content"]
    decisions = [(e["reason"], e["decision"]) for e in of_type(session, ev.APPROVAL)]
    assert decisions == [("unknown_outcome", "pending"), ("unknown_outcome", "declined")]
    assert of_type(session, ev.APPROVAL)[1]["by"] == ("deny" if approval == "deny" else "nobody")


def test_started_unkeyed_write_runs_again_when_approved(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool], effects: Effects
) -> None:
    asked: list[nbagent.ApprovalRequest] = []
    tool_turn(session, ("append_note", {"text": "x"}, "toolu_a"))
    started(session, "toolu_a", "append_note", "write")
    fake.script(text("ok"))
    go(session, client, tools=tools, approval=lambda request: asked.append(request) or True)
    assert effects.calls == [("append_note", {"text": "x"}, None)]
    assert results(fake.requests[0].body["messages"][-1]) == [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "noted x"}]
    assert [(r.tool_use_id, r.tool_name, r.input, r.effect, r.reason) for r in asked] == [
        ("toolu_a", "append_note", {"text": "x"}, "write", "unknown_outcome")
    ]
    assert "interrupted" in asked[0].describe()


def test_auto_never_repeats_a_write_of_unknown_outcome(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool], effects: Effects
) -> None:
    tool_turn(session, ("append_note", {"text": "x"}, "toolu_a"))
    started(session, "toolu_a", "append_note", "write")
    fake.script(text("I will check whether the note exists first."))
    go(session, client, tools=tools, approval="auto")
    assert effects.calls == []  # "auto" approves only the user's own new calls, never a repeat of unknown outcome
    [result] = results(fake.requests[0].body["messages"][-1])
    assert result["is_error"] and result["content"].startswith(UNKNOWN_OUTCOME) and "'auto'" in result["content"]
    assert of_type(session, ev.APPROVAL)[1]["by"] == "auto" and of_type(session, ev.APPROVAL)[1]["decision"] == "declined"


def test_irreversible_tool_asks_before_it_runs(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool], effects: Effects
) -> None:
    asked: list[nbagent.ApprovalRequest] = []

    def policy(request: nbagent.ApprovalRequest) -> nbagent.Decision:
        asked.append(request)
        assert ("delete_table", request.input, None) not in effects.calls  # asked before, not after
        return nbagent.Decision(request.input["table"] == "scratch", "test", "not that table")

    fake.script(
        tool_uses([("delete_table", {"table": "scratch"}, "toolu_1"), ("delete_table", {"table": "users"}, "toolu_2")]),
        text("Dropped scratch only."),
    )
    go(session, client, "clean up", tools=tools, approval=policy)
    assert effects.calls == [("delete_table", {"table": "scratch"}, None)]
    assert [(r.tool_name, r.reason, r.effect) for r in asked] == [("delete_table", "irreversible", "irreversible")] * 2
    assert "irreversible" in asked[0].describe()
    approvals = [(e["tool_use_id"], e["decision"]) for e in of_type(session, ev.APPROVAL)]
    assert approvals == [("toolu_1", "pending"), ("toolu_1", "approved"), ("toolu_2", "pending"), ("toolu_2", "declined")]
    first, second = results(fake.requests[1].body["messages"][-1])
    assert first == {"type": "tool_result", "tool_use_id": "toolu_1", "content": "dropped scratch"}
    assert second["is_error"] is True and second["content"] == "not that table"


def test_ask_without_a_tty_behaves_as_deny_and_says_so(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool], effects: Effects
) -> None:
    fake.script(tool_use("delete_table", {"table": "t"}, id="toolu_1"), text("ok"))
    go(session, client, "drop t", tools=tools, approval="ask")
    assert effects.calls == []
    [result] = results(fake.requests[1].body["messages"][-1])
    assert result["is_error"] is True and "nobody can answer" in result["content"]
    assert of_type(session, ev.APPROVAL)[-1]["by"] == "nobody"


# Tool failures ------------------------------------------------------------------------------------------
def test_tool_that_raises_gives_an_error_result_and_the_loop_goes_on(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session
) -> None:
    @nbagent.tool(effect="read")
    def divide(a: float, b: float) -> float:
        """Divide a by b."""
        return a / b

    fake.script(tool_use("divide", {"a": 1, "b": 0}, id="toolu_1"), tool_use("divide", {"a": 1, "b": 4}, id="toolu_2"), text("0.25"))
    assert go(session, client, "divide", tools=[divide]) == "0.25"
    [failed] = results(fake.requests[1].body["messages"][-1])
    assert failed["is_error"] is True and "ZeroDivisionError" in failed["content"] and "division by zero" in failed["content"]
    [ok] = results(fake.requests[2].body["messages"][-1])
    assert ok == {"type": "tool_result", "tool_use_id": "toolu_2", "content": "0.25"}


def test_invalid_arguments_from_the_model_are_an_error_result(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool], effects: Effects
) -> None:
    fake.script(tool_use("charge", {"amount": "a lot"}, id="toolu_1"), tool_use("lookup", {}, id="toolu_2"), text("sorry"))
    go(session, client, "charge", tools=tools)
    assert effects.calls == []
    [bad_type] = results(fake.requests[1].body["messages"][-1])
    assert bad_type["is_error"] is True and "amount" in bad_type["content"]
    [missing] = results(fake.requests[2].body["messages"][-1])
    assert missing["is_error"] is True and "name" in missing["content"]


def test_unknown_tool_name_gets_an_error_naming_the_offered_tools(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool], effects: Effects
) -> None:
    tool_turn(session, ("old_name", {"x": 1}, "toolu_a"))  # recorded with a tool since renamed
    fake.script(text("ok"))
    go(session, client, tools=tools)
    [result] = results(fake.requests[0].body["messages"][-1])
    assert result["is_error"] is True
    assert "'old_name'" in result["content"] and "lookup, append_note, charge, delete_table" in result["content"]
    assert "not run" in result["content"] and effects.calls == []


def test_tool_error_content_passes_through(fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session) -> None:
    blocks = [{"type": "text", "text": "quota exceeded; try tomorrow"}]

    @nbagent.tool
    def upload(name: str) -> str:
        """Upload a file."""
        raise ToolError(blocks)

    fake.script(tool_use("upload", {"name": "f"}, id="toolu_1"), text("ok"))
    go(session, client, "upload", tools=[upload])
    [result] = results(fake.requests[1].body["messages"][-1])
    assert result == {"type": "tool_result", "tool_use_id": "toolu_1", "content": blocks, "is_error": True}


def test_tool_returning_structured_values(fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session) -> None:
    @nbagent.tool(effect="read")
    def stats() -> dict[str, int]:
        """Some numbers."""
        return {"rows": 3}

    fake.script(tool_use("stats", {}, id="toolu_1"), text("3 rows"))
    go(session, client, "stats", tools=[stats])
    assert results(fake.requests[1].body["messages"][-1])[0]["content"] == '{"rows": 3}'


# Model errors through the loop ----------------------------------------------------------------------------
def test_overloaded_then_success_is_retried_by_the_loop_and_each_attempt_logged(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session
) -> None:
    fake.script(error(529), error(429, retry_after="0.01"), text("made it"))
    assert go(session, client, "hi") == "made it"
    assert len(fake.requests) == 3 and fake.requests[0].body == fake.requests[2].body
    errors = of_type(session, ev.MODEL_ERROR)
    assert [(e["status"], e["attempt"], e["retry_in"]) for e in errors] == [(529, 1, 0.001), (429, 2, 0.01)]  # the API's waits
    assert len(of_type(session, ev.ASSISTANT_MSG)) == 1


def test_one_retry_budget_caps_the_http_attempts_of_a_call(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session
) -> None:
    """The SDK retried twice inside each of the loop's attempts: one call could make 9 requests. Now retries + 1."""
    fake.script(*[error(529) for _ in range(10)])
    with pytest.raises(nbagent.ModelError, match="Overloaded"):
        go(session, client, "hi", retries=3)
    assert len(fake.requests) == 4
    assert [e.get("retry_in") is not None for e in of_type(session, ev.MODEL_ERROR)] == [True, True, True, False]


def test_x_should_retry_false_is_not_retried(fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session) -> None:
    fake.script(error(500, x_should_retry=False), text("never asked"))
    with pytest.raises(nbagent.ModelError):
        go(session, client, "hi")
    assert len(fake.requests) == 1 and of_type(session, ev.MODEL_ERROR)[0]["retryable"] is False


def test_mid_stream_error_is_logged_and_retried_by_the_loop(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session
) -> None:
    fake.script(stream_error(after=4, partial=text("never finished", chunks=4)), text("finished"))
    assert go(session, client, "hi") == "finished"
    assert len(fake.requests) == 2 and fake.requests[1].body["messages"] == [{"role": "user", "content": "hi"}]
    [failure] = of_type(session, ev.MODEL_ERROR)
    assert failure["kind"] == "overloaded_error" and failure["retryable"] is True and failure["status"] is None
    assert [e["attempt"] for e in of_type(session, ev.MODEL_CALL)] == [1, 2]
    assert session.messages == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "text", "text": "finished"}]}]


def note_stream(tool_use_id: str, partial_json: str, *, whole: bool) -> Reply:
    """A reply that calls append_note with ``partial_json`` as its input; not ``whole``: its stream stops there."""
    call = {"type": "tool_use", "id": tool_use_id, "name": "append_note", "input": {}}
    delta = {"type": "input_json_delta", "partial_json": partial_json}
    events = stream_of((call, [delta]), usage={"output_tokens": 9}, stop="tool_use", message_id="msg_" + tool_use_id, model=MODEL)
    return checked(events if whole else events[:3])  # cut: message_start, the block's start, its one delta


# Replies nothing of which may be used. The SDK's stream helper let both through: a stream a gateway closed cleanly
# mid-reply (no error event, no message_delta, no message_stop) came back as a reply with stop_reason None and its cut
# input parsed leniently ({"text": "half a note"}), and the loop ran that call; input that is not JSON raised a bare
# ValueError out of nbagent.run.
UNUSABLE = {
    "closed before message_stop": (note_stream("toolu_cut", '{"text": "half a note"', whole=False), "connection_error", "message_stop"),
    "a tool input that is not JSON": (note_stream("toolu_bad", '{"text": x}', whole=True), "api_error", "not JSON"),
}


@pytest.mark.parametrize("case", UNUSABLE)
def test_a_reply_that_cannot_be_used_runs_nothing_of_it_and_is_asked_again(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool], effects: Effects, case: str
) -> None:
    reply, kind, said = UNUSABLE[case]
    fake.script(reply, tool_use("append_note", {"text": "the whole note"}, id="toolu_whole"), text("noted"))
    assert go(session, client, "note it", tools=tools) == "noted"
    assert effects.calls == [("append_note", {"text": "the whole note"}, None)]
    [failure] = of_type(session, ev.MODEL_ERROR)
    assert failure["kind"] == kind and failure["retryable"] is True and said in failure["message"]
    assert "toolu_cut" not in json.dumps(session.messages) and "toolu_bad" not in json.dumps(session.messages)


def test_bad_request_raises_is_logged_and_the_session_stays_resumable(
    fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path
) -> None:
    refusal = error(400, message="messages: text content blocks must be non-empty")
    fake.script(refusal)  # it answers a request asking for server compaction, and says nothing of it: not a reason to fall back
    with nbagent.Session.open(log_path) as session:
        with pytest.raises(nbagent.ModelError, match="text content blocks must be non-empty") as raised:
            go(session, client, "hi")
        assert raised.value.status == 400 and raised.value.kind == "invalid_request_error" and not raised.value.retryable
        [failure] = of_type(session, ev.MODEL_ERROR)  # not retried, not sent again without compaction (context.refuses_compaction)
        assert failure["status"] == 400 and "non-empty" in failure["message"] and "retry_in" not in failure
        assert len(fake.requests) == 1 and not session.state.server_refused
    fake.script(text("Now it works."))
    with nbagent.Session.open(log_path) as session:
        assert session.state.frontier == "model"
        with pytest.raises(nbagent.RefusedRequestError):  # the same request is never sent again (tests/agent/test_refused.py)
            go(session, client)
        assert len(fake.requests) == 1
        assert go(session, client, "let me put it another way") == "Now it works."
        asked = [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "let me put it another way"}]}]
        assert fake.requests[1].body["messages"] == asked
        assert session.messages == [*asked, {"role": "assistant", "content": [{"type": "text", "text": "Now it works."}]}]


def test_unauthorized_says_to_check_the_key(fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session) -> None:
    fake.script(error(401))
    with pytest.raises(nbagent.ModelError, match="ANTHROPIC_API_KEY"):
        go(session, client, "hi")
    assert of_type(session, ev.MODEL_ERROR)[0]["status"] == 401


def test_usage_totals_are_the_sum_over_replies(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool]
) -> None:
    first = {"input_tokens": 11, "output_tokens": 7, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 0}
    second = {"input_tokens": 13, "output_tokens": 5, "cache_creation_input_tokens": 20, "cache_read_input_tokens": 100}
    fake.script(tool_use("lookup", {"name": "a"}, usage=first), text("ok", usage=second))
    go(session, client, "hi", tools=tools)
    assert session.usage == {key: first[key] + second[key] for key in first}
    with nbagent.Session.open(session.path.with_name("other.jsonl")) as other:
        assert other.usage == dict.fromkeys(first, 0)


def test_prompt_caching_reads_the_history_from_cache(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool]
) -> None:
    fake.script(tool_use("lookup", {"name": "a"}), text("first answer"), text("second answer"))
    go(session, client, "hi " * 200, tools=tools, system="Be helpful. " * 50)
    go(session, client, "and then?", tools=tools, system="Be helpful. " * 50)
    usages = [e["usage"] for e in of_type(session, ev.ASSISTANT_MSG)]
    assert usages[0]["cache_read_input_tokens"] == 0 and usages[0]["cache_creation_input_tokens"] > 0
    for later in usages[1:]:
        assert later["cache_read_input_tokens"] > later["input_tokens"] + later["cache_creation_input_tokens"]
    assert session.usage["cache_read_input_tokens"] == sum(u["cache_read_input_tokens"] for u in usages) > 0


# Moving on and interrupting ---------------------------------------------------------------------------------
def test_new_prompt_answers_open_calls_first_so_the_history_stays_valid(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool], effects: Effects
) -> None:
    tool_turn(session, ("append_note", {"text": "x"}, "toolu_a"), ("lookup", {"name": "y"}, "toolu_b"))
    started(session, "toolu_a", "append_note", "write")
    fake.script(text("Sure, something else."))
    assert go(session, client, "never mind, do something else", tools=tools) == "Sure, something else."
    assert effects.calls == []
    last = fake.requests[0].body["messages"][-1]  # the server itself rejects unanswered tool_use with a 400
    first, second, new_text = last["content"]
    assert first["tool_use_id"] == "toolu_a" and first["is_error"] is True and "moved on" in first["content"]
    assert "outcome is unknown" in first["content"]
    assert second["tool_use_id"] == "toolu_b" and second["is_error"] is True and "moved on" in second["content"]
    assert new_text == {"type": "text", "text": "never mind, do something else"}
    assert len(fake.requests) == 1


def test_keyboard_interrupt_in_a_tool_is_logged_and_the_next_run_continues(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, effects: Effects
) -> None:
    @nbagent.tool
    def slow_write(text: str) -> str:
        """Write slowly."""
        effects.calls.append(("slow_write", {"text": text}, None))
        raise KeyboardInterrupt

    fake.script(tool_use("slow_write", {"text": "x"}, id="toolu_1"))
    with pytest.raises(nbagent.Interrupted) as raised:
        go(session, client, "write", tools=[slow_write])
    assert isinstance(raised.value, KeyboardInterrupt) and "continues" in str(raised.value)
    [interrupted] = of_type(session, ev.INTERRUPTED)
    assert interrupted["open_calls"] == ["toolu_1"] and session.state.status == "interrupted"
    assert session.state.frontier == "tools"
    fake.script(text("The write may or may not have happened."))
    go(session, client, tools=[slow_write], approval="deny")  # started, un-keyed write: not repeated
    assert effects.count("slow_write") == 1
    [result] = results(fake.requests[1].body["messages"][-1])
    assert result["is_error"] is True and UNKNOWN_OUTCOME in result["content"]
    assert len(fake.requests) == 2


def test_empty_prompt_and_empty_session_say_what_to_do(client: anthropic.Anthropic, session: nbagent.Session) -> None:
    with pytest.raises(nbagent.NbagentError, match="empty"):
        go(session, client, "   ")
    with pytest.raises(nbagent.NbagentError, match="pass a prompt"):
        go(session, client)


def test_anthropic_model_without_key_or_client_says_to_set_the_key(monkeypatch: pytest.MonkeyPatch, session: nbagent.Session) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(nbagent.NbagentError, match="ANTHROPIC_API_KEY"):
        nbagent.run(session, "hi", model=MODEL)
    assert session.messages == []  # nothing was logged


def test_interrupt_while_the_reply_streams_is_logged_and_the_call_is_made_again(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session
) -> None:
    def ctrl_c_on_first_delta(event: dict[str, Any]) -> None:
        if event["type"] == ev.DELTA:
            raise KeyboardInterrupt  # what Ctrl-C in the main thread does while the SDK reads the stream

    unsubscribe = session.subscribe(ctrl_c_on_first_delta, since=session.seq)
    fake.script(text("a reply that is cut short by the user", chunks=5))
    with pytest.raises(nbagent.Interrupted):
        go(session, client, "hi", delta_interval=0)  # a line per delta: the first one reaches the subscriber mid-stream
    unsubscribe()
    assert of_type(session, ev.INTERRUPTED)[0]["during"] == "model"
    assert of_type(session, ev.ASSISTANT_MSG) == [] and session.state.frontier == "model"
    fake.script(text("complete reply"))
    assert go(session, client) == "complete reply"
    assert [r.body["messages"] for r in fake.requests] == [[{"role": "user", "content": "hi"}]] * 2


@pytest.mark.parametrize("where", ["asking", "showing the logged question"])
def test_interrupt_while_waiting_for_approval_asks_again_on_resume(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, tools: list[nbagent.Tool], effects: Effects, where: str
) -> None:
    def walk_away(request: nbagent.ApprovalRequest) -> bool:
        raise KeyboardInterrupt

    def ctrl_c_on_the_question(event: dict[str, Any]) -> None:
        if where != "asking" and event["type"] == ev.APPROVAL and event.get("decision") == "pending":
            raise KeyboardInterrupt  # a view that follows the log is drawing the question when Ctrl-C comes

    unsubscribe = session.subscribe(ctrl_c_on_the_question, since=session.seq)
    fake.script(tool_use("delete_table", {"table": "t"}, id="toolu_1"))
    with pytest.raises(nbagent.Interrupted):
        go(session, client, "drop t", tools=tools, approval=walk_away)
    unsubscribe()
    # the question's end is logged before the interrupt: asked, interrupted, then the interruption
    assert [(e["type"], e.get("decision")) for e in session.events()][-3:] == [
        (ev.APPROVAL, "pending"),
        (ev.APPROVAL, "interrupted"),
        (ev.INTERRUPTED, None),
    ]
    assert effects.calls == [] and session.state.frontier == "tools"
    fake.script(text("dropped"))
    go(session, client, tools=tools, approval="auto")
    assert effects.calls == [("delete_table", {"table": "t"}, None)]
    assert [e["decision"] for e in of_type(session, ev.APPROVAL)] == ["pending", "interrupted", "pending", "approved"]


def test_pause_turn_sends_the_paused_message_back_to_continue(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session
) -> None:
    fake.script(text("Searching...", stop_reason="pause_turn"), text("Found it."))
    assert go(session, client, "search") == "Found it."
    second = fake.requests[1].body["messages"]
    assert second == [{"role": "user", "content": "search"}, {"role": "assistant", "content": [{"type": "text", "text": "Searching..."}]}]


def test_empty_reply_is_recorded_so_the_next_request_stays_valid(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session
) -> None:
    fake.script(Reply(content=[]), text("second"))
    go(session, client, "first")
    assert session.messages[-1]["content"][0]["text"]  # a placeholder, never an empty assistant turn
    assert go(session, client, "again") == "second"  # the server accepted the history


def test_loop_gives_up_after_its_retries_and_the_session_can_resume(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session
) -> None:
    fake.script(stream_error(after=3), stream_error(after=3))
    with pytest.raises(nbagent.ModelError, match="Overloaded"):
        go(session, client, "hi", retries=1)
    assert [e["attempt"] for e in of_type(session, ev.MODEL_ERROR)] == [1, 2]
    fake.script(text("back"))
    assert go(session, client) == "back"
    assert len(fake.requests) == 3 and all(r.body["messages"] == [{"role": "user", "content": "hi"}] for r in fake.requests)


def test_replay_rules_hold_after_reopening_from_a_snapshot(
    fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path, tools: list[nbagent.Tool], effects: Effects
) -> None:
    with nbagent.Session.open(log_path) as session:
        tool_turn(
            session, ("append_note", {"text": "x"}, "toolu_a"), ("charge", {"amount": 2}, "toolu_b"), ("lookup", {"name": "z"}, "toolu_c")
        )
        started(session, "toolu_a", "append_note", "write")
        started(session, "toolu_b", "charge", "write", key=True)
        session.append(ev.TOOL_RESULT, tool_use_id="toolu_c", content="z was recorded")
        key = idempotency_key(session.id, "toolu_b")
    assert log_path.with_name(log_path.name + ".snapshot").exists()  # closing wrote one
    fake.script(text("ok"))
    with nbagent.Session.open(log_path) as session:
        go(session, client, tools=tools, approval="deny")
    assert effects.calls == [("charge", {"amount": 2}, key)]  # the write is not repeated, the read not re-run
    # Results stand in the reply's order, whichever was logged first (parallel calls log them as they finish).
    note, charge, recorded = results(fake.requests[0].body["messages"][-1])
    assert recorded == {"type": "tool_result", "tool_use_id": "toolu_c", "content": "z was recorded"}
    assert note["tool_use_id"] == "toolu_a" and note["is_error"] and UNKNOWN_OUTCOME in note["content"]
    assert charge == {"type": "tool_result", "tool_use_id": "toolu_b", "content": "charged 2"}


# Stream deltas in the log ---------------------------------------------------------------------------
def loop_with(session: nbagent.Session, client: anthropic.Anthropic, **kw: Any) -> nbagent.Loop:
    return nbagent.Loop(session, model=nbagent.AnthropicModel(MODEL, client=client), **kw)


def delta_texts(session: nbagent.Session) -> list[tuple[int, str]]:
    return [(e["index"], e.get("text", e.get("partial_json", ""))) for e in of_type(session, ev.DELTA)]


def test_a_reply_streamed_within_the_interval_is_logged_as_its_assistant_msg_alone(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session
) -> None:
    words = " ".join(f"word{n}" for n in range(40))  # 39 text deltas of 8 characters
    fake.script(tool_use("lookup", {"name": "pi"}, id="toolu_a", text=words), text("done"))
    loop_with(session, client, tools=[], approval="deny", delta_interval=3600).run("hi")
    assert delta_texts(session) == []  # no view could have been shown any of it: nothing repeats the replies
    assert [e["content"][0]["text"] for e in of_type(session, ev.ASSISTANT_MSG)] == [words, "done"]


def test_a_reply_slower_than_the_interval_streams_into_the_log_and_ends_whole(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session
) -> None:
    fake.script(tool_use("lookup", {"name": "pi"}, id="toolu_a", text="Let me look it up.", delay=0.03), text("done"))
    loop_with(session, client, tools=[], approval="deny", delta_interval=0.01).run("hi")
    first_reply = of_type(session, ev.ASSISTANT_MSG)[0]
    lines = [(e["index"], e.get("text", e.get("partial_json", ""))) for e in of_type(session, ev.DELTA) if e["seq"] < first_reply["seq"]]
    assert len(lines) >= 2 and {index for index, _ in lines} == {0, 1}  # written as it came, both blocks
    assert "".join(t for i, t in lines if i == 0) == "Let me look it up."
    assert json.loads("".join(t for i, t in lines if i == 1)) == {"name": "pi"}


def test_a_zero_interval_logs_every_delta_as_it_comes(fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session) -> None:
    fake.script(text("abc def ghi jkl", chunks=4))  # pieces end on spaces, so none is held back
    loop_with(session, client, delta_interval=0).run("hi")
    assert delta_texts(session) == [(0, "abc "), (0, "def "), (0, "ghi "), (0, "jkl")]


def test_text_streamed_before_a_stall_reaches_the_log_and_a_dropped_stream_is_a_model_error(fake: FakeAnthropic, log_path: Path) -> None:
    # SSE events: message_start, ping, block start, then 3 deltas ("aaaa ", "bbbb ", "cccc ") and a stall.
    fake.script(text("aaaa bbbb cccc dddd eeee", chunks=5, hang_after=6))
    slow = anthropic.Anthropic(base_url=fake.base_url, api_key="test-key", max_retries=0, timeout=30)
    failures: list[BaseException] = []
    with nbagent.Session.open(log_path) as session:

        def run() -> None:
            try:
                loop_with(session, slow, retries=0, delta_interval=0.05).run("hi")
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        deadline = time.monotonic() + 20
        while "".join(t for _, t in delta_texts(session)) != "aaaa bbbb cccc " and time.monotonic() < deadline:
            time.sleep(0.02)
        logged = "".join(t for _, t in delta_texts(session))
        fake.stop()  # ends the stall: the connection drops, the loop logs a model error
        worker.join(30)
        lines = delta_texts(session)
        [error] = of_type(session, ev.MODEL_ERROR)
    assert logged == "aaaa bbbb cccc ", "the flusher did not write what arrived before the stall"
    assert not worker.is_alive() and failures and isinstance(failures[0], nbagent.ModelError)
    assert error["kind"] == "connection_error" and error["retryable"] is True
    assert len(lines) <= 3  # one line after the interval (more only if the deltas came that far apart)
