"""The fold: session state as a pure function of the events, updated in O(1) per event.

Events and the messages built from them are shared, not copied: treat both as read-only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from . import events as ev
from .transcript import Transcript

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
    usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_KEYS, 0))
    turns: int = 0
    title: str = ""
    last_ts: float = 0.0
    stop_reason: str | None = None
    status: str = "idle"  # idle | model | tools | done | interrupted | error
    model_errors: int = 0
    # Text streamed since the last model_call; shown by views, never sent to the model.
    partial: list[str] = field(default_factory=list)

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
        if not self.messages:
            return "empty"
        if self.open_calls:
            return "tools"
        last = self.messages[-1]
        if last["role"] == "user" or self.stop_reason == "pause_turn":
            return "model"
        return "done"

    @property
    def final_text(self) -> str:
        """Text of the last assistant message."""
        for message in reversed(self.messages):
            if message["role"] == "assistant":
                return "".join(b.get("text", "") for b in message["content"] if b.get("type") == "text")
        return ""


def as_blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Message content as a list of blocks."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _add_user_content(state: State, blocks: list[dict[str, Any]], content: str | list[dict[str, Any]]) -> None:
    last = state.messages[-1] if state.messages else None
    if last is not None and last["role"] == "user":
        # The API wants user and assistant turns to alternate: merge into the open user message.
        state.messages[-1] = {"role": "user", "content": as_blocks(last["content"]) + blocks}
    else:
        state.messages.append({"role": "user", "content": content})


def _session_start(state: State, event: ev.Event) -> None:
    state.session_id = event["session_id"]
    state.created = event.get("ts", 0.0)
    state.meta = dict(event.get("meta") or {})


def _user_msg(state: State, event: ev.Event) -> None:
    content = event["content"]
    _add_user_content(state, as_blocks(content), content)
    state.turns += 1
    if not state.title:
        text = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)
        state.title = " ".join(text.split())[:80]
    state.status, state.stop_reason = "model", None


def _model_call(state: State, event: ev.Event) -> None:
    state.status, state.partial = "model", []


def _delta(state: State, event: ev.Event) -> None:
    if "text" in event:
        state.partial.append(event["text"])


def _assistant_msg(state: State, event: ev.Event) -> None:
    content = event["content"]
    state.messages.append({"role": "assistant", "content": content})
    state.open_calls = {
        b["id"]: {"name": b["name"], "input": b.get("input", {}), "started": 0} for b in content if b.get("type") == "tool_use"
    }
    for key in USAGE_KEYS:
        state.usage[key] += int((event.get("usage") or {}).get(key) or 0)
    state.stop_reason = event.get("stop_reason")
    state.partial = []
    state.status = "tools" if state.open_calls else ("model" if state.stop_reason == "pause_turn" else "done")


def _model_error(state: State, event: ev.Event) -> None:
    state.model_errors += 1
    state.status = "error"


def _tool_started(state: State, event: ev.Event) -> None:
    call = state.open_calls.get(event["tool_use_id"])
    if call is not None:
        call["started"] += 1
        # What the attempts were recorded as, so a resume can tell if the tool changed since.
        call["read"] = call.get("read", True) and event.get("effect") == "read"
        call["keyed"] = call.get("keyed", True) and bool(event.get("idempotency_key"))
    state.status = "tools"


def _tool_result(state: State, event: ev.Event) -> None:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": event["tool_use_id"], "content": event["content"]}
    if event.get("is_error"):
        block["is_error"] = True
    _add_user_content(state, [block], [block])
    state.open_calls.pop(event["tool_use_id"], None)
    state.status = "tools" if state.open_calls else "model"


def _interrupted(state: State, event: ev.Event) -> None:
    state.status, state.partial = "interrupted", []


def _nothing(state: State, event: ev.Event) -> None:
    """Approvals, notes and trust lines change no state the loop reads (the rules read them from the log)."""


# One small function per event type: the one place besides the renderers that knows every type.
APPLY: dict[str, Callable[[State, ev.Event], None]] = {
    ev.SESSION_START: _session_start,
    ev.USER_MSG: _user_msg,
    ev.MODEL_CALL: _model_call,
    ev.DELTA: _delta,
    ev.ASSISTANT_MSG: _assistant_msg,
    ev.MODEL_ERROR: _model_error,
    ev.APPROVAL: _nothing,
    ev.TOOL_STARTED: _tool_started,
    ev.TOOL_RESULT: _tool_result,
    ev.INTERRUPTED: _interrupted,
    ev.NOTE: _nothing,
    ev.TRUST: _nothing,
}


def apply(state: State, event: ev.Event) -> State:
    """Fold one event into the state (in place, O(1)) and return it."""
    state.seq = event["seq"]
    state.last_ts = event.get("ts", state.last_ts)
    APPLY.get(event["type"], _nothing)(state, event)
    return state


def fold(events: Iterable[ev.Event], state: State | None = None) -> State:
    """Fold events into a fresh state (or onto ``state``)."""
    state = State() if state is None else state
    for event in events:
        apply(state, event)
    return state
