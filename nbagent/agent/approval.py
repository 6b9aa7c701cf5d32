"""Approval: who says yes before a call runs that needs a person's word.

A call needs approval for one reason (the loop's :func:`~nbagent.state.decide.decide` picks it):

* ``untrusted``: it was recorded in a log, or a part of a log, this user did not sign;
* ``unknown_outcome``: it was interrupted mid-way and repeating it could do its effect twice;
* ``irreversible``: the tool is marked irreversible;
* ``outside_workspace``: a file tool's path leads outside the workspace.

``"auto"`` approves only the last two, for the user's own new calls; ``"deny"`` approves
nothing; ``"ask"`` asks a person; a callable gets the reason and its answer is the user's.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..terminal import safe

Reason = Literal["untrusted", "unknown_outcome", "irreversible", "outside_workspace"]
REASONS: tuple[str, ...] = ("untrusted", "unknown_outcome", "irreversible", "outside_workspace")
APPROVAL_MODES: tuple[str, ...] = ("ask", "auto", "deny")
# What "auto" may approve: the user's own new calls.  A foreign call or a repeat of unknown outcome
# needs a person's explicit answer (or `nbagent trust` for a foreign session).
AUTO_APPROVES: frozenset[str] = frozenset({"irreversible", "outside_workspace"})

_QUESTIONS = {
    "untrusted": "This session's log was not written by you (it is unsigned or signed by another user's key, e.g. it "
    "came with a cloned or downloaded notebook), and it asks to run {call} [effect: {effect}] with the arguments below. Run it?",
    "unknown_outcome": "The tool call {call} was interrupted while running; it may or may not have taken effect. "
    "Run it again with the arguments below?",
    "irreversible": "The agent wants to run {call}, which is marked irreversible, with the arguments below. Allow it?",
    "outside_workspace": "The agent wants {call} to use a path outside the workspace (arguments below). Allow it?",
}


@dataclass(frozen=True)
class ApprovalRequest:
    """One question to the user about one tool call."""

    tool_use_id: str
    tool_name: str
    input: dict[str, Any]
    effect: str
    reason: Reason
    claims: str = ""  # what the tool's provider says of it (an MCP server's own annotations), shown with the question

    def describe(self) -> str:
        """The question, one sentence (and the tool provider's claims, if any); the call's full arguments are :meth:`arguments`."""
        question = _QUESTIONS[self.reason].format(call=self.tool_name, effect=self.effect)
        return f"{question} {self.claims}" if self.claims else question

    def arguments(self) -> str:
        """Every argument of the call, in full, as indented JSON (never shortened: the user must see what will run)."""
        return json.dumps(self.input, ensure_ascii=False, indent=2, sort_keys=True)


@dataclass(frozen=True)
class Decision:
    """The answer, who gave it, and a note for the model when it is no."""

    approved: bool
    by: str
    note: str = ""


class ApprovalPolicy(Protocol):
    """The approval seam: answers approval requests (a callable returning bool or a Decision)."""

    def __call__(self, request: ApprovalRequest) -> bool | Decision: ...


Ask = Callable[[ApprovalRequest], Decision]


def console(request: ApprovalRequest) -> Decision:
    """Ask on the terminal: the question, then every argument (control characters shown escaped)."""
    print(safe(request.describe()), file=sys.stderr)
    print(safe(request.arguments()), file=sys.stderr)
    try:
        answer = input("[y/N] ").strip().lower()
    except EOFError:
        answer = ""
    if answer in ("y", "yes"):
        return Decision(True, "console")
    return Decision(False, "console", "The user declined this tool call.")


def nobody(request: ApprovalRequest) -> Decision:
    """The answer where no person can be asked."""
    return Decision(False, "nobody", "Approval was needed but nobody can answer here (no interactive terminal), so this call was not run.")


def auto(person: Ask | None = None) -> Ask:
    """Approve the user's own new calls; ask ``person`` (or decline) for a foreign call or a repeat of unknown outcome."""

    def answer(request: ApprovalRequest) -> Decision:
        if request.reason in AUTO_APPROVES:
            return Decision(True, "auto")
        if person is not None:
            return person(request)
        why = (
            "it was recorded in a log you did not write"
            if request.reason == "untrusted"
            else ("it was interrupted mid-way, so running it again could repeat its effect")
        )
        return Decision(
            False,
            "auto",
            f"Approval is 'auto', which approves only the user's own new calls; this call was not run because {why}. "
            "It needs an explicit approval (a click in the notebook, or `nbagent trust` for the session).",
        )

    return answer


def deny(request: ApprovalRequest) -> Decision:
    """Approve nothing."""
    return Decision(False, "deny", "Approval is set to 'deny', so this call was not run.")


def resolve(policy: str | ApprovalPolicy) -> Ask:
    """Turn ``"ask" | "auto" | "deny"`` or a callable into a function returning a :class:`Decision`."""
    if callable(policy):

        def ask_callable(request: ApprovalRequest) -> Decision:
            answer = policy(request)
            if isinstance(answer, Decision):
                return answer
            return Decision(bool(answer), "callback", "" if answer else "The user declined this tool call.")

        return ask_callable
    person = console if sys.stdin is not None and sys.stdin.isatty() else nobody
    if policy == "auto":
        return auto(person if person is console else None)
    if policy == "deny":
        return deny
    if policy == "ask":
        return person
    raise ValueError(f"approval must be one of {', '.join(APPROVAL_MODES)} or a callable; got {policy!r}")
