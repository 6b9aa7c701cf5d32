"""Approval's words and its one rule: why a call needs a person's word, the modes, and who answers where (pure).

A call needs approval for one reason (:func:`~nbagent.state.decide.decide` picks it):

* ``untrusted``: it was recorded in a log, or a part of a log, this user did not sign;
* ``unknown_outcome``: it was interrupted mid-way and repeating it could do its effect twice;
* ``irreversible``: the tool is marked irreversible;
* ``outside_workspace``: a file tool's path leads outside the workspace.

``"auto"`` approves only the last two, for the user's own new calls, and never a call that rewrites what the user
wrote (a proposed cell edit: ``asks_always``), which is asked under "ask" and "auto" alike; ``"deny"`` approves
nothing; ``"ask"`` asks a person (:func:`who_answers` says who can answer where); a callable gets the reason and its
answer is the user's.
Asking is not done here: :mod:`nbagent.agent.approval` asks on a terminal, the notebook's panel in a cell.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

Reason = Literal["untrusted", "unknown_outcome", "irreversible", "outside_workspace"]
REASONS: tuple[str, ...] = ("untrusted", "unknown_outcome", "irreversible", "outside_workspace")
APPROVAL_MODES: tuple[str, ...] = ("ask", "auto", "deny")
# What "auto" may approve: the user's own new calls.  A foreign call or a repeat of unknown outcome
# needs a person's explicit answer (or `nbagent trust` for a foreign session).
AUTO_APPROVES: frozenset[str] = frozenset({"irreversible", "outside_workspace"})

DECLINED = "The user declined this tool call."  # the note of a person's "no": it says nothing more
NOBODY = "Approval was needed but {why}, so this call was not run."  # the note where nobody can answer
DENIED = "Approval is set to 'deny', so this call was not run."
AUTO_DECLINED = (
    "Approval is 'auto', which approves only the user's own new calls; this call was not run because {why}. "
    "It needs an explicit approval (a click in the notebook, or `nbagent trust` for the session)."
)
_AUTO_WHY = {
    "untrusted": "it was recorded in a log you did not write",
    "unknown_outcome": "it was interrupted mid-way, so running it again could repeat its effect",
}
ASKS_ALWAYS_WHY = "it rewrites what you wrote (a cell of your notebook), which only a person may approve"

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
    claims: str = ""  # what the tool's provider says of it (an MCP server's own annotations): shown as the server's words
    asks_always: bool = False  # the call rewrites what the user wrote (a cell edit): "auto" does not answer it
    about: str = ""  # nbagent's own words on the question (why a server's claims do not count), shown as nbagent's

    def describe(self) -> str:
        """The question, one sentence, then the tool provider's claims and nbagent's words on them, if any; the arguments are :meth:`arguments`."""
        question = _QUESTIONS[self.reason].format(call=self.tool_name, effect=self.effect)
        claims = f" The server says: {self.claims}" if self.claims else ""
        return question + claims + (f" {self.about}" if self.about else "")

    def arguments(self) -> str:
        """Every argument of the call, in full, as indented JSON (never shortened: the user must see what will run)."""
        return json.dumps(self.input, ensure_ascii=False, indent=2, sort_keys=True)


@dataclass(frozen=True)
class Decision:
    """The answer, who gave it, and a note for the model when it is no."""

    approved: bool
    by: str
    note: str = ""


Answerer = Literal["panel", "console", "nobody"]  # who can be asked: a notebook panel, a prompt on stdin, nobody


@dataclass(frozen=True)
class Here:
    """What can be told, where a question comes up, of who could answer it."""

    tty: bool = False  # stdin is an interactive terminal
    kernel: bool = False  # a Jupyter kernel runs the request, and a panel shows the question
    frontend_stdin: bool = False  # ... sent by a front end a person answers in (nbclient and papermill send allow_stdin=False)


def who_can_answer(here: Here) -> Answerer:
    """Who can be asked ``here``: the panel in a kernel whose front end can answer, the console on a terminal, else nobody."""
    if here.kernel:
        return "panel" if here.frontend_stdin else "nobody"
    return "console" if here.tty else "nobody"


def who_answers(mode: str, reason: Reason, here: Here, *, asks_always: bool = False) -> Decision | Answerer:
    """The approval mode's own answer for a call that needs approval for ``reason``, or who must be asked ``here``.

    The one rule for the notebook, the terminal and headless runs (table: tests/state/test_approval_rule.py): "deny"
    says no; "auto" says yes to the user's own new calls, unless the call rewrites what the user wrote
    (``asks_always``: a proposed cell edit), and where nobody can answer, no to the rest; otherwise the person
    :func:`who_can_answer` names is asked ("nobody" declines, saying so).
    """
    if mode not in APPROVAL_MODES:
        raise ValueError(f"approval must be one of {', '.join(APPROVAL_MODES)} or a callable; got {mode!r}")
    if mode == "deny":
        return Decision(False, "deny", DENIED)
    if mode == "auto" and reason in AUTO_APPROVES and not asks_always:
        return Decision(True, "auto")
    person = who_can_answer(here)
    if mode == "auto" and person == "nobody":
        why = ASKS_ALWAYS_WHY if asks_always and reason in AUTO_APPROVES else _AUTO_WHY.get(reason, "it needs a person's answer")
        return Decision(False, "auto", AUTO_DECLINED.format(why=why))
    return person
