"""Each model gets the endpoint and API version its platform takes, whichever SDK release is installed (api_versions.py),
and the two platforms the SDK added (Claude Platform on AWS, Claude Models on Google Cloud) run real turns.

Everything goes through the SDK's own clients against the fake clouds (tests/support/fake_clouds.py) in front of the fake
Messages API, which know which versions each endpoint and model take (tests/support/fake_versions.py). CI runs this file
on the newest SDK and on the floor in pyproject.toml (1.9.0), which send different versions by default.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

import nbagent
from nbagent.record import events as ev
from nbagent.state import api_versions, binding
from nbagent.state import context as ctx
from nbagent.state import model_table as models
from tests.model.test_providers import ACCESS_KEY, BEDROCK_KEY, SECRET_KEY, SESSION_TOKEN, service_account
from tests.support import fake_binding, fake_context
from tests.support.fake_anthropic import FakeAnthropic, RecordedRequest, text
from tests.support.fake_clouds import FakeCloud

pytestmark = pytest.mark.sdk  # run again against the SDK floor in CI (.ci/run)

__all__ = ["service_account"]  # a fixture, shared with test_providers.py
SDK_VERSION = "2026-10-21" if int(anthropic.__version__.split(".")[0]) >= 2 else "2023-06-01"  # what the SDK sends itself
HELLO = [{"role": "user", "content": "hi"}]


@pytest.fixture
def bedrock(api: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloud]:
    """A fake Bedrock, both endpoints, reached with a Bedrock API key from the environment."""
    with FakeCloud("bedrock", api, bearer=frozenset({BEDROCK_KEY}), aws_keys={ACCESS_KEY: SECRET_KEY}) as cloud:
        monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", BEDROCK_KEY)
        monkeypatch.setenv("AWS_REGION", cloud.region)
        monkeypatch.setenv("ANTHROPIC_BEDROCK_BASE_URL", cloud.base_url)
        monkeypatch.setenv("ANTHROPIC_BEDROCK_MANTLE_BASE_URL", f"{cloud.base_url}/anthropic")
        yield cloud


def turn(log: Path, model: str, provider: str, **kw: Any) -> tuple[str, list[dict[str, Any]]]:
    """One turn logged to ``log``: its answer and the session's events."""
    with nbagent.Session.open(log) as session:
        answer = nbagent.run(session, "hi", model=model, provider=provider, **kw)
        return answer, list(session.events())


# Pure rules ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("provider", "name", "endpoint", "invoke_version"),
    [
        ("bedrock", "claude-sonnet-4-6", "invoke_model", "bedrock-2023-05-31"),  # the legacy page's table
        ("bedrock", "claude-opus-4-6", "invoke_model", "bedrock-2023-05-31"),
        ("bedrock", "claude-haiku-4-5", "invoke_model", "bedrock-2023-05-31"),
        ("bedrock", "claude-3-7-sonnet-20250219", "invoke_model", "bedrock-2023-05-31"),  # unknown: an older, ARN-versioned one
        ("bedrock", "claude-opus-4-7", "bedrock_messages", None),  # Claude 4.7 and later: the Messages-API endpoint
        ("bedrock", "claude-opus-4-8", "bedrock_messages", None),
        ("bedrock", "claude-sonnet-5-5", "bedrock_messages", None),
        ("anthropic", "claude-sonnet-4-6", "api", "bedrock-2023-05-31"),
        ("vertex", "claude-opus-4-8", "api", None),
        ("aws", "claude-sonnet-5-5", "api", None),
    ],
)
def test_endpoint_and_version_by_model(provider: str, name: str, endpoint: str, invoke_version: str | None) -> None:
    assert api_versions.endpoint(provider, name) == endpoint
    assert api_versions.body_version(True, name) == invoke_version  # what an InvokeModel body carries
    assert api_versions.body_version(False, name) is None  # no other endpoint has it in the body


def test_the_token_estimate_counts_the_newer_tokenizer() -> None:
    content = [{"role": "user", "content": "x" * 4000}]
    old, new = ctx.estimate_tokens(content, "claude-opus-4-6"), ctx.estimate_tokens(content, "claude-opus-4-8")
    assert old == ctx.estimate_tokens(content) and new == int(old * 1.3)  # "approximately 30 percent more tokens"
    assert models.lookup("claude-fable-5-2").token_factor == 1.3 and models.lookup("claude-test").token_factor == 1.0


def test_the_binding_control_goes_only_to_models_that_run_the_prefix_check() -> None:
    for name in ("claude-sonnet-5", "claude-opus-5", "claude-fable-5", "claude-mythos-5", "claude-opus-4-8"):
        thinking = binding.request(models.thinking_request("adaptive", name, 8192), name)
        assert "block_binding" not in (thinking.param or {}) and not thinking.betas, name
    for name in ("claude-fable-5-1", "claude-fable-5-2", "claude-sonnet-5-5", "claude-haiku-5-5", "claude-opus-5-5"):
        thinking = binding.request(models.thinking_request("adaptive", name, 8192), name)
        assert (thinking.param or {}).get("block_binding") == binding.DROP_BLOCK and thinking.betas, name


@pytest.mark.parametrize(
    ("model", "key", "control", "refused"),
    [
        ("claude-fable-5-1", "key-created-2026-05-01", False, False),  # an older account: not checked by default
        ("claude-fable-5-1", "key-created-2026-09-15", False, True),  # created on or after 2026-08-31: checked
        ("claude-fable-5-1", "key-created-2026-05-01", True, True),  # setting the control turns the check on
        ("claude-fable-5-2", "key-created-2026-05-01", False, True),  # Fable 5.2: every account
        ("claude-mythos-5-1", "key-created-2026-05-01", False, True),
    ],
)
def test_the_fakes_prefix_check_follows_the_accounts_age(model: str, key: str, control: bool, refused: bool) -> None:
    headers = {"x-api-key": key}
    first = {"model": model, "system": "v1", "messages": [{"role": "user", "content": "hi"}]}
    block = fake_binding.new_blocks(first, headers, first["messages"], [], 1)[0]
    thinking: dict[str, Any] = {"type": "adaptive", **({"block_binding": {"prefix_mismatch_behavior": "error"}} if control else {})}
    later = dict(first, system="v2", thinking=thinking)  # a changed system prompt: the block's prefix no longer matches
    later["messages"] = [*first["messages"], {"role": "assistant", "content": [block, {"type": "text", "text": "hello"}]}, HELLO[0]]
    problem, _ = fake_binding.check(later, headers, (0, 0))
    assert (problem is not None) is refused


# Through the SDK: Bedrock -----------------------------------------------------------------------------------------
def test_a_legacy_model_on_bedrock_sends_the_version_it_takes(api: FakeAnthropic, tmp_path: Path, bedrock: FakeCloud) -> None:
    api.script(text("Hello from InvokeModel."))
    answer, events = turn(tmp_path / "s.jsonl", "claude-sonnet-4-6", "bedrock")
    assert answer == "Hello from InvokeModel."
    (request,) = bedrock.requests
    assert request.path == "/model/anthropic.claude-sonnet-4-6/invoke-with-response-stream"
    assert request.body["anthropic_version"] == "bedrock-2023-05-31"  # on SDK 2.x too, which would send 2026-10-21
    assert api.requests[0].headers["anthropic-version"] == "2023-06-01"


def test_bedrock_refuses_the_new_version_for_an_arn_versioned_model(api: FakeAnthropic, bedrock: FakeCloud) -> None:
    client = anthropic.AnthropicBedrock(max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="2026-10-21"):
        client.messages.create(
            model="anthropic.claude-sonnet-4-6", max_tokens=64, messages=HELLO, extra_body={"anthropic_version": "2026-10-21"}
        )
    with pytest.raises(anthropic.BadRequestError, match="Messages-API endpoint"):  # and InvokeModel does not serve 4.7 and later
        client.messages.create(model="anthropic.claude-opus-4-8", max_tokens=64, messages=HELLO)
    assert api.requests == []  # refused by the cloud before the model saw either


def test_a_later_model_on_bedrock_goes_to_the_messages_api_endpoint(api: FakeAnthropic, tmp_path: Path, bedrock: FakeCloud) -> None:
    api.script(text("Hello from the Messages-API endpoint."))
    answer, events = turn(tmp_path / "s.jsonl", "claude-opus-4-8", "bedrock")
    assert answer == "Hello from the Messages-API endpoint."
    (request,) = bedrock.requests
    assert path(request) == "/anthropic/v1/messages" and request.body["model"] == "anthropic.claude-opus-4-8"
    assert "anthropic_version" not in request.body and request.headers["anthropic-version"] == SDK_VERSION
    assert request.headers["authorization"] == f"Bearer {BEDROCK_KEY}"
    (call,) = [e for e in events if e["type"] == ev.MODEL_CALL]
    assert call["provider"] == "bedrock" and call["provider_model"] == "anthropic.claude-opus-4-8"


def test_the_messages_api_endpoint_is_signed_for_its_own_service(
    api: FakeAnthropic, tmp_path: Path, bedrock: FakeCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    api.script(text("Signed."))
    answer, events = turn(tmp_path / "s.jsonl", "claude-sonnet-5-5", "bedrock")
    assert answer == "Signed."
    (request,) = bedrock.requests
    assert f"/{bedrock.region}/bedrock-mantle/aws4_request" in request.headers["authorization"]
    assert SECRET_KEY not in json.dumps(events) and SESSION_TOKEN not in json.dumps(events)


def test_server_compaction_and_the_binding_control_reach_bedrock(api: FakeAnthropic, tmp_path: Path, bedrock: FakeCloud) -> None:
    api.script(text("ok"), text("ok"))
    small = nbagent.ContextSettings(trigger=2_000)  # compaction is asked for from half the trigger on (context.asks_compaction)
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:  # both pages list Bedrock
        for prompt in ("hi", fake_context.past_half(small.threshold)):
            nbagent.run(session, prompt, model="claude-sonnet-5-5", provider="bedrock", thinking="adaptive", context=small)
    short, long = bedrock.requests
    assert short.headers.get("anthropic-beta", "").split(",") == [binding.BINDING_BETA] and "context_management" not in short.body
    betas = long.headers.get("anthropic-beta", "")
    assert ctx.COMPACT_BETA in betas and binding.BINDING_BETA in betas and long.body["context_management"]
    assert long.body["thinking"]["block_binding"] == binding.DROP_BLOCK


# The fake API's versions ---------------------------------------------------------------------------------------------
def test_the_fake_api_knows_the_two_versions(api: FakeAnthropic) -> None:
    client = anthropic.Anthropic(base_url=api.base_url, api_key="test-key", max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="not a valid version"):
        client.messages.create(model="claude-test", max_tokens=64, messages=HELLO, extra_headers={"anthropic-version": "2023-01-01"})
    with pytest.raises(anthropic.BadRequestError, match="removed in API version 2026-10-21"):
        client.messages.create(
            model="claude-test", max_tokens=64, messages=HELLO, extra_headers={"anthropic-version": "2026-10-21"}, extra_body={"top_k": 5}
        )
    api.script(text("Old version."))
    sent = client.messages.create(model="claude-test", max_tokens=64, messages=HELLO, extra_headers={"anthropic-version": "2023-06-01"})
    assert sent.content[0].text == "Old version."  # type: ignore[union-attr]


# Through the SDK: a reply that filled the window --------------------------------------------------------------------
def test_a_reply_that_filled_the_context_window_keeps_its_partial_answer(api: FakeAnthropic, tmp_path: Path) -> None:
    client = anthropic.Anthropic(base_url=api.base_url, api_key="test-key")
    api.script(text("The first half of a long answer", stop_reason="model_context_window_exceeded"), text("Next."))
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        answer = nbagent.run(session, "write a lot", client=client, model="claude-test")
        assert "The first half of a long answer" in answer
        notes = [e for e in session.events() if e["type"] == ev.NOTE and e.get("kind") == "stop"]
        assert len(notes) == 1 and "cut off" in notes[0]["text"] and "filled the model's context window" in notes[0]["text"]
        assert nbagent.run(session, "go on", client=client, model="claude-test") == "Next."
    sent = api.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"] and "first half" in json.dumps(sent[1])  # it stays in the history


# Claude Platform on AWS and Claude Models on Google Cloud ------------------------------------------------------------
def test_claude_platform_on_aws_with_a_workspace_key_then_sigv4(
    api: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-ant-aws-fake-workspace-key-0123456789"
    with FakeCloud("aws", api, api_keys=frozenset({key}), aws_keys={ACCESS_KEY: SECRET_KEY}) as cloud:
        monkeypatch.setenv("ANTHROPIC_AWS_API_KEY", key)
        monkeypatch.setenv("ANTHROPIC_AWS_WORKSPACE_ID", cloud.workspace)
        monkeypatch.setenv("AWS_REGION", cloud.region)
        monkeypatch.setenv("ANTHROPIC_AWS_BASE_URL", cloud.base_url)
        api.script(text("Hello from Claude Platform on AWS."), text("Signed."))
        answer, events = turn(tmp_path / "s.jsonl", "claude-sonnet-5-5", "aws")
        assert answer == "Hello from Claude Platform on AWS."
        request = cloud.requests[0]
        assert path(request) == "/v1/messages" and key in (request.headers.get("x-api-key"), request.headers.get("authorization", "")[7:])
        assert request.headers["anthropic-workspace-id"] == cloud.workspace and request.headers["anthropic-version"] == SDK_VERSION
        assert request.body["model"] == "claude-sonnet-5-5" and request.body["cache_control"] == {"type": "ephemeral"}
        assert [c["provider"] for c in model_calls_of(events)] == ["aws"] and key not in json.dumps(events)
        monkeypatch.delenv("ANTHROPIC_AWS_API_KEY")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        answer, events = turn(tmp_path / "signed.jsonl", "claude-sonnet-5-5", "aws")
        assert answer == "Signed."
        assert f"/{cloud.region}/aws-external-anthropic/aws4_request" in cloud.requests[1].headers["authorization"]
        assert SECRET_KEY not in json.dumps(events)


def test_claude_models_on_google_cloud_authenticate_with_adc(
    api: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, service_account: tuple[str, Any, Path]
) -> None:
    email, public, key_file = service_account
    with FakeCloud("google", api, region="global", service_accounts={email: public}) as cloud:
        info = json.loads(key_file.read_text())
        key_file.write_text(json.dumps({**info, "token_uri": f"{cloud.base_url}/token"}))
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
        monkeypatch.setenv("ANTHROPIC_GOOGLE_CLOUD_WORKSPACE_ID", cloud.workspace)
        where = f"/v1/projects/{cloud.project}/locations/global/workspaces/{cloud.workspace}/invoke"
        monkeypatch.setenv("ANTHROPIC_GOOGLE_CLOUD_BASE_URL", cloud.base_url + where)
        api.script(text("Hello from Google Cloud."))
        answer, events = turn(tmp_path / "s.jsonl", "claude-haiku-5-5", "google")
        assert answer == "Hello from Google Cloud."
        (request,) = cloud.requests
        (token,) = cloud.tokens_issued
        assert path(request) == where + "/v1/messages" and request.headers["authorization"] == f"Bearer {token}"
        assert request.body["model"] == "claude-haiku-5-5" and request.headers["anthropic-version"] == SDK_VERSION
        assert [c["provider"] for c in model_calls_of(events)] == ["google"] and token not in json.dumps(events)


def path(request: RecordedRequest) -> str:
    """A request's path without its query (SDK 1.x marks a beta call ``?beta=true``, 2.x does not)."""
    return urllib.parse.urlsplit(request.path).path


def model_calls_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == ev.MODEL_CALL]
