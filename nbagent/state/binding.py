"""Thinking blocks bound to their conversation ("preserved thinking"): what a request asks of the API, what the fold drops.

On the models in :data:`BINDS` a thinking block's signature is bound to the model that wrote it, the organization
(API key) it was written under, and everything before it: the messages before its assistant message and the blocks
before it in that message.  Every rewrite the fold makes (clearing an old tool result, an image note, a local
compaction, a changed system prompt, tool list or model, another user's session continued) changes that prefix for
the blocks after it.  Sources: the ``anthropic`` SDK's request and response types (``BetaThinkingBlockBindingParam``:
"drop_block removes the failing blocks and the request proceeds"; ``BetaThinkingDroppedInputTransformation``: the
model, prefix, organization and end-user checks, "the rest of that turn's consecutive thinking blocks are removed
with it"), behind the ``thinking-binding-controls-2026-08-01`` beta; the API's 400 for a changed block:
"messages.N.content.M: Invalid `signature` in `thinking` block".

Two ways keep every request valid, chosen per request by :func:`request`:

- a thinking config that takes ``block_binding`` (adaptive or a budget) asks ``prefix_mismatch_behavior:
  "drop_block"``: the API leaves out what no longer fits, and the request proceeds;
- where it can't (``between_tools``, ``disabled``), the fold leaves out every thinking block after a rewrite
  (:func:`fold_drops`), with a note; it keeps them where requests carry the binding.

Table tests: tests/state/test_binding.py.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

from ..record import events as ev
from . import model_table as models

BINDING_BETA = "thinking-binding-controls-2026-08-01"
DROP_BLOCK: dict[str, str] = {"prefix_mismatch_behavior": "drop_block"}
CARRIES = frozenset({"adaptive", "enabled"})  # the thinking types whose config has block_binding (SDK types)
# The models that run the prefix check, "starting with Claude Fable 5.1" ("Preserved thinking",
# https://platform.claude.com/docs/en/build-with-claude/preserved-thinking; Amazon Bedrock's copy of it,
# https://docs.aws.amazon.com/bedrock/latest/userguide/claude-messages-thinking-block-binding.html): Fable 5.1 / Mythos 5.1,
# Fable 5.2 / Mythos 5.2 (https://platform.claude.com/docs/en/models/fable-5-2/whats-new-fable-5-2: the check "applies to
# every account") and the 5.5 models released after them (Sonnet 5.5's overview: "thinking blocks are bound to the model
# and the conversation"). Not Sonnet 5, Opus 5, Fable 5 or Mythos 5: setting the control at all would turn enforcement on
# for accounts the API would otherwise not check. Older and unknown models are not assumed to bind either. The same
# pages list Bedrock, Google Cloud and Foundry, so the control goes to every provider (providers.py ``betas``).
BINDS = frozenset(
    {
        "claude-fable-5-2",
        "claude-mythos-5-2",
        "claude-fable-5-1",
        "claude-mythos-5-1",
        "claude-opus-5-5",
        "claude-sonnet-5-5",
        "claude-haiku-5-5",
    }
)
NOTE_KIND = ev.NOTE_THINKING_BINDING  # the note that the fold left this many thinking blocks out so far (its `dropped`)


def note(count: int) -> str:
    """What people read when the fold left thinking blocks out of requests."""
    return (
        f"{count} thinking block{'s' if count != 1 else ''} after a rewritten part of the history (a cleared result, an image "
        "note, a compaction, a changed model) left out of later requests: the API would refuse them, and this thinking "
        "setting can't ask it to drop them; the log keeps them"
    )


def binds(model: str | None) -> bool:
    """Whether ``model`` binds thinking blocks to their conversation."""
    return (model or "") in BINDS


def carries(param: dict[str, Any] | None) -> bool:
    """Whether a request's ``thinking`` asks the API to drop a block that no longer fits (drop_block)."""
    return bool(param) and (param or {}).get("type") in CARRIES and (param or {}).get("block_binding") == DROP_BLOCK


def request(thinking: models.Thinking, model: str) -> models.Thinking:
    """``thinking`` as a request on ``model`` sends it: with ``block_binding`` drop_block (and its beta) where the model binds.

    Where leaving ``thinking`` out means adaptive thinking (models.py ``thinks_by_default``), it is said explicitly,
    so that it can carry the binding; ``between_tools`` and ``disabled`` can't, and go as they are.
    """
    if not binds(model):
        return thinking
    param = thinking.param
    if param is None and models.lookup(model).thinks_by_default:
        param = {"type": "adaptive"}
    if param is None or param.get("type") not in CARRIES:
        return thinking
    return replace(thinking, param={**param, "block_binding": dict(DROP_BLOCK)}, betas=(BINDING_BETA,))


def fold_drops(model: str | None, carried: bool) -> bool:
    """Whether the fold leaves out the thinking blocks after a rewrite: the model binds them and requests can't ask to drop them."""
    return binds(model) and not carried


def context_drops(old_model: str | None, new_model: str | None, was_carried: bool, carried: bool) -> bool:
    """Whether a settings change leaves every thinking block so far out of requests.

    It does where the blocks were bound (the old model binds) and requests from now on can't ask to drop them, and
    either the model changed or requests stop carrying the binding (blocks a rewrite unbound were left for the API).
    """
    if not old_model or not binds(old_model) or carried:
        return False
    return old_model != (new_model or old_model) or was_carried


def prefix(system: str | None, tools: list[dict[str, Any]]) -> str:
    """A fingerprint of what every request of a session starts with (the system prompt and the tool definitions).

    A thinking block is bound to them as to the messages before it; the ``context`` event records this fingerprint so
    the fold can tell when a later request starts differently (a tool added, e.g. by an upgrade, or a changed prompt).
    """
    canonical = json.dumps([system or "", tools], sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def prefix_drops(old_model: str | None, recorded: str, new: str, carried: bool) -> bool:
    """Whether a request that starts differently from the ones before (``recorded`` -> ``new``) leaves every thinking block
    so far out: the model that wrote them binds them, requests can't ask the API to drop them, and the start changed or
    was never recorded (a session written before the fingerprint was, whose tools may differ from today's)."""
    return bool(old_model) and fold_drops(old_model, carried) and recorded != new


def drops_foreign(model: str | None, carried: bool, all_mine: bool, already: bool) -> bool:
    """Whether a run leaves out the thinking blocks so far before it asks anything: another user's key wrote part of the
    session (trusted, or it would not run), the model binds blocks to the account that wrote them, and requests can't ask
    the API to drop them. Once per session: later blocks are this user's."""
    return binds(model) and not carried and not all_mine and not already


def has_thinking(messages: Any) -> bool:
    """Whether any assistant message of a history holds a thinking block."""
    return any(
        isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking")
        for m in messages
        if m.get("role") == "assistant" and isinstance(m.get("content"), list)
        for b in m["content"]
    )
