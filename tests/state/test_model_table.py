"""The model table (nbagent/state/model_table.py): its rows, what each thinking setting sends per model, and the window shown.

End to end through the real SDK against the fake API, which refuses the thinking types each model refuses
(tests/support/fake_context.py THINKING, with the documentation pages it follows).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import anthropic
import pytest

import nbagent
from nbagent.cli.main import main
from nbagent.errors import NbagentError
from nbagent.model.claude import DEFAULT_MODEL
from nbagent.record import events as ev
from nbagent.render.parts import state_context
from nbagent.state import model_table as models
from nbagent.state.binding import BINDING_BETA, DROP_BLOCK
from nbagent.state.context import ContextSettings, uses_server
from tests.support import fake_context
from tests.support.fake_anthropic import FakeAnthropic, text

pytestmark = pytest.mark.sdk  # run again against the SDK floor in CI (.ci/run)


# The table -----------------------------------------------------------------------------------------
def test_every_model_the_sdk_names_is_in_the_table() -> None:
    from anthropic.types.model_param import ModelParam

    named = set(ModelParam.__args__[0].__args__)  # type: ignore[attr-defined]
    assert named <= set(models.MODELS), sorted(named - set(models.MODELS))
    assert DEFAULT_MODEL in models.MODELS


@pytest.mark.parametrize(
    ("model", "window", "max_output", "off", "by_default", "compaction"),
    [
        ("claude-sonnet-5-5", 1_000_000, 128_000, "between_tools", True, True),
        ("claude-opus-5-5", 1_000_000, 128_000, "low_effort", True, True),
        ("claude-fable-5-2", 1_000_000, 128_000, "low_effort", True, True),
        ("claude-haiku-5-5", 1_000_000, 128_000, "disabled", True, True),
        ("claude-sonnet-5", 1_000_000, 128_000, "disabled", True, True),
        ("claude-opus-5", 1_000_000, 128_000, "disabled", True, True),
        ("claude-opus-4-8", 1_000_000, 128_000, "omit", False, True),
        ("claude-opus-4-6", 1_000_000, 128_000, "omit", False, True),
        ("claude-sonnet-4-6", 1_000_000, 128_000, "omit", False, True),  # its overview: 128K
        ("claude-haiku-4-5", 200_000, 64_000, "omit", False, False),
        ("claude-haiku-4-5-20251001", 200_000, 64_000, "omit", False, False),
        ("claude-test", 200_000, 8_192, "omit", False, None),  # unknown: conservative, no assumptions
        ("", 200_000, 8_192, "omit", False, None),
    ],
)
def test_the_rows(model: str, window: int, max_output: int, off: str, by_default: bool, compaction: bool | None) -> None:
    info = models.lookup(model)
    assert (info.window, info.max_output, info.off, info.thinks_by_default, info.compaction) == (
        window,
        max_output,
        off,
        by_default,
        compaction,
    )
    assert info.known == (model in models.MODELS)


@pytest.mark.parametrize(
    ("model", "setting", "param", "output_config", "noted"),
    [
        # off: the least thinking each model allows
        ("claude-sonnet-5-5", "off", {"type": "between_tools"}, None, False),
        ("claude-sonnet-5-5", None, {"type": "between_tools"}, None, False),
        ("claude-opus-5-5", "off", None, {"effort": "low"}, False),
        ("claude-haiku-5-5", "off", {"type": "disabled"}, None, False),
        ("claude-opus-5", "off", {"type": "disabled"}, None, False),
        ("claude-opus-4-6", "off", None, None, False),
        ("claude-haiku-4-5", "off", None, None, False),
        ("claude-test", "off", None, None, False),
        # adaptive
        ("claude-sonnet-5-5", "adaptive", {"type": "adaptive"}, None, False),
        ("claude-opus-4-6", "adaptive", {"type": "adaptive"}, None, False),
        ("claude-test", "adaptive", {"type": "adaptive"}, None, False),
        # a budget: adaptive with a note where budgets are refused
        ("claude-sonnet-5-5", 4096, {"type": "adaptive"}, None, True),
        ("claude-opus-5-5", 4096, {"type": "adaptive"}, None, True),
        ("claude-opus-4-6", 4096, {"type": "enabled", "budget_tokens": 4096}, None, False),
        ("claude-haiku-4-5", 4096, {"type": "enabled", "budget_tokens": 4096}, None, False),
        ("claude-test", 4096, {"type": "enabled", "budget_tokens": 4096}, None, False),
    ],
)
def test_what_each_setting_sends(model: str, setting: Any, param: Any, output_config: Any, noted: bool) -> None:
    thinking = models.thinking_request(setting, model, 8192)
    assert (thinking.param, thinking.output_config, bool(thinking.note)) == (param, output_config, noted)


def test_adaptive_on_a_model_that_takes_only_budgets_is_an_error_naming_the_setting() -> None:
    with pytest.raises(NbagentError, match=r"Agent.thinking='adaptive' is not available on claude-haiku-4-5.*budget"):
        models.thinking_request("adaptive", "claude-haiku-4-5", 8192, name="Agent.thinking")


@pytest.mark.parametrize(("setting"), [1023, 8192, True, "on"])
def test_a_bad_setting_says_what_is_allowed(setting: Any) -> None:
    with pytest.raises(NbagentError, match="use 'off', 'adaptive', or a token budget"):
        models.thinking_request(setting, "claude-sonnet-5-5", 8192)


@pytest.mark.parametrize(
    ("model", "recorded", "window"),
    [
        ("claude-sonnet-5-5", 0, 1_000_000),
        ("claude-sonnet-5-5", 200_000, 1_000_000),  # what every earlier version logged: counts as unset
        ("claude-sonnet-5-5", 300_000, 300_000),  # a setting: kept
        ("claude-haiku-4-5", 200_000, 200_000),
        ("claude-test", 0, 200_000),
        (None, 50_000, 50_000),
    ],
)
def test_the_window(model: str | None, recorded: int, window: int) -> None:
    assert models.window(model, recorded) == window


def test_server_compaction_is_not_asked_of_a_model_the_table_rules_out() -> None:
    assert uses_server(ContextSettings(), "claude-sonnet-5-5", False)  # unconfirmed: tried, local fallback on refusal
    assert uses_server(ContextSettings(), "claude-opus-4-6", False)
    assert not uses_server(ContextSettings(), "claude-haiku-4-5", False)
    assert ContextSettings().for_model("claude-sonnet-5-5").window == 1_000_000
    assert ContextSettings(window=5_000).for_model("claude-sonnet-5-5").window == 5_000


DROP = DROP_BLOCK


# End to end: the request bodies ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("model", "setting", "sent", "effort", "thought"),
    [
        ("claude-sonnet-5-5", "off", {"type": "between_tools"}, None, False),
        # Thinking blocks are bound on these models: the config that takes it asks the API to drop an unbound one (binding.py).
        # They omit thinking text by default: summarized display is asked where the config takes it (thinking_display.py).
        ("claude-sonnet-5-5", "adaptive", {"type": "adaptive", "block_binding": DROP, "display": "summarized"}, None, True),
        ("claude-sonnet-5-5", 2048, {"type": "adaptive", "block_binding": DROP, "display": "summarized"}, None, True),
        ("claude-opus-5-5", "off", {"type": "adaptive", "block_binding": DROP, "display": "summarized"}, {"effort": "low"}, True),
        ("claude-opus-5-5", 2048, {"type": "adaptive", "block_binding": DROP, "display": "summarized"}, None, True),
        ("claude-haiku-4-5", "off", None, None, False),
        ("claude-haiku-4-5", 2048, {"type": "enabled", "budget_tokens": 2048}, None, True),
        ("claude-opus-4-6", "adaptive", {"type": "adaptive"}, None, True),
    ],
)
def test_each_setting_reaches_the_api_as_the_model_takes_it(
    fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path, model: str, setting: Any, sent: Any, effort: Any, thought: bool
) -> None:
    fake.script(text("one"), text("two"))
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        for prompt in ("first", "second"):  # the second request carries the first reply (and its thinking) back
            nbagent.run(session, prompt, client=client, model=model, thinking=setting)
        events = list(session.events())
    for request in fake.requests:
        assert request.body.get("thinking") == sent and request.body.get("output_config") == effort
        assert (BINDING_BETA in request.headers.get("anthropic-beta", "")) == ("block_binding" in (sent or {}))
    replies = [e for e in events if e["type"] == ev.ASSISTANT_MSG]
    assert all((r["content"][0]["type"] == "thinking") == thought for r in replies)
    notes = [e["text"] for e in events if e["type"] == ev.NOTE and e.get("kind") == "thinking"]
    assert len(notes) == (2 if isinstance(setting, int) and not models.lookup(model).budgets else 0)


def test_adaptive_on_a_budget_only_model_sends_nothing(fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path) -> None:
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        with pytest.raises(NbagentError, match="thinking='adaptive' is not available on claude-haiku-4-5"):
            nbagent.run(session, "hi", client=client, model="claude-haiku-4-5", thinking="adaptive")
        assert not [e for e in session.events() if e["type"] == ev.USER_MSG]
    assert fake.requests == []


@pytest.mark.parametrize(
    ("model", "thinking", "refusal"),
    [
        ("claude-sonnet-5-5", {"type": "enabled", "budget_tokens": 2048}, '"thinking.type.enabled" is not supported'),
        ("claude-sonnet-5-5", {"type": "disabled"}, '"thinking.type.disabled" is not supported'),
        ("claude-opus-5-5", {"type": "disabled"}, '"thinking.type.disabled" is not supported'),
        ("claude-haiku-4-5", {"type": "adaptive"}, '"thinking.type.adaptive" is not supported'),
        ("claude-opus-4-6", {"type": "between_tools"}, '"thinking.type.between_tools" is not supported'),
    ],
)
def test_the_fake_refuses_what_the_api_refuses(client: anthropic.Anthropic, model: str, thinking: Any, refusal: str) -> None:
    with pytest.raises(anthropic.BadRequestError) as raised:
        client.messages.create(model=model, max_tokens=4096, messages=[{"role": "user", "content": "hi"}], thinking=thinking)
    assert refusal in raised.value.body["error"]["message"]  # type: ignore[index]
    assert fake_context.thinking_refused({"model": "claude-test", "thinking": thinking}) is None  # an unknown model takes all


# The window the panel and `nbagent sessions` show ---------------------------------------------------
def sessions_json(folder: Path) -> list[dict[str, Any]]:
    out, err = io.StringIO(), io.StringIO()
    assert main(["sessions", str(folder), "--json"], out=out, err=err) == 0, err.getvalue()
    return list(json.loads(out.getvalue()))


@pytest.mark.parametrize(("setting", "shown"), [(0, "1M"), (200_000, "1M"), (300_000, "300k")])
def test_the_window_shown_is_the_models_and_a_recorded_200k_counts_as_unset(
    fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path, setting: int, shown: str
) -> None:
    """Earlier versions logged 200,000 on every session's first turn; the default model's window is 1M."""
    fake.script(text("ok"))
    path = tmp_path / "s.jsonl"
    with nbagent.Session.open(path) as session:
        nbagent.run(session, "hi", client=client, model="claude-sonnet-5-5", context=ContextSettings(window=setting))
        [context] = [e for e in session.events() if e["type"] == ev.CONTEXT]
        assert context["window"] == (setting or 1_000_000)
        assert state_context(session.state).endswith(f"/ {shown}")
    [entry] = sessions_json(tmp_path)
    assert entry["context"].endswith(f"/ {shown}")
