"""Which endpoint a turn's request goes to, through the real SDK and the fake API: the beta one only for a beta."""

from __future__ import annotations

from pathlib import Path

import anthropic
import pytest

import nbagent
from nbagent.model.claude import AnthropicModel
from nbagent.state import binding
from nbagent.state import context as ctx
from tests.support.fake_anthropic import FakeAnthropic, text

pytestmark = pytest.mark.sdk  # run again against the SDK floor in CI (.ci/run)


@pytest.mark.parametrize(
    ("model", "settings", "thinking", "beta"),
    [
        ("claude-test", nbagent.ContextSettings(compact="off"), None, None),  # no beta feature: the plain Messages endpoint
        ("claude-test", nbagent.ContextSettings(compact="local"), None, None),  # nbagent compacts: the API is not asked
        ("claude-test", nbagent.ContextSettings(), None, ctx.COMPACT_BETA),  # "auto" on a Claude model: the server compacts
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


def test_the_adapter_copies_a_client_once(client: anthropic.Anthropic) -> None:
    """Every run makes its model: the retry-less copy of the same client is made once and reused."""
    first, second = AnthropicModel("claude-test", client=client), AnthropicModel("claude-test", client=client)
    assert first.client is second.client and first.client is not client and first.client.max_retries == 0
    other = anthropic.Anthropic(base_url=str(client.base_url), api_key="other-key")
    assert AnthropicModel("claude-test", client=other).client.api_key == "other-key"
