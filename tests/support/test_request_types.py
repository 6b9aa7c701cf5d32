"""The strict request check (tests/support/request_types.py), the prefill rule (tests/support/fake_prefill.py) and usage totals.

The walker is table-tested with bodies the SDK's types take and bodies the API refuses; the prefill rule and the
compaction ``usage.iterations`` go end to end through the real SDK and the fake API.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import anthropic
import pytest

import nbagent
from nbagent.record import events as ev
from nbagent.render.parts import usage_text
from nbagent.state import tokens as usage
from tests.support import fake_prefill
from tests.support.fake_anthropic import FakeAnthropic, text
from tests.support.request_types import problem

GOOD: dict[str, Any] = {
    "model": "claude-test",
    "max_tokens": 1024,
    "stream": True,
    "system": [{"type": "text", "text": "You help.", "cache_control": {"type": "ephemeral"}}],
    "tools": [
        {
            "name": "read_file",
            "description": "Read a file.",
            "input_schema": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
                "additionalProperties": False,
            },
        }
    ],
    "thinking": {"type": "adaptive"},
    "cache_control": {"type": "ephemeral"},
    "messages": [
        {"role": "user", "content": "read a.py"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "I should read it.", "signature": "c2ln"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [
                        {"type": "text", "text": "print(1)"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                    ],
                    "is_error": False,
                }
            ],
        },
    ],
}
COMPACTION = {"type": "compaction", "content": "Summary.", "encrypted_content": "b3BhcXVl", "signature": "c2ln"}
BETA_EDITS = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50000}}]}


def changed(path: tuple[Any, ...], value: Any, base: dict[str, Any] = GOOD) -> dict[str, Any]:
    """A deep copy of ``base`` with the item at ``path`` set to ``value`` (a new key where it was not)."""
    body = copy.deepcopy(base)
    target: Any = body
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return body


WITH_COMPACTION = changed(("messages", 1, "content"), [COMPACTION, *GOOD["messages"][1]["content"]])


@pytest.mark.parametrize(
    ("body", "beta", "expected"),
    [
        (GOOD, False, None),
        (GOOD, True, None),
        (changed(("stream",), False), False, None),
        (changed(("messages", 0, "content"), [{"type": "text", "text": "hi", "citations": None}]), False, None),
        (changed(("model",), "claude-opus-4-6"), False, None),  # any model id is a string the types take
        (changed(("context_management",), BETA_EDITS), True, None),
        (WITH_COMPACTION, True, None),
        # a key no type names, at the top and nested deep in a tool result
        (changed(("temperature_x",), 1), False, "temperature_x: Extra inputs are not permitted"),
        (
            changed(("messages", 2, "content", 0, "content", 0, "foo"), 1),
            False,
            "messages.2.content.0.content.0.foo: Extra inputs are not permitted",
        ),
        (changed(("messages", 1, "content", 2, "caller_x"), "me"), False, "messages.1.content.2.caller_x: Extra inputs are not permitted"),
        (changed(("system", 0, "cache_control", "scope"), "x"), False, "system.0.cache_control.scope: Extra inputs are not permitted"),
        # beta-only parameters and blocks on the plain endpoint
        (changed(("context_management",), BETA_EDITS), False, "context_management: Extra inputs are not permitted"),
        (WITH_COMPACTION, False, "messages.1.content.0: Input tag 'compaction' found using 'type' does not match any of the expected tags"),
        # the SDK sends these as headers: a body holding one is not what the SDK sends
        (changed(("betas",), ["compact-2026-01-12"]), True, "betas: Extra inputs are not permitted"),
        # an unknown content block type, role, or literal
        (changed(("messages", 1, "content", 1, "type"), "txt"), False, "messages.1.content.1: Input tag 'txt' found using 'type'"),
        (changed(("messages", 0, "role"), "human"), False, "messages.0: Input tag 'human' found using 'role'"),
        (changed(("thinking",), {"type": "sometimes"}), False, "thinking: Input tag 'sometimes' found using 'type'"),
        (changed(("system", 0, "cache_control", "ttl"), "2h"), False, "system.0.cache_control.ttl: Input should be '5m' or '1h'"),
        (
            changed(("messages", 2, "content", 0, "content", 1, "source", "media_type"), "image/bmp"),
            False,
            "messages.2.content.0.content.1.source.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'",
        ),
        # wrong JSON kinds and missing required keys
        (changed(("max_tokens",), True), False, "max_tokens: Input should be a valid integer"),
        (changed(("max_tokens",), "1024"), False, "max_tokens: Input should be a valid integer"),
        (changed(("messages", 1, "content", 2, "id"), 7), False, "messages.1.content.2.id: Input should be a valid string"),
        (
            changed(("messages", 2, "content", 0), {"type": "tool_result", "content": "x"}),
            False,
            "messages.2.content.0.tool_use_id: Field required",
        ),
        ({k: v for k, v in GOOD.items() if k != "max_tokens"}, False, "max_tokens: Field required"),
        (changed(("messages",), {"role": "user"}), False, "messages: Input should be a valid list"),
        ([GOOD], False, "Input should be a valid dictionary"),
    ],
)
def test_the_walker_takes_what_the_sdk_types_name_and_refuses_the_rest(body: Any, beta: bool, expected: str | None) -> None:
    found = problem(body, beta=beta)
    if expected is None:
        assert found is None
    else:
        assert found is not None and found.startswith(expected), found


@pytest.mark.sdk
def test_the_fake_api_answers_a_body_the_types_refuse_with_the_apis_400(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.script(text("never sent"))
    with pytest.raises(anthropic.BadRequestError, match=r"messages\.0\.content\.0\.foo: Extra inputs are not permitted"):
        client.messages.create(
            model="claude-test",
            max_tokens=10,
            messages=[{"role": "user", "content": [{"type": "text", "text": "hi", "foo": 1}]}],  # type: ignore[typeddict-unknown-key]
        )
    assert fake.pending == 1  # refused before a reply was taken


@pytest.mark.sdk
@pytest.mark.parametrize(("model", "refused"), [("claude-opus-4-6", True), ("claude-sonnet-5-5", True), ("claude-test", False)])
def test_a_request_ending_on_an_assistant_turn_is_a_prefill_refused_where_the_docs_say(
    fake: FakeAnthropic, client: anthropic.Anthropic, model: str, refused: bool
) -> None:
    fake.script(text("}"))
    messages: list[Any] = [{"role": "user", "content": "JSON please"}, {"role": "assistant", "content": "{"}]
    if refused:
        with pytest.raises(anthropic.BadRequestError, match=fake_prefill.MESSAGE):
            client.messages.create(model=model, max_tokens=10, messages=messages)
    else:
        assert client.messages.create(model=model, max_tokens=10, messages=messages).content[0].text == "}"  # type: ignore[union-attr]


@pytest.mark.sdk
def test_a_paused_reply_sent_back_as_it_is_continues_on_a_model_without_prefill(
    fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path
) -> None:
    fake.script(text("Searching...", stop_reason="pause_turn"), text("Found it."))
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        assert nbagent.run(session, "find it", client=client, model="claude-opus-4-6").endswith("Found it.")
    assert fake.requests[1].body["messages"][-1]["role"] == "assistant"


@pytest.mark.parametrize(
    ("reply_usage", "expected"),
    [
        ({}, {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}),
        ({"input_tokens": 10, "output_tokens": 5}, {"input_tokens": 10, "output_tokens": 5}),
        (  # the docs' example: the compaction entry is not in the top-level counts; the message entry is
            {
                "input_tokens": 23000,
                "output_tokens": 1000,
                "iterations": [
                    {"type": "compaction", "input_tokens": 180000, "output_tokens": 3500, "cache_read_input_tokens": 0},
                    {"type": "message", "input_tokens": 23000, "output_tokens": 1000},
                ],
            },
            {"input_tokens": 203000, "output_tokens": 4500},
        ),
        ({"input_tokens": 1, "iterations": [{"type": "compaction", "input_tokens": True}, "junk"]}, {"input_tokens": 1}),
        ("not usage", {"input_tokens": 0}),
    ],
)
def test_totals_add_compaction_iterations_to_the_top_level_counts(reply_usage: Any, expected: dict[str, int]) -> None:
    totals = usage.totals(reply_usage)
    assert set(totals) == set(ev.USAGE_KEYS) and {k: totals[k] for k in expected} == expected


@pytest.mark.sdk
def test_a_server_compaction_s_tokens_reach_the_session_totals_and_the_panel(
    fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path
) -> None:
    fake.responder = lambda request: text("Answer: " + "words " * 60)
    settings = nbagent.ContextSettings(trigger=400)
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        for n in range(5):
            nbagent.run(session, f"question {n}", client=client, model="claude-test", context=settings)
        replies = [e for e in session.events() if e["type"] == ev.ASSISTANT_MSG]
        compacting = [e for e in replies if e["usage"].get("iterations")]
        assert compacting, "the fake never compacted"
        [summary_step] = [i for i in compacting[0]["usage"]["iterations"] if i["type"] == "compaction"]
        top_level = sum(e["usage"]["input_tokens"] for e in replies)
        assert summary_step["input_tokens"] > 0
        assert session.usage["input_tokens"] == top_level + sum(
            i["input_tokens"] for e in compacting for i in e["usage"]["iterations"] if i["type"] == "compaction"
        )
        every_input = (
            session.usage["input_tokens"] + session.usage["cache_creation_input_tokens"] + session.usage["cache_read_input_tokens"]
        )
        assert f"{every_input:,} tokens in" in usage_text(session.usage)  # cached input is input too (usage.Tokens)
