"""Claude on Amazon Bedrock, Google Vertex AI and Microsoft Foundry: each through the SDK's own client, against a fake
of the cloud's endpoint on 127.0.0.1 (tests/support/fake_clouds.py) in front of the fake Messages API.

Each turn runs through ``nbagent.run(..., provider=...)`` with credentials where the cloud's own tools look for them
(AWS environment variables, a Google service-account key file as ADC, a Foundry key): the request is the one that
client sends (path, auth, body), the reply streams into the same log, and no credential is ever written to it.
The Bedrock stream is the real AWS event stream, decoded by botocore in the SDK.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent.errors import NbagentError
from nbagent.model import clients
from nbagent.model.claude import AnthropicModel
from nbagent.state import providers
from tests.support import fake_context
from tests.support.fake_anthropic import FakeAnthropic, stream_error, text, tool_use
from tests.support.fake_clouds import FakeCloud

pytestmark = pytest.mark.sdk  # run again against the SDK floor in CI (.ci/run)

ACCESS_KEY, SECRET_KEY, SESSION_TOKEN = "AKIAFAKE0NBAGENT0001", "fake-aws-secret-key-9f8e7d6c5b4a", "fake-aws-session-token-0123456789"


BEDROCK_KEY = "ABSKfakeBedrockApiKey0123456789abcdef"


@pytest.fixture
def bedrock(api: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloud]:
    """A fake Bedrock that the SDK reaches with a Bedrock API key (a bearer token) from the environment."""
    with FakeCloud("bedrock", api, bearer=frozenset({BEDROCK_KEY})) as cloud:
        monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", BEDROCK_KEY)
        monkeypatch.setenv("AWS_REGION", cloud.region)
        monkeypatch.setenv("ANTHROPIC_BEDROCK_BASE_URL", cloud.base_url)
        yield cloud


def log_text(session: nbagent.Session) -> str:
    return session.path.read_text()


def model_calls(session: nbagent.Session) -> list[dict[str, Any]]:
    return [e for e in session.events() if e["type"] == "model_call"]


# Table tests: names, ids and what each provider offers ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("provider", "name", "sent"),
    [
        ("anthropic", "claude-sonnet-4-6", "claude-sonnet-4-6"),
        ("bedrock", "claude-sonnet-4-5", "anthropic.claude-sonnet-4-5-20250929-v1:0"),
        ("bedrock", "claude-opus-4-6", "anthropic.claude-opus-4-6-v1"),
        ("bedrock", "claude-sonnet-5-5", "anthropic.claude-sonnet-5-5"),
        ("bedrock", "us.anthropic.claude-sonnet-4-6", "us.anthropic.claude-sonnet-4-6"),  # a provider's own id: as given
        ("vertex", "claude-haiku-4-5", "claude-haiku-4-5@20251001"),
        ("vertex", "claude-opus-5", "claude-opus-5"),
        ("foundry", "claude-opus-4-8", "claude-opus-4-8"),  # a deployment named as the model (Foundry's default)
        ("foundry", "my-claude-deployment", "my-claude-deployment"),
    ],
)
def test_model_ids(provider: str, name: str, sent: str) -> None:
    assert providers.model_id(provider, name) == sent


@pytest.mark.parametrize(
    ("provider", "given", "table"),
    [
        ("bedrock", "anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("bedrock", "global.anthropic.claude-sonnet-4-6", "claude-sonnet-4-6"),
        ("bedrock", "eu.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
        ("bedrock", "arn:aws:bedrock:us-west-2:123456789012:inference-profile/us.anthropic.claude-opus-4-6-v1", "claude-opus-4-6"),
        ("bedrock", "anthropic.claude-fable-5-2", "claude-fable-5-2"),
        ("vertex", "claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("vertex", "claude-opus-4-8", "claude-opus-4-8"),
        ("foundry", "my-claude-deployment", "my-claude-deployment"),  # unknown: conservative defaults (models.UNKNOWN)
        ("anthropic", "anthropic.claude-sonnet-4-6", "anthropic.claude-sonnet-4-6"),  # the Claude API: names are never rewritten
    ],
)
def test_a_provider_id_reads_back_to_the_model_table(provider: str, given: str, table: str) -> None:
    assert providers.table_name(provider, given) == table


def test_every_table_model_has_an_id_on_every_cloud_that_reads_back() -> None:
    for provider in ("bedrock", "vertex", "foundry"):
        for name, info in nbagent.state.model_table.MODELS.items():
            assert nbagent.state.model_table.lookup(providers.table_name(provider, providers.model_id(provider, name))) == info


def test_what_each_provider_offers() -> None:
    assert providers.lookup(None).name == providers.lookup("Anthropic").name == "anthropic"
    # The compaction and preserved-thinking pages list Bedrock, Google Cloud and Foundry; the other two serve the API's surface.
    assert [providers.lookup(p).betas for p in providers.PROVIDERS] == [True] * 6
    assert [providers.prices_known(p) for p in providers.PROVIDERS] == [True, False, False, False, False, False]  # "cost unknown"
    assert [providers.served_by(p) for p in providers.PROVIDERS] == [
        "",
        "on Amazon Bedrock",
        "on Google Vertex AI",
        "on Microsoft Foundry",
        "on Claude Platform on AWS",
        "on Claude Models on Google Cloud",
    ]
    with pytest.raises(NbagentError, match="Unknown provider 'azure': use one of anthropic, bedrock, vertex, foundry, aws, google"):
        providers.lookup("azure")


@pytest.mark.parametrize(
    ("model", "provider", "key"),
    [
        ("claude-sonnet-4-6", None, "claude-sonnet-4-6"),
        ("claude-sonnet-4-6", "anthropic", "claude-sonnet-4-6"),
        ("claude-sonnet-4-6", "bedrock", "bedrock:claude-sonnet-4-6"),  # in no built-in table: "cost unknown"
        ("claude-haiku-4-5@20251001", "vertex", "vertex:claude-haiku-4-5@20251001"),
        (None, "foundry", None),
    ],
)
def test_a_clouds_replies_are_priced_under_their_own_key(model: str | None, provider: str | None, key: str | None) -> None:
    assert providers.price_key(model, provider) == key


def test_a_claude_api_reply_records_no_provider_beside_its_model_call(api: FakeAnthropic, tmp_path: Path) -> None:
    import anthropic

    api.script(text("hi"))
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        nbagent.run(session, "hi", model="claude-sonnet-4-6", client=anthropic.Anthropic(base_url=api.base_url, api_key="test-key"))
        (call,) = model_calls(session)
        (reply,) = [e for e in session.events() if e["type"] == "assistant_msg"]
        assert call["provider"] == "anthropic" and "provider_model" not in call and "provider" not in reply
        assert api.requests[0].body["cache_control"] == {"type": "ephemeral"}  # automatic caching, as before


@pytest.mark.parametrize(
    ("content", "marked"),
    [
        ("hi", [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]),
        (
            [{"type": "tool_result", "tool_use_id": "t", "content": "4"}],
            [{"type": "tool_result", "tool_use_id": "t", "content": "4", "cache_control": {"type": "ephemeral"}}],
        ),
        ([{"type": "thinking", "thinking": "x", "signature": "s"}], [{"type": "thinking", "thinking": "x", "signature": "s"}]),
        ("", ""),
    ],
)
def test_the_cache_breakpoint_goes_on_the_last_block(content: Any, marked: Any) -> None:
    messages = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": content}]
    out = providers.cache_last_block(messages)
    assert out[:2] == messages[:2] and out[2]["content"] == marked
    assert messages[2]["content"] == content  # the session's own messages are never changed


@pytest.mark.parametrize(
    ("given", "kind"),
    [
        ("internalServerException", "api_error"),
        ("modelStreamErrorException", "api_error"),
        ("throttlingException", "rate_limit_error"),
        ("serviceUnavailableException", "overloaded_error"),
        ("modelTimeoutException", "timeout_error"),
        ("validationException", "invalid_request_error"),
        ("overloaded_error", "overloaded_error"),  # the API's own types pass through
        ("somethingNewException", "somethingNewException"),
    ],
)
def test_a_bedrock_stream_exception_reads_as_the_apis_error_type(given: str, kind: str) -> None:
    assert providers.error_kind(given) == kind


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, "invalid_request_error"), (401, "authentication_error"), (403, "permission_error"), (404, "not_found_error")]
    + [(418, "invalid_request_error"), (429, "rate_limit_error"), (500, "api_error"), (503, "api_error"), (529, "overloaded_error")],
)
def test_a_clouds_error_status_reads_as_the_apis_error_type(status: int, kind: str) -> None:
    assert providers.status_kind(status) == kind


# Amazon Bedrock ----------------------------------------------------------------------------------------------------
def bedrock_env(monkeypatch: pytest.MonkeyPatch, cloud: FakeCloud) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    monkeypatch.setenv("AWS_REGION", cloud.region)
    monkeypatch.setenv("ANTHROPIC_BEDROCK_BASE_URL", cloud.base_url)


def test_bedrock_turn_is_signed_with_sigv4_and_streams_into_the_log(
    api: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeCloud("bedrock", api, aws_keys={ACCESS_KEY: SECRET_KEY}) as cloud:
        bedrock_env(monkeypatch, cloud)
        api.script(tool_use("add", {"a": 2, "b": 3}, text="Adding."), text("The sum is 5.", chunks=3))

        @nbagent.tool(effect="read")
        def add(a: int, b: int) -> int:
            """Add two numbers."""
            return a + b

        with nbagent.Session.open(tmp_path / "s.jsonl") as session:
            answer = nbagent.run(session, "What is 2 + 3?", tools=[add], model="claude-sonnet-4-5", provider="bedrock", delta_interval=0)
            assert answer == "The sum is 5."
            first, second = cloud.requests
            assert first.path == "/model/anthropic.claude-sonnet-4-5-20250929-v1:0/invoke-with-response-stream"
            auth = first.headers["authorization"]
            assert auth.startswith(f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/") and f"/{cloud.region}/bedrock/aws4_request" in auth
            assert first.headers["x-amz-security-token"] == SESSION_TOKEN  # the session token rides along, as SigV4 says
            body = first.body
            assert "model" not in body and "stream" not in body and body["anthropic_version"]
            assert "cache_control" not in body and body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
            assert "anthropic_beta" not in body  # Sonnet 4.5 takes neither server compaction nor the binding control
            assert second.body["messages"][-1]["content"][0]["type"] == "tool_result"  # the tool ran, its result went back
            calls = model_calls(session)
            assert [c["provider"] for c in calls] == ["bedrock", "bedrock"] and calls[0]["model"] == "claude-sonnet-4-5"
            assert calls[0]["provider_model"] == "anthropic.claude-sonnet-4-5-20250929-v1:0"  # the id the request named
            replies = [e for e in session.events() if e["type"] == "assistant_msg"]
            assert [r["provider"] for r in replies] == ["bedrock", "bedrock"]  # who bills each reply: priced as Bedrock's, not the API's
            deltas = "".join(e.get("text", "") for e in session.events() if e["type"] == "delta")
            assert "The sum is 5." in deltas  # the AWS event stream's chunks arrived as streamed deltas
            logged = log_text(session)
            assert SECRET_KEY not in logged and SESSION_TOKEN not in logged


def test_a_cloud_turn_costs_unknown_until_its_price_is_set(api: FakeAnthropic, tmp_path: Path, bedrock: FakeCloud) -> None:
    from nbagent.state import prices

    api.script(text("Priced elsewhere."))
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        nbagent.run(session, "hi", model="claude-sonnet-4-6", provider="bedrock")
        spend = session.state.spend
    (key,) = spend
    assert key.startswith("bedrock:")  # never the Claude API's price for the same model
    assert prices.cost(spend).words() == "cost unknown" and prices.cost(spend).unpriced == (key,)
    override = prices.parse({key: {"input": 3, "output": 15, "cache_write_5m": 3.75, "cache_write_1h": 6, "cache_read": 0.3}})
    assert prices.cost(spend, {**prices.PRICES, **override}).known  # a price that names the key gives it a figure


def test_bedrock_api_key_is_a_bearer_token_and_a_provider_id_is_sent_as_given(
    api: FakeAnthropic, tmp_path: Path, bedrock: FakeCloud
) -> None:
    api.script(text("Hello from Bedrock."))
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        assert nbagent.run(session, "hi", model="global.anthropic.claude-sonnet-4-6", provider="bedrock") == "Hello from Bedrock."
        (request,) = bedrock.requests
        assert request.path == "/model/global.anthropic.claude-sonnet-4-6/invoke-with-response-stream"
        assert request.headers["authorization"] == f"Bearer {BEDROCK_KEY}"
        (call,) = model_calls(session)
        assert call["model"] == "claude-sonnet-4-6" and call["provider_model"] == "global.anthropic.claude-sonnet-4-6"
        assert BEDROCK_KEY not in log_text(session)


def test_bedrock_error_mid_stream_is_an_exception_frame_and_is_retried(api: FakeAnthropic, tmp_path: Path, bedrock: FakeCloud) -> None:
    api.script(stream_error(after=4, partial=text("This reply is cut short.")), text("Second try."))
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        assert nbagent.run(session, "hi", model="claude-sonnet-4-6", provider="bedrock") == "Second try."
        (failure,) = [e for e in session.events() if e["type"] == "model_error"]
        assert failure["retryable"] and failure["status"] is None and "Amazon Bedrock error (mid-stream" in failure["message"]
        assert len(bedrock.requests) == 2


def test_server_compaction_asked_for_on_bedrock_goes_in_the_body(api: FakeAnthropic, tmp_path: Path, bedrock: FakeCloud) -> None:
    api.script(text("ok"), text("ok"))
    settings = nbagent.ContextSettings(compact="server", trigger=2_000)  # asked for: tried, from half the trigger on
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        loop = nbagent.Loop(session, model=AnthropicModel("claude-opus-4-6", provider="bedrock"), context=settings)
        loop.run("hi")
        loop.run(fake_context.past_half(settings.threshold))
    short, long = bedrock.requests
    assert "anthropic_beta" not in short.body and "context_management" not in short.body
    assert (
        long.body["anthropic_beta"] == [nbagent.state.context.COMPACT_BETA] and long.body["context_management"]
    )  # Bedrock reads betas from the body


def test_bedrock_refusal_echoing_the_key_never_reaches_the_log(api: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = "ABSKrevokedBedrockKey9876543210fedcba"
    with FakeCloud("bedrock", api) as cloud:  # the key is not one the account knows: 403
        cloud.echo_credentials = True
        monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", token)
        monkeypatch.setenv("AWS_REGION", cloud.region)
        monkeypatch.setenv("ANTHROPIC_BEDROCK_BASE_URL", cloud.base_url)
        with nbagent.Session.open(tmp_path / "s.jsonl") as session:
            with pytest.raises(nbagent.ModelError) as raised:
                nbagent.run(session, "hi", model="claude-sonnet-4-6", provider="bedrock")
            assert "Amazon Bedrock error (403 permission_error): Invalid API Key format" in str(raised.value)
            assert token not in str(raised.value) and not raised.value.retryable  # refused credentials are not tried again
            assert "[REDACTED]" in str(raised.value)  # the echo was there, and is gone
            assert token not in log_text(session) and api.requests == []


def test_bedrock_wrong_secret_fails_the_signature_check(api: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeCloud("bedrock", api, aws_keys={ACCESS_KEY: "the-real-secret-is-another-one"}) as cloud:
        bedrock_env(monkeypatch, cloud)
        with nbagent.Session.open(tmp_path / "s.jsonl") as session:
            with pytest.raises(nbagent.ModelError, match="signature we calculated does not match"):
                nbagent.run(session, "hi", model="claude-sonnet-4-6", provider="bedrock", retries=0)
        assert api.requests == []  # refused at the cloud: the model never saw it


def test_bedrock_without_credentials_says_how_to_give_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    with pytest.raises(NbagentError, match="No AWS credentials for Amazon Bedrock: the AWS CLI's own: AWS_PROFILE"):
        AnthropicModel("claude-sonnet-4-6", provider="bedrock")


def test_bedrock_unknown_profile_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    with pytest.raises(NbagentError, match="Amazon Bedrock") as raised:
        AnthropicModel("claude-sonnet-4-6", provider="bedrock")
    assert "no-such-profile" in str(raised.value)


def test_bedrock_profile_from_the_aws_config_files(api: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeCloud("bedrock", api, aws_keys={ACCESS_KEY: SECRET_KEY}, region="eu-central-1") as cloud:
        (tmp_path / "credentials").write_text(f"[analytics]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n")
        (tmp_path / "config").write_text("[profile analytics]\nregion = eu-central-1\n")
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
        monkeypatch.setenv("AWS_PROFILE", "analytics")
        monkeypatch.setenv("ANTHROPIC_BEDROCK_BASE_URL", cloud.base_url)
        api.script(text("From the profile."))
        with nbagent.Session.open(tmp_path / "s.jsonl") as session:
            assert nbagent.run(session, "hi", model="claude-sonnet-4-6", provider="bedrock") == "From the profile."
            assert "/eu-central-1/bedrock/aws4_request" in cloud.requests[0].headers["authorization"]
            assert SECRET_KEY not in log_text(session)


# Google Vertex AI ---------------------------------------------------------------------------------------------------
@pytest.fixture
def service_account(tmp_path: Path) -> tuple[str, Any, Path]:
    """A service account's key file (a fresh RSA key): its email, public key, and the file's path."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    email = "nbagent-test@nbagent-test.iam.gserviceaccount.com"
    path = tmp_path / "service-account.json"
    path.write_text(
        json.dumps(
            {"type": "service_account", "project_id": "nbagent-test", "private_key_id": "k1", "private_key": pem, "client_email": email}
        )
    )
    return email, key.public_key(), path


def vertex_env(monkeypatch: pytest.MonkeyPatch, cloud: FakeCloud, key_file: Path) -> None:
    info = json.loads(key_file.read_text())
    key_file.write_text(json.dumps({**info, "token_uri": f"{cloud.base_url}/token"}))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
    monkeypatch.setenv("CLOUD_ML_REGION", cloud.region)
    monkeypatch.setenv("ANTHROPIC_VERTEX_BASE_URL", f"{cloud.base_url}/v1")


def test_vertex_turn_authenticates_with_adc_and_streams_into_the_log(
    api: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, service_account: tuple[str, Any, Path]
) -> None:
    email, public, key_file = service_account
    with FakeCloud("vertex", api, region="us-east5", service_accounts={email: public}) as cloud:
        vertex_env(monkeypatch, cloud, key_file)  # the project comes from the key file, as ADC gives it
        api.script(text("Hello from Vertex AI.", chunks=4))
        with nbagent.Session.open(tmp_path / "s.jsonl") as session:
            assert nbagent.run(session, "hi", model="claude-haiku-4-5", provider="vertex") == "Hello from Vertex AI."
            (request,) = cloud.requests
            assert (
                request.path
                == "/v1/projects/nbagent-test/locations/us-east5/publishers/anthropic/models/claude-haiku-4-5@20251001:streamRawPredict"
            )
            (token,) = cloud.tokens_issued
            assert request.headers["authorization"] == f"Bearer {token}"
            assert "model" not in request.body and request.body["stream"] is True and request.body["anthropic_version"]
            assert "cache_control" not in request.body and request.body["messages"][-1]["content"][-1]["cache_control"]
            assert api.requests[0].body["model"] == "claude-haiku-4-5@20251001"
            assert [c["provider"] for c in model_calls(session)] == ["vertex"]
            api.script(text("Again."))
            assert (
                nbagent.run(session, "and again", model="claude-haiku-4-5", provider="vertex") == "Again."
            )  # a new model, as each %agent turn builds
            assert len(cloud.tokens_issued) == 1 and len(cloud.requests) == 2  # the client is kept: no second token, no second ADC read
            logged = log_text(session)
            assert token not in logged and "PRIVATE KEY" not in logged


def test_vertex_token_echoed_in_an_error_is_redacted(
    api: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, service_account: tuple[str, Any, Path]
) -> None:
    email, public, key_file = service_account
    with FakeCloud("vertex", api, service_accounts={email: public}) as cloud:
        vertex_env(monkeypatch, cloud, key_file)
        cloud.echo_credentials = True
        cloud.tokens_issued.append("never-matches")  # every request is refused: 401 echoing the token sent
        cloud.refusal = lambda request: (
            401,
            "Request had invalid authentication credentials. (sent: " + request.headers["authorization"] + ")",
        )  # type: ignore[method-assign]
        with nbagent.Session.open(tmp_path / "s.jsonl") as session:
            with pytest.raises(nbagent.ModelError) as raised:
                nbagent.run(session, "hi", model="claude-opus-4-8", provider="vertex")
            token = cloud.tokens_issued[-1]
            assert token.startswith("ya29.") and token not in str(raised.value) and "Google Vertex AI error (401" in str(raised.value)
            assert token not in log_text(session)


def test_vertex_without_adc_says_how_to_sign_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
    with pytest.raises(NbagentError, match="No Google credentials for Google Vertex AI: Application Default Credentials"):
        AnthropicModel("claude-sonnet-4-6", provider="vertex")


# Microsoft Foundry --------------------------------------------------------------------------------------------------
def test_foundry_turn_with_a_key_streams_into_the_log(api: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "fake-foundry-key-0123456789abcdef0123"
    with FakeCloud("foundry", api, api_keys=frozenset({key})) as cloud:
        monkeypatch.setenv("ANTHROPIC_FOUNDRY_API_KEY", key)
        monkeypatch.setenv("ANTHROPIC_FOUNDRY_BASE_URL", f"{cloud.base_url}/anthropic/")
        api.script(text("Hello from Foundry."))
        with nbagent.Session.open(tmp_path / "s.jsonl") as session:
            assert nbagent.run(session, "hi", model="claude-sonnet-5-5", provider="foundry") == "Hello from Foundry."
            (request,) = cloud.requests
            assert request.path.split("?")[0] == "/anthropic/v1/messages" and request.headers["x-api-key"] == key  # SDK 1.x: ?beta=true
            assert request.body["model"] == "claude-sonnet-5-5" and "cache_control" not in request.body
            # Under half the compaction trigger: nothing asked of the server (test_a_long_session_on_a_cloud_asks_the_cloud_to_compact).
            assert "compact-2026-01-12" not in request.headers.get("anthropic-beta", "") and "context_management" not in request.body
            assert [c["provider"] for c in model_calls(session)] == ["foundry"]
            assert key not in log_text(session)


def test_foundry_entra_token_is_a_bearer_and_never_logged(api: FakeAnthropic, tmp_path: Path) -> None:
    import anthropic

    token = "eyJfake.entra-id-token.0123456789abcdef"
    with FakeCloud("foundry", api) as cloud:  # the token is not accepted: a 401 that echoes it
        cloud.echo_credentials = True
        client = anthropic.AnthropicFoundry(
            base_url=f"{cloud.base_url}/anthropic/", azure_ad_token_provider=clients.redacting(lambda: token)
        )
        with nbagent.Session.open(tmp_path / "s.jsonl") as session:
            with pytest.raises(nbagent.ModelError) as raised:
                nbagent.run(session, "hi", model="claude-opus-4-8", client=client, provider="foundry")
            assert cloud.requests[0].headers["authorization"] == f"Bearer {token}"
            assert token not in str(raised.value) and token not in log_text(session)


def test_foundry_without_a_key_or_azure_identity_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    if clients._importable("azure.identity"):
        pytest.skip("azure-identity is installed here: Entra ID sign-in is tried instead")
    with pytest.raises(NbagentError, match=r"pip install 'nbagent\[foundry\]'"):
        AnthropicModel("claude-opus-4-8", provider="foundry")


# Features a cloud does not offer fall back -----------------------------------------------------------------------------
def test_a_long_session_on_a_cloud_asks_the_cloud_to_compact(api: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "fake-foundry-key-0123456789abcdef0123"
    with FakeCloud("foundry", api, api_keys=frozenset({key})) as cloud:
        monkeypatch.setenv("ANTHROPIC_FOUNDRY_API_KEY", key)
        monkeypatch.setenv("ANTHROPIC_FOUNDRY_BASE_URL", f"{cloud.base_url}/anthropic/")
        loop_model = AnthropicModel("claude-opus-4-6", provider="foundry")  # server compaction is documented for it
        with nbagent.Session.open(tmp_path / "s.jsonl") as session:
            settings = nbagent.ContextSettings(compact="auto", trigger=2_000)
            loop = nbagent.Loop(session, model=loop_model, context=settings)
            assert loop._server() is True  # "auto" on a cloud the compaction page lists: the cloud compacts, as the API does
            api.script(text("ok"), text("ok"))
            loop.run("hi")
            loop.run(fake_context.past_half(settings.threshold))  # asked from half the trigger on (context.asks_compaction)
            short, long = cloud.requests
            assert "context_management" not in short.body and "compact-2026-01-12" not in short.headers.get("anthropic-beta", "")
            assert long.body["context_management"]["edits"][0]["type"] == "compact_20260112"
            assert "compact-2026-01-12" in long.headers["anthropic-beta"]


def test_provider_on_loop_and_run_checks_its_arguments(tmp_path: Path) -> None:
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        with pytest.raises(NbagentError, match="Unknown provider 'azure'"):
            nbagent.run(session, "hi", model="claude-sonnet-4-6", provider="azure")
        with pytest.raises(NbagentError, match="does not apply to the model object"):
            nbagent.Loop(session, model=nbagent.DemoModel(), provider="bedrock")


# The panel's header ----------------------------------------------------------------------------------------------------
def test_the_header_names_the_cloud_the_turn_ran_on() -> None:
    from nbagent.notebook.output import StaticPanel

    panel = StaticPanel("hi")
    panel({"type": "model_call", "seq": 2, "model": "claude-sonnet-4-6", "provider": "bedrock", "attempt": 1})
    assert panel.status_line().endswith("on Amazon Bedrock")
    assert "on Amazon Bedrock" in panel.static_bundle()["text/html"]
    panel({"type": "model_call", "seq": 3, "model": "claude-sonnet-4-6", "provider": "anthropic", "attempt": 1})
    assert "on " not in panel.status_line()


def test_the_live_panels_header_names_the_cloud() -> None:
    from nbagent.notebook.panel import Panel

    panel = Panel("hi")
    panel({"type": "model_call", "seq": 2, "model": "claude-opus-4-8", "provider": "vertex", "attempt": 1})
    assert "on Google Vertex AI" in panel.header.value


# In a notebook: %config Agent.provider --------------------------------------------------------------------------------
def test_agent_provider_runs_a_notebook_turn_on_the_cloud(
    shell: Any, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    key = "fake-foundry-key-0123456789abcdef0123"
    with FakeCloud("foundry", fake, api_keys=frozenset({key})) as cloud:
        monkeypatch.delenv("ANTHROPIC_API_KEY")  # no Claude API key: the cloud's own is enough
        monkeypatch.setenv("ANTHROPIC_FOUNDRY_API_KEY", key)
        monkeypatch.setenv("ANTHROPIC_FOUNDRY_BASE_URL", f"{cloud.base_url}/anthropic/")
        fake.script(text("Hello from Foundry in a notebook."))
        assert shell.run_cell('%config Agent.provider = "foundry"').success
        assert shell.run_cell("%agent say hello").success
        out = capsys.readouterr().out
        assert "Hello from Foundry in a notebook." in out
        assert len(cloud.requests) == 1 and cloud.requests[0].headers["x-api-key"] == key


def test_agent_provider_problems_are_one_line_usage_errors(shell: Any, monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    from IPython.core.error import UsageError

    from nbagent.notebook.magics import magics_for

    shell.run_cell('%config Agent.provider = "azure"')  # %config logs a refused value, and keeps the setting
    assert "expected any of ['anthropic', 'bedrock', 'vertex', 'foundry', 'aws', 'google']" in caplog.text
    assert magics_for(shell).settings.provider == "anthropic"
    assert shell.run_cell('%config Agent.provider = "vertex"').success
    monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
    result = shell.run_cell("%agent hi")  # no Application Default Credentials on this machine (the fixture hides them)
    assert isinstance(result.error_in_exec, UsageError)
    assert str(result.error_in_exec).startswith("No Google credentials for Google Vertex AI")


def test_each_turn_on_the_claude_api_keeps_the_client_and_its_connections(api: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
    first, second = AnthropicModel("claude-sonnet-4-6"), AnthropicModel("claude-opus-4-8")  # two %agent turns
    assert first.client._client is second.client._client  # one httpx pool: the next turn reuses the open connection
    monkeypatch.setenv("ANTHROPIC_API_KEY", "another-key")  # a changed configuration makes a new client
    assert AnthropicModel("claude-sonnet-4-6").client.api_key == "another-key"
