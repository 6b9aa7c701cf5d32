"""Which endpoint a turn's request goes to, through the real SDK and the fake API: the beta one only for a beta."""

from __future__ import annotations

from pathlib import Path

import anthropic
import pytest

import nbagent
from nbagent.model.claude import AnthropicModel
from nbagent.state import binding
from nbagent.state import context as ctx
from tests.support import fake_context
from tests.support.fake_anthropic import FakeAnthropic, RecordedRequest, text, tool_use

pytestmark = pytest.mark.sdk  # run again against the SDK floor in CI (.ci/run)


@pytest.mark.parametrize(
    ("model", "settings", "thinking", "beta"),
    [
        ("claude-test", nbagent.ContextSettings(compact="off"), None, None),  # no beta feature: the plain Messages endpoint
        ("claude-test", nbagent.ContextSettings(compact="local"), None, None),  # nbagent compacts: the API is not asked
        ("claude-test", nbagent.ContextSettings(), None, None),  # "auto": the server compacts, but a short request asks nothing
        ("claude-test", nbagent.ContextSettings(compact="server"), None, None),
        ("claude-sonnet-5-5", nbagent.ContextSettings(compact="off"), "adaptive", binding.BINDING_BETA),  # thinking's binding control
    ],
)
def test_a_turn_uses_the_beta_endpoint_only_for_a_beta(
    fake: FakeAnthropic,
    client: anthropic.Anthropic,
    log_path: Path,
    model: str,
    settings: nbagent.ContextSettings,
    thinking: str | None,
    beta: str | None,
) -> None:
    fake.script(text("fine"))
    with nbagent.Session.open(log_path) as session:
        options = {"thinking": thinking} if thinking else {}
        assert nbagent.run(session, "hi", client=client, model=model, context=settings, **options) == "fine"
    [request] = fake.requests
    assert request.path.split("?")[0] == "/v1/messages"
    if beta is None:
        assert "beta=true" not in request.path and "anthropic-beta" not in request.headers  # SDK 1.x marks beta calls ?beta=true
        assert "context_management" not in request.body
    else:
        assert beta in request.headers["anthropic-beta"].split(",")
        assert ("context_management" in request.body) == (beta == ctx.COMPACT_BETA)


def plain(request: RecordedRequest) -> bool:
    """Whether a request went to the plain Messages endpoint: no beta header, query or field."""
    return (
        request.path == "/v1/messages"
        and "anthropic-beta" not in request.headers
        and "context_management" not in request.body
        and "betas" not in request.body
    )


def test_a_short_session_never_leaves_the_plain_endpoint(fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path) -> None:
    """A default session on a model the server compacts for: turns, a tool call and a resume, all under half the trigger."""

    def double(x: int) -> int:
        """Double a number."""
        return 2 * x

    fake.script(tool_use("double", {"x": 21}), text("42"), text("fine"), text("again"))
    with nbagent.Session.open(log_path) as session:
        assert nbagent.run(session, "double 21", client=client, model="claude-test", tools=[double], approval="auto") == "42"
        assert nbagent.run(session, "thanks", client=client, model="claude-test") == "fine"
    with nbagent.Session.open(log_path) as session:  # resumed from the log: the same rule
        assert nbagent.run(session, "once more", client=client, model="claude-test") == "again"
    assert len(fake.requests) == 4 and all(plain(r) for r in fake.requests)


def test_the_first_request_over_half_the_trigger_asks(fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path) -> None:
    """A session grows a step at a time: each request under half the trigger is plain; the first at or over it asks, and so on."""
    trigger = 3_000
    settings = nbagent.ContextSettings(trigger=trigger)
    fake.responder = lambda request: text("noted " * 40)
    with nbagent.Session.open(log_path) as session:
        for n in range(30):
            nbagent.run(session, f"step {n}: " + "detail " * 60, client=client, model="claude-test", context=settings)
    asked = [fake_context.asks(r) for r in fake.requests]
    first = asked.index(True)
    assert first >= 3 and all(plain(r) for r in fake.requests[:first])  # before: the plain endpoint
    assert all(asked[first:])  # from then on every request asks, the compacted history's included
    sizes = [fake_context.tokens(r.body) for r in fake.requests]
    assert 2 * sizes[first - 1] < trigger <= 2 * sizes[first] + 100  # the first over half (give or take a message's overhead)
    assert all(size < trigger for size, ask in zip(sizes, asked) if not ask)  # the server was never left a request to compact
    messages = fake.requests[-1].body["messages"]
    assert messages[0]["content"][0]["type"] == "compaction"  # the server compacted, and its block went back with the beta


def test_a_recorded_reply_is_reused_whichever_endpoint_the_request_goes_to(
    fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path
) -> None:
    """A reply recorded from the beta endpoint is replayed from the log on resume, never asked for again, and sent back as is."""

    def stop(x: int) -> int:
        """Stop the run."""
        raise KeyboardInterrupt  # the user interrupts while the call runs

    settings = nbagent.ContextSettings(trigger=2_000)
    fake.script(tool_use("stop", {"x": 21}), text("42"))
    with nbagent.Session.open(log_path) as session, pytest.raises(nbagent.Interrupted):
        prompt = fake_context.past_half(settings.threshold)
        nbagent.run(session, prompt, client=client, model="claude-test", tools=[stop], approval="auto", context=settings)
    [asked] = fake.requests
    assert fake_context.asks(asked)  # recorded from the beta endpoint
    with nbagent.Session.open(log_path) as session:  # resumed where compaction is off: the plain endpoint
        recorded = session.state.messages[1]
        off = nbagent.ContextSettings(compact="off")
        assert nbagent.run(session, client=client, model="claude-test", tools=[stop], approval="auto", context=off) == "42"
    assert len(fake.requests) == 2 and plain(fake.requests[1])  # the recorded reply was not asked for again
    assert fake.requests[1].body["messages"][1] == recorded  # and goes back verbatim


def test_the_adapter_copies_a_client_once(client: anthropic.Anthropic) -> None:
    """Every run makes its model: the retry-less copy of the same client is made once and reused."""
    first, second = AnthropicModel("claude-test", client=client), AnthropicModel("claude-test", client=client)
    assert first.client is second.client and first.client is not client and first.client.max_retries == 0
    other = anthropic.Anthropic(base_url=str(client.base_url), api_key="other-key")
    assert AnthropicModel("claude-test", client=other).client.api_key == "other-key"
