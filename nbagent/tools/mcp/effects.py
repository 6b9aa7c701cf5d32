"""The MCP rules, pure: a tool's name in requests, its effect from the server's annotations, the claims shown (table: tests/tools/test_mcp_effects.py)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from ..decorator import Effect

PREFIX = "mcp__"
MAX_NAME = 64  # the Messages API's tool names: ^[a-zA-Z0-9_-]{1,64}$ (the narrowest the API has said)
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``: two servers' tools never share a name, and the API's pattern always holds.

    A name that had to be changed (a character outside ``[a-zA-Z0-9_-]``, or too long) ends in a short hash of the
    server and tool as given, so two names that clean to the same text stay apart.
    """
    plain = f"{PREFIX}{server}__{tool}"
    if _NAME.match(plain) and "__" not in server:
        return plain
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    cleaned = f"{PREFIX}{_UNSAFE.sub('_', server).replace('__', '_')}__{_UNSAFE.sub('_', tool)}"
    return f"{cleaned[: MAX_NAME - len(digest) - 1]}_{digest}"


def hint(annotations: Mapping[str, Any] | None, name: str) -> bool | None:
    """An annotation's value, by its wire name (readOnlyHint) or the SDK's (read_only_hint)."""
    if not annotations:
        return None
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
    value = annotations.get(name, annotations.get(snake))
    return value if isinstance(value, bool) else None


def effect(annotations: Mapping[str, Any] | None, override: Effect | None = None, *, trusted: bool = True) -> Effect:
    """The call's effect: the user's override; else, for a server the user configured (``trusted``), destructiveHint on a
    tool not read-only -> irreversible, anything else -> write; for a project's server, irreversible whatever it claims.

    A hint never gives ``read``: a read is repeated after a crash cut it off, and no server's claim justifies that
    (only the user's own ``effects`` can say a tool is a read).
    """
    if override is not None:
        return override
    if not trusted:
        return "irreversible"  # the schema's defaults (destructiveHint: true); an untrusted server's claims are not used
    if not hint(annotations, "readOnlyHint") and hint(annotations, "destructiveHint"):
        return "irreversible"
    return "write"


def claims(server: str, tool: str, annotations: Mapping[str, Any] | None) -> str:
    """The server's own claims about a tool, in a sentence the approval question shows as the server's (hints, not guarantees)."""
    said = []
    for key, yes, no in (
        ("readOnlyHint", "read-only", "not read-only"),
        ("destructiveHint", "destructive", "not destructive"),
        ("idempotentHint", "idempotent", "not idempotent"),
        ("openWorldHint", "reaches outside systems", "stays inside its own system"),
    ):
        value = hint(annotations, key)
        if value is not None:
            said.append(yes if value else no)
    title = (annotations or {}).get("title")
    named = f" titled {str(title)[:80]!r}" if title else ""
    what = ", ".join(said) if said else "nothing about its effects"
    return f"tool {tool!r}{named} of MCP server {server!r} is: {what} (hints, not guarantees)."


def verdict(override: Effect | None = None, *, trusted: bool = True) -> str:
    """nbagent's own words on what a server's claims count for ('' where they set the effect, as :func:`effect` says)."""
    if override is not None:
        return f"Your settings make this tool {override!r}, whatever the server claims."
    if not trusted:
        return "This server comes from a project's .mcp.json, so its claims are not used: each call asks."
    return ""
