"""The fake Messages API's signatures: thinking blocks bound to their conversation, and compaction blocks sent back unchanged.

Used by tests/support/fake_context.py.  The rules, and where they come from:

- On the models in :data:`BOUND` (those that run the prefix check, "starting with Claude Fable 5.1": "Preserved
  thinking", https://platform.claude.com/docs/en/build-with-claude/preserved-thinking) a thinking block's
  signature binds it to the model that wrote it, the organization (here: the API key) and everything before it:
  the system prompt, the tools, the messages before its assistant message and the blocks before it there.  A block
  that fails a check is refused with the API's 400 "messages.N.content.M: Invalid `signature` in `thinking` block",
  unless the request asks ``thinking.block_binding.prefix_mismatch_behavior: "drop_block"`` with the
  ``thinking-binding-controls-2026-08-01`` beta: then the block and the rest of that message's consecutive thinking
  blocks are removed, the request proceeds, and the reply's ``input_transformations`` lists each removal.  Source:
  the anthropic SDK's types, which carry the API reference's text (``BetaThinkingBlockBindingParam``,
  ``BetaThinkingDroppedInputTransformation``: reasons in the order organization, end user, model, prefix; "a block
  that carries no record of one on a model that requires it" fails the prefix check).
- Who the prefix check applies to (:func:`enforced`): on Fable 5.2 / Mythos 5.2 "every account"
  (https://platform.claude.com/docs/en/models/fable-5-2/whats-new-fable-5-2), on Mythos 5.1 every account already; on
  the others only accounts created on or after 2026-08-31, or a request that sets ``prefix_mismatch_behavior`` at all.
  An account's creation date is read from its key: ``...created-2026-05-01...`` in the key is an older account; a key
  without one is a new account (checked).
- A thinking block of the latest assistant message whose text changed gets the API's other wording ("`thinking` or
  `redacted_thinking` blocks in the latest assistant message cannot be modified. These blocks must remain as they
  were in the original response."), as reported from the API in claude-code's issue threads; elsewhere "Invalid
  `signature`".  Any other model keeps the simple check: the signature is a MAC of the text alone.
- On bound models thinking is sometimes empty and a ``redacted_thinking`` block sometimes follows it
  (https://platform.claude.com/docs/en/build-with-claude/extended-thinking, "Thinking redaction"): both by the
  request's number, so tests stay deterministic.
- A compaction block comes with ``signature``, ``encrypted_content`` and ``tool_changes`` (the SDK's
  ``BetaCompactionBlock``: "Send the block back unchanged"); one sent back changed is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from typing import Any

from tests.support import fake_display

BINDING_BETA = "thinking-binding-controls-2026-08-01"
_SECRET = b"fake-thinking-signing-key"
_PREFIX = "bound1."
BOUND = frozenset(
    {
        "claude-fable-5-2",
        "claude-mythos-5-2",
        "claude-haiku-5-5",
        "claude-sonnet-5-5",
        "claude-opus-5-5",
        "claude-fable-5-1",
        "claude-mythos-5-1",
    }
)
EVERY_ACCOUNT = frozenset({"claude-fable-5-2", "claude-mythos-5-2", "claude-mythos-5-1"})  # the prefix check whatever the account's age
CUTOFF = "2026-08-31"  # accounts created on or after it are checked on the other bound models
_CREATED = re.compile(r"created-(\d{4}-\d{2}-\d{2})")
THINKING_TYPES = ("thinking", "redacted_thinking")


def _mac(*parts: str) -> str:
    return base64.b64encode(hmac.new(_SECRET, "\n".join(parts).encode(), hashlib.sha256).digest()).decode()


def signature(thinking: str) -> str:
    """The signature this server puts on a thinking block of a model that does not bind them."""
    return base64.b64encode(hmac.new(_SECRET, thinking.encode(), hashlib.sha256).digest()).decode()


def organization(headers: dict[str, str]) -> str:
    """Who the request is from: the API key (or token) it carries, hashed."""
    key = headers.get("x-api-key") or headers.get("authorization") or ""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _canonical(block: Any) -> Any:
    """A block as the binding sees it: the fields that carry meaning (an SDK's dump may add or drop empty ones)."""
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    keep = {
        "text": ("type", "text"),
        "thinking": ("type", "thinking", "signature"),
        "redacted_thinking": ("type", "data"),
        "tool_use": ("type", "id", "name", "input"),
        "tool_result": ("type", "tool_use_id", "content", "is_error"),
        "image": ("type", "source"),
        "compaction": ("type", "content", "encrypted_content", "signature"),
    }.get(str(kind))
    out = {k: v for k, v in block.items() if k != "cache_control" and v is not None and (keep is None or k in keep)}
    if kind == "tool_result":
        content = out.get("content")
        out["content"] = [{"type": "text", "text": content}] if isinstance(content, str) else [_canonical(b) for b in content or []]
        out["is_error"] = bool(out.get("is_error"))
    return out


def _message(message: Any) -> Any:
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else [_canonical(b) for b in content or []]
    return {"role": message.get("role"), "content": blocks}


def prefix(body: dict[str, Any], messages: list[Any], blocks: list[Any]) -> str:
    """The digest of what comes before a block: system, tools, the messages before its message, the blocks before it."""
    system = body.get("system")
    system = [{"type": "text", "text": system}] if isinstance(system, str) else [_canonical(b) for b in system or []]
    tools = [{k: v for k, v in t.items() if k != "cache_control"} for t in body.get("tools") or [] if isinstance(t, dict)]
    data = [system, tools, [_message(m) for m in messages], [_canonical(b) for b in blocks]]
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def bound_signature(model: str, org: str, before: str, thinking: str) -> str:
    """A signature binding ``thinking`` to the model, the organization and the digest of what came before it."""
    token = {"m": model, "o": org, "p": before, "mac": _mac(model, org, before, thinking)}
    return _PREFIX + base64.b64encode(json.dumps(token, separators=(",", ":")).encode()).decode()


def new_blocks(body: dict[str, Any], headers: dict[str, str], live: list[Any], leading: list[Any], number: int) -> list[dict[str, Any]]:
    """The thinking blocks of a reply: bound on the models that bind them (after ``leading``, e.g. a compaction block)."""
    model = str(body.get("model"))
    thought = fake_display.shown(body, f"Thinking about request {number}.")  # "" where the display omits it (fake_display.py)
    if model not in BOUND:
        return [{"type": "thinking", "thinking": thought, "signature": signature(thought)}]
    if number % 4 == 3:  # sometimes empty
        thought = ""
    messages, blocks = ([], leading) if leading else (live, [])  # after a compaction block, the API reads from it
    org = organization(headers)
    out = [{"type": "thinking", "thinking": thought, "signature": bound_signature(model, org, prefix(body, messages, blocks), thought)}]
    if number % 3 == 2:  # sometimes a redacted block follows
        before = prefix(body, messages, [*blocks, *out])
        out.append({"type": "redacted_thinking", "data": bound_signature(model, org, before, "")})
    return out


def enforced(body: dict[str, Any], headers: dict[str, str]) -> bool:
    """Whether the prefix check runs on this request: the model checks every account, the account is new enough, or the
    request set ``prefix_mismatch_behavior`` (which turns the check on)."""
    if str(body.get("model")) in EVERY_ACCOUNT or "prefix_mismatch_behavior" in ((body.get("thinking") or {}).get("block_binding") or {}):
        return True
    created = _CREATED.search(headers.get("x-api-key") or headers.get("authorization") or "")
    return created is None or created.group(1) >= CUTOFF


def _check(block: dict[str, Any], body: dict[str, Any], headers: dict[str, str], before: str) -> str | None:
    """Why a thinking block fails: "signature" (forged or changed), a binding reason, or None."""
    kind = block.get("type")
    token = str(block.get("signature") if kind == "thinking" else block.get("data") or "")
    text = str(block.get("thinking") or "") if kind == "thinking" else ""
    model = str(body.get("model"))
    if not token.startswith(_PREFIX):
        if kind == "thinking" and token != signature(text):
            return "signature"
        return "prefix_binding_mismatch" if model in BOUND and enforced(body, headers) else None  # no record where one is required
    try:
        data = json.loads(base64.b64decode(token[len(_PREFIX) :]))
        good = hmac.compare_digest(str(data["mac"]), _mac(str(data["m"]), str(data["o"]), str(data["p"]), text))
    except (ValueError, KeyError, TypeError):
        good = False
    if not good:
        return "signature"
    if data["o"] != organization(headers):
        return "organization_binding_mismatch"
    if data["m"] != model:
        return "model_binding_mismatch"
    return "prefix_binding_mismatch" if data["p"] != before and enforced(body, headers) else None


def drops(body: dict[str, Any], headers: dict[str, str]) -> bool:
    """Whether the request asks the API to drop a thinking block that fails a binding check."""
    binding = (body.get("thinking") or {}).get("block_binding") or {}
    return BINDING_BETA in headers.get("anthropic-beta", "") and binding.get("prefix_mismatch_behavior") == "drop_block"


def compaction_signature(block: dict[str, Any]) -> str:
    """The signature of a compaction block: over its summary, encrypted content and tool changes."""
    changes = json.dumps(block.get("tool_changes"), sort_keys=True)
    return _mac("compaction", str(block.get("content")), str(block.get("encrypted_content")), changes)


def check(body: dict[str, Any], headers: dict[str, str], start: tuple[int, int]) -> tuple[str | None, list[dict[str, Any]]]:
    """The API's 400 message for a block sent back changed or unbound, else None and the blocks dropped (input_transformations).

    ``start`` is where the API starts reading (the latest compaction block): prefixes are taken from there.
    """
    messages = body.get("messages") or []
    last_assistant = max((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"), default=-1)
    dropped: list[dict[str, Any]] = []
    for i in range(start[0], len(messages)):  # the API reads nothing before the latest compaction block
        content = messages[i].get("content") if isinstance(messages[i], dict) else None
        if not isinstance(content, list):
            continue
        first = start[1] if i == start[0] else 0
        head = list(messages[start[0] : i])
        if head:
            head[0] = dict(head[0], content=head[0]["content"][start[1] :]) if isinstance(head[0].get("content"), list) else head[0]
        j = first
        while j < len(content):
            block = content[j]
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "compaction" and block.get("signature") and block["signature"] != compaction_signature(block):
                return f"messages.{i}.content.{j}: Invalid `signature` in `compaction` block", []
            why = _check(block, body, headers, prefix(body, head, content[first:j])) if kind in THINKING_TYPES else None
            if why is None:
                j += 1
            elif why == "signature" and i == last_assistant and body.get("model") in BOUND:
                return (
                    f"messages.{i}.content.{j}: `thinking` or `redacted_thinking` blocks in the latest assistant message "
                    "cannot be modified. These blocks must remain as they were in the original response."
                ), []
            elif why == "signature" or not drops(body, headers):
                return f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block", []
            else:  # drop_block: this block and the rest of the message's consecutive thinking blocks
                while j < len(content) and isinstance(content[j], dict) and content[j].get("type") in THINKING_TYPES:
                    dropped.append({"type": "thinking_dropped", "path": f"messages.{i}.content.{j}", "reason": why})
                    j += 1
    return None, dropped
