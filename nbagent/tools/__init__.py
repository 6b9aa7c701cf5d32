"""Tools: the ``@tool`` decorator (``decorator``), the built-in file and shell tools (``builtin``), clipping, images, MCP.

``nbagent.tools.tool``, ``Tool``, ``file_tools`` and ``shell`` are loaded on first use (the decorator builds schemas
with the SDK, whose import is slow; the built-in tools import the stores).

May import: ``stores``, ``state``, ``record`` and the leaves.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {"tool": "decorator", "Tool": "decorator", "file_tools": "builtin", "shell": "builtin", "default_tools": "builtin"}


def __getattr__(name: str) -> Any:
    """The decorator and the built-in tools, by the names users write (``nbagent.tools.file_tools(root=...)``)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
