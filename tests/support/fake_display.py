"""The fake Messages API's thinking display: the thinking text comes back only where the request's display shows it.

Used by tests/support/fake_binding.py. A thinking config's ``display`` is "summarized" (the text comes back) or
"omitted" (an empty ``thinking``, the signature still there); "The default depends on the model" (the SDK's
``ThinkingConfigAdaptiveParam``, pointing to
https://platform.claude.com/docs/en/build-with-claude/thinking#controlling-thinking-display). From Claude Opus 4.7 on
the default is "omitted"; on Claude Opus 5.5, Sonnet 5.5 and Haiku 5.5 the text between tool calls arrives in those
thinking blocks (https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/overview). ``between_tools`` takes no
``display`` and the pages found do not say what it shows: its text is left as it was.
"""

from __future__ import annotations

from typing import Any

OMITTED_BY_DEFAULT = frozenset(
    {
        "claude-opus-4-7",
        "claude-opus-4-8",
        "claude-mythos-preview",
        "claude-opus-5",
        "claude-sonnet-5",
        "claude-fable-5",
        "claude-mythos-5",
        "claude-fable-5-1",
        "claude-mythos-5-1",
        "claude-fable-5-2",
        "claude-mythos-5-2",
        "claude-opus-5-5",
        "claude-sonnet-5-5",
        "claude-haiku-5-5",
    }
)


def shown(body: dict[str, Any], text: str) -> str:
    """The thinking text a reply carries: ``text``, or "" where the request's display (or the model's default) omits it."""
    thinking = body.get("thinking") or {}
    display = thinking.get("display")
    if display is not None:
        return "" if display == "omitted" else text
    if thinking.get("type") not in (None, "adaptive", "enabled"):
        return text
    return "" if str(body.get("model")) in OMITTED_BY_DEFAULT else text
