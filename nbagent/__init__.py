"""nbagent: a Claude agent for Jupyter whose session is a durable event log beside the notebook."""

from __future__ import annotations

from typing import Any

from .approval import ApprovalPolicy, ApprovalRequest, Decision
from .errors import (
    Interrupted,
    LogCorruptError,
    LogError,
    LogLockedError,
    LogVersionError,
    LogWriteError,
    ModelError,
    NbagentError,
)
from .fold import State
from .log import follow, read_events
from .loop import Loop, run
from .model import AnthropicModel, DemoModel, Model, ModelRequest
from .session import Session, Subscriber
from .tools import Tool, tool

__version__ = "0.1.0"

__all__ = [
    "AnthropicModel", "Loop", "ApprovalPolicy", "ApprovalRequest", "Decision", "DemoModel", "Interrupted",
    "LogCorruptError", "LogError", "LogLockedError", "LogVersionError", "LogWriteError", "Model", "ModelError",
    "ModelRequest", "NbagentError", "Session", "State", "Subscriber", "Tool", "follow", "read_events", "run", "tool",
]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext nbagent``: register the notebook front end (imports IPython only now)."""
    from .notebook.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext nbagent``."""
    from .notebook.magics import unload_ipython_extension as unload

    unload(ipython)
