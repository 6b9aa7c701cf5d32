"""MCP tools as nbagent tools: each listed tool a :class:`McpTool`, the servers of a run a :class:`McpServers` tool source.

The loop treats an MCP tool like any other (tool_started before the call goes out, the result logged before the model
sees it, the unknown-outcome rules); the tool carries where its calls go (``origin``, logged with tool_started) and the
server's claims (shown in the approval question).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from ...state.image_limits import IMAGE_TYPES
from ..clipping import clipped
from ..decorator import Tool, ToolContent
from . import effects as rules
from .config import ServerConfig, parse
from .manager import CallFailed, Connection, Manager

UNKNOWN = "Its outcome is unknown (it may have run on the server); it was not repeated."
DESCRIPTION_LIMIT = 8_000  # characters of a tool's description sent in every request (the rest cut, with a note)
SCHEMA_LIMIT = 32_000  # characters of a tool's input schema as JSON; a larger one is cut to its argument names


def bounded_schema(schema: Any) -> tuple[dict[str, Any], str]:
    """The input schema sent (at most SCHEMA_LIMIT characters of JSON), and what was cut ('' if nothing)."""
    if not isinstance(schema, dict) or not schema:
        return {"type": "object"}, ""
    size = len(json.dumps(schema, ensure_ascii=False))
    if size <= SCHEMA_LIMIT:
        return schema, ""
    found, listed = schema.get("properties"), schema.get("required")
    properties: dict[str, Any] = found if isinstance(found, dict) else {}
    required = [name for name in listed if isinstance(name, str) and name in properties] if isinstance(listed, list) else []
    names: dict[str, Any] = {"type": "object", "properties": {str(name): {} for name in properties}, "required": required}
    if len(json.dumps(names, ensure_ascii=False)) > SCHEMA_LIMIT:
        return {"type": "object"}, f"its input schema ({size:,} characters) was left out"
    return names, f"its input schema ({size:,} characters) was cut to its argument names"


def bounded_description(text: str) -> tuple[str, str]:
    """The description sent (at most about DESCRIPTION_LIMIT characters), and what was cut ('' if nothing)."""
    if len(text) <= DESCRIPTION_LIMIT:
        return text, ""
    return clipped(text, DESCRIPTION_LIMIT), f"its description ({len(text):,} characters) was cut to {DESCRIPTION_LIMIT:,}"


def _dump(value: Any) -> dict[str, Any]:
    """An SDK model as the wire has it (camelCase keys, no unset fields); a plain mapping as it is."""
    if hasattr(value, "model_dump"):
        return dict(value.model_dump(by_alias=True, exclude_none=True, mode="json"))
    return dict(value or {})


def content(result: Any) -> tuple[ToolContent, bool]:
    """A CallToolResult as tool_result content: text, images, embedded text resources, and structured content if no text has it."""
    data = _dump(result)
    blocks: list[dict[str, Any]] = []
    for item in data.get("content") or []:
        kind = item.get("type")
        if kind == "text":
            blocks.append({"type": "text", "text": str(item.get("text", ""))})
        elif kind == "image" and item.get("mimeType") in IMAGE_TYPES:
            blocks.append({"type": "image", "source": {"type": "base64", "media_type": item["mimeType"], "data": item.get("data", "")}})
        elif kind == "resource" and isinstance(item.get("resource"), dict) and "text" in item["resource"]:
            resource = item["resource"]
            blocks.append({"type": "text", "text": f"[resource {resource.get('uri', '')}]\n{resource['text']}"})
        else:
            what = item.get("mimeType") or (item.get("resource") or {}).get("mimeType") or ""
            link = f" {item['uri']}" if kind == "resource_link" and item.get("uri") else ""
            blocks.append(
                {"type": "text", "text": f"[a {kind} block{f' ({what})' if what else ''}{link} the model cannot read was left out]"}
            )
    structured = data.get("structuredContent")
    if structured is not None:
        encoded = json.dumps(structured, ensure_ascii=False, sort_keys=True)
        texts = {_canonical(b["text"]) for b in blocks if b["type"] == "text"}
        if _canonical(encoded) not in texts and not (len(structured) == 1 and "result" in structured and texts):
            blocks.append({"type": "text", "text": f"structured content: {encoded}"})
    is_error = bool(data.get("isError"))
    if all(b["type"] == "text" for b in blocks):
        return "\n".join(b["text"] for b in blocks), is_error
    return blocks, is_error


def _canonical(text: str) -> str:
    try:
        return json.dumps(json.loads(text), sort_keys=True, ensure_ascii=False)
    except ValueError:
        return text


class McpTool(Tool):
    """One tool of one MCP server, offered to the model as ``mcp__<server>__<tool>``."""

    def __init__(self, server: ServerConfig, listed: Any, connection: Connection, notes: list[str]) -> None:
        data = _dump(listed)
        annotations = data.get("annotations") or {}
        override = server.effects.get(data["name"]) if server.trusted else None  # a project file's own effects are its claims
        self.server, self.tool_name, self.connection, self._notes = server.name, str(data["name"]), connection, notes
        self.name = rules.tool_name(server.name, self.tool_name)
        self.effect = rules.effect(annotations, override, trusted=server.trusted)
        self.guard = None
        self.takes_key = False
        self.claims = rules.claims(server.name, self.tool_name, annotations)  # the server's words
        self.about = rules.verdict(override, trusted=server.trusted)  # nbagent's: what those words count for
        self.origin = {"server": server.name, "tool": self.tool_name}
        described = data.get("description") or annotations.get("title") or f"Tool {self.tool_name} of MCP server {server.name}."
        description, cut = bounded_description(str(described))
        schema, cut_schema = bounded_schema(data.get("inputSchema"))
        self.cut = [c for c in (cut, cut_schema) if c]  # what was cut of what the server sent (McpServers says it once)
        if cut_schema:
            description += f"\n[nbagent: {cut_schema}; the server checks the arguments.]"
        self.definition = {"name": self.name, "description": description, "input_schema": schema}
        self.func = self.__call__

    def to_dict(self) -> dict[str, Any]:
        """The tool definition sent to the Messages API (the server's own input schema)."""
        return dict(self.definition)

    def __call__(self, *args: Any, **arguments: Any) -> Any:
        """Call the tool by hand: its content, or an error raised."""
        value, is_error = self.invoke(arguments, "")
        if is_error:
            raise RuntimeError(value)
        return value

    def invoke(self, arguments: dict[str, Any], key: str) -> tuple[ToolContent, bool]:
        """Call the server; a failure is an error result saying what happened (and a note for the panel), never raised."""
        try:
            return content(self.connection.call(self.tool_name, dict(arguments)))
        except CallFailed as failed:
            text = f"{failed}." + (f" {UNKNOWN}" if failed.unknown else "")
            self._notes.append(f"MCP {self.server}/{self.tool_name}: {failed}")
            return text, True

    def __repr__(self) -> str:
        return f"<nbagent.McpTool {self.name} effect={self.effect}>"


class McpServers:
    """The MCP servers of a run, as a tool source: the loop reads :meth:`tools` before each request, :meth:`notes` to log."""

    def __init__(
        self, servers: Mapping[str, Any] | Iterable[ServerConfig], *, manager: Manager | None = None, skipped: Iterable[str] = ()
    ) -> None:
        self.configs = list(servers) if not isinstance(servers, Mapping) else parse(servers)
        self._manager = manager
        self._notes: list[str] = list(skipped)
        self._said: dict[str, str] = {}
        self._cut_said: set[str] = set()
        self._lock = threading.Lock()

    @property
    def manager(self) -> Manager:
        """The process's manager (servers are shared by every run of a kernel)."""
        if self._manager is None:
            self._manager = Manager.shared()
        return self._manager

    def connections(self) -> list[Connection]:
        """Each server's connection (nothing started)."""
        return [self.manager.connection(config) for config in self.configs]

    def tools(self) -> list[Tool]:
        """The tools of every server, starting those not running yet (at the same time; each bounded by its startup_timeout)."""
        if not self.configs:
            return []
        connections = self.connections()
        for connection in connections:
            connection.ensure(wait=False)
        tools: list[Tool] = []
        for connection in connections:
            connection.ensure(wait=True)
            self._say(connection)
            for listed in list(connection.tools):
                tool = McpTool(connection.config, listed, connection, self._notes)
                self._say_cut(tool)
                tools.append(tool)
        return tools

    def _say_cut(self, tool: McpTool) -> None:
        """A one-line note, once, when a tool's description or schema was cut to fit."""
        said = (
            f"MCP server {tool.server!r}, tool {tool.tool_name!r}: {'; '.join(tool.cut)} (nbagent's limits for what every request carries)."
        )
        if tool.cut and said not in self._cut_said:
            self._cut_said.add(said)
            self._notes.append(said)

    def _say(self, connection: Connection) -> None:
        """A one-line note when a server's state changes to one the user should know of."""
        name, state = connection.config.name, connection.state
        said = f"{state}:{connection.starts}:{connection.error}"
        if self._said.get(name) == said:
            return
        self._said[name] = said
        if state == "failed":
            self._notes.append(
                f"MCP server {name!r} is not available: {connection.error}. Its tools are not offered "
                "(change its settings, or restart the kernel, to try again)."
            )
        elif state == "running" and connection.starts > 1:
            self._notes.append(f"MCP server {name!r} stopped ({connection.last_death}) and was restarted once.")

    def notes(self) -> list[str]:
        """The notes since the last call (a server that failed, a call that did), each once."""
        with self._lock:
            taken, self._notes[:] = list(self._notes), []
        return taken
