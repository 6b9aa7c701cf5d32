"""The context window: what a request may carry, and when and how much of it to compact (pure rules).

Server-side compaction (the API's ``compact_20260112`` edit) is asked for in the request and comes back
as a ``compaction`` block of an assistant message; the fold starts the next request at it.  The local
fallback summarises the oldest messages with a model call and logs the summary as a ``compaction``
event, which the fold puts in their place.  Table tests: tests/state/test_context.py.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from . import model_table as models

CompactMode = Literal["auto", "server", "local", "off"]
COMPACT_MODES: tuple[str, ...] = ("auto", "server", "local", "off")
COMPACT_BETA = "compact-2026-01-12"
# What an error about the compaction part of a request names: its field, its edit, its beta (refuses_compaction).
COMPACTION_WORDS = ("context_management", "compact_20260112", COMPACT_BETA)
DEFAULT_WINDOW = models.DEFAULT_WINDOW  # an unknown model's window (models.py knows the others)
DEFAULT_RESULT_BUDGET = 40_000  # characters of one tool result in a request (about 10k tokens)
# https://platform.claude.com/docs/en/build-with-claude/vision ("Basics and limits"): up to 600 images a request, 100 on
# models with a 200k window; 100 holds on every model. Requests are 32 MB at most (https://platform.claude.com/docs/en/api/errors,
# "Request size limits"): images get 20 MiB of it, the rest is left for the text a window holds.
MAX_IMAGES = 100  # images in one request; the fold leaves the oldest out beyond it
MAX_IMAGE_DATA = 20 * 1024 * 1024  # characters of base64 image data in one request; the oldest go beyond it too
CHARS_PER_TOKEN = 4  # the estimate used before the API has counted (the API's own count wins when there is one)
IMAGE_TOKENS = 1_600  # an image once the API has scaled it to its native size (vision docs, "Evaluate image size")
SUMMARY_PREFIX = "[nbagent note: the conversation so far was compacted. Summary of what happened before:]\n"
SUMMARY_INSTRUCTIONS = (
    "Summarise the conversation below for your own later use: the user's goals and requests, what was "
    "done, the facts and results found (file names, variables, numbers), decisions, and what is still "
    "open. Be complete but concise; write it as notes, not as a reply to the user."
)
Message = Mapping[str, Any]


@dataclass(frozen=True)
class ContextSettings:
    """How a run keeps its requests inside the model's context window."""

    compact: CompactMode = "auto"
    window: int = 0  # tokens; 0: the model's, from the table in models.py (see for_model)
    trigger: int | None = None  # input tokens at which to compact; None: a margin under the window
    result_budget: int | None = DEFAULT_RESULT_BUDGET
    keep_tool_results: int = 0  # >0: the request keeps only this many latest tool results (the fold clears older ones)
    keep_tokens: int = 8_000  # a local compaction keeps the latest messages up to about this many tokens

    @property
    def threshold(self) -> int:
        """Input tokens at which the conversation is compacted."""
        window = self.window or DEFAULT_WINDOW
        return self.trigger if self.trigger else max(1_000, window - max(20_000, window // 8))

    def for_model(self, model: str) -> ContextSettings:
        """These settings with the window filled in from the model table where it is unset."""
        return self if self.window else dataclasses.replace(self, window=models.lookup(model).window)


def estimate_tokens(value: Any, model: str | None = None) -> int:
    """A rough token count of some request content (characters of its JSON / 4; an image as IMAGE_TOKENS, not its base64).

    With ``model``, the text's count is scaled by the model's tokenizer (models.py ``token_factor``: about 30% more on
    Claude Opus 4.7 and later), so that local compaction starts in time on them.
    """
    encoded = json.dumps(value, separators=(",", ":"))
    images, data = images_in(value) if '"type":"image"' in encoded else (0, 0)
    text = (len(encoded) - data) // CHARS_PER_TOKEN
    return int(text * models.lookup(model).token_factor) + images * IMAGE_TOKENS


def images_in(value: Any) -> tuple[int, int]:
    """The image blocks in messages or content (tool results' included) and the characters of their base64 data."""
    count = chars = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            source = item.get("source")
            if item.get("type") == "image" and isinstance(source, dict):
                count, chars = count + 1, chars + len(source.get("data") or "")
            elif isinstance(item.get("content"), list):
                stack.append(item["content"])
    return count, chars


def context_tokens(usage: Mapping[str, Any]) -> int:
    """The tokens a reply's request and the reply itself take in the window, from the API's usage."""
    keys = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")
    return sum(int(usage.get(k) or 0) for k in keys)


def uses_server(settings: ContextSettings, model: str, server_refused: bool) -> bool:
    """Whether requests ask the API to compact (Claude models the table does not rule out; never after the API refused it)."""
    if settings.compact == "server":
        return True
    return (
        settings.compact == "auto" and model.startswith("claude-") and models.lookup(model).compaction is not False and not server_refused
    )


def context_management(settings: ContextSettings) -> dict[str, Any] | None:
    """The request's ``context_management`` for server-side compaction.

    Old tool results are cleared by the fold itself (the same rule as the API's ``clear_tool_uses`` edit),
    so that the request is the same whichever way the session compacts.
    """
    return {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": settings.threshold}}]}


def asks_compaction(settings: ContextSettings, messages: Sequence[dict[str, Any]], estimate: Callable[[], int]) -> bool:
    """Whether a request of a session the server compacts carries ``context_management`` (and so the beta endpoint).

    The API compacts only a request whose input reaches the trigger ("Detects when input tokens exceed your
    specified trigger threshold": https://platform.claude.com/docs/en/build-with-claude/compaction), so a request
    under half of it asks for nothing and goes to the plain endpoint; half leaves room for ``estimate``'s error.
    A history that starts at a server compaction block carries a beta content type: it always asks.
    """
    return starts_compacted(messages) or 2 * estimate() >= settings.threshold


def starts_compacted(messages: Sequence[dict[str, Any]]) -> bool:
    """Whether the history starts at a server compaction block (the fold starts it at the latest one)."""
    first = messages[0] if messages else None
    content = first.get("content") if first is not None else None
    if not (first is not None and first.get("role") == "assistant" and isinstance(content, list) and content):
        return False
    return isinstance(content[0], dict) and content[0].get("type") == "compaction"


def needs_compaction(settings: ContextSettings, server: bool, estimate: Callable[[], int]) -> bool:
    """Whether to compact locally before the next request (the server compacts by itself when it can).

    ``estimate`` (the request's tokens) is only called when a local compaction could apply.
    """
    return settings.compact != "off" and not server and estimate() >= settings.threshold


def is_prompt_too_long(kind: str, status: int | None, message: str) -> bool:
    """Whether a model error says the request does not fit the window."""
    return status in (400, 413) and ("prompt is too long" in message.lower() or kind == "request_too_large")


def refuses_compaction(kind: str, status: int | None, message: str, model: str) -> bool:
    """Whether an error to a request that asked for server compaction means the model or gateway has none.

    Only the API's refusal of the compaction part itself: a 400 ``invalid_request_error`` whose message names
    ``context_management`` or the compaction edit or beta (:data:`COMPACTION_WORDS`), on a model the table does not
    know to support server compaction. Any other 400 (a spend limit, a malformed message) ends the run with the API's
    message: it is not a reason to resend without compaction. The compaction page
    (https://platform.claude.com/docs/en/build-with-claude/compaction) gives no error text for an unsupported
    model; an unknown field is refused as "context_management: Extra inputs are not permitted"
    (https://platform.claude.com/docs/en/api/errors, tests/support/request_types.py). On a model the table
    says compacts, the same error is a refused request (fold.refuses_request), not a reason to compact locally.
    """
    if status != 400 or kind != "invalid_request_error" or models.lookup(model).compaction is True:
        return False
    return any(word in message for word in COMPACTION_WORDS)


def plain_history(messages: Sequence[dict[str, Any]]) -> Sequence[dict[str, Any]]:
    """The history as an endpoint without the compaction beta takes it: a server compaction block becomes a summary note.

    The fold starts the history at the latest compaction block, so only the first message can hold one. Its
    summary goes first as a user message (as a local compaction's does); what followed the block in that reply
    stays, less its thinking blocks, which were bound to the block's history. O(1) when there is no block.
    """
    if not starts_compacted(messages):
        return messages
    content = messages[0]["content"]
    summary = {"type": "text", "text": SUMMARY_PREFIX + str(content[0].get("content") or "")}
    rest = [b for b in content[1:] if not (isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking"))]
    after = list(messages[1:])
    if rest:
        return [{"role": "user", "content": [summary]}, {"role": "assistant", "content": rest}, *after]
    if after and after[0].get("role") == "user":  # user turns alternate with assistant ones: the summary joins the next
        following = after[0]["content"]
        blocks = [{"type": "text", "text": following}] if isinstance(following, str) else list(following)
        return [{"role": "user", "content": [summary, *blocks]}, *after[1:]]
    return [{"role": "user", "content": [summary]}, *after]


def keep_count(messages: Sequence[Message], keep_tokens: int) -> int:
    """How many latest messages a local compaction keeps: about ``keep_tokens``, starting where the API allows.

    The kept part must start with an assistant message or with a user message that answers no tool call
    (a tool_result needs its tool_use in the message before it), and at least one message is summarised.
    """
    total, keep = 0, 0
    for index in range(len(messages) - 1, 0, -1):
        total += estimate_tokens(messages[index])
        if total > keep_tokens and keep:
            break
        if can_start(messages[index]):
            keep = len(messages) - index
    return keep


def can_start(message: Message) -> bool:
    """Whether the kept part of a compaction may begin with ``message``."""
    content = message.get("content")
    if message.get("role") == "assistant":
        return True
    return not (isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content))


def first_chunk(messages: Sequence[Message], limit_tokens: int) -> int:
    """How many leading messages of a prefix the next summary call takes: about ``limit_tokens``, at least two.

    A part ends where the rest may start (see :func:`can_start`), so each summary can stand in its place.
    """
    size, end = 0, 0
    for index, message in enumerate(messages):
        if index >= 2 and can_start(message):
            if size > limit_tokens and end:
                return end
            end = index
            if size > limit_tokens:
                return end
        size += estimate_tokens(message)
    return len(messages) if size <= limit_tokens or not end else end


def as_text(message: Message) -> str:
    """One message as plain text for a summary request (images and binary data named, not sent)."""
    content = message.get("content")
    parts = []
    for block in [{"type": "text", "text": content}] if isinstance(content, str) else content or []:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            parts.append(f"[called {block.get('name')} with {json.dumps(block.get('input'))}]")
        elif kind == "tool_result":
            inner = block.get("content")
            text = inner if isinstance(inner, str) else " ".join(str(b.get("text", f"[{b.get('type')}]")) for b in inner or [])
            parts.append(f"[result{' (error)' if block.get('is_error') else ''}: {text}]")
        elif kind == "compaction":
            parts.append(f"[summary of earlier context: {block.get('content') or ''}]")
        elif kind in ("thinking", "redacted_thinking"):
            continue  # the model's private reasoning is not summarised
        else:
            parts.append(f"[{kind}]")
    return f"{message.get('role')}: " + "\n".join(parts)


def summary_request(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The messages of one summary call: the instructions and the part as text (an earlier part's summary is its first message)."""
    body = "\n\n".join(as_text(m) for m in messages)
    return [{"role": "user", "content": f"{SUMMARY_INSTRUCTIONS}\n\n<conversation>\n{body}\n</conversation>"}]


def clip_result(content: Any, budget: int | None, seq: int) -> Any:
    """A tool result as a request carries it: text beyond ``budget`` characters cut, with a note that says so."""
    if budget is None or budget <= 0:
        return content
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list):
        return content
    size = sum(len(b["text"]) for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))
    if size <= budget:
        return content
    out: list[Any] = []
    room = budget
    for block in blocks:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            text = block["text"]
            if room <= 0:
                continue
            out.append(dict(block, text=text[:room]) if len(text) > room else block)
            room -= len(text)
        else:
            out.append(block)
    out.append({"type": "text", "text": clip_note(size, budget, seq)})
    return out


def image_count(content: Any) -> int:
    """How many image blocks a tool result carries."""
    if not isinstance(content, list):
        return 0
    return sum(1 for b in content if isinstance(b, dict) and b.get("type") == "image")


def image_data(content: Any) -> int:
    """The characters of base64 data a tool result's images carry."""
    if not isinstance(content, list):
        return 0
    return sum(
        len(b["source"].get("data") or "")
        for b in content
        if isinstance(b, dict) and b.get("type") == "image" and isinstance(b.get("source"), dict)
    )


def images_to_drop(content: list[Any], count: int, size: int) -> int:
    """How many of a result's first images to leave out so that at least ``count`` images and ``size`` characters go."""
    dropped = freed = 0
    for block in content:
        if dropped >= count and freed >= size:
            break
        if isinstance(block, dict) and block.get("type") == "image":
            dropped += 1
            freed += image_data([block])
    return dropped


def drop_images(content: list[Any], count: int, seq: int) -> list[Any]:
    """A tool result with its first ``count`` images replaced by a note that says where they are kept."""
    out: list[Any] = []
    for block in content:
        if count > 0 and isinstance(block, dict) and block.get("type") == "image":
            out.append({"type": "text", "text": dropped_image(seq)})
            count -= 1
        else:
            out.append(block)
    return out


def dropped_image(seq: int) -> str:
    """What the model reads in place of an older image left out of the request."""
    return (
        f"[nbagent note: an image of this older tool result was left out: a request carries at most {MAX_IMAGES} "
        f"images and {MAX_IMAGE_DATA >> 20} MiB of them; the session log keeps it (event {seq}).]"
    )


def cleared_result(seq: int) -> str:
    """What the model reads in place of an old tool result cleared from the request."""
    return f"[nbagent note: this older tool result was cleared from the context; the session log keeps it (event {seq}).]"


def clip_note(size: int, budget: int, seq: int) -> str:
    """What the model reads after a clipped result."""
    return (
        f"[nbagent note: this result was cut to its first {budget:,} of {size:,} characters to fit the context "
        f"window; the whole result is kept in the session log (event {seq}). To see more, ask for a narrower "
        "part: a slice, a filter, fewer rows, or a file read with an offset.]"
    )
