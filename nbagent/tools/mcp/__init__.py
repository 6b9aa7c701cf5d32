"""MCP servers as tools (docs/mcp.md): configuration, trust of a project's .mcp.json, the running servers, the tool adapter.

Nothing here imports the ``mcp`` SDK until a server is started (``pip install 'nbagent[mcp]'``).

May import: the rest of ``tools`` and the floors below it.
"""

from __future__ import annotations

from .adapter import McpServers, McpTool
from .config import McpConfigError, ServerConfig, parse
from .manager import CallFailed, Manager, McpUnavailable

__all__ = ["CallFailed", "Manager", "McpConfigError", "McpServers", "McpTool", "McpUnavailable", "ServerConfig", "parse"]
