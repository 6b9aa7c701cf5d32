"""Thinking display: ask for summarized thinking on the models that leave its text out by default.

A thinking config's ``display`` (``ThinkingConfigAdaptiveParam`` / ``ThinkingConfigEnabledParam`` in the SDK, in every
release from nbagent's floor on) is "summarized" (the thinking text comes back) or "omitted" (an empty ``thinking``
with its signature); "The default depends on the model" (the SDK's docstring, pointing to
https://platform.claude.com/docs/en/build-with-claude/thinking#controlling-thinking-display). From Claude Opus 4.7 on the default is
"omitted", and on Claude Opus 5.5, Sonnet 5.5 and Haiku 5.5 the text between tool calls comes in thinking blocks
(https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/overview): left at the default, the panel would show
nothing between the calls. So nbagent asks for "summarized" on those models, and says so in the request where
leaving ``thinking`` out means adaptive thinking. Models that default to "summarized" (Opus 4.6, Sonnet 4.6,
the budget-only ones) and models the table does not know are sent what they were before.
``between_tools`` and ``disabled`` take no ``display``. Table tests: tests/state/test_thinking_display.py.
"""

from __future__ import annotations

from dataclasses import replace

from . import model_table as models

SUMMARIZED = "summarized"
TAKES_DISPLAY = frozenset({"adaptive", "enabled"})  # the thinking types whose config has `display` (SDK types)
SUMMARIZES_BY_DEFAULT = frozenset({"claude-opus-4-6", "claude-sonnet-4-6"})  # adaptive models whose default is summarized


def omits(model: str) -> bool:
    """Whether ``model`` leaves thinking text out unless asked: a known adaptive model from Claude Opus 4.7 on."""
    return models.lookup(model).adaptive is True and model not in SUMMARIZES_BY_DEFAULT


def summarized(thinking: models.Thinking, model: str) -> models.Thinking:
    """``thinking`` with ``display: "summarized"`` where ``model`` would otherwise omit the text (else unchanged)."""
    if not omits(model):
        return thinking
    param = thinking.param
    if param is None and models.lookup(model).thinks_by_default:
        param = {"type": "adaptive"}  # what leaving it out means on this model, said so that it can carry `display`
    if param is None or param.get("type") not in TAKES_DISPLAY or "display" in param:
        return thinking
    return replace(thinking, param={**param, "display": SUMMARIZED})
