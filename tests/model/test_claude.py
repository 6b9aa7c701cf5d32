"""The model seam: AnthropicModel over the real SDK against the fake server, error mapping, caching; the offline DemoModel."""

from __future__ import annotations

import datetime
import json
import socket
from pathlib import Path
from typing import Any

import anthropic
import pytest

import nbagent
from nbagent.model.claude import AnthropicModel, DemoModel, ModelRequest
from nbagent.model.retries import retry_after
from tests.support.fake_anthropic import FakeAnthropic, Reply, error, stream_error, text, tool_use

pytestmark = pytest.mark.sdk  # run again against the SDK floor in CI (.ci/run)

MODEL = "claude-test"
HI = [{"role": "user", "content": "hi"}]


def stream(model: AnthropicModel, request: ModelRequest) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One streamed reply and the deltas reported on the way."""
    deltas: list[dict[str, Any]] = []
    reply = model.stream(request, deltas.append)
    return reply, deltas


def failure(fake: FakeAnthropic, client: anthropic.Anthropic, *replies: Any) -> nbagent.ModelError:
    fake.script(*replies)
    with pytest.raises(nbagent.ModelError) as raised:
        stream(AnthropicModel(MODEL, client=client), ModelRequest(HI))
    return raised.value


def test_text_reply_streams_deltas_and_returns_a_plain_dict(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.script(text("Hello from the fake.", chunks=4))
    reply, deltas = stream(AnthropicModel(MODEL, client=client), ModelRequest(HI))
    assert deltas == [{"index": 0, "text": t} for t in ("Hello", " from", " the ", "fake.")]
    assert reply["content"] == [{"type": "text", "text": "Hello from the fake."}]
    assert reply["stop_reason"] == "end_turn" and reply["model"] == MODEL and reply["id"].startswith("msg_")
    assert reply["usage"]["output_tokens"] > 0 and set(reply["usage"]) >= {"input_tokens", "output_tokens"}
    body = fake.requests[0].body
    assert body["stream"] is True and body["messages"] == HI and body["cache_control"] == {"type": "ephemeral"}
    assert "system" not in body and "tools" not in body  # empty ones are left out, not sent empty


def test_tool_use_reply_streams_json_deltas(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    args = {"query": "select * from a_rather_long_table_name", "limit": 10}
    fake.script(tool_use("sql", args, id="toolu_x", text="Querying."))
    tools = [{"name": "sql", "description": "Run SQL.", "input_schema": {"type": "object", "properties": {}}}]
    reply, deltas = stream(AnthropicModel(MODEL, client=client), ModelRequest(HI, tools, "sys", 99))
    assert reply["content"] == [{"type": "text", "text": "Querying."}, {"type": "tool_use", "id": "toolu_x", "name": "sql", "input": args}]
    assert reply["stop_reason"] == "tool_use"
    json_parts = [d["partial_json"] for d in deltas if "partial_json" in d]
    assert len(json_parts) > 2 and all(d["index"] == 1 for d in deltas if "partial_json" in d)
    assert json.loads("".join(json_parts)) == args
    body = fake.requests[0].body
    assert body["tools"] == tools and body["system"] == "sys" and body["max_tokens"] == 99


def test_second_request_of_a_session_reads_from_the_prompt_cache(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    model = AnthropicModel(MODEL, client=client)
    history = [{"role": "user", "content": "a long question " * 100}]
    fake.script(text("first"), text("second"))
    first, _ = stream(model, ModelRequest(history, system="rules " * 100))
    history += [{"role": "assistant", "content": first["content"]}, {"role": "user", "content": "and?"}]
    second, _ = stream(model, ModelRequest(history, system="rules " * 100))
    assert first["usage"]["cache_read_input_tokens"] == 0 and first["usage"]["cache_creation_input_tokens"] > 0
    assert second["usage"]["cache_read_input_tokens"] >= first["usage"]["cache_creation_input_tokens"] > 0


def test_bad_request_is_not_retryable_and_carries_the_api_message(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    err = failure(fake, client, error(400, message="max_tokens: too large"))
    assert (err.status, err.kind, err.retryable) == (400, "invalid_request_error", False)
    assert "max_tokens: too large" in str(err) and "400" in str(err)
    assert len(fake.requests) == 1


def test_unauthorized_hints_at_the_key(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    err = failure(fake, client, error(401))
    assert err.status == 401 and err.kind == "authentication_error" and "Check ANTHROPIC_API_KEY" in str(err)


def test_the_sdk_never_retries_under_nbagent_even_on_a_client_that_would(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    """One retry budget: a client made with max_retries=2 is used with none, so the loop's retries are the only ones."""
    assert client.max_retries == 2
    err = failure(fake, client, error(529), text("not reached"))
    assert (err.status, err.kind, err.retryable) == (529, "overloaded_error", True) and len(fake.requests) == 1
    assert err.retry_after == 0.001  # the fake's retry-after-ms: 1, for the loop to honour


@pytest.mark.parametrize(
    ("reply", "retryable", "after"),
    [
        (error(500, x_should_retry=False), False, None),  # the API says no: not retried, whatever the status
        (error(400, x_should_retry=True), False, None),  # a 400 never: the same request would be refused the same way
        (error(409, x_should_retry=True), True, 0.001),  # the API says yes (and the fake sends retry-after-ms: 1)
        (error(429, retry_after="7"), True, 7.0),
        (error(429, retry_after="600"), True, 600.0),  # any length: waited for, as the SDK does (or stopped at max_retry_wait)
        (error(429, retry_after="soon"), True, None),
        (error(529), True, 0.001),
        (error(401), False, None),
    ],
)
def test_x_should_retry_and_retry_after_decide_the_retry(
    fake: FakeAnthropic, client: anthropic.Anthropic, reply: Reply, retryable: bool, after: float | None
) -> None:
    err = failure(fake, client, reply)
    assert (err.retryable, err.retry_after) == (retryable, after)


def test_retry_after_reads_an_http_date() -> None:
    headers = {"retry-after": "Wed, 02 Dec 2026 12:00:30 GMT"}
    now = datetime.datetime(2026, 12, 2, 12, 0, tzinfo=datetime.timezone.utc).timestamp()
    assert retry_after(headers, now) == 30.0 and retry_after({}, now) is None


def test_mid_stream_error_has_no_status_and_is_retryable(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    err = failure(fake, client, stream_error(after=5, type="api_error", message="Internal server error"))
    assert (err.status, err.kind, err.retryable) == (None, "api_error", True)
    assert "mid-stream" in str(err) and "Internal server error" in str(err)


def test_unreachable_server_is_a_retryable_connection_error() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="test-key", max_retries=0)
    with pytest.raises(nbagent.ModelError) as raised:
        stream(AnthropicModel(MODEL, client=client), ModelRequest(HI))
    assert raised.value.kind == "connection_error" and raised.value.retryable


def test_environment_key_and_base_url_are_honoured(fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    fake.script(text("via env"))
    reply, _ = stream(AnthropicModel(MODEL), ModelRequest(HI))
    assert reply["content"][0]["text"] == "via env"
    headers = fake.requests[0].headers
    assert "env-test-key" in (headers.get("x-api-key", ""), headers.get("authorization", "").removeprefix("Bearer "))


def test_no_key_and_no_client_says_to_set_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(nbagent.NbagentError, match="set ANTHROPIC_API_KEY"):
        AnthropicModel(MODEL)


def test_demo_model_is_labelled_not_claude_and_runs_a_tool_offline(log_path: Path) -> None:
    seen: list[str] = []

    @nbagent.tool(effect="read")
    def list_files(path: str) -> str:
        """List the files in a folder."""
        seen.append(path)
        return "a.csv\nb.csv"

    model = DemoModel(delay=0)
    assert "not Claude" in model.name
    with nbagent.Session.open(log_path) as session:
        final = nbagent.run(session, "what files are here?", tools=[list_files], model=model)
        assert seen == ["."] and model.calls == 2
        assistant_texts = [b["text"] for m in session.messages if m["role"] == "assistant" for b in m["content"] if b["type"] == "text"]
        assert assistant_texts and all(t.startswith(DemoModel.LABEL) for t in assistant_texts)
        assert "a.csv" in final and "not Claude" in final
        assert all(e["model"] == model.name for e in session.events() if e["type"] == "model_call")


def test_demo_model_without_tools_answers_and_points_to_the_key(log_path: Path) -> None:
    with nbagent.Session.open(log_path) as session:
        final = nbagent.run(session, "hello", model=DemoModel(delay=0))
    assert final.startswith(DemoModel.LABEL) and "ANTHROPIC_API_KEY" in final
