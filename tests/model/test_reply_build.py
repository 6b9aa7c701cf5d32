"""The reply nbagent folds from a stream's typed events is the one the SDK's stream helper builds from the same bytes.

Each case is scripted twice on the fake server: once for ``AnthropicModel.stream`` (``messages.create(stream=True)``
and nbagent.model.reply_build) and once for ``messages.stream()`` + ``get_final_message()``; the two replies must
serialize to the same JSON, key order included. Shapes the fake's blocks do not make are scripted as raw events,
each checked first against the SDK's own stream event types. Marked ``sdk``: CI runs it again on the floor release.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import anthropic
import pytest

from nbagent.errors import ModelError
from nbagent.model.claude import AnthropicModel, ModelRequest
from nbagent.model.reply_build import ReplyBuilder, StreamError
from nbagent.state import context as ctx
from tests.support.fake_anthropic import FakeAnthropic, Reply, refusal, text, tool_use, tool_uses
from tests.support.raw_stream import checked, stream_of

pytestmark = pytest.mark.sdk

MODEL = "claude-test"
HI = [{"role": "user", "content": "hi"}]
TOOLS = [{"name": "sql", "description": "Run SQL.", "input_schema": {"type": "object", "properties": {}}}]
BETA = {"betas": (ctx.COMPACT_BETA,), "context_management": ctx.context_management(ctx.ContextSettings().for_model(MODEL))}


def helper_reply(client: anthropic.Anthropic, request: ModelRequest) -> dict[str, Any]:
    """The reply as the SDK's stream helper builds it, in the shape nbagent records."""
    params: dict[str, Any] = {"model": MODEL, "max_tokens": request.max_tokens, "messages": list(request.messages)}
    params["cache_control"] = {"type": "ephemeral"}
    if request.tools:
        params["tools"] = request.tools
    messages: Any = client.messages
    if request.betas:
        messages = client.beta.messages
        params |= {"betas": list(request.betas), "context_management": request.context_management}
    with messages.stream(**params) as stream:
        for _ in stream:
            pass
        message = stream.get_final_message()
    content = [block.model_dump(mode="json", exclude_none=True) for block in message.content]
    for block in content:
        block.pop("parsed_output", None)
    reply = {
        "id": message.id,
        "model": message.model,
        "content": content,
        "stop_reason": message.stop_reason,
        "usage": message.usage.model_dump(mode="json", exclude_none=True),
    }
    details = getattr(message, "stop_details", None)
    if details is not None:
        reply["stop_details"] = details.model_dump(mode="json", exclude_none=True)
    return reply


def both(fake: FakeAnthropic, client: anthropic.Anthropic, script: Reply, request: ModelRequest) -> tuple[str, str, list[Any]]:
    """nbagent's reply and the helper's, as JSON text (message ids made equal), and the deltas nbagent reported."""
    fake.script(script, script)
    deltas: list[dict[str, Any]] = []
    ours = AnthropicModel(MODEL, client=client).stream(request, deltas.append)
    fake._cached_prefixes.clear()  # the second request is not a cache read of the first: the same usage for both
    theirs = helper_reply(client, request)
    ours["id"] = theirs["id"] = "msg"
    return json.dumps(ours), json.dumps(theirs), deltas


def cut(reply: Reply, at: int) -> Reply:
    """``reply`` stopped at max_tokens ``at`` characters into its last tool call's JSON (as ``cut_tool_use``, with a fixed id)."""
    return dataclasses.replace(reply, stop_reason="max_tokens", cut_json=at)


# Source: "Citations" (https://platform.claude.com/docs/en/build-with-claude/citations, streaming): a citations_delta
# adds one citation to the text block being streamed.
CITED = stream_of(
    (
        {"type": "text", "text": ""},
        [
            {"type": "text_delta", "text": "The grass is "},
            {
                "type": "citations_delta",
                "citation": {
                    "type": "char_location",
                    "cited_text": "The grass is green.",
                    "document_index": 0,
                    "document_title": "Notes",
                    "start_char_index": 0,
                    "end_char_index": 20,
                },
            },
            {"type": "text_delta", "text": "green."},
        ],
    ),
    usage={"output_tokens": 9},
)
# Source: "Web search tool" (https://platform.claude.com/docs/en/agents-and-tools/tool-use/web-search-tool): a
# server_tool_use block streams its input as JSON, its result block
# arrives whole, and the message_delta's usage counts the searches.
SEARCHED = stream_of(
    (
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
        [
            {"type": "input_json_delta", "partial_json": ""},
            {"type": "input_json_delta", "partial_json": '{"query": "grass'},
            {"type": "input_json_delta", "partial_json": ' colour"}'},
        ],
    ),
    (
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": [{"type": "web_search_result", "url": "https://example.com/", "title": "Grass", "encrypted_content": "e1"}],
        },
        [],
    ),
    ({"type": "text", "text": ""}, [{"type": "text_delta", "text": "Green."}]),
    usage={"output_tokens": 30, "input_tokens": 900, "server_tool_use": {"web_search_requests": 1, "web_fetch_requests": 0}},
)
# Source: "MCP connector" (https://platform.claude.com/docs/en/agents-and-tools/mcp-connector): an mcp_tool_use block
# streams its input as JSON; its result arrives whole.
MCP_CALLED = stream_of(
    (
        {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "lookup", "server_name": "docs", "input": {}},
        [
            {"type": "input_json_delta", "partial_json": '{"term": "fold"}'},
        ],
    ),
    (
        {
            "type": "mcp_tool_result",
            "tool_use_id": "mcptoolu_1",
            "is_error": False,
            "content": [{"type": "text", "text": "a pure function"}],
        },
        [],
    ),
    usage={"output_tokens": 12, "cache_read_input_tokens": 30},
)
# Source: "Extended thinking" (https://platform.claude.com/docs/en/build-with-claude/extended-thinking, streaming):
# thinking_delta pieces, then one signature_delta.
THOUGHT = stream_of(
    (
        {"type": "thinking", "thinking": "", "signature": ""},
        [
            {"type": "thinking_delta", "thinking": "Let me see. "},
            {"type": "thinking_delta", "thinking": "Two and two."},
            {"type": "signature_delta", "signature": "sig-1"},
        ],
    ),
    ({"type": "redacted_thinking", "data": "opaque"}, []),
    ({"type": "text", "text": ""}, [{"type": "text_delta", "text": "Four."}]),
    usage={"output_tokens": 20},
)

CASES = {
    "text": (text("Hello from the fake, in pieces.", chunks=5), ModelRequest(HI)),
    "text, beta": (text("Hello on the beta endpoint.", chunks=3), ModelRequest(HI, **BETA)),
    "tool calls": (
        tool_uses([("sql", {"q": "select 1"}, "toolu_a"), ("sql", {"q": "select 2", "n": [1, 2.5]}, "toolu_b")], "Two."),
        ModelRequest(HI, TOOLS),
    ),
    "a tool call cut mid-JSON": (
        cut(tool_use("sql", {"query": "select * from t", "limit": 10}, id="toolu_c", text="Cut."), 21),
        ModelRequest(HI, TOOLS),
    ),
    "a tool call cut mid-JSON, beta": (
        cut(tool_use("sql", {"query": "select * from t"}, id="toolu_d"), 15),
        ModelRequest(HI, TOOLS, **BETA),
    ),
    "a refusal": (refusal("I was saying"), ModelRequest(HI)),
    "a compaction block": (
        Reply([{"type": "compaction", "content": "Summary so far.", "encrypted_content": "enc"}, {"type": "text", "text": "On."}]),
        ModelRequest(HI, **BETA),
    ),
    "thinking, signed and redacted": (checked(THOUGHT, beta=False), ModelRequest(HI)),
    "citations": (checked(CITED, beta=False), ModelRequest(HI)),
    "citations, beta": (checked(CITED, beta=True), ModelRequest(HI, **BETA)),
    "a server tool": (checked(SEARCHED, beta=False), ModelRequest(HI)),
    "a server tool, beta": (checked(SEARCHED, beta=True), ModelRequest(HI, **BETA)),
    "an MCP tool": (checked(MCP_CALLED, beta=True), ModelRequest(HI, **BETA)),
}


@pytest.mark.parametrize("case", CASES)
def test_the_reply_is_the_helpers(fake: FakeAnthropic, client: anthropic.Anthropic, case: str) -> None:
    script, request = CASES[case]
    ours, theirs, _ = both(fake, client, script, request)
    assert ours == theirs


def test_deltas_are_reported_as_they_stream(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    _, _, deltas = both(fake, client, checked(SEARCHED, beta=False), ModelRequest(HI))
    assert deltas == [
        {"index": 0, "partial_json": ""},
        {"index": 0, "partial_json": '{"query": "grass'},
        {"index": 0, "partial_json": ' colour"}'},
        {"index": 2, "text": "Green."},
    ]
    _, _, deltas = both(fake, client, checked(THOUGHT, beta=False), ModelRequest(HI))
    assert deltas == [{"index": 0, "thinking": "Let me see. "}, {"index": 0, "thinking": "Two and two."}, {"index": 2, "text": "Four."}]


def test_a_tool_input_that_is_not_json_is_a_retryable_error_with_any_secret_in_it_redacted(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    secret = "sk-ant-api03-" + "Q" * 90
    # The key 180 characters in, and 300 more after it: clipped before redaction, a piece of the key would be left.
    bad = f'{{"q": "{"x" * 162}", "key": "{secret}", "then": "{"y" * 300}", nope}}'
    broken = stream_of(
        (
            {"type": "tool_use", "id": "toolu_x", "name": "sql", "input": {}},
            [{"type": "input_json_delta", "partial_json": bad}],
        ),
        usage={"output_tokens": 5},
        stop="tool_use",
    )
    fake.script(checked(broken, beta=False), checked(broken, beta=False))
    with pytest.raises(ModelError, match="could not be read: a tool input is not JSON") as ours:
        AnthropicModel(MODEL, client=client).stream(ModelRequest(HI, TOOLS), lambda delta: None)
    said = str(ours.value)
    assert ours.value.retryable and ours.value.kind == "api_error" and len(said) == 501 and said.endswith("yyy…")
    assert "[REDACTED]" in said and "sk-ant-api03-Q" not in said
    with pytest.raises(ValueError, match="Unable to parse tool parameter JSON"):  # the helper's: a bare ValueError, a traceback
        helper_reply(client, ModelRequest(HI, TOOLS))


@pytest.mark.parametrize(
    ("events", "said"),
    [
        (MCP_CALLED[1:], 'content_block_start before "message_start"'),
        ([*MCP_CALLED[:1], *MCP_CALLED[2:]], "input_json_delta for content block 0, which never started"),
    ],
)
def test_a_stream_out_of_order_is_a_retryable_error(fake: FakeAnthropic, client: anthropic.Anthropic, events: list[Any], said: str) -> None:
    fake.script(checked(events, beta=True))
    with pytest.raises(ModelError, match=said) as raised:
        AnthropicModel(MODEL, client=client).stream(ModelRequest(HI, **BETA), lambda delta: None)
    assert raised.value.retryable


def test_no_reply_is_made_of_a_stream_without_its_message() -> None:
    with pytest.raises(StreamError, match="ended before its message started"):
        ReplyBuilder().reply()


@pytest.mark.parametrize("kept", [0, 1, 3, len(THOUGHT) - 1])
def test_a_stream_that_closes_before_message_stop_is_a_retryable_error(fake: FakeAnthropic, client: anthropic.Anthropic, kept: int) -> None:
    fake.script(Reply(events=THOUGHT[:kept]))
    with pytest.raises(ModelError, match="closed before message_stop") as raised:
        AnthropicModel(MODEL, client=client).stream(ModelRequest(HI), lambda delta: None)
    assert raised.value.kind == "connection_error" and raised.value.retryable
