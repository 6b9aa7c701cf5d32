"""Sessions this user did not write (a cloned or downloaded notebook's): the warning, and the calls a restore must not run."""

from __future__ import annotations

from ..agent.session import Session
from ..record import events as ev

__all__ = ["calls_not_signed_by_user", "untrusted_warning"]


def untrusted_warning(session: Session) -> str:
    """The line shown when a notebook opens a session log this user did not write."""
    return (
        f"nbagent: WARNING: the session log {session.path.name} was not written by you ({session.trust.describe()}); "
        "it may come from a cloned or downloaded notebook. Its recorded tool calls will not run without your "
        "approval, and its recorded python code is not re-run to restore kernel state."
    )


def calls_not_signed_by_user(session: Session) -> set[str]:
    """Tool-use ids requested by assistant messages in lines this user did not sign."""
    report = session.trust
    if report.trusted:
        return set()
    return {
        str(block.get("id"))
        for event in session.events(since=report.trusted_upto)
        if event["type"] == ev.ASSISTANT_MSG
        for block in event.get("content") or []
        if isinstance(block, dict) and block.get("type") == "tool_use"
    }
