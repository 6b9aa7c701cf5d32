"""MCP server configurations, in the format users already write for Claude.

``{"name": {"command": ..., "args": [...], "env": {...}}}`` starts a server on stdio;
``{"name": {"type": "http", "url": ..., "headers": {...}}}`` reaches one over streamable HTTP. A file's
``{"mcpServers": {...}}`` wrapper (``.mcp.json``) is accepted too. ``${VAR}`` and ``${VAR:-default}`` in a command,
its arguments, env values, a URL or header values are taken from the environment, as Claude Code does.

nbagent's own keys, beside those: ``effects`` (``{"tool": "read" | "write" | "irreversible"}``: overrides the
effect the server's annotations give), ``timeout`` (seconds one call may take, default 300) and
``startup_timeout`` (seconds to start and list tools, default 30), ``cwd`` (a stdio server's folder).

A value taken from the environment into a server's ``env`` or ``headers`` is kept in ``ServerConfig.secrets``: the
manager registers it for redaction when the server starts, so the server's stderr (shown in a note) never logs it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ...errors import NbagentError
from ..decorator import EFFECTS, Effect

Transport = Literal["stdio", "http"]
CALL_TIMEOUT = 300.0
STARTUP_TIMEOUT = 30.0
_KNOWN = {"type", "command", "args", "env", "cwd", "url", "headers", "effects", "timeout", "startup_timeout"}
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class McpConfigError(NbagentError):
    """A server configuration nbagent cannot use; the message says which server and what to change."""


@dataclass(frozen=True)
class ServerConfig:
    """One server: how to reach it, and nbagent's settings for it."""

    name: str
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    effects: Mapping[str, Effect] = field(default_factory=dict)
    timeout: float = CALL_TIMEOUT
    startup_timeout: float = STARTUP_TIMEOUT
    origin: str = "user"  # "user" (the user's own settings) or the project file it came from
    trusted: bool = True  # its annotations count: the user's own settings; a project's .mcp.json is not (docs/mcp.md)
    secrets: tuple[str, ...] = field(default=(), repr=False)  # the environment's values in env or headers, redacted once started

    def key(self) -> str:
        """A fingerprint of everything that reaches the server (one running server per key and process)."""
        shape = [
            self.name,
            self.transport,
            self.command,
            self.args,
            sorted(self.env.items()),
            self.cwd,
            self.url,
            sorted(self.headers.items()),
        ]
        return hashlib.sha256(json.dumps(shape, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def describe(self) -> str:
        """What runs or is reached, for people (env and header values never shown: they often hold keys)."""
        if self.transport == "http":
            names = f" (headers: {', '.join(sorted(self.headers))})" if self.headers else ""
            return f"{self.url} over HTTP{names}"
        names = f" (env: {', '.join(sorted(self.env))})" if self.env else ""
        return " ".join([self.command, *self.args]) + names


def parse(
    servers: Mapping[str, Any] | None, *, origin: str = "user", environ: Mapping[str, str] | None = None, trusted: bool = True
) -> list[ServerConfig]:
    """The servers of a configuration (Claude's format); McpConfigError for one nbagent cannot use (``trusted``: its annotations count)."""
    if not servers:
        return []
    if not isinstance(servers, Mapping):
        raise McpConfigError(f"MCP servers are a mapping of name to settings, not {type(servers).__name__} ({origin}).")
    if set(servers) == {"mcpServers"}:
        servers = servers["mcpServers"] or {}
        if not isinstance(servers, Mapping):
            raise McpConfigError(f"'mcpServers' must map server names to their settings ({origin}).")
    env = os.environ if environ is None else environ
    return [dataclasses.replace(_server(str(name), value, origin, env), trusted=trusted) for name, value in servers.items()]


def _server(name: str, value: Any, origin: str, environ: Mapping[str, str]) -> ServerConfig:
    where = f"MCP server {name!r} ({origin})"
    if not name.strip():
        raise McpConfigError(f"An MCP server has an empty name ({origin}); give it a name such as 'warehouse'.")
    if not isinstance(value, Mapping):
        raise McpConfigError(f"{where}: its settings must be a mapping such as {{'command': ..., 'args': [...]}}.")
    unknown = sorted(set(value) - _KNOWN)
    if unknown:
        raise McpConfigError(f"{where}: unknown keys {unknown}; known: {', '.join(sorted(_KNOWN))}.")
    kind = value.get("type") or ("http" if "url" in value else "stdio")
    if kind in ("streamable-http", "streamable_http"):
        kind = "http"
    if kind not in ("stdio", "http"):
        raise McpConfigError(f"{where}: type {kind!r} is not supported; use 'stdio' (a command) or 'http' (streamable HTTP).")

    secrets: list[str] = []

    def text(key: str, item: Any, taken: list[str] | None = None) -> str:
        if not isinstance(item, str):
            raise McpConfigError(f"{where}: {key} must be text, not {type(item).__name__}.")
        return _expand(item, environ, where, taken)

    def table(key: str) -> dict[str, str]:
        raw = value.get(key) or {}
        if not isinstance(raw, Mapping):
            raise McpConfigError(f"{where}: {key} must map names to text values.")
        return {str(k): text(f"{key}[{k!r}]", v, secrets) for k, v in raw.items()}

    effects = value.get("effects") or {}
    if not isinstance(effects, Mapping) or any(e not in EFFECTS for e in effects.values()):
        raise McpConfigError(f"{where}: effects must map tool names to one of {', '.join(EFFECTS)}.")
    timeouts = {}
    for key, default in (("timeout", CALL_TIMEOUT), ("startup_timeout", STARTUP_TIMEOUT)):
        seconds = value.get(key, default)
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
            raise McpConfigError(f"{where}: {key} is in seconds and must be more than 0, not {seconds!r}.")
        timeouts[key] = float(seconds)
    common: dict[str, Any] = {"name": name, "origin": origin, "effects": dict(effects), **timeouts}
    if kind == "http":
        url = text("url", value.get("url", ""))
        if not url.startswith(("http://", "https://")):
            raise McpConfigError(f"{where}: url must start with http:// or https://, not {url!r}.")
        headers = table("headers")
        return ServerConfig(transport="http", url=url, headers=headers, secrets=tuple(secrets), **common)
    command = text("command", value.get("command", ""))
    if not command.strip():
        raise McpConfigError(f"{where}: a stdio server needs a command (or give 'type': 'http' and a url).")
    args = value.get("args") or []
    if not isinstance(args, list):
        raise McpConfigError(f"{where}: args must be a list of text.")
    cwd = value.get("cwd")
    env = table("env")
    return ServerConfig(
        transport="stdio",
        command=command,
        args=tuple(text("args", a) for a in args),
        env=env,
        cwd=text("cwd", cwd) if cwd is not None else None,
        secrets=tuple(secrets),
        **common,
    )


def _expand(value: str, environ: Mapping[str, str], where: str, taken: list[str] | None = None) -> str:
    """``${VAR}`` and ``${VAR:-default}`` replaced from the environment (``taken`` gets each value taken from it); a missing variable without a default is an error."""

    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in environ:
            if taken is not None:
                taken.append(environ[name])
            return environ[name]
        if default is not None:
            return default
        raise McpConfigError(f"{where}: ${{{name}}} is not set in the environment; set it, or write ${{{name}:-default}}.")

    return _VARIABLE.sub(one, value)
