"""Approval, asked: a run's policy as a function, and asking on a terminal.

The words and the rule (the reasons, the modes, who answers where) are pure and live in
:mod:`nbagent.state.approval_rule`; this module does the asking.  A front end that asks in its own way
(the notebook's panel) is an :class:`Asker`; the terminal's is :data:`TERMINAL`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Protocol, TextIO

from ..state.approval_rule import APPROVAL_MODES as APPROVAL_MODES  # re-exported: the words are asked for here too
from ..state.approval_rule import AUTO_APPROVES as AUTO_APPROVES
from ..state.approval_rule import DECLINED, NOBODY, ApprovalRequest, Decision, Here, who_answers, who_can_answer
from ..state.approval_rule import REASONS as REASONS
from ..state.approval_rule import Reason as Reason
from ..terminal import hidden_words, visible


class ApprovalPolicy(Protocol):
    """The approval seam: answers approval requests (a callable returning bool or a Decision)."""

    def __call__(self, request: ApprovalRequest, /) -> bool | Decision: ...


Ask = Callable[[ApprovalRequest], Decision]


class Asker(Protocol):
    """Where a person may be asked about a call: what can be told there of who could answer, and the asking."""

    def here(self) -> Here:
        """What can be told now of who could answer (see :func:`~nbagent.state.approval_rule.who_can_answer`)."""
        ...

    def ask(self, request: ApprovalRequest) -> Decision:
        """Ask whoever can answer here; where nobody can, decline and say so."""
        ...


def console(request: ApprovalRequest, *, out: TextIO | None = None, prompt: str = "[y/N] ") -> Decision:
    """Ask on stdin: the question, then every argument, on ``out`` (stderr by default).

    Control, invisible and direction-changing characters are shown escaped, and a line names them.
    """
    stream = out if out is not None else sys.stderr
    arguments = request.arguments()
    print(visible(request.describe()), file=stream, flush=True)
    if hidden := hidden_words(arguments):
        print(f"Warning: {hidden}", file=stream, flush=True)
    print(visible(arguments), file=stream, flush=True)
    try:
        answer = input(prompt).strip().lower()
    except EOFError:
        answer = ""
    if answer in ("y", "yes"):
        return Decision(True, "console")
    return Decision(False, "console", DECLINED)


def nobody(request: ApprovalRequest, why: str = "nobody can answer here (no interactive terminal)") -> Decision:
    """The answer where no person can be asked (``why``: what the note says of it)."""
    return Decision(False, "nobody", NOBODY.format(why=why))


class Terminal:
    """The terminal as an :class:`Asker`: the console where stdin is interactive, else nobody."""

    def here(self) -> Here:
        """Whether stdin is an interactive terminal."""
        return Here(tty=sys.stdin is not None and sys.stdin.isatty())

    def ask(self, request: ApprovalRequest) -> Decision:
        """Ask on the console, or decline where nobody can answer."""
        return console(request) if who_can_answer(self.here()) == "console" else nobody(request)


TERMINAL = Terminal()


def resolve(policy: str | ApprovalPolicy, asker: Asker = TERMINAL) -> Ask:
    """Turn ``"ask" | "auto" | "deny"`` or a callable into a function returning a :class:`Decision`.

    A mode answers by itself where :func:`~nbagent.state.approval_rule.who_answers` says so, else ``asker`` asks.
    """
    if callable(policy):

        def ask_callable(request: ApprovalRequest) -> Decision:
            answer = policy(request)
            if isinstance(answer, Decision):
                return answer
            return Decision(bool(answer), "callback", "" if answer else DECLINED)

        return ask_callable
    if policy not in APPROVAL_MODES:
        raise ValueError(f"approval must be one of {', '.join(APPROVAL_MODES)} or a callable; got {policy!r}")

    def ask_mode(request: ApprovalRequest) -> Decision:
        found = who_answers(policy, request.reason, asker.here(), asks_always=request.asks_always)
        return found if isinstance(found, Decision) else asker.ask(request)

    return ask_mode
