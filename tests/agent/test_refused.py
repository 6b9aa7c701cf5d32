"""A request the API refuses as malformed is never sent again unchanged: the rule in the fold, the loop, and the ways out."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

import nbagent
from nbagent.record import events as ev
from nbagent.state.fold import DROP_THINKING, fold
from tests.support import fake_context
from tests.support.fake_anthropic import FakeAnthropic, error, text

pytestmark = pytest.mark.sdk  # run again against the SDK floor in CI (.ci/run)

MODEL = "claude-test"
REFUSAL = {"message": "messages.1.content.0: Invalid `signature` in `thinking` block", "status": 400, "kind": "invalid_request_error"}


def events(*specs: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"seq": n, "ts": 0.0, "type": kind, **payload} for n, (kind, payload) in enumerate(specs, 1)]


START = [(ev.SESSION_START, {"session_id": "s"}), (ev.USER_MSG, {"content": "go"})]


@pytest.mark.parametrize(
    ("error", "refused"),
    [
        (dict(REFUSAL, retryable=False), True),
        (dict(REFUSAL, retryable=True), False),  # the API said to retry (x-should-retry)
        (dict(REFUSAL, kind="prompt_too_long", retryable=False), False),  # a compaction answers it
        (dict(REFUSAL, status=500, retryable=False), False),  # not the request's fault
        (dict(REFUSAL, status=None, retryable=False), False),  # mid-stream
    ],
)
def test_which_errors_refuse_the_request(error: dict[str, Any], refused: bool) -> None:
    assert bool(fold(events(*START, (ev.MODEL_ERROR, error))).refused) == refused


@pytest.mark.parametrize(
    ("after", "cleared"),
    [
        ((ev.USER_MSG, {"content": "something else"}), True),
        ((ev.NOTE, {"kind": DROP_THINKING}), True),
        ((ev.NOTE, {"kind": "kernel_restarted", "to_model": "the kernel restarted"}), True),
        ((ev.CONTEXT, {"result_budget": 1000}), True),
        ((ev.ASSISTANT_MSG, {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"}), True),
        ((ev.MODEL_CALL, {"model": MODEL, "attempt": 2}), False),
        ((ev.NOTE, {"kind": "kernel_state_restored", "text": "re-ran 2 calls"}), False),  # changes no request
        ((ev.INTERRUPTED, {"during": "model"}), False),
    ],
)
def test_what_clears_a_refusal(after: tuple[str, dict[str, Any]], cleared: bool) -> None:
    state = fold(events(*START, (ev.MODEL_ERROR, dict(REFUSAL, retryable=False)), after))
    assert (state.refused == "") == cleared


def test_drop_thinking_leaves_every_thinking_block_out_and_never_an_empty_message() -> None:
    thought = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    state = fold(
        events(
            *START,
            (ev.ASSISTANT_MSG, {"content": [thought, {"type": "text", "text": "one"}], "stop_reason": "end_turn"}),
            (ev.USER_MSG, {"content": "two"}),
            (ev.ASSISTANT_MSG, {"content": [{"type": "redacted_thinking", "data": "x"}], "stop_reason": "end_turn"}),
            (ev.NOTE, {"kind": DROP_THINKING}),
        )
    )
    assert [m["content"] for m in state.messages if m["role"] == "assistant"] == [
        [{"type": "text", "text": "one"}],
        [{"type": "text", "text": "(thinking left out)"}],
    ]


def test_a_malformed_request_is_not_sent_again_until_something_changes(
    fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Any
) -> None:
    refusal = error(400, message="messages.0.content.0: something the API does not take")
    small = nbagent.ContextSettings(trigger=2_000)  # compaction is asked for from half the trigger on (context.asks_compaction)
    fake.script(text("short"), refusal)
    with nbagent.Session.open(log_path) as session:
        nbagent.run(session, "hi", client=client, model=MODEL, context=small)
        with pytest.raises(nbagent.RefusedRequestError, match="does not send the same request again") as raised:
            nbagent.run(session, fake_context.past_half(small.threshold), client=client, model=MODEL, context=small)
        assert isinstance(raised.value, nbagent.ModelError) and raised.value.status == 400
        # A 400 to a request asking for server compaction that does not name compaction is not a refusal of compaction
        # (context.refuses_compaction): the request is not sent again without it.
        assert [fake_context.asks(r) for r in fake.requests] == [False, True]
        for _ in range(2):  # a resume, then another: nothing is sent
            with pytest.raises(nbagent.RefusedRequestError, match="drop-thinking"):
                nbagent.run(session, client=client, model=MODEL, context=small)
        assert len(fake.requests) == 2
    with nbagent.Session.open(log_path) as session:  # after a restart too: the rule is the fold's
        with pytest.raises(nbagent.RefusedRequestError):
            nbagent.run(session, client=client, model=MODEL, context=small)
        assert len(fake.requests) == 2
        fake.script(text("better"))
        assert nbagent.run(session, "try this instead", client=client, model=MODEL, context=small) == "better"  # another request
    assert fake.requests[-1].body["messages"][-1]["content"][-1] == {"type": "text", "text": "try this instead"}


def test_drop_thinking_is_the_way_out_of_a_history_the_api_refuses(fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Any) -> None:
    thought = {"type": "thinking", "thinking": "a thought signed elsewhere", "signature": "not-this-servers"}
    with nbagent.Session.open(log_path) as session:
        session.append(ev.USER_MSG, content="first")
        session.append(ev.ASSISTANT_MSG, content=[thought, {"type": "text", "text": "one"}], stop_reason="end_turn", usage={})
        with pytest.raises(nbagent.RefusedRequestError):  # the fake checks signatures, as the API does
            nbagent.run(session, "second", client=client, model=MODEL)
        assert "Invalid `signature`" in session.state.refused
        loop = nbagent.Loop(session, model=nbagent.AnthropicModel(MODEL, client=client))
        loop.drop_thinking()
        fake.script(text("two"))
        assert loop.run() == "two"
    # Two requests: the refused one (its 400 names no compaction: not a fallback, context.refuses_compaction), then the one
    # without the thinking blocks.
    assert "thinking" not in str(fake.requests[-1].body["messages"]) and len(fake.requests) == 2
    kinds = [e.get("kind") for e in nbagent.read_events(log_path) if e["type"] == ev.NOTE]
    assert DROP_THINKING in kinds
    assert any(b.get("type") == "thinking" for e in nbagent.read_events(log_path) if e["type"] == ev.ASSISTANT_MSG for b in e["content"])
