"""The fake's thinking display (fake_display.py): the text comes back where the request's display, or the model's default, shows it."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from tests.support.fake_anthropic import FakeAnthropic, text

pytestmark = pytest.mark.sdk  # run again against the SDK floor in CI (.ci/run)


@pytest.mark.parametrize(
    ("model", "thinking", "shown"),
    [
        ("claude-opus-5-5", {"type": "adaptive"}, False),  # omitted by default from Claude Opus 4.7 on
        ("claude-opus-5-5", {"type": "adaptive", "display": "summarized"}, True),
        ("claude-sonnet-5-5", {"type": "adaptive", "display": "summarized"}, True),
        ("claude-opus-4-7", {"type": "adaptive"}, False),
        ("claude-opus-4-6", {"type": "adaptive"}, True),  # summarized by default
        ("claude-opus-4-6", {"type": "adaptive", "display": "omitted"}, False),
        ("claude-haiku-4-5", {"type": "enabled", "budget_tokens": 1024}, True),
    ],
)
def test_thinking_text_only_where_the_display_shows_it(
    fake: FakeAnthropic, client: anthropic.Anthropic, model: str, thinking: dict[str, Any], shown: bool
) -> None:
    fake.script(text("ok"))
    reply = client.messages.create(model=model, max_tokens=2048, thinking=thinking, messages=[{"role": "user", "content": "hi"}])  # type: ignore[arg-type]
    block = reply.content[0]
    assert block.type == "thinking" and bool(block.thinking) is shown and block.signature
