"""The view of an ``%agent`` cell, named once: what the live panel, the static panel and terminal IPython's text all do.

The magics build one per cell (:func:`.build.view`), feed it the session's events, and ask in it for approval.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..agent.approval import Asker
from ..record import events as ev
from ..render.parts import Start


class View(Asker, Protocol):
    """A session subscriber shown in a cell: it begins where the session stood, asks for approval where a person can answer, and finishes."""

    shows_questions: bool  # a panel whose buttons a person answers (a project's .mcp.json is asked about only there)

    @property
    def events(self) -> Sequence[ev.Event]:
        """The events shown so far (the cells feature finds the cell's turn among them; a terminal keeps none)."""
        ...

    def __call__(self, event: ev.Event) -> None:
        """Show one session event."""
        ...

    def begin(self, start: Start) -> None:
        """Start from where the session stands: the calls still open, and what comes before the first event."""
        ...

    def recorded(self, then: str) -> None:
        """Say that the events so far come from the log (when they were recorded), and ``then`` what."""
        ...

    def finish(self, status: str | None = None) -> None:
        """End the view (once): its final status, and what stays in the cell's output."""
        ...
