"""The fold as the server's views follow a session, in bounded memory whatever the session's length.

A view's status line, header and listing labels read the fold's counters (status, open calls, usage,
spend, context, turns, title) and, of the messages, only whether there are any and who spoke last
(``State.frontier``).  So :class:`ViewFold` keeps the last :data:`KEEP` messages (and the fold's indexes
into them, shifted), and :class:`RecentCalls` the names and inputs of the last :data:`CALLS` tool calls:
what a followed session holds stays the same at a million events as at a thousand.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..record import events as ev
from ..render.parts import kind_of
from ..render.rows import ToolCalls
from ..render.view import follow
from ..state.fold import State, latest_compaction

KEEP = 8  # messages kept (trimmed back to this once twice as many)
CALLS = 4096  # tool calls whose names and inputs are kept (a result comes with or soon after its call)


class ViewFold:
    """A :class:`State` followed event by event (as :func:`~nbagent.render.view.follow`), only its last messages kept."""

    def __init__(self) -> None:
        self.state = State()
        self.dropped = 0  # messages let go of: the fold's message indexes are this much smaller here

    def apply(self, event: Mapping[str, Any]) -> State:
        """Fold one event, then let go of old messages (a local compaction's count is of the messages as the whole fold has them)."""
        kind = kind_of(event)
        replaced = event.get("messages")
        if kind == ev.COMPACTION and self.dropped and isinstance(replaced, int) and not isinstance(replaced, bool):
            event = {**event, "messages": max(0, replaced - self.dropped)}
            self.dropped = max(0, self.dropped - replaced)
        follow(self.state, event)
        content = event.get("content")
        if kind == ev.ASSISTANT_MSG and isinstance(content, list) and _compacted(content):
            self.dropped = 0  # the server compacted: the fold's messages start anew
        if len(self.state.messages) > 2 * KEEP:
            self._trim(len(self.state.messages) - KEEP)
        return self.state

    def _trim(self, count: int) -> None:
        state = self.state
        state.messages = list(state.messages[count:])
        state.turn_start = max(0, state.turn_start - count)
        state.unbound_to = max(0, state.unbound_to - count)
        state.results = [[entry[0] - count, *entry[1:]] for entry in state.results if entry[0] >= count]
        state.images = [[entry[0] - count, *entry[1:]] for entry in state.images if entry[0] >= count]
        self.dropped += count


def _compacted(content: list[Any]) -> bool:
    try:
        return latest_compaction(content) is not None
    except AttributeError:  # a hostile log's blocks: the fold ignored them too
        return False


class RecentCalls(ToolCalls):
    """:class:`ToolCalls` that keeps the last :data:`CALLS` calls only."""

    def learn(self, event: Mapping[str, Any]) -> None:
        """Note the event's calls, then let go of the oldest beyond :data:`CALLS`."""
        super().learn(event)
        while len(self) > CALLS:
            del self[next(iter(self))]
        while len(self.inputs) > CALLS:
            del self.inputs[next(iter(self.inputs))]
