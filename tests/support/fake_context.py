"""The fake Messages API's context window: token counts, "prompt is too long", server-side compaction, thinking.

Used by tests/support/fake_anthropic.py.  The rules follow the real API as documented:

- A request's size is estimated as the characters of its JSON (system, tools, and the messages from the
  latest compaction block on, since the API drops what is before one) divided by 4.  Past
  ``fake.window`` tokens the answer is 400 ``prompt is too long: N tokens > W maximum``.
- With the ``compact-2026-01-12`` beta and a ``compact_20260112`` edit whose trigger the request passes,
  the reply starts with a ``compaction`` block (streamed as ``compaction_delta``).
- With ``thinking`` on, the reply starts with a ``thinking`` block whose signature this server made; a
  later request must send every thinking block back unchanged (a changed one is refused), and an
  assistant message that ends in tool use must still start with its thinking block.  On the models that bind
  thinking to its conversation, a block whose model, organization or prefix changed is refused, or dropped where
  the request asks for it; compaction blocks carry a signature and must come back unchanged: tests/support/fake_binding.py.
- Images (tool results' included) are held to the API's limits of count, base64 length and pixels, with its 400
  wording: see tests/support/fake_images.py, which cites the docs.
- Each model in :data:`THINKING` (every model the docs describe) takes only its documented ``thinking.type`` values (a
  400 otherwise) and thinks when ``thinking`` is left out where the model does so; a model the docs do not name (a
  test's "claude-test", a cloud's decorated id) takes every value.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from tests.support import fake_binding, fake_images

COMPACT_BETA = "compact-2026-01-12"
CHARS_PER_TOKEN = 4
IMAGE_LIMIT = fake_images.MAX_IMAGES  # images the API takes in one request
# Per model: the thinking.type values it accepts, and whether it thinks when the request leaves `thinking` out.
# https://platform.claude.com/docs/en/build-with-claude/thinking-troubleshooting ("Thinking support, defaults,
# and rejected configurations by model") and each model's page:
THINKING: dict[str, tuple[frozenset[str], bool]] = {
    # "disabled" returns 400 (use between_tools); budgets removed since Sonnet 5; adaptive on by default.
    # https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/whats-new-sonnet-5-5
    "claude-sonnet-5-5": (frozenset({"adaptive", "between_tools"}), True),
    # Thinking always on: "disabled" and "enabled" both return 400 invalid_request_error.
    # https://platform.claude.com/docs/zh-CN/models/opus-5-5/whats-new-opus-5-5
    "claude-opus-5-5": (frozenset({"adaptive"}), True),
    # Adaptive and (deprecated) budgets; no thinking unless asked.
    # https://platform.claude.com/docs/en/build-with-claude/adaptive-thinking
    "claude-opus-4-6": (frozenset({"adaptive", "enabled", "disabled"}), False),
    # "Older models (Sonnet 4.5, Opus 4.5, etc.) do not support adaptive thinking and require enabled".
    # https://platform.claude.com/docs/en/build-with-claude/adaptive-thinking
    "claude-haiku-4-5": (frozenset({"enabled", "disabled"}), False),
    # Adaptive always on: "disabled" and "enabled" both return 400 (Fable 5.x / Mythos 5.x).
    # https://platform.claude.com/docs/en/models/fable-5/migration-guide , .../models/fable-5-1/migration-guide ,
    # .../models/fable-5-2/whats-new-fable-5-2 ("adaptive thinking always on")
    **dict.fromkeys(
        ("claude-fable-5-2", "claude-mythos-5-2", "claude-fable-5-1", "claude-mythos-5-1", "claude-fable-5", "claude-mythos-5"),
        (frozenset({"adaptive"}), True),
    ),
    # Adaptive on by default, "disabled" accepted, budgets refused ("Claude 4.7 and later reject enabled"):
    # https://platform.claude.com/docs/en/models/haiku-5-5/overview , https://platform.claude.com/docs/zh-CN/models/sonnet-5/overview ,
    # https://platform.claude.com/docs/en/build-with-claude/thinking-troubleshooting
    **dict.fromkeys(("claude-haiku-5-5", "claude-sonnet-5", "claude-opus-5"), (frozenset({"adaptive", "disabled"}), True)),
    # Adaptive only (budgets return 400), no thinking unless asked: https://platform.claude.com/docs/en/build-with-claude/adaptive-thinking
    **dict.fromkeys(("claude-opus-4-8", "claude-opus-4-7"), (frozenset({"adaptive", "disabled"}), False)),
    # Adaptive by default and always on ("disabled" not supported), budgets still accepted (same page).
    "claude-mythos-preview": (frozenset({"adaptive", "enabled"}), True),
    "claude-sonnet-4-6": (frozenset({"adaptive", "enabled", "disabled"}), False),
    **dict.fromkeys(
        ("claude-haiku-4-5-20251001", "claude-opus-4-5", "claude-opus-4-5-20251101", "claude-sonnet-4-5", "claude-sonnet-4-5-20250929"),
        (frozenset({"enabled", "disabled"}), False),
    ),
}


signature = fake_binding.signature  # the signature of a thinking block on a model that does not bind them


def _blocks(message: Any) -> list[dict[str, Any]]:
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def live_start(messages: list[Any]) -> tuple[int, int]:
    """Where the API starts reading: the latest compaction block with a summary (it drops what is before), else (0, 0)."""
    for i in range(len(messages) - 1, -1, -1):
        content = messages[i].get("content") if isinstance(messages[i], dict) else None
        if isinstance(content, list):
            for j in range(len(content) - 1, -1, -1):
                if isinstance(content[j], dict) and content[j].get("type") == "compaction" and content[j].get("content"):
                    return i, j
    return 0, 0


def live_messages(messages: list[Any]) -> list[Any]:
    """The messages the API reads: from the latest compaction block with a summary on (it drops what is before)."""
    i, j = live_start(messages)
    if (i, j) == (0, 0):
        return messages
    return [dict(messages[i], content=messages[i]["content"][j:]), *messages[i + 1 :]]


def tokens(body: dict[str, Any]) -> int:
    """The request's size in (estimated) tokens."""
    parts = [body.get("system"), body.get("tools"), live_messages(body.get("messages") or [])]
    images, data = fake_images.in_content(parts[2])  # an image costs its pixels, not its base64 (fake_images cites the docs)
    return (
        sum(len(json.dumps(p, separators=(",", ":"))) for p in parts if p) - data
    ) // CHARS_PER_TOKEN + images * fake_images.IMAGE_TOKENS


def past_half(trigger: int) -> str:
    """A prompt of about 0.6 ``trigger`` tokens: nbagent asks for server compaction from half the trigger on; the fake compacts past it."""
    return "word " * (trigger * 3 // 5 * CHARS_PER_TOKEN // len("word "))


def asks(request: Any) -> bool:
    """Whether a recorded request asked for server compaction (its field and its beta; the beta endpoint)."""
    return "context_management" in request.body and COMPACT_BETA in request.headers.get("anthropic-beta", "")


def compaction_trigger(body: dict[str, Any], headers: dict[str, str]) -> int | None:
    """The input-token trigger of a server-side compaction the request asks for (None: it asks for none)."""
    if COMPACT_BETA not in headers.get("anthropic-beta", ""):
        return None
    for edit in (body.get("context_management") or {}).get("edits") or []:
        if isinstance(edit, dict) and edit.get("type") == "compact_20260112":
            trigger = edit.get("trigger") or {}
            return int(trigger.get("value") or 150_000)
    return None


def image_blocks(message: Any) -> int:
    """The image blocks in a message, those inside tool results included."""
    count = 0
    for block in _blocks(message):
        if block.get("type") == "image":
            count += 1
        elif block.get("type") == "tool_result":
            count += image_blocks(block)
    return count


def thinks(body: dict[str, Any]) -> bool:
    """Whether the model thinks on this request: asked to, or by default where the parameter is left out."""
    kind = (body.get("thinking") or {}).get("type")
    if kind is None:
        return THINKING.get(str(body.get("model")), (frozenset(), False))[1]
    if kind == "between_tools":
        # No up-front thinking, but "the text between tool calls comes back as thinking blocks" (Claude Sonnet 5.5's
        # overview: https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/overview): a reply after tool results thinks.
        last = (body.get("messages") or [{}])[-1]
        return any(b.get("type") == "tool_result" for b in _blocks(last))
    return kind in ("enabled", "adaptive")


def thinking_refused(body: dict[str, Any]) -> str | None:
    """The API's 400 message for a thinking.type the model does not take (the wording of the model pages), else None."""
    kind = (body.get("thinking") or {}).get("type")
    rule = THINKING.get(str(body.get("model")))
    if kind is None or rule is None or kind in rule[0]:
        return None
    hint = (
        'Use "thinking.type.adaptive" and "output_config.effort" to control thinking behavior.'
        if "adaptive" in rule[0]
        else 'Use "thinking.type.enabled" with "budget_tokens".'
    )
    return f'"thinking.type.{kind}" is not supported for this model. {hint}'


def problem(body: dict[str, Any], headers: dict[str, str], window: int | None) -> str | None:
    """The API's 400 message for a request it would refuse for its context or thinking, else None."""
    if body.get("context_management") and not headers.get("anthropic-beta"):
        return "context_management: Extra inputs are not permitted (this feature needs its beta header)"
    messages = body.get("messages") or []
    # A compaction block is a beta content type: the plain endpoint has no such block (Compaction, platform docs:
    # https://platform.claude.com/docs/en/build-with-claude/compaction, "pass the compaction block back" with the beta).
    if COMPACT_BETA not in headers.get("anthropic-beta", ""):
        for i, message in enumerate(messages):
            for j, block in enumerate(_blocks(message)):
                if block.get("type") == "compaction":
                    return (
                        f"messages.{i}.content.{j}.type: Input tag 'compaction' found using 'type' does not match any of the expected tags"
                    )
    refused_block, _ = fake_binding.check(body, headers, live_start(messages))
    if refused_block:
        return refused_block
    refused = thinking_refused(body)
    if refused:
        return refused
    thinking_on = thinks(body) and (body.get("thinking") or {}).get("type") != "between_tools"  # no up-front thinking to require
    live = live_messages(messages)
    if thinking_on and live and live[-1].get("role") == "user":
        last_assistant = next((m for m in reversed(live) if m.get("role") == "assistant"), None)
        blocks = _blocks(last_assistant)
        answers_tools = any(b.get("type") == "tool_result" for b in _blocks(live[-1]))
        if answers_tools and blocks and blocks[0].get("type") not in ("thinking", "redacted_thinking", "compaction"):
            return (
                "messages: Expected `thinking` or `redacted_thinking`, but found `"
                f"{blocks[0].get('type')}`. When `thinking` is enabled, a final `assistant` message must start with a "
                "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks)."
            )
    refused_image = fake_images.problem(body)
    if refused_image:
        return refused_image
    if window is not None and tokens(body) > window:
        return f"prompt is too long: {tokens(body)} tokens > {window} maximum"
    return None


def leading_blocks(body: dict[str, Any], headers: dict[str, str], number: int) -> list[dict[str, Any]]:
    """The blocks the API puts before the scripted reply: a compaction block, a thinking block."""
    blocks: list[dict[str, Any]] = []
    trigger = compaction_trigger(body, headers)
    live = live_messages(body.get("messages") or [])
    if trigger is not None and tokens(body) > trigger:
        summary = {"type": "compaction", "content": f"Summary {number}: {len(live)} messages compacted by the server."}
        summary |= {"encrypted_content": base64.b64encode(f"state {number}".encode()).decode(), "tool_changes": []}
        blocks.append(dict(summary, signature=fake_binding.compaction_signature(summary)))
    if thinks(body):
        blocks += fake_binding.new_blocks(body, headers, live, blocks, number)
    return blocks


def stream_events(index: int, block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events of a compaction, thinking or redacted_thinking block, as the API streams them."""
    if block["type"] == "compaction":
        opening = dict(block, content=None, encrypted_content=None)
        deltas = [{"type": "compaction_delta", "content": block["content"], "encrypted_content": block.get("encrypted_content")}]
    elif block["type"] == "redacted_thinking":
        opening, deltas = block, []
    else:
        opening = dict(block, thinking="", signature="")
        deltas = [{"type": "thinking_delta", "thinking": block["thinking"]}, {"type": "signature_delta", "signature": block["signature"]}]
    return [
        ("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}),
        *(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas),
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]
