"""What a reply's ``stop_reason`` means for the turn: one pure rule (table: tests/state/test_stops.py).

Source: the platform docs' "Handling stop reasons" and "Streaming refusals" pages. A reply cut off at
``max_tokens`` may end in a ``tool_use`` whose input the SDK parsed leniently from cut JSON, so no call
of a cut reply ever runs; a refused turn must be left out of later requests ("reset the conversation
context by removing or updating the turn that was refused"); ``pause_turn`` is sent back as it is;
``model_context_window_exceeded`` is treated as truncated ("Treat the response as truncated"), like ``max_tokens``.
The fold applies this rule to every ``assistant_msg``, so a resume reaches the same decision from the log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .model_table import ModelInfo

Action = Literal["done", "tools", "continue", "again", "compact", "refused", "stopped"]
# Cut replies asked again in one turn before the turn stops (more room, or a compaction, once).
AGAIN_LIMIT = 1
MORE_ROOM = 2  # a reply cut inside a tool call is asked again with this many times max_tokens
KNOWN = frozenset({"end_turn", "stop_sequence", "tool_use", "pause_turn", "max_tokens", "model_context_window_exceeded", "refusal"})


@dataclass(frozen=True)
class Stop:
    """The rule for one reply: what the loop does next, whether the reply stays in later requests, what the user is told."""

    action: Action
    keep: bool  # the reply is part of later requests (the log keeps it either way)
    note: str = ""  # for the user; "" for the ordinary endings

    @property
    def runs_calls(self) -> bool:
        """Whether the reply's tool calls may run."""
        return self.action == "tools"

    @property
    def ends_turn(self) -> bool:
        """Whether the turn is over (nothing more to do until the next request)."""
        return self.action in ("done", "refused", "stopped")


def rule(stop_reason: str | None, has_calls: bool, asked_again: int = 0, refusal_detail: str = "") -> Stop:
    """What a reply with ``stop_reason`` (and tool calls or not) means, after ``asked_again`` cut replies in this turn."""
    if stop_reason in ("end_turn", "stop_sequence", "tool_use", None):
        # None: a log written before stop reasons were recorded; a call there was meant to run.
        return Stop("tools" if has_calls else "done", keep=True)
    if stop_reason == "pause_turn":
        return Stop("continue", keep=True)
    if stop_reason == "max_tokens":
        if not has_calls:
            return Stop("done", keep=True, note="The answer was cut off at max_tokens (the most one reply may hold).")
        if asked_again < AGAIN_LIMIT:
            return Stop(
                "again",
                keep=False,
                note="The reply was cut off at max_tokens inside a tool call: nothing of it ran. Asking again with more room.",
            )
        return Stop(
            "stopped",
            keep=False,
            note="The reply was cut off at max_tokens inside a tool call again: nothing of it ran. Raise max_tokens or ask for smaller steps.",
        )
    if stop_reason == "model_context_window_exceeded":
        if not has_calls:  # "Treat the response as truncated" (the stop reasons page's quick reference): the answer stands
            return Stop(
                "done",
                keep=True,
                note="The answer was cut off where it filled the model's context window (what it wrote is kept, marked truncated).",
            )
        if asked_again < AGAIN_LIMIT:
            return Stop(
                "compact", keep=False, note="The reply filled the model's context window: compacting, then asking again. Nothing of it ran."
            )
        return Stop(
            "stopped",
            keep=False,
            note="The reply filled the model's context window again after compacting: nothing of it ran. Start a new session.",
        )
    if stop_reason == "refusal":
        detail = f" ({refusal_detail})" if refusal_detail else ""
        return Stop(
            "refused",
            keep=False,
            note=f"Claude's safety system declined this request{detail}: nothing of the reply ran, and this request is left out of "
            "later requests (the log keeps it). Rephrase the request or ask something else.",
        )
    return Stop(
        "stopped",
        keep=False,
        note=f"The reply ended with a stop reason nbagent does not know ({stop_reason!r}): nothing of it ran. Upgrading nbagent may help.",
    )


def more_room(max_tokens: int, model: ModelInfo) -> int:
    """``max_tokens`` for asking a cut reply again: twice as much, up to the model's maximum output where the table knows it."""
    room = max_tokens * MORE_ROOM
    return max(max_tokens, min(room, model.max_output)) if model.known else room


def refusal_detail(stop_details: object) -> str:
    """The part of a refusal's ``stop_details`` worth showing (its category and explanation), bounded."""
    if not isinstance(stop_details, dict):
        return ""
    parts = [str(stop_details[key]) for key in ("category", "explanation") if isinstance(stop_details.get(key), str) and stop_details[key]]
    return "; ".join(parts)[:400]
