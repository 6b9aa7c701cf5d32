"""The view of an ``%agent`` cell in terminal IPython: the terminal transcript, streamed, and approval asked at the prompt."""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import TextIO

from ..agent.approval import TERMINAL
from ..record import events as ev
from ..render.text import VIEW_LIMIT, Printer
from ..state.approval_rule import ApprovalRequest, Decision, Here


class TextView(Printer):
    """The terminal transcript (see :mod:`nbagent.render.text`) as a subscriber for terminal IPython: streams the answer, no times.

    Everything is written through :func:`nbagent.terminal.wrap`: control characters, C1 controls and bidi
    overrides from the session (model, tools, log) are shown escaped, never acted on by the terminal.
    """

    shows_questions = False

    def __init__(self, stream: TextIO | None = None, *, result_limit: int = VIEW_LIMIT) -> None:
        super().__init__(stream if stream is not None else sys.stdout, result_limit=result_limit, stamps=False)
        self._lock = threading.Lock()

    @property
    def events(self) -> Sequence[ev.Event]:
        """None kept: what was written stays in the terminal (and no cells are offered there)."""
        return ()

    def __call__(self, event: ev.Event) -> None:
        """Print one session event (thread-safe)."""
        with self._lock:
            super().__call__(event)

    def recorded(self, then: str) -> None:
        """Nothing to say: a terminal shows no header."""

    def finish(self, status: str | None = None) -> None:
        """End a half-written line and say which notes wait for the next request (the status is in the transcript already)."""
        super().finish()

    def here(self) -> Here:
        """The terminal's: whether stdin is interactive."""
        return TERMINAL.here()

    def ask(self, request: ApprovalRequest) -> Decision:
        """Ask at the prompt, or decline where nobody can answer (as the terminal does)."""
        return TERMINAL.ask(request)
