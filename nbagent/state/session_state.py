"""What a session knows, folded from its events (nbagent/state/fold.py): the messages the next request carries, and the rest."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from ..record import events as ev
from ..record.transcript import Transcript

Frontier = Literal["empty", "model", "tools", "done"]
USAGE_KEYS = ev.USAGE_KEYS


@dataclass
class State:
    """Everything a session knows, folded from its events."""

    session_id: str = ""
    created: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)
    seq: int = 0
    # A plain list when folded from events; a Transcript when loaded from a snapshot (see transcript.py).
    messages: list[dict[str, Any]] | Transcript = field(default_factory=list)
    # Tool calls of the last assistant message that have no result yet, in order.
    open_calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Parallel calls (parallel.py): results go into messages in the reply's order, whichever finished first. The ids
    # of the last reply's calls whose results are not in messages yet, in order, and results held for an earlier one.
    awaiting: list[str] = field(default_factory=list)
    held: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_KEYS, 0))
    turns: int = 0
    title: str = ""
    last_ts: float = 0.0
    stop_reason: str | None = None
    status: str = "idle"  # idle | model | tools | done | interrupted | error
    model_errors: int = 0
    # Text streamed since the last model_call; shown by views, never sent to the model.
    partial: list[str] = field(default_factory=list)
    # Notes to the model (a note event's to_model) waiting for the next request, which they go before.
    pending_notes: list[str] = field(default_factory=list)
    # An interruption the model never answered: the next request gets the interruption note first.
    unanswered_interrupt: bool = False
    # The context window (see context.py): a tool result's characters in a request (None: whole), the window
    # in tokens, the tokens the last reply's request and reply took, compactions so far, one in progress.
    result_budget: int | None = None
    keep_tool_results: int = 0
    results: list[list[int]] = field(default_factory=list)  # [message index, block index, seq] of the results kept whole
    # [message index, block index, seq, count, characters of base64] of the results with images the request carries
    images: list[list[int]] = field(default_factory=list)
    window: int = 0  # the window in use: the recorded one (a recorded 200,000 counts as unset), else the model table's
    recorded_window: int = 0  # as the last context event logged it
    model: str = ""  # the model of the last model call
    context_tokens: int = 0
    compactions: int = 0
    compacting: dict[str, Any] | None = None
    server_refused: bool = False  # the API refused server-side compaction for this session: compact locally
    # The stop rule (stops.py) for the last reply: its action, what the user is told, cut replies asked again this
    # turn, and where this turn's request starts in messages (a refused turn is left out of later requests from there).
    stop_action: str = ""
    stop_note: str = ""
    foreign_thinking_dropped: bool = False  # the thinking another user's key wrote was left out (a drop_thinking note, reason foreign)
    stop_noted: bool = False  # the loop logged the rule's note (a process killed in between logs it on resume)
    asked_again: int = 0
    turn_start: int = 0
    # The API refused the last request as malformed (a 400 that no retry or compaction answers): its message. The same
    # request is never sent again; anything that changes the next request (a request, a note, a compaction) clears it.
    refused: str = ""
    # Requests ask the API to drop thinking blocks a rewrite unbound (binding.py); where they don't and the model binds
    # them, the fold leaves out the thinking blocks after each rewrite: messages before unbound_to hold none of those.
    thinking_binding: bool = False
    unbound_to: int = 0
    thinking_dropped: int = 0  # thinking blocks the fold left out so far for that reason
    thinking_noted: int = 0  # of which a note told people
    prefix: str = ""  # the fingerprint of the requests' system prompt and tools, as the last context event logged it
    # What it cost (prices.py): tokens by price key for the session and for the current request (the dollars are
    # priced when shown); the request's model replies; the budgets last logged (budget.py) and whether the loop
    # logged that one was reached here.
    spend: dict[str, list[int]] = field(default_factory=dict)
    turn_spend: dict[str, list[int]] = field(default_factory=dict)
    turn_usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_KEYS, 0))  # the request's tokens, as usage counts them
    turn_replies: int = 0
    budget: dict[str, Any] = field(default_factory=dict)
    budget_stopped: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy, with the messages as a plain list."""
        return asdict(replace(self, messages=list(self.messages)))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> State:
        """Rebuild from :meth:`to_dict` output."""
        return cls(**data)

    @property
    def frontier(self) -> Frontier:
        """What the loop must do next: call the model, run tools, or nothing."""
        if self.stop_action in ("refused", "stopped"):
            return "done"
        if not self.messages:
            return "empty"
        if self.open_calls:
            return "tools"
        last = self.messages[-1]
        if last["role"] == "user" or self.stop_action == "continue":
            return "model"
        return "done"

    @property
    def final_text(self) -> str:
        """Text of the last assistant message (a turn the stop rule ended without a reply: what the user is told)."""
        if self.stop_action in ("refused", "stopped"):
            return self.stop_note
        for message in reversed(self.messages):
            if message["role"] == "assistant":
                return "".join(b.get("text", "") for b in message["content"] if b.get("type") == "text")
        return ""
