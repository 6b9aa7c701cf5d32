"""Prefill: a request that ends on an assistant turn, refused with a 400 by the models that no longer take it.

Sources: "What's new in Claude 4.6" (platform.claude.com/docs/en/about-claude/models/whats-new-claude-4-6,
"Prefill removal": "Prefilling assistant messages (last-assistant-turn prefills) is not supported on Opus 4.6.
Requests with prefilled assistant messages return a 400 error"), the migration guide ("returns a 400 error on
Claude 4.6 models"; reports of the same 400 on Claude Mythos Preview), and the SDK's ``messages`` docstring ("On models
that don't support prefill, creating a message that ends with a partial `assistant` response returns a 400
error", linking api/errors#prefill-not-supported). The models after 4.6 in the SDK's ``ModelParam`` are taken to
refuse it too: no page of theirs brings prefill back. Any other model (``claude-test``, older ids) accepts it.
A reply that stopped with ``pause_turn`` and is sent back as it is continues ("Handling stop reasons":
pause_turn), so it is not a prefill.
"""

from __future__ import annotations

import json
from typing import Any

MESSAGE = "Prefilling assistant messages is not supported for this model."
REFUSING = frozenset(
    {
        "claude-opus-4-6",
        "claude-sonnet-4-6",
        "claude-mythos-preview",
        "claude-opus-4-7",
        "claude-opus-4-8",
        "claude-sonnet-5",
        "claude-opus-5",
        "claude-fable-5",
        "claude-mythos-5",
        "claude-fable-5-1",
        "claude-mythos-5-1",
        "claude-opus-5-5",
        "claude-sonnet-5-5",
        "claude-haiku-5-5",
        "claude-fable-5-2",
        "claude-mythos-5-2",
    }
)


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


def key(content: Any) -> str:
    """A message content's identity for "sent back as it is" (a string is one text block; markers don't count)."""
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    return json.dumps(_without_cache_control(blocks), sort_keys=True)


def problem(body: dict[str, Any], paused: set[str]) -> str | None:
    """The API's 400 message for a prefill on a model that refuses it, else None (``paused``: keys of pause_turn replies)."""
    messages = body.get("messages") or []
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    if body.get("model") not in REFUSING or last.get("role") != "assistant":
        return None
    return None if key(last.get("content")) in paused else MESSAGE
