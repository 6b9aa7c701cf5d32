"""Tests of the fake Anthropic server, driven only through the real anthropic SDK over HTTP."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from tests.support.fake_anthropic import FakeAnthropic, RecordedRequest, error, stream_error, text, tool_use, tool_uses

pytestmark = pytest.mark.sdk  # run again against the SDK floor in CI (.ci/run)

MODEL = "claude-test"
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    """A running fake server."""
    with FakeAnthropic() as server:
        yield server


def api_message(err: anthropic.APIStatusError) -> str:
    """The error body's message (read from the body: ``api_message`` is newer than the SDK floor)."""
    return str(err.body["error"]["message"]) if isinstance(err.body, dict) else ""


def client(fake: FakeAnthropic, max_retries: int = 0) -> anthropic.Anthropic:
    """A real SDK client pointed at the fake."""
    return anthropic.Anthropic(base_url=fake.base_url, api_key="test-key", max_retries=max_retries)


def stream(fake: FakeAnthropic, messages: list[dict[str, Any]] = HI, **kw: Any) -> tuple[list[Any], Any]:
    """Stream one request; return its events and the final message."""
    with client(fake) as c, c.messages.stream(model=MODEL, max_tokens=100, messages=messages, **kw) as s:
        events = list(s)
        return events, s.get_final_message()


def test_streamed_text_arrives_in_several_deltas(fake: FakeAnthropic) -> None:
    fake.script(text("Hello, world! How are you today?"))
    events, final = stream(fake, system="be brief")
    deltas = [e.delta.text for e in events if e.type == "content_block_delta"]
    assert len(deltas) > 1 and "".join(deltas) == "Hello, world! How are you today?"
    assert [b.text for b in final.content] == ["Hello, world! How are you today?"]
    assert final.stop_reason == "end_turn" and final.model == MODEL and final.id.startswith("msg_")
    assert final.usage.output_tokens > 1 and final.usage.input_tokens > 0
    req = fake.requests[0]
    assert req.path == "/v1/messages" and req.stream
    assert req.body["system"] == "be brief" and req.body["messages"] == HI
    assert req.headers["content-type"] == "application/json" and "anthropic-version" in req.headers


def test_chunks_controls_the_number_of_text_deltas(fake: FakeAnthropic) -> None:
    fake.script(text("abcdefghi", chunks=3))
    events, final = stream(fake)
    assert [e.delta.text for e in events if e.type == "content_block_delta"] == ["abc", "def", "ghi"]
    assert final.content[0].text == "abcdefghi"


def test_tool_use_streams_input_json_deltas(fake: FakeAnthropic) -> None:
    args = {"a": 1, "b": 2, "note": "add these two numbers"}
    fake.script(tool_use("add", args, text="Let me add."))
    events, final = stream(fake, tools=[{"name": "add", "input_schema": {"type": "object"}}])
    partials = [e.delta.partial_json for e in events if e.type == "content_block_delta" and e.delta.type == "input_json_delta"]
    assert len(partials) > 2 and "".join(partials) == '{"a": 1, "b": 2, "note": "add these two numbers"}'
    assert final.stop_reason == "tool_use"
    assert final.content[0].type == "text" and final.content[0].text == "Let me add."
    block = final.content[1]
    assert (block.type, block.name, block.input, block.id) == ("tool_use", "add", args, "toolu_0001")


def test_parallel_tool_uses(fake: FakeAnthropic) -> None:
    fake.script(tool_uses([("add", {"a": 1}), ("mul", {"b": 2}), ("neg", {"c": 3}, "toolu_mine")]))
    _, final = stream(fake)
    assert [(b.name, b.input, b.id) for b in final.content] == [
        ("add", {"a": 1}, "toolu_0001"),
        ("mul", {"b": 2}, "toolu_0002"),
        ("neg", {"c": 3}, "toolu_mine"),
    ]


def test_529_then_success_is_retried_by_the_sdk(fake: FakeAnthropic) -> None:
    fake.script(error(529), text("second time lucky"))
    started = time.monotonic()
    with client(fake, max_retries=2) as c:
        message = c.messages.create(model=MODEL, max_tokens=10, messages=HI)
    assert message.content[0].text == "second time lucky"
    assert len(fake.requests) == 2 and time.monotonic() - started < 2
    assert [r.headers["x-stainless-retry-count"] for r in fake.requests] == ["0", "1"]


def test_x_should_retry_false_stops_sdk_retries(fake: FakeAnthropic) -> None:
    fake.script(error(429, x_should_retry=False), text("unused"))
    with client(fake, max_retries=2) as c, pytest.raises(anthropic.RateLimitError) as info:
        c.messages.create(model=MODEL, max_tokens=10, messages=HI)
    assert info.value.type == "rate_limit_error" and len(fake.requests) == 1 and fake.pending == 1


def test_400_raises_bad_request_with_message(fake: FakeAnthropic) -> None:
    fake.script(error(400, message="prompt is too long"))
    with client(fake, max_retries=2) as c, pytest.raises(anthropic.BadRequestError) as info:
        c.messages.create(model=MODEL, max_tokens=10, messages=HI)
    err = info.value
    assert api_message(err) == "prompt is too long" and "prompt is too long" in str(err)
    assert err.type == "invalid_request_error" and err.request_id and err.request_id.startswith("req_")
    assert err.body["type"] == "error" and len(fake.requests) == 1


def test_stream_error_breaks_stream_after_partial_text(fake: FakeAnthropic) -> None:
    fake.script(stream_error(after=5, partial=text("Partial answer that never ends", chunks=4)))
    seen: list[str] = []
    with client(fake, max_retries=2) as c, pytest.raises(anthropic.APIStatusError) as info:
        with c.messages.stream(model=MODEL, max_tokens=10, messages=HI) as s:
            seen.extend(s.text_stream)
    assert seen == ["Partial ", "answer t"]  # events: message_start, ping, block_start, 2 deltas
    assert info.value.type == "overloaded_error" and api_message(info.value) == "Overloaded"
    assert len(fake.requests) == 1  # an error inside a 200 stream is not retried by the SDK


def test_non_streaming_create(fake: FakeAnthropic) -> None:
    fake.script(text("plain", usage={"output_tokens": 42}), tool_use("f", {"x": [1, 2]}))
    with client(fake) as c:
        first = c.messages.create(model=MODEL, max_tokens=10, messages=HI)
        second = c.messages.create(model=MODEL, max_tokens=10, messages=HI)
    assert first.content[0].text == "plain" and first.usage.output_tokens == 42
    assert second.stop_reason == "tool_use" and second.content[0].input == {"x": [1, 2]}
    assert [r.stream for r in fake.requests] == [False, False]


def test_missing_tool_result_is_rejected_without_consuming_a_reply(fake: FakeAnthropic) -> None:
    fake.script(text("never sent"))
    history = [
        {"role": "user", "content": "add"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_x", "name": "add", "input": {}}]},
        {"role": "user", "content": "where is my result?"},
    ]
    with client(fake, max_retries=2) as c, pytest.raises(anthropic.BadRequestError) as info:
        c.messages.create(model=MODEL, max_tokens=10, messages=history)
    assert "toolu_x" in api_message(info.value) and "tool_result" in api_message(info.value)
    assert fake.pending == 1 and len(fake.requests) == 1


def test_valid_tool_history_and_other_validation(fake: FakeAnthropic) -> None:
    fake.script(text("done"))
    history = [
        {"role": "user", "content": "add"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_x", "name": "add", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "3"}]},
    ]
    with client(fake) as c:
        assert c.messages.create(model=MODEL, max_tokens=10, messages=history).content[0].text == "done"
        with pytest.raises(anthropic.BadRequestError, match="at least one message"):
            c.messages.create(model=MODEL, max_tokens=10, messages=[])
        stray = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_y"}]}]
        with pytest.raises(anthropic.BadRequestError, match="unexpected `tool_use_id`"):
            c.messages.create(model=MODEL, max_tokens=10, messages=stray)
        with pytest.raises(anthropic.BadRequestError, match="max_tokens: Field required"):
            c.post("/v1/messages", cast_to=object, body={"model": MODEL, "messages": HI})


def test_unscripted_request_fails_loudly_and_is_recorded(fake: FakeAnthropic) -> None:
    with client(fake) as c, pytest.raises(anthropic.InternalServerError, match="no scripted reply left"):
        c.messages.create(model=MODEL, max_tokens=10, messages=HI)
    assert len(fake.requests) == 1 and fake.requests[0].body["messages"] == HI


def test_unknown_path_is_404(fake: FakeAnthropic) -> None:
    with client(fake) as c, pytest.raises(anthropic.NotFoundError):
        c.models.list()
    assert fake.requests[0].method == "GET"


def test_caching_reports_reads_for_a_repeated_prefix(fake: FakeAnthropic) -> None:
    fake.script(text("one"), text("two"), text("three"))
    cached = {"type": "ephemeral"}
    first = [{"role": "user", "content": [{"type": "text", "text": "long context " * 50, "cache_control": cached}]}]
    second = [
        {"role": "user", "content": [{"type": "text", "text": "long context " * 50}]},
        {"role": "assistant", "content": "one"},
        {"role": "user", "content": [{"type": "text", "text": "more", "cache_control": cached}]},
    ]
    with client(fake) as c:
        u0 = c.messages.create(model=MODEL, max_tokens=10, messages=HI).usage
        u1 = c.messages.create(model=MODEL, max_tokens=10, system="sys", messages=first).usage
        u2 = c.messages.create(model=MODEL, max_tokens=10, system="sys", messages=second).usage
    assert (u0.cache_read_input_tokens, u0.cache_creation_input_tokens) == (0, 0)
    assert u1.cache_read_input_tokens == 0 and u1.cache_creation_input_tokens > 100
    assert u2.cache_read_input_tokens == u1.cache_creation_input_tokens
    assert 0 < u2.cache_creation_input_tokens < u1.cache_creation_input_tokens


def test_callable_replies_and_responder_see_the_request(fake: FakeAnthropic) -> None:
    seen: list[RecordedRequest] = []

    def echo(request: RecordedRequest) -> Any:
        seen.append(request)
        return text("you said " + request.body["messages"][-1]["content"])

    fake.script(echo)
    fake.responder = lambda request: text(f"responder #{len(fake.requests)}")
    with client(fake) as c:
        replies = [c.messages.create(model=MODEL, max_tokens=10, messages=[{"role": "user", "content": w}]) for w in ("ping", "a", "b")]
    assert [m.content[0].text for m in replies] == ["you said ping", "responder #2", "responder #3"]
    assert seen == [fake.requests[0]] and fake.pending == 0


def test_async_client_streams(fake: FakeAnthropic) -> None:
    fake.script(text("async hello"))

    async def run() -> str:
        async with anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test-key", max_retries=0) as c:
            async with c.messages.stream(model=MODEL, max_tokens=10, messages=HI) as s:
                return (await s.get_final_message()).content[0].text

    assert asyncio.run(run()) == "async hello"


def test_delay_spaces_out_events(fake: FakeAnthropic) -> None:
    fake.script(text("abcd", chunks=2, delay=0.05))
    started = time.monotonic()
    _, final = stream(fake)
    assert final.content[0].text == "abcd" and time.monotonic() - started >= 0.05 * 7


def test_hang_after_stalls_until_client_disconnects(fake: FakeAnthropic) -> None:
    fake.script(text("abcdefgh", chunks=2, hang_after=4), text("next"))
    with client(fake) as c:
        with c.messages.stream(model=MODEL, max_tokens=10, messages=HI) as s:
            assert next(iter(s.text_stream)) == "abcd"  # then the server stalls; leaving the block closes it
        assert c.messages.create(model=MODEL, max_tokens=10, messages=HI).content[0].text == "next"


def test_stop_ends_a_hung_stream_promptly() -> None:
    outcome: list[BaseException | str] = []
    got_first = threading.Event()
    fake = FakeAnthropic().start()
    fake.script(text("abcdefgh", chunks=2, hang_after=4))

    def consume() -> None:
        try:
            with client(fake) as c, c.messages.stream(model=MODEL, max_tokens=10, messages=HI) as s:
                for piece in s.text_stream:
                    outcome.append(piece)
                    got_first.set()
        except Exception as exc:  # the cut connection surfaces as a transport/protocol error
            outcome.append(exc)
        got_first.set()

    worker = threading.Thread(target=consume)
    worker.start()
    assert got_first.wait(5)
    started = time.monotonic()
    fake.stop()
    worker.join(5)
    assert not worker.is_alive() and time.monotonic() - started < 2
    assert outcome[0] == "abcd" and isinstance(outcome[-1], Exception)
