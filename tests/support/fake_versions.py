"""The API versions the fake Messages API and the fake clouds take, and which Bedrock endpoint serves which model.

Used by tests/support/fake_anthropic.py and tests/support/fake_clouds.py. Sources, per rule:

- "Versions" (https://platform.claude.com/docs/en/api/versioning): the ``anthropic-version`` header is required;
  ``2023-06-01`` and ``2026-10-21`` exist; 2026-10-21 is on the Claude API, Claude Platform on AWS, Claude Models on
  Google Cloud (Anthropic and Google managed) and Microsoft Foundry, and on Amazon Bedrock "for Claude 4.7 and later
  models". Under 2026-10-21 "the temperature, top_p, and top_k request parameters are removed": a request that sends one
  gets a 400.
- "Claude on Amazon Bedrock (Opus 4.6 and earlier)" (https://platform.claude.com/docs/en/build-with-claude/claude-on-
  amazon-bedrock-legacy): InvokeModel serves the ARN-versioned models of its table; they "do not support 2026-10-21 on
  Bedrock" (a 400 here); the body's version for them is ``bedrock-2023-05-31`` (what SDK 1.x sends). Later models are on
  the Messages-API Bedrock endpoint (``/anthropic/v1/messages``, "Claude in Amazon Bedrock"), and only there: this fake
  serves each model only on the endpoint the pages name (not confirmed against a real account).
- Vertex AI's body version: ``vertex-2023-10-16`` (what SDK 1.x sends), or 2026-10-21 (Google managed, versioning page).
"""

from __future__ import annotations

from typing import Any

API_VERSIONS = ("2023-06-01", "2026-10-21")
REMOVED_IN_2026 = ("temperature", "top_p", "top_k")
# A cloud's body version -> the API version it stands for (what the gateway sends the fake API).
BODY_VERSIONS = {
    "bedrock": {"bedrock-2023-05-31": "2023-06-01", "2026-10-21": "2026-10-21"},
    "vertex": {"vertex-2023-10-16": "2023-06-01", "2026-10-21": "2026-10-21"},
}
# The legacy page's model table (base model ids; a cross-region profile's prefix or an ARN's path is taken off first).
LEGACY_BEDROCK_IDS = frozenset(
    {
        "anthropic.claude-opus-4-6-v1",
        "anthropic.claude-sonnet-4-6",
        "anthropic.claude-sonnet-4-5-20250929-v1:0",
        "anthropic.claude-sonnet-4-20250514-v1:0",
        "anthropic.claude-3-7-sonnet-20250219-v1:0",
        "anthropic.claude-opus-4-5-20251101-v1:0",
        "anthropic.claude-opus-4-1-20250805-v1:0",
        "anthropic.claude-opus-4-20250514-v1:0",
        "anthropic.claude-haiku-4-5-20251001-v1:0",
    }
)
_REGIONS = ("global.", "us.", "us-gov.", "eu.", "jp.", "apac.", "au.", "ca.")


def api_problem(headers: dict[str, str], body: Any) -> str | None:
    """The API's 400 for a request whose ``anthropic-version`` it does not know, or that 2026-10-21 no longer takes."""
    version = headers.get("anthropic-version", "")
    if version not in API_VERSIONS:
        return f"anthropic-version: {version!r} is not a valid version (use one of {', '.join(API_VERSIONS)})"
    if version == "2026-10-21" and isinstance(body, dict):
        for name in REMOVED_IN_2026:
            if name in body:
                return f"{name}: Extra inputs are not permitted (removed in API version 2026-10-21)"
    return None


def bedrock_base_id(model: str) -> str:
    """A Bedrock model id without an ARN's path or a cross-region inference profile's prefix."""
    bare = model.rsplit("/", 1)[-1]
    for prefix in _REGIONS:
        if bare.startswith(prefix):
            return bare[len(prefix) :]
    return bare


def bedrock_problem(operation: str, model: str, version: str) -> str | None:
    """Why Bedrock refuses ``model`` at ``version`` on ``operation`` ("invoke_model" or "messages"), else None."""
    legacy = bedrock_base_id(model) in LEGACY_BEDROCK_IDS
    if operation == "invoke_model" and not legacy:
        return f"The provided model identifier is invalid: {model} is served on the Messages-API endpoint (/anthropic/v1/messages)."
    if operation == "messages" and legacy:
        return f"The provided model identifier is invalid: {model} is served by InvokeModel (/model/{{modelId}}/invoke)."
    if operation == "invoke_model" and version not in BODY_VERSIONS["bedrock"]:
        return f"anthropic_version: {version!r} is not a valid version"
    if operation == "invoke_model" and version == "2026-10-21":
        return f"anthropic_version: 2026-10-21 is not supported for {model}; send bedrock-2023-05-31"
    if operation == "messages" and version not in API_VERSIONS:
        return f"anthropic-version: {version!r} is not a valid version"
    return None
