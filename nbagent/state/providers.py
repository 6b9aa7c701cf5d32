"""Claude on the clouds: each provider's model ids, its credentials, what it offers, its errors (pure rules).

``Agent.provider`` / ``run(provider=...)`` / ``Loop(provider=...)`` name one of :data:`PROVIDERS`. Each is the
``anthropic`` SDK's own client (``Anthropic``, ``AnthropicBedrock`` or ``AnthropicBedrockMantle`` by model (see
api_versions.py), ``AnthropicVertex``, ``AnthropicFoundry``, ``AnthropicAWS``, ``AnthropicGoogleCloud``: all exist at the
SDK floor in pyproject.toml), configured the way that cloud's own tools are: AWS's environment,
profile or bearer token (boto3's chain), Google's Application Default Credentials, Azure's key or Entra ID
(azure-identity); :mod:`nbagent.model.clients` builds them. nbagent reads no credential itself beyond what the SDK
reads; each one it holds is registered with :mod:`nbagent.record.redact`, so it never reaches a log, an error or a view.

A model is named as the model table names it (``claude-sonnet-5-5``) and sent as the provider's id
(:func:`model_id`); a provider's own id is sent as given and read back to the table's row where it can be
(:func:`table_name`), so the window, thinking modes and binding rules still apply. Table tests:
tests/model/test_providers.py. How to set each cloud up: docs/providers.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import NbagentError
from . import model_table as models

PROVIDERS = ("anthropic", "bedrock", "vertex", "foundry", "aws", "google")


@dataclass(frozen=True)
class ProviderInfo:
    """One provider: its name for people, how to install and authenticate it, and what its endpoint offers."""

    name: str
    label: str  # for people: "Amazon Bedrock"
    extra: str  # the pip extra that installs the cloud's libraries ("" for the Claude API)
    credentials: str  # how to give it credentials, for the error that says none were found
    # Betas nbagent sends (server compaction, the thinking-binding beta): False where the platform's page does not
    # list them; then nbagent falls back as for a model without them (local compaction, unbound thinking left out).
    # "Compaction" and "Preserved thinking" (platform docs) list Amazon Bedrock, Google Cloud and Microsoft Foundry, and
    # Claude Platform on AWS and Claude Models on Google Cloud (Anthropic managed) serve the Claude API's own surface.
    betas: bool
    automatic_cache: bool  # the request's top-level cache_control; else the last block carries the marker
    prices: bool  # nbagent knows its prices (the cost view reads this; False: "cost unknown")
    ids: Mapping[str, str] = field(default_factory=dict)  # the model table's names -> this provider's ids


# Claude on Amazon Bedrock, InvokeModel on bedrock-runtime (AnthropicBedrock): model ids from the table of
# https://platform.claude.com/docs/en/build-with-claude/claude-on-amazon-bedrock-legacy (Opus 4.6 and earlier;
# Haiku 4.5's row is the same page's dated -v1:0 form). Later models have no ARN-versioned id: they are
# "anthropic.<name>", the form the Messages-API Bedrock endpoint lists (anthropic.claude-opus-4-8). A cross-region
# inference profile (global.anthropic..., us.anthropic...) or an ARN is a provider id and is sent as given.
BEDROCK_DATED = {
    "claude-opus-4-6": "anthropic.claude-opus-4-6-v1",
    "claude-sonnet-4-6": "anthropic.claude-sonnet-4-6",
    "claude-sonnet-4-5": "anthropic.claude-sonnet-4-5-20250929-v1:0",
    "claude-sonnet-4-5-20250929": "anthropic.claude-sonnet-4-5-20250929-v1:0",
    "claude-opus-4-5": "anthropic.claude-opus-4-5-20251101-v1:0",
    "claude-opus-4-5-20251101": "anthropic.claude-opus-4-5-20251101-v1:0",
    "claude-haiku-4-5": "anthropic.claude-haiku-4-5-20251001-v1:0",
    "claude-haiku-4-5-20251001": "anthropic.claude-haiku-4-5-20251001-v1:0",
}
BEDROCK_IDS = {name: BEDROCK_DATED.get(name, f"anthropic.{name}") for name in models.MODELS}
# Claude on Vertex AI: "claude-sonnet-4-5@20250929" (Google's "Request predictions with Claude models",
# https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/use-claude); later models are
# published without an @version and are sent by their name.
_VERTEX_DATED = {
    "claude-sonnet-4-5": "claude-sonnet-4-5@20250929",
    "claude-sonnet-4-5-20250929": "claude-sonnet-4-5@20250929",
    "claude-opus-4-5": "claude-opus-4-5@20251101",
    "claude-opus-4-5-20251101": "claude-opus-4-5@20251101",
    "claude-haiku-4-5": "claude-haiku-4-5@20251001",
    "claude-haiku-4-5-20251001": "claude-haiku-4-5@20251001",
}
VERTEX_IDS = {name: _VERTEX_DATED.get(name, name) for name in models.MODELS}

INFO: dict[str, ProviderInfo] = {
    "anthropic": ProviderInfo(
        "anthropic",
        "the Claude API",
        "",
        "set ANTHROPIC_API_KEY in the environment Jupyter or Python starts from",
        betas=True,
        automatic_cache=True,
        prices=True,
    ),
    "bedrock": ProviderInfo(
        "bedrock",
        "Amazon Bedrock",
        "nbagent[bedrock]",
        "the AWS CLI's own: AWS_PROFILE or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (an SSO or instance role works too), "
        "or a Bedrock API key in AWS_BEARER_TOKEN_BEDROCK; and a region in AWS_REGION or the profile",
        betas=True,
        automatic_cache=False,
        prices=False,
        ids=BEDROCK_IDS,
    ),
    "vertex": ProviderInfo(
        "vertex",
        "Google Vertex AI",
        "nbagent[vertex]",
        "Application Default Credentials (`gcloud auth application-default login`, or GOOGLE_APPLICATION_CREDENTIALS), "
        "a region in CLOUD_ML_REGION and the project in ANTHROPIC_VERTEX_PROJECT_ID",
        betas=True,
        automatic_cache=False,
        prices=False,
        ids=VERTEX_IDS,
    ),
    "foundry": ProviderInfo(
        "foundry",
        "Microsoft Foundry",
        "nbagent[foundry]",
        "ANTHROPIC_FOUNDRY_API_KEY, or Entra ID through azure-identity (`az login`, a managed identity, AZURE_CLIENT_ID...); "
        "and the resource in ANTHROPIC_FOUNDRY_RESOURCE (or its URL in ANTHROPIC_FOUNDRY_BASE_URL)",
        betas=True,
        automatic_cache=False,
        prices=False,
    ),
    # Claude Platform on AWS (AnthropicAWS): the Claude API operated by Anthropic, AWS authentication and billing;
    # "the same models and features as the Claude API" under the same model ids, a required anthropic-workspace-id.
    # https://platform.claude.com/docs/en/build-with-claude/claude-platform-on-aws ,
    # https://docs.aws.amazon.com/claude-platform/latest/userguide/making-requests.html
    "aws": ProviderInfo(
        "aws",
        "Claude Platform on AWS",
        "nbagent[bedrock]",
        "a workspace in ANTHROPIC_AWS_WORKSPACE_ID and a region in AWS_REGION; a workspace API key in ANTHROPIC_AWS_API_KEY, "
        "or the AWS CLI's own credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, SSO, a role) for SigV4",
        betas=True,
        automatic_cache=True,
        prices=False,
    ),
    # Claude Models on Google Cloud, managed by Anthropic (AnthropicGoogleCloud): the Claude API's whole surface through
    # Google's gateway, Google IAM credentials, first-party model ids (the SDK's lib/google_cloud/README.md;
    # https://platform.claude.com/docs/en/build-with-claude/claude-models-on-google-cloud/anthropic-managed).
    "google": ProviderInfo(
        "google",
        "Claude Models on Google Cloud",
        "nbagent[vertex]",
        "Application Default Credentials (`gcloud auth application-default login`, or GOOGLE_APPLICATION_CREDENTIALS), "
        "the workspace in ANTHROPIC_GOOGLE_CLOUD_WORKSPACE_ID and the project in ANTHROPIC_GOOGLE_CLOUD_PROJECT",
        betas=True,
        automatic_cache=True,
        prices=False,
    ),
}


def lookup(provider: str | None) -> ProviderInfo:
    """The row of a provider name (None or "": the Claude API); an unknown name is an error that lists the known ones."""
    name = (provider or "anthropic").strip().lower()
    if name not in INFO:
        raise NbagentError(f"Unknown provider {provider!r}: use one of {', '.join(PROVIDERS)}.")
    return INFO[name]


def model_id(provider: str | None, name: str) -> str:
    """What ``provider`` calls the model the table names ``name``; a name the table does not know is sent as given."""
    return lookup(provider).ids.get(name, name)


_REGION_PREFIX = re.compile(r"^(?:global|us|us-gov|eu|jp|apac|au|ca)\.")  # a Bedrock cross-region inference profile
_BEDROCK_SUFFIX = re.compile(r"-v\d+(?::\d+)?$")


def table_name(provider: str | None, given: str) -> str:
    """The model table's name for a model named either way (``claude-sonnet-4-6`` or ``us.anthropic.claude-sonnet-4-6``).

    A provider id the table's mapping names reads back to its row; otherwise the usual decorations (a Bedrock
    profile's region, ``anthropic.``, ``-v1:0``, Vertex's ``@date``, an ARN's path) are taken off and the rest is
    looked up. What still is not in the table stays as given (conservative defaults: models.UNKNOWN).
    """
    info = lookup(provider)
    if given in models.MODELS or info.name == "anthropic":
        return given
    for name, their in info.ids.items():
        if their == given:
            return _alias(name)
    bare = given.rsplit("/", 1)[-1]  # an ARN ending in .../inference-profile/<id> or .../foundation-model/<id>
    bare = _REGION_PREFIX.sub("", bare).removeprefix("anthropic.")
    bare = _BEDROCK_SUFFIX.sub("", bare)
    base, _, date = bare.partition("@")
    for candidate in (f"{base}-{date}" if date else "", base):
        if candidate in models.MODELS:
            return _alias(candidate)
    return given


CACHE_MARK = {"type": "ephemeral"}
_UNMARKABLE = frozenset({"thinking", "redacted_thinking", "compaction"})  # blocks the API takes back verbatim, no marker


def cache_last_block(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with a prompt-caching breakpoint on the last block of the last message (copies: the log's are untouched).

    Where the top-level ``cache_control`` (automatic caching) is not offered, the same prefix is cached this way:
    "Prompt caching" (platform docs) puts ``cache_control`` on a block, and each cloud's Claude takes that form.
    """
    if not messages:
        return messages
    last = messages[-1]
    content = last.get("content")
    if isinstance(content, str):
        blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
    else:
        blocks = list(content or [])
    if not blocks or blocks[-1].get("type") in _UNMARKABLE:
        return messages
    blocks[-1] = {**blocks[-1], "cache_control": dict(CACHE_MARK)}
    return [*messages[:-1], {**last, "content": blocks}]


def _alias(name: str) -> str:
    """A dated id as the table's undated alias when both name the same row (the alias is what people set)."""
    undated = re.sub(r"-\d{8}$", "", name)
    return undated if undated != name and models.MODELS.get(undated) == models.MODELS.get(name) else name


# A cloud's error without the API's error type reads as the type the API gives that status ("Errors", platform docs):
# an authentication or permission failure is not retried, a throttle or a server error is.
STATUS_KINDS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


# The exceptions a Bedrock response stream ends with (the ResponseStream members of InvokeModelWithResponseStream,
# https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html), as the API's
# error types: the SDK reports a frame's exception type as the error's type.
STREAM_EXCEPTIONS = {
    "internalServerException": "api_error",
    "modelStreamErrorException": "api_error",
    "throttlingException": "rate_limit_error",
    "serviceUnavailableException": "overloaded_error",
    "modelTimeoutException": "timeout_error",
    "validationException": "invalid_request_error",
}


def error_kind(kind: str) -> str:
    """A cloud's error type as the API's (a Bedrock stream exception); any other type as it is."""
    return STREAM_EXCEPTIONS.get(kind, kind)


def status_kind(status: int) -> str:
    """The API's error type for an HTTP status a cloud answered with."""
    return STATUS_KINDS.get(status, "api_error" if status >= 500 or status == 200 else "invalid_request_error")


def served(model: Any) -> dict[str, str]:
    """What a ``model_call`` event records of where it went: the provider, and its own id where it differs from the table's name."""
    provider = getattr(model, "provider", None)
    if not isinstance(provider, str):
        return {}  # not Claude through a client (the demo model, a test's model)
    their = getattr(model, "model_id", None)
    return {"provider": provider, **({"provider_model": their} if isinstance(their, str) and their != model.name else {})}


def billed(model: Any) -> dict[str, str]:
    """What a reply's ``assistant_msg`` (or a compaction) records of who bills it: a cloud's name; nothing for the Claude API."""
    provider = getattr(model, "provider", None)
    return {"provider": provider} if isinstance(provider, str) and provider != "anthropic" else {}


def price_key(model: str | None, provider: str | None) -> str | None:
    """The name a reply's tokens are priced under: the model on the Claude API, "bedrock:<model>" on a cloud.

    A cloud's prices are its own (regional and global rates, its own units), so its replies are never priced as the
    Claude API's: the key is in no built-in table ("cost unknown") until a price override names it.
    """
    if not provider or provider == "anthropic" or model is None:
        return model
    return f"{provider}:{model}"


def served_by(provider: str | None) -> str:
    """Words for a view's header: "on Amazon Bedrock" for a cloud, "" for the Claude API (or nothing recorded)."""
    if not provider or provider == "anthropic" or provider not in INFO:
        return ""
    return f"on {INFO[provider].label}"


def prices_known(provider: str | None) -> bool:
    """Whether nbagent has this provider's prices (a cloud's are its own: "cost unknown" until they are added)."""
    return provider in INFO and INFO[provider].prices if provider else True
