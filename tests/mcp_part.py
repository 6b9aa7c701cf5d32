"""The mcp SDK the MCP tests need: skipped with one line where it is missing, a failure under CI=true (CI installs it)."""

from __future__ import annotations

import importlib.util
import os

import pytest

REASON = "needs the mcp SDK: pip install -e '.[test]' (or 'nbagent[mcp]')"


def require() -> None:
    """Skip the calling test module where ``mcp`` is not installed; fail under CI=true."""
    if importlib.util.find_spec("mcp") is not None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true, so the MCP tests may not be skipped: {REASON}", pytrace=False)
    pytest.skip(REASON, allow_module_level=True)
