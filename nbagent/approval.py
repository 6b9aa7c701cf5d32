"""Approval: who says yes before an irreversible tool runs, a call of unknown outcome is repeated, or a call from an untrusted log runs."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Reason = Literal["irreversible", "unknown_outcome", "untrusted"]
APPROVAL_MODES: tuple[str, ...] = ("ask", "auto", "deny")


@dataclass(frozen=True)
class ApprovalRequest:
    """One question to the user about one tool call."""

    tool_use_id: str
    tool_name: str
    input: dict[str, Any]
    effect: str
    reason: Reason

    def describe(self) -> str:
        """A one-paragraph question a person can answer."""
        arguments = json.dumps(self.input, ensure_ascii=False)
        if len(arguments) > 300:
            arguments = arguments[:300] + "…"
        if self.reason == "untrusted":
            return (
                f"This session's log was not written by you (it is unsigned or signed by another user's key, e.g. it "
                f"came with a cloned or downloaded notebook), and it asks to run {self.tool_name}({arguments}) "
                f"[effect: {self.effect}]. Run it?"
            )
        if self.reason == "unknown_outcome":
            return (
                f"The tool call {self.tool_name}({arguments}) was interrupted while running; it may or may not "
                "have taken effect. Run it again?"
            )
        return f"The agent wants to run {self.tool_name}({arguments}), which is marked irreversible. Allow it?"


@dataclass(frozen=True)
class Decision:
    """The answer, who gave it, and a note for the model when it is no."""

    approved: bool
    by: str
    note: str = ""


class ApprovalPolicy(Protocol):
    """The approval seam: answers approval requests (a callable returning bool or a Decision)."""

    def __call__(self, request: ApprovalRequest) -> bool | Decision: ...


def _console(request: ApprovalRequest) -> Decision:
    print(request.describe(), file=sys.stderr)
    try:
        answer = input("[y/N] ").strip().lower()
    except EOFError:
        answer = ""
    if answer in ("y", "yes"):
        return Decision(True, "console")
    return Decision(False, "console", "The user declined this tool call.")


def resolve(policy: str | ApprovalPolicy, *, interactive: bool | None = None) -> Callable[[ApprovalRequest], Decision]:
    """Turn ``"ask" | "auto" | "deny"`` or a callable into a function returning a :class:`Decision`."""
    if callable(policy):
        def ask_callable(request: ApprovalRequest) -> Decision:
            answer = policy(request)
            if isinstance(answer, Decision):
                return answer
            return Decision(bool(answer), "callback", "" if answer else "The user declined this tool call.")

        return ask_callable
    if policy == "auto":
        return lambda request: Decision(True, "auto")
    if policy == "deny":
        return lambda request: Decision(False, "deny", "Approval is set to 'deny', so this call was not run.")
    if policy == "ask":
        if interactive is None:
            interactive = sys.stdin is not None and sys.stdin.isatty()
        if interactive:
            return _console
        return lambda request: Decision(
            False,
            "nobody",
            "Approval is set to 'ask' but no person can answer here (no interactive terminal), "
            "so this call was not run.",
        )
    raise ValueError(f"approval must be one of {', '.join(APPROVAL_MODES)} or a callable; got {policy!r}")
