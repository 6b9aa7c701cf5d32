"""Notes to the model: what goes before a request besides its own content, one rule for the fold and for views.

A note event's ``to_model`` text waits for the next request; an interruption the model never answered puts
:data:`INTERRUPTED_NOTE` first. The fold (nbagent/state/fold.py) applies this to build the request; :class:`Asides`
follows the same rule from events alone, so a view shows each request's notes as they were sent. Table:
tests/state/test_fold.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..record import events as ev

if TYPE_CHECKING:
    from .fold import State

# Put before a request that follows an interruption the model never answered (see interruption_note).
INTERRUPTED_NOTE = "[nbagent note: the previous request was interrupted before it was answered.]"


def interruption_note(awaiting_reply: bool, event: Mapping[str, Any]) -> bool:
    """Whether an ``interrupted`` event puts the interruption note before the next request.

    It does when the model had not replied to the user's last message (a request or tool results) when the
    interrupt came, so a new request would otherwise join that message silently.  Interrupted while tools
    ran, the model did reply; the calls it made are settled with results that say so.  An event upgraded
    from v2 (``mark: false``) never does: its next request was sent without the note.
    """
    return awaiting_reply and event.get("mark", True) is not False


def request_notes(pending: Sequence[str], unanswered_interrupt: bool) -> list[str]:
    """The notes a request gets before its own content, in order: the interruption note, then the notes to the model."""
    return ([INTERRUPTED_NOTE] if unanswered_interrupt else []) + list(pending)


def to_model(event: Mapping[str, Any]) -> str | None:
    """What a note event says to the model (None for a note only people read)."""
    text = event.get("to_model")
    return text if isinstance(text, str) and text else None


def awaiting_reply(state: State) -> bool:
    """Whether the model has not yet replied to the user's last message (results held for an earlier call count: see _tool_result)."""
    return bool(state.messages) and (state.messages[-1]["role"] == "user" or bool(state.held))


@dataclass
class Asides:
    """What the fold will put before the next request, followed from events alone (no messages): for views."""

    notes: list[str] = field(default_factory=list)
    awaiting_reply: bool = False
    unanswered_interrupt: bool = False

    @classmethod
    def of_state(cls, state: State) -> Asides:
        """Where ``state`` stands (a view that starts mid-session, e.g. a cell's panel)."""
        return cls(list(state.pending_notes), awaiting_reply(state), state.unanswered_interrupt)

    def see(self, event: Mapping[str, Any]) -> list[str]:
        """Follow ``event``; for a request, the notes the fold put before it, else []."""
        kind = event.get("type")
        if kind == ev.USER_MSG:
            notes = request_notes(self.notes, self.unanswered_interrupt)
            self.notes, self.awaiting_reply, self.unanswered_interrupt = [], True, False
            return notes
        if kind == ev.NOTE and to_model(event) is not None:
            self.notes.append(str(to_model(event)))
        elif kind == ev.TOOL_RESULT:
            self.awaiting_reply = True
        elif kind == ev.ASSISTANT_MSG:
            self.awaiting_reply = self.unanswered_interrupt = False
        elif kind == ev.INTERRUPTED:
            self.unanswered_interrupt = self.unanswered_interrupt or interruption_note(self.awaiting_reply, event)
        return []
