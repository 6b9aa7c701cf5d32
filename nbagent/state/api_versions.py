"""Which endpoint and API version a model takes on each provider, whichever SDK release is installed (pure rules).

The SDK sends the API version its major release was current with: ``2023-06-01`` up to 1.x (``bedrock-2023-05-31`` and
``vertex-2023-10-16`` in the clouds' bodies), ``2026-10-21`` from 2.0 on, on every client. "Versions" (platform docs,
https://platform.claude.com/docs/en/api/versioning) lists 2026-10-21 on the Claude API, Claude Platform on AWS, Claude
Models on Google Cloud (both kinds) and Microsoft Foundry, and "on Amazon Bedrock ... for Claude 4.7 and later models".
"Claude on Amazon Bedrock (Opus 4.6 and earlier)" (https://platform.claude.com/docs/en/build-with-claude/claude-on-amazon-
bedrock-legacy) warns that its ARN-versioned models (InvokeModel) do not support 2026-10-21 and "may return a 400", and
sends later models to the Messages-API Bedrock endpoint (``/anthropic/v1/messages``, the SDK's
``AnthropicBedrockMantle``; "Claude in Amazon Bedrock"). So on Bedrock:

- a model of the legacy page's table, or one the model table does not know (older Bedrock models are ARN-versioned too),
  goes to InvokeModel (``AnthropicBedrock``) with ``anthropic_version: "bedrock-2023-05-31"`` in its body on every SDK;
- every later model the table knows (Claude 4.7 and later) goes to the Messages-API endpoint, with the SDK's version.

Verified against the pages and the SDK's code only: no AWS account was at hand (docs/providers.md says so).
Table tests: tests/model/test_cloud_versions.py.
"""

from __future__ import annotations

from typing import Literal

from . import model_table as models
from . import providers

Endpoint = Literal["api", "invoke_model", "bedrock_messages"]
INVOKE_MODEL_VERSION = "bedrock-2023-05-31"  # the body's anthropic_version every InvokeModel model takes
# The ARN-versioned models of the legacy Bedrock page's model table that the model table names (providers.py's ids).
LEGACY_BEDROCK = frozenset(providers.BEDROCK_DATED)


def endpoint(provider: str | None, name: str) -> Endpoint:
    """Where a request for the model the table names ``name`` goes on ``provider`` (Bedrock: by the legacy page)."""
    if providers.lookup(provider).name != "bedrock":
        return "api"
    if name in LEGACY_BEDROCK or name not in models.MODELS:
        return "invoke_model"
    return "bedrock_messages"


def body_version(invoke_model: bool, name: str) -> str | None:
    """The ``anthropic_version`` an InvokeModel body must carry for ``name`` (None: the SDK's own is taken).

    Only InvokeModel puts the version in the body; a legacy (or unknown) model there takes ``bedrock-2023-05-31``, which
    SDK 1.x sends itself and 2.x replaces with 2026-10-21. A later model sent to InvokeModel by a client of the user's own
    takes the SDK's version, as the versioning page allows it 2026-10-21.
    """
    if not invoke_model:
        return None
    return INVOKE_MODEL_VERSION if name in LEGACY_BEDROCK or name not in models.MODELS else None
