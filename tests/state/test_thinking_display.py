"""Which requests ask for summarized thinking: the models that omit the text by default, in the configs that take display."""

from __future__ import annotations

from typing import Any

import pytest

from nbagent.state import binding
from nbagent.state import model_table as models
from nbagent.state.thinking_display import omits, summarized

DROP = {"block_binding": binding.DROP_BLOCK}
SUM = {"display": "summarized"}


@pytest.mark.parametrize(
    ("model", "param", "sent"),
    [
        ("claude-opus-5-5", {"type": "adaptive"}, {"type": "adaptive", **SUM}),
        ("claude-sonnet-5-5", {"type": "adaptive", **DROP}, {"type": "adaptive", **DROP, **SUM}),
        ("claude-haiku-5-5", {"type": "adaptive"}, {"type": "adaptive", **SUM}),
        ("claude-opus-4-7", {"type": "adaptive"}, {"type": "adaptive", **SUM}),
        ("claude-mythos-preview", {"type": "enabled", "budget_tokens": 2048}, {"type": "enabled", "budget_tokens": 2048, **SUM}),
        # Thinking left out where the model thinks adaptively anyway (Opus 5.5's "off"): said, so that it carries display.
        ("claude-opus-5-5", None, {"type": "adaptive", **SUM}),
        ("claude-opus-4-8", None, None),  # thinks only when asked: nothing to show, nothing sent
        ("claude-sonnet-5-5", {"type": "between_tools"}, {"type": "between_tools"}),  # takes no display
        ("claude-haiku-5-5", {"type": "disabled"}, {"type": "disabled"}),
        ("claude-opus-5-5", {"type": "adaptive", "display": "omitted"}, {"type": "adaptive", "display": "omitted"}),  # as asked
        ("claude-opus-4-6", {"type": "adaptive"}, {"type": "adaptive"}),  # summarized is its default: sent as before
        ("claude-sonnet-4-6", {"type": "enabled", "budget_tokens": 2048}, {"type": "enabled", "budget_tokens": 2048}),
        ("claude-haiku-4-5", {"type": "enabled", "budget_tokens": 2048}, {"type": "enabled", "budget_tokens": 2048}),
        ("claude-test", {"type": "adaptive"}, {"type": "adaptive"}),  # a model the table does not know: as asked
    ],
)
def test_summarized_display_is_asked_where_the_text_would_be_omitted(model: str, param: Any, sent: Any) -> None:
    thinking = models.Thinking(param, {"effort": "low"}, "a note", ("a-beta",))
    asked = summarized(thinking, model)
    assert asked.param == sent
    assert (asked.output_config, asked.note, asked.betas) == (thinking.output_config, thinking.note, thinking.betas)


@pytest.mark.parametrize(
    ("model", "omitted"),
    [
        ("claude-sonnet-5-5", True),
        ("claude-fable-5-2", True),
        ("claude-opus-4-7", True),
        ("claude-opus-4-6", False),
        ("claude-haiku-4-5", False),
        ("claude-test", False),
    ],
)
def test_which_models_omit_thinking_text_by_default(model: str, omitted: bool) -> None:
    assert omits(model) is omitted
