"""What nbagent knows of each Claude model: context window, maximum output, thinking modes, server compaction.

One row per model id and alias the SDK names (``anthropic/types/model_param.py``); each row's source is the
platform documentation page in its comment.  Where the pages did not say, the row takes the conservative
value and its comment says so.  A model the table does not know gets :data:`UNKNOWN`: a 200k window, an
8k output, and no assumption about thinking (the setting is sent as asked) or compaction (tried; the local
fallback takes over if the API refuses it).  The API's own token counts win once a reply has them.

``thinking`` (``Agent.thinking`` / ``Loop(thinking=...)``) becomes the request's parameters by
:func:`thinking_request`: "off" is the least thinking the model allows, a budget becomes adaptive with a
note where budgets are refused, and "adaptive" where only budgets are taken is an error before any request.
Table tests: tests/state/test_model_table.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..errors import NbagentError

# What "off" sends: "omit" (the model does not think unless asked), "disabled", "between_tools" (Claude
# Sonnet 5.5's lowest setting), or "low_effort" (thinking can't be turned off: adaptive at effort "low").
OffMode = Literal["omit", "disabled", "between_tools", "low_effort"]
DEFAULT_WINDOW = 200_000  # an unknown model's window, and the one every earlier nbagent logged
UNKNOWN_MAX_OUTPUT = 8_192
MIN_BUDGET = 1_024  # the API's smallest budget_tokens
K, M = 1_000, 1_000_000


@dataclass(frozen=True)
class ModelInfo:
    """One model's limits and thinking modes, as the platform documentation gives them."""

    window: int  # context window, tokens
    max_output: int  # largest max_tokens, tokens
    adaptive: bool | None  # accepts thinking {"type": "adaptive"} (None: unknown, sent as asked)
    budgets: bool | None  # accepts thinking {"type": "enabled", "budget_tokens": N}
    off: OffMode  # what Agent.thinking = "off" sends
    thinks_by_default: bool  # thinks (adaptively) when the request leaves `thinking` out
    compaction: bool | None  # server compaction (compact_20260112): True documented, False not offered, None unconfirmed
    known: bool = True
    # Tokens per token of the chars/4 estimate: Claude Opus 4.7 and later use a newer tokenizer, "approximately 30 percent
    # more tokens" for the same text (https://platform.claude.com/docs/en/build-with-claude/token-counting).
    token_factor: float = 1.0

    @property
    def off_label(self) -> str:
        """What "off" means on this model, for people."""
        return {
            "omit": "no thinking (the parameter is left out)",
            "disabled": 'thinking {"type": "disabled"}',
            "between_tools": 'thinking {"type": "between_tools"} (no up-front thinking; short notes between tool calls)',
            "low_effort": "adaptive thinking at effort low (this model can't turn thinking off)",
        }[self.off]


UNKNOWN = ModelInfo(DEFAULT_WINDOW, UNKNOWN_MAX_OUTPUT, None, None, "omit", False, None, known=False)
NEW_TOKENIZER = 1.3  # see ModelInfo.token_factor
# Server compaction: "Compaction" (https://platform.claude.com/docs/en/build-with-claude/compaction, "Compaction is
# supported on the following models") lists every Claude 5.x model and Opus 4.8, 4.7, 4.6 and Sonnet 4.6 (the issue's
# reading of the page; the copy the docs index holds shows the list cut short after Opus 4.6 and Sonnet 4.6).

# Claude 5.5 and 5.2: adaptive by default; budgets refused ("Claude 4.7 and later reject enabled").
#   https://platform.claude.com/docs/en/build-with-claude/thinking-troubleshooting (per-model table)
# Claude Fable 5.2 / Mythos 5.2: 1M, 128K, "Adaptive (always on)" (comparison table of
#   https://platform.claude.com/docs/id/models/sonnet-5/overview); Mythos 5.2 assumed to share Fable 5.2's
#   row as every earlier Mythos/Fable pair does (not confirmed on its own page).
#   Tokenizer: the one introduced with Claude Opus 4.7 (https://platform.claude.com/docs/en/models/fable-5-2/whats-new-fable-5-2).
_FABLE_5_2 = ModelInfo(1 * M, 128 * K, True, False, "low_effort", True, True, token_factor=NEW_TOKENIZER)
# Claude Haiku 5.5: 1M, 128K, adaptive, default effort medium; thinks by default and accepts "disabled" at
#   effort high or lower. https://platform.claude.com/docs/en/models/haiku-5-5/overview ; budgets: not
#   confirmed accepted, so a budget is sent as adaptive (which it takes). Tokenizer: the token-counting page seen predates
#   Haiku 5.5 and Sonnet 5.5 (it names Opus 4.7 and later, Fable 5, Mythos 5, Mythos Preview, Sonnet 5): the newer one is
#   assumed, which compacts a little early rather than late.
_HAIKU_5_5 = ModelInfo(1 * M, 128 * K, True, False, "disabled", True, True, token_factor=NEW_TOKENIZER)
# Claude Sonnet 5.5: 1M, 128K; "disabled" is refused with a 400, {"type": "between_tools"} is the lowest
#   setting (valid at effort low/medium/high; nbagent leaves effort at the default, high).
#   https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/whats-new-sonnet-5-5 ,
#   https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/overview
_SONNET_5_5 = ModelInfo(1 * M, 128 * K, True, False, "between_tools", True, True, token_factor=NEW_TOKENIZER)
# Claude Opus 5.5 and Fable 5.1 / Mythos 5.1: thinking always on; "disabled" and "enabled" both return 400;
#   "lower output_config.effort where you used to disable thinking".
#   https://platform.claude.com/docs/zh-CN/models/opus-5-5/whats-new-opus-5-5 , .../models/opus-5-5/overview
_ALWAYS_ON = ModelInfo(1 * M, 128 * K, True, False, "low_effort", True, True, token_factor=NEW_TOKENIZER)
# Claude Fable 5 / Mythos 5: adaptive only, "disabled" and "enabled" return 400; 1M, 128K.
#   https://platform.claude.com/docs/en/models/fable-5/migration-guide
_FABLE_5 = _ALWAYS_ON
# Claude Sonnet 5: adaptive on by default, manual budgets return 400, "disabled" accepted; 1M, 128K.
#   https://platform.claude.com/docs/zh-CN/models/sonnet-5/overview
_SONNET_5 = ModelInfo(1 * M, 128 * K, True, False, "disabled", True, True, token_factor=NEW_TOKENIZER)
# Claude Opus 5: adaptive on by default, "disabled" accepted at effort high or lower (the default), budgets
#   refused (Opus 4.8 and later); 1M, 128K. https://platform.claude.com/docs/zh-CN/models/sonnet-5/overview
#   (comparison table) and https://platform.claude.com/docs/en/build-with-claude/thinking-troubleshooting
_OPUS_5 = ModelInfo(1 * M, 128 * K, True, False, "disabled", True, True, token_factor=NEW_TOKENIZER)
# Claude Opus 4.8 / 4.7: adaptive only (budgets return 400), no thinking unless asked; 1M, 128K.
#   https://platform.claude.com/docs/en/build-with-claude/adaptive-thinking ; compaction: the compaction page (above).
_OPUS_4_8 = ModelInfo(1 * M, 128 * K, True, False, "omit", False, True, token_factor=NEW_TOKENIZER)
_OPUS_4_7 = ModelInfo(1 * M, 128 * K, True, False, "omit", False, True, token_factor=NEW_TOKENIZER)
# Claude Mythos Preview: adaptive by default and always on ("disabled" not supported), budgets still
#   accepted. https://platform.claude.com/docs/en/build-with-claude/adaptive-thinking ; window and output not
#   confirmed: the conservative 200K / 64K.
_MYTHOS_PREVIEW = ModelInfo(200 * K, 64 * K, True, True, "low_effort", True, True, token_factor=NEW_TOKENIZER)
# Claude Opus 4.6 / Sonnet 4.6: adaptive and (deprecated) budgets, no thinking unless asked; 1M; compaction
#   documented. https://platform.claude.com/docs/en/build-with-claude/adaptive-thinking ,
#   https://platform.claude.com/docs/en/build-with-claude/compaction . Sonnet 4.6: 1M, 128K ("Context window: 1M tokens ·
#   Max output: 128K tokens", https://platform.claude.com/docs/zh-CN/models/sonnet-4-6/overview.md).
_OPUS_4_6 = ModelInfo(1 * M, 128 * K, True, True, "omit", False, True)
_SONNET_4_6 = ModelInfo(1 * M, 128 * K, True, True, "omit", False, True)
# Claude Haiku 4.5 and Opus 4.5: budgets only ("Sonnet 4.5, Opus 4.5 and older do not support adaptive
#   thinking"); 200K, 64K; not in the compaction page's model list.
#   https://platform.claude.com/docs/en/build-with-claude/adaptive-thinking ,
#   https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/overview (Haiku 4.5: 200K / 64K, Extended)
_BUDGETS_ONLY = ModelInfo(200 * K, 64 * K, False, True, "omit", False, False)

MODELS: dict[str, ModelInfo] = {
    "claude-fable-5-2": _FABLE_5_2,
    "claude-mythos-5-2": _FABLE_5_2,
    "claude-haiku-5-5": _HAIKU_5_5,
    "claude-sonnet-5-5": _SONNET_5_5,
    "claude-opus-5-5": _ALWAYS_ON,
    "claude-fable-5-1": _ALWAYS_ON,
    "claude-mythos-5-1": _ALWAYS_ON,
    "claude-sonnet-5": _SONNET_5,
    "claude-fable-5": _FABLE_5,
    "claude-mythos-5": _FABLE_5,
    "claude-opus-5": _OPUS_5,
    "claude-opus-4-8": _OPUS_4_8,
    "claude-opus-4-7": _OPUS_4_7,
    "claude-mythos-preview": _MYTHOS_PREVIEW,
    "claude-opus-4-6": _OPUS_4_6,
    "claude-sonnet-4-6": _SONNET_4_6,
    "claude-haiku-4-5": _BUDGETS_ONLY,
    "claude-haiku-4-5-20251001": _BUDGETS_ONLY,
    "claude-opus-4-5": _BUDGETS_ONLY,
    "claude-opus-4-5-20251101": _BUDGETS_ONLY,
    # Claude Sonnet 4.5: named by older SDKs (down to the floor in pyproject.toml), not by current ones; budgets
    #   only, like Opus 4.5 (same adaptive-thinking page); 200K (1M only behind a beta nbagent does not send), 64K.
    "claude-sonnet-4-5": _BUDGETS_ONLY,
    "claude-sonnet-4-5-20250929": _BUDGETS_ONLY,
}


def lookup(model: str | None) -> ModelInfo:
    """The table's row for a model id or alias (an unknown model: conservative defaults)."""
    return MODELS.get(model or "", UNKNOWN)


def window(model: str | None, recorded: int = 0) -> int:
    """The context window to show and plan for: the one a session recorded, else the table's.

    Earlier versions logged 200,000 for every model (their default), so a recorded 200,000 counts as unset.
    """
    return recorded if recorded and recorded != DEFAULT_WINDOW else lookup(model).window


@dataclass(frozen=True)
class Thinking:
    """A thinking setting as one model's request takes it, and a note for people where it was changed."""

    param: dict[str, Any] | None  # the request's `thinking` (None: left out)
    output_config: dict[str, Any] | None = None  # the request's `output_config` (effort), where "off" needs it
    note: str = ""
    betas: tuple[str, ...] = ()  # betas the parameters need (block_binding: see binding.py)


def thinking_request(setting: int | str | None, model: str, max_tokens: int, *, name: str = "thinking") -> Thinking:
    """The request parameters for a thinking setting on ``model``; NbagentError before any request if it can't be met.

    ``setting`` is None or "off", "adaptive", or a budget (>= 1024, below ``max_tokens``); ``name`` is how
    the error names the setting (``Agent.thinking`` in a notebook).
    """
    info = lookup(model)
    if setting is None or setting == "off":
        if info.off == "disabled":
            return Thinking({"type": "disabled"})
        if info.off == "between_tools":
            return Thinking({"type": "between_tools"})
        if info.off == "low_effort":
            return Thinking(None, {"effort": "low"})
        return Thinking(None)
    if setting == "adaptive":
        if info.adaptive is False:
            raise NbagentError(
                f"{name}='adaptive' is not available on {model}, which takes only a token budget: "
                f"set {name} to a budget (e.g. 4096) or 'off', or use a model with adaptive thinking."
            )
        return Thinking({"type": "adaptive"})
    if isinstance(setting, int) and not isinstance(setting, bool) and MIN_BUDGET <= setting < max_tokens:
        if info.budgets is False:
            return Thinking(
                {"type": "adaptive"},
                note=f"{model} does not take a thinking budget: the budget of {setting} tokens runs as adaptive "
                "thinking (the model decides how much to think).",
            )
        return Thinking({"type": "enabled", "budget_tokens": setting})
    raise NbagentError(
        f"{name}={setting!r} is not a thinking setting: use 'off', 'adaptive', or a token budget of at least "
        f"{MIN_BUDGET} and below max_tokens ({max_tokens})."
    )
