"""The SDK's client for each cloud, built from the environment as the cloud's own tools are; its credentials redacted.

What each provider is (names, model ids, which credentials, what it offers) is the table in
nbagent/state/providers.py; this builds the client: ``Anthropic``, ``AnthropicBedrock`` (InvokeModel) or
``AnthropicBedrockMantle`` (Bedrock's Messages-API endpoint, for the models nbagent/state/api_versions.py sends there),
``AnthropicVertex``, ``AnthropicFoundry``, ``AnthropicAWS`` or ``AnthropicGoogleCloud``, from AWS's credential chain,
Google's Application Default Credentials or Azure's key or Entra ID. Each credential a client holds is registered with :mod:`nbagent.record.redact`, so it never reaches a log,
an error or a view: keys and tokens, a gateway's credential headers (``ANTHROPIC_CUSTOM_HEADERS``) and the password
in a base URL's userinfo. A missing library or credential is an NbagentError that says what to do, before any request.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import threading
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import NbagentError
from ..record import redact
from ..state import api_versions
from ..state.providers import ProviderInfo, lookup

CLOUD_SCOPE = "https://www.googleapis.com/auth/cloud-platform"  # what the SDK asks ADC for (anthropic/lib/_extras/_google_auth.py)
# The Entra ID audience of the Foundry data plane (tokens from DefaultAzureCredential for "https://ai.azure.com/.default").
FOUNDRY_SCOPE = "https://ai.azure.com/.default"


def client(provider: str | None, model: str | None = None) -> Any:
    """The SDK's client for ``provider`` (and, on Bedrock, the endpoint ``model`` takes), configured from the environment.

    Raises NbagentError, before any request, where the cloud's library is missing (which extra to install) or
    where no credentials can be found (how to give them). Every credential the client holds is registered for
    redaction.
    """
    info = lookup(provider)
    missing = problem(info.name) if info.name != "anthropic" else None
    if missing:
        raise NbagentError(missing)
    kind = "bedrock_messages" if model is not None and api_versions.endpoint(info.name, model) == "bedrock_messages" else info.name
    # One client per provider and configuration, kept: each %agent turn builds its model, and a new client would read
    # the credential chain again and (Vertex) mint a new token. Changed variables make a new one.
    key = (kind, tuple(os.environ.get(name) for name in (*_CONFIG_ENV.get(kind, ()), *_GATEWAY_ENV, *_PROXY_ENV)))
    with _clients_lock:
        held = _clients.get(key)
    if held is not None:
        return held
    made = _build(info, kind)
    with _clients_lock:
        _clients[key] = made
    return made


# The variables a cloud's client is configured from (the SDK's and the cloud library's): a change builds a new client.
_AWS_ENV = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION")
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
    "aws": (*_AWS_ENV, "ANTHROPIC_AWS_API_KEY", "ANTHROPIC_AWS_WORKSPACE_ID", "ANTHROPIC_AWS_BASE_URL"),
    "google": (
        *("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CONFIG", "ANTHROPIC_GOOGLE_CLOUD_PROJECT"),
        *("ANTHROPIC_GOOGLE_CLOUD_LOCATION", "ANTHROPIC_GOOGLE_CLOUD_WORKSPACE_ID", "ANTHROPIC_GOOGLE_CLOUD_BASE_URL"),
    ),
}
_CONFIG_ENV["bedrock_messages"] = (*_CONFIG_ENV["bedrock"], "ANTHROPIC_AWS_API_KEY", "ANTHROPIC_BEDROCK_MANTLE_BASE_URL")
_GATEWAY_ENV = ("ANTHROPIC_CUSTOM_HEADERS",)  # the SDK adds these headers to every cloud's client (anthropic/lib/_env.py)
_PROXY_ENV = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "all_proxy", "no_proxy")  # httpx's
_clients: dict[tuple[str, tuple[str | None, ...]], Any] = {}
_clients_lock = threading.Lock()


def _build(info: ProviderInfo, kind: str) -> Any:
    """A new client for ``info``'s cloud, ``kind`` its endpoint (see :func:`client`)."""
    import anthropic

    builder = _BUILDERS[kind]
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

    if not os.environ.get("AWS_BEARER_TOKEN_BEDROCK"):  # a Bedrock API key: no signing, no boto3 session needed
        _aws_chain(info)
    return anthropic.AnthropicBedrock()  # signs each request itself, from the same chain


def _bedrock_messages(info: ProviderInfo) -> Any:
    """Bedrock's Messages-API endpoint (``/anthropic/v1/messages``), for Claude 4.7 and later (api_versions.py)."""
    import anthropic

    if not (os.environ.get("AWS_BEARER_TOKEN_BEDROCK") or os.environ.get("ANTHROPIC_AWS_API_KEY")):
        _aws_chain(info)
    return anthropic.AnthropicBedrockMantle()


def _aws(info: ProviderInfo) -> Any:
    import anthropic

    if not os.environ.get("ANTHROPIC_AWS_API_KEY"):  # a workspace API key: no signing
        _aws_chain(info)
    return anthropic.AnthropicAWS()


def _aws_chain(info: ProviderInfo) -> None:
    """Check that boto3's credential chain has credentials (the SDK signs with them) and register them for redaction."""
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


def _google_credentials(info: ProviderInfo) -> tuple[Any, str | None]:
    """Google's application default credentials and their project, or a clear error naming what to set."""
    import google.auth
    import google.auth.exceptions

    try:
        credentials, project = google.auth.default(scopes=[CLOUD_SCOPE])
    except google.auth.exceptions.DefaultCredentialsError as exc:
        raise NbagentError(f"No Google credentials for {info.label}: {info.credentials} ({exc}).") from None
    return credentials, project


def _vertex(info: ProviderInfo) -> Any:
    import anthropic

    credentials, project = _google_credentials(info)
    options: dict[str, Any] = {"credentials": credentials}
    if not os.environ.get("ANTHROPIC_VERTEX_PROJECT_ID") and project:
        options["project_id"] = project  # ADC's own project (GOOGLE_CLOUD_PROJECT, a service account's)
    return anthropic.AnthropicVertex(**options)


def _google(info: ProviderInfo) -> Any:
    import anthropic

    credentials, project = _google_credentials(info)
    options: dict[str, Any] = {"credentials": credentials}
    if not os.environ.get("ANTHROPIC_GOOGLE_CLOUD_PROJECT") and project:
        options["project"] = project
    return anthropic.AnthropicGoogleCloud(**options)


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


_BUILDERS: dict[str, Callable[[ProviderInfo], Any]] = {
    **{"anthropic": _anthropic, "bedrock": _bedrock, "bedrock_messages": _bedrock_messages, "vertex": _vertex},
    **{"foundry": _foundry, "aws": _aws, "google": _google},
}


def redacting(provider: Callable[[], str]) -> Callable[[], str]:
    """A token provider whose every token is registered for redaction before the SDK sends it."""

    def token() -> str:
        value = provider()
        redact.register(value)
        return value

    return token


def register_secrets(made: Any) -> None:
    """Register every credential ``made`` (an SDK client) holds now: keys, tokens, a Google token once minted, credential
    headers (``ANTHROPIC_CUSTOM_HEADERS``, ``default_headers=``) and the password in its base URL."""
    for name in ("api_key", "auth_token", "aws_secret_key", "aws_session_token", "access_token"):
        value = getattr(made, name, None)
        if isinstance(value, str):
            redact.register(value)
    headers = getattr(made, "default_headers", None)  # the SDK's own headers, then the custom ones
    for secret in _header_secrets(headers) if isinstance(headers, Mapping) else ():
        redact.register(secret)
    base_url = getattr(made, "base_url", None)
    for held in _url_secrets(str(base_url)) if base_url is not None else ():
        redact.register(held)
    for name in ("credentials", "google_credentials"):  # google.auth credentials (Vertex, Google Cloud), minted at first use
        token = getattr(getattr(made, name, None), "token", None)
        if isinstance(token, str):
            redact.register(token)


# A header whose name has a word saying it carries a credential (X-Api-Key, cf-aig-authorization, X-Gateway-Token...);
# whole words, so that x-portkey-provider is not one.
_CREDENTIAL_WORD = re.compile(
    r"(?:^|[-_.])(?:auth\w*|(?:api)?key|token|secret|passw(?:or)?d|pass|cookie|session|signature|credentials?|jwt)(?=$|[-_.])",
    re.IGNORECASE,
)
_AUTH_SCHEME = re.compile(r"(?:bearer|basic|token|digest|apikey|api-key)\s+(\S+)", re.IGNORECASE)  # "Bearer abc..."


def header_secrets(headers: Mapping[str, object]) -> list[str]:
    """The credentials among request headers: values of headers named like one, and any value after an auth scheme.

    A value is given whole and, after a scheme (``Bearer abc``), without it. Headers such as ``X-Team: analytics``
    are not secrets: their values would otherwise be redacted wherever the words appear.
    """
    found: list[str] = []
    for name, value in headers.items():
        if not isinstance(value, str) or not value.strip():
            continue
        scheme = _AUTH_SCHEME.match(value.strip())
        if _CREDENTIAL_WORD.search(name) or scheme:
            found.append(value.strip())
        if scheme:
            found.append(scheme.group(1))
    return found


def _header_secrets(headers: Mapping[str, object]) -> Sequence[str]:
    """:func:`header_secrets`, remembered by the headers' items: every model a run makes registers its client's (about 40 µs)."""
    try:
        return _headers_seen(tuple(headers.items()))
    except TypeError:  # a value that cannot be hashed
        return header_secrets(headers)


@functools.lru_cache(maxsize=64)
def _headers_seen(items: tuple[tuple[str, object], ...]) -> tuple[str, ...]:
    return tuple(header_secrets(dict(items)))


@functools.lru_cache(maxsize=64)
def _url_secrets(url: str) -> tuple[str | bytes, ...]:
    return tuple(url_secrets(url))


def url_secrets(url: str) -> list[str | bytes]:
    """The password in ``url``'s userinfo: as written, percent-decoded, and the ``user:password`` an HTTP client sends.

    The last is bytes, so that its base64 form (the ``Authorization: Basic`` value) is redacted too.
    """
    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password
    except ValueError:  # a malformed port or bracket: no userinfo to find
        return []
    if not password:
        return []
    user = urllib.parse.unquote(parts.username or "")
    decoded = urllib.parse.unquote(password)
    return [password, decoded, f"{user}:{decoded}".encode()]


def auth_errors(provider: str | None) -> tuple[type[BaseException], ...]:
    """The errors a provider's credential libraries raise while a request is signed or its token refreshed."""
    name = lookup(provider).name
    try:
        if name in ("bedrock", "aws"):
            from botocore.exceptions import BotoCoreError

            return (BotoCoreError,)
        if name in ("vertex", "google"):
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
    keyed = {"foundry": "ANTHROPIC_FOUNDRY_API_KEY", "aws": "ANTHROPIC_AWS_API_KEY"}.get(info.name)
    if keyed and os.environ.get(keyed):
        needed = None  # a Foundry key needs no Azure library, an AWS workspace key no signing
    if needed and not _importable(needed):
        if info.name == "foundry":
            return f"No key for {info.label}: set ANTHROPIC_FOUNDRY_API_KEY, or pip install '{info.extra}' to sign in with Entra ID."
        return f"Claude on {info.label} needs {needed}: pip install '{info.extra}'."
    return None


# What each cloud's client cannot work without (the Bedrock stream is decoded by botocore even with a bearer token).
_LIBRARIES = {"bedrock": "botocore", "vertex": "google.auth", "foundry": "azure.identity", "aws": "botocore", "google": "google.auth"}


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a missing parent package
        return False
