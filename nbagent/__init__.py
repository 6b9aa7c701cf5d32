"""nbagent: a Claude agent for Jupyter whose session is a durable event log beside the notebook."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__ as __version__  # "as": public here, as it always was (not in __all__)
from .agent.approval import ApprovalPolicy, ApprovalRequest, Decision
from .agent.session import Session, Subscriber
from .errors import (
    Interrupted,
    LogCorruptError,
    LogError,
    LogLockedError,
    LogVersionError,
    LogWriteError,
    ModelError,
    NbagentError,
    NotALogError,
    RefusedRequestError,
)
from .record.log_reader import follow, read_events
from .state.budget import BudgetError, BudgetReached
from .state.context import ContextSettings
from .state.fold import State

if TYPE_CHECKING:
    from .agent.loop import Loop, run
    from .model.claude import AnthropicModel, DemoModel, Model, ModelRequest
    from .tools.decorator import Tool, tool

# These need the anthropic SDK, whose import takes about a second; they are loaded on first
# use so that `nbagent sessions` and other log readers start fast.
_NEEDS_SDK = {
    "Loop": "agent.loop",
    "run": "agent.loop",
    "AnthropicModel": "model.claude",
    "DemoModel": "model.claude",
    "Model": "model.claude",
    "ModelRequest": "model.claude",
    "Tool": "tools.decorator",
    "tool": "tools.decorator",
}


__all__ = [
    "AnthropicModel",
    "Loop",
    "ApprovalPolicy",
    "ApprovalRequest",
    "BudgetError",
    "BudgetReached",
    "ContextSettings",
    "Decision",
    "DemoModel",
    "Interrupted",
    "LogCorruptError",
    "LogError",
    "LogLockedError",
    "LogVersionError",
    "LogWriteError",
    "Model",
    "ModelError",
    "RefusedRequestError",
    "ModelRequest",
    "NbagentError",
    "NotALogError",
    "Session",
    "State",
    "Subscriber",
    "Tool",
    "follow",
    "read_events",
    "run",
    "tool",
]


def __getattr__(name: str) -> Any:
    """Load the SDK-backed names, and the engine submodules, on first use."""
    if name in _NEEDS_SDK:
        value = getattr(importlib.import_module(f".{_NEEDS_SDK[name]}", __name__), name)
        globals()[name] = value
        return value
    if name in ("agent", "model", "tools"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext nbagent``: register the notebook front end (imports IPython only now)."""
    from .notebook.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext nbagent``."""
    from .notebook.magics import unload_ipython_extension as unload

    unload(ipython)
