"""Claude on the clouds: the SDK client that serves each provider, its model ids, its credentials, what it offers.

``Agent.provider`` / ``run(provider=...)`` / ``Loop(provider=...)`` name one of :data:`PROVIDERS`. Each is the
``anthropic`` SDK's own client (``Anthropic``, ``AnthropicBedrock``, ``AnthropicVertex``, ``AnthropicFoundry``: all
four exist at the SDK floor in pyproject.toml), configured the way that cloud's own tools are: AWS's environment,
profile or bearer token (boto3's chain), Google's Application Default Credentials, Azure's key or Entra ID
(azure-identity). nbagent reads no credential itself beyond what the SDK reads; each one it holds is registered
with :mod:`nbagent.redact`, so it never reaches a log, an error or a view.

A model is named as the model table names it (``claude-sonnet-5-5``) and sent as the provider's id
(:func:`model_id`); a provider's own id is sent as given and read back to the table's row where it can be
(:func:`table_name`), so the window, thinking modes and binding rules still apply. Table tests:
tests/test_providers.py. How to set each cloud up: docs/providers.md.
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import models, redact
from .errors import NbagentError

PROVIDERS = ("anthropic", "bedrock", "vertex", "foundry")
CLOUD_SCOPE = "https://www.googleapis.com/auth/cloud-platform"  # what the SDK asks ADC for (anthropic/lib/_extras/_google_auth.py)
# The Entra ID audience of the Foundry data plane (tokens from DefaultAzureCredential for "https://ai.azure.com/.default").
FOUNDRY_SCOPE = "https://ai.azure.com/.default"


@dataclass(frozen=True)
class ProviderInfo:
    """One provider: its name for people, how to install and authenticate it, and what its endpoint offers."""

    name: str
    label: str  # for people: "Amazon Bedrock"
    extra: str  # the pip extra that installs the cloud's libraries ("" for the Claude API)
    credentials: str  # how to give it credentials, for the error that says none were found
    # Betas nbagent sends (server compaction, the thinking-binding beta): False where the platform's page does not
    # list them; then nbagent falls back as for a model without them (local compaction, unbound thinking left out).
    betas: bool
    automatic_cache: bool  # the request's top-level cache_control; else the last block carries the marker
    prices: bool  # nbagent knows its prices (the cost view reads this; False: "cost unknown")
    ids: Mapping[str, str] = field(default_factory=dict)  # the model table's names -> this provider's ids


# Claude on Amazon Bedrock, InvokeModel on bedrock-runtime (AnthropicBedrock): model ids from the table of
# https://platform.claude.com/docs/en/build-with-claude/claude-on-amazon-bedrock-legacy (Opus 4.6 and earlier;
# Haiku 4.5's row is the same page's dated -v1:0 form). Later models have no ARN-versioned id: they are
# "anthropic.<name>", the form the Messages-API Bedrock endpoint lists (anthropic.claude-opus-4-8). A cross-region
# inference profile (global.anthropic..., us.anthropic...) or an ARN is a provider id and is sent as given.
_BEDROCK_DATED = {
    "claude-opus-4-6": "anthropic.claude-opus-4-6-v1",
    "claude-sonnet-4-6": "anthropic.claude-sonnet-4-6",
    "claude-sonnet-4-5": "anthropic.claude-sonnet-4-5-20250929-v1:0",
    "claude-sonnet-4-5-20250929": "anthropic.claude-sonnet-4-5-20250929-v1:0",
    "claude-opus-4-5": "anthropic.claude-opus-4-5-20251101-v1:0",
    "claude-opus-4-5-20251101": "anthropic.claude-opus-4-5-20251101-v1:0",
    "claude-haiku-4-5": "anthropic.claude-haiku-4-5-20251001-v1:0",
    "claude-haiku-4-5-20251001": "anthropic.claude-haiku-4-5-20251001-v1:0",
}
BEDROCK_IDS = {name: _BEDROCK_DATED.get(name, f"anthropic.{name}") for name in models.MODELS}
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
        betas=False,
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
        betas=False,
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
        betas=False,
        automatic_cache=False,
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


def client(provider: str | None) -> Any:
    """The SDK's client for ``provider``, configured from the environment as the cloud's own tools are.

    Raises NbagentError, before any request, where the cloud's library is missing (which extra to install) or
    where no credentials can be found (how to give them). Every credential the client holds is registered for
    redaction.
    """
    info = lookup(provider)
    missing = problem(info.name) if info.name != "anthropic" else None
    if missing:
        raise NbagentError(missing)
    # One client per provider and configuration, kept: each %agent turn builds its model, and a new client would read
    # the credential chain again and (Vertex) mint a new token. Changed variables make a new one.
    key = (info.name, tuple(os.environ.get(name) for name in _CONFIG_ENV.get(info.name, ())))
    with _clients_lock:
        held = _clients.get(key)
    if held is not None:
        return held
    made = _build(info)
    with _clients_lock:
        _clients[key] = made
    return made


# The variables a cloud's client is configured from (the SDK's and the cloud library's): a change builds a new client.
_CONFIG_ENV = {
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"),
    "bedrock": (
        *("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION"),
        *("AWS_DEFAULT_REGION", "AWS_BEARER_TOKEN_BEDROCK", "ANTHROPIC_BEDROCK_BASE_URL", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"),
    ),
    "vertex": (
        *("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CONFIG", "CLOUD_ML_REGION"),
        *("ANTHROPIC_VERTEX_PROJECT_ID", "ANTHROPIC_VERTEX_BASE_URL"),
    ),
    "foundry": (
        "ANTHROPIC_FOUNDRY_API_KEY",
        "ANTHROPIC_FOUNDRY_RESOURCE",
        "ANTHROPIC_FOUNDRY_BASE_URL",
        "AZURE_CLIENT_ID",
        "AZURE_TENANT_ID",
    ),
}
_clients: dict[tuple[str, tuple[str | None, ...]], Any] = {}
_clients_lock = threading.Lock()


def _build(info: ProviderInfo) -> Any:
    """A new client for ``info``'s cloud (see :func:`client`)."""
    import anthropic

    builder = _BUILDERS[info.name]
    try:
        made = builder(info)
    except NbagentError:
        raise
    except ImportError as exc:
        raise NbagentError(f"{info.label} needs its libraries: pip install '{info.extra}' ({exc}).") from None
    except (anthropic.AnthropicError, ValueError, RuntimeError) as exc:  # the SDK's own "no region", "missing credentials"
        raise NbagentError(redact.text(f"Cannot reach Claude on {info.label}: {exc}. Credentials: {info.credentials}.")) from None
    register_secrets(made)
    return made


def _anthropic(info: ProviderInfo) -> Any:
    import anthropic  # here, not at the top: a view that only names the provider never loads the SDK

    if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
        raise NbagentError(f"No Anthropic API key: {info.credentials}.")
    return anthropic.Anthropic()  # honours ANTHROPIC_BASE_URL


def _bedrock(info: ProviderInfo) -> Any:
    import anthropic

    if os.environ.get("AWS_BEARER_TOKEN_BEDROCK"):  # a Bedrock API key: no signing, no boto3 session needed
        return anthropic.AnthropicBedrock()
    import boto3  # the SDK signs with boto3's credential chain (env, profile, SSO, container or instance role)
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        credentials = boto3.Session().get_credentials()
        frozen = credentials.get_frozen_credentials() if credentials is not None else None
    except (BotoCoreError, ClientError) as exc:  # a profile that does not exist, an expired SSO sign-in, ...
        raise NbagentError(redact.text(f"AWS credentials for {info.label} could not be loaded: {exc}. {info.credentials}.")) from None
    if frozen is None:
        raise NbagentError(f"No AWS credentials for {info.label}: {info.credentials}.")
    redact.register(frozen.secret_key)
    redact.register(frozen.token)
    return anthropic.AnthropicBedrock()  # signs each request itself, from the same chain


def _vertex(info: ProviderInfo) -> Any:
    import anthropic
    import google.auth
    import google.auth.exceptions

    try:
        credentials, project = google.auth.default(scopes=[CLOUD_SCOPE])
    except google.auth.exceptions.DefaultCredentialsError as exc:
        raise NbagentError(f"No Google credentials for {info.label}: {info.credentials} ({exc}).") from None
    options: dict[str, Any] = {"credentials": credentials}
    if not os.environ.get("ANTHROPIC_VERTEX_PROJECT_ID") and project:
        options["project_id"] = project  # ADC's own project (GOOGLE_CLOUD_PROJECT, a service account's)
    return anthropic.AnthropicVertex(**options)


def _foundry(info: ProviderInfo) -> Any:
    import anthropic

    if os.environ.get("ANTHROPIC_FOUNDRY_API_KEY"):
        return anthropic.AnthropicFoundry()
    try:
        from azure.identity import DefaultAzureCredential, get_bearer_token_provider
    except ImportError:
        raise NbagentError(
            f"No key for {info.label}: set ANTHROPIC_FOUNDRY_API_KEY, or pip install '{info.extra}' to sign in with Entra ID."
        ) from None
    return anthropic.AnthropicFoundry(azure_ad_token_provider=redacting(get_bearer_token_provider(DefaultAzureCredential(), FOUNDRY_SCOPE)))


_BUILDERS: dict[str, Callable[[ProviderInfo], Any]] = {"anthropic": _anthropic, "bedrock": _bedrock, "vertex": _vertex, "foundry": _foundry}


def redacting(provider: Callable[[], str]) -> Callable[[], str]:
    """A token provider whose every token is registered for redaction before the SDK sends it."""

    def token() -> str:
        value = provider()
        redact.register(value)
        return value

    return token


def register_secrets(made: Any) -> None:
    """Register every credential ``made`` (an SDK client) holds now: keys, tokens, a Google token once minted."""
    for name in ("api_key", "auth_token", "aws_secret_key", "aws_session_token", "access_token"):
        value = getattr(made, name, None)
        if isinstance(value, str):
            redact.register(value)
    credentials = getattr(made, "credentials", None)  # Vertex: google.auth credentials, their token minted at first use
    token = getattr(credentials, "token", None)
    if isinstance(token, str):
        redact.register(token)


def auth_errors(provider: str | None) -> tuple[type[BaseException], ...]:
    """The errors a provider's credential libraries raise while a request is signed or its token refreshed."""
    name = lookup(provider).name
    try:
        if name == "bedrock":
            from botocore.exceptions import BotoCoreError

            return (BotoCoreError,)
        if name == "vertex":
            from google.auth.exceptions import GoogleAuthError

            return (GoogleAuthError,)
        if name == "foundry":
            from azure.core.exceptions import ClientAuthenticationError

            return (ClientAuthenticationError,)
    except ImportError:
        pass
    return ()


def problem(provider: str | None) -> str | None:
    """Why no model call on ``provider`` can start, found without a network call (an unknown name, no key); else None."""
    try:
        info = lookup(provider)
    except NbagentError as exc:
        return str(exc)
    if info.name == "anthropic" and not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
        return f"No Anthropic API key: {info.credentials}."
    needed = _LIBRARIES.get(info.name)
    if info.name == "foundry" and os.environ.get("ANTHROPIC_FOUNDRY_API_KEY"):
        needed = None  # a key needs no Azure library
    if needed and not _importable(needed):
        if info.name == "foundry":
            return f"No key for {info.label}: set ANTHROPIC_FOUNDRY_API_KEY, or pip install '{info.extra}' to sign in with Entra ID."
        return f"Claude on {info.label} needs {needed}: pip install '{info.extra}'."
    return None


# What each cloud's client cannot work without (the Bedrock stream is decoded by botocore even with a bearer token).
_LIBRARIES = {"bedrock": "botocore", "vertex": "google.auth", "foundry": "azure.identity"}


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a missing parent package
        return False


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
