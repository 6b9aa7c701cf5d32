"""The fold: session state as a pure function of the events, updated in O(1) per event.

Events and the messages built from them are shared, not copied: treat both as read-only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from . import events as ev
from .transcript import Transcript

Frontier = Literal["empty", "model", "tools", "done"]
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


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


def apply(state: State, event: ev.Event) -> State:
    """Fold one event into the state (in place, O(1)) and return it."""
    kind = event["type"]
    state.seq = event["seq"]
    state.last_ts = event.get("ts", state.last_ts)
    if kind == ev.SESSION_START:
        state.session_id = event["session_id"]
        state.created = event.get("ts", 0.0)
        state.meta = dict(event.get("meta") or {})
    elif kind == ev.USER_MSG:
        content = event["content"]
        _add_user_content(state, as_blocks(content), content)
        state.turns += 1
        if not state.title:
            text = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)
            state.title = " ".join(text.split())[:80]
        state.status, state.stop_reason = "model", None
    elif kind == ev.MODEL_CALL:
        state.status, state.partial = "model", []
    elif kind == ev.DELTA:
        if "text" in event:
            state.partial.append(event["text"])
    elif kind == ev.ASSISTANT_MSG:
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
    elif kind == ev.MODEL_ERROR:
        state.model_errors += 1
        state.status = "error"
    elif kind == ev.TOOL_STARTED:
        call = state.open_calls.get(event["tool_use_id"])
        if call is not None:
            call["started"] += 1
            # What the attempts were recorded as, so a resume can tell if the tool changed since.
            call["read"] = call.get("read", True) and event.get("effect") == "read"
            call["keyed"] = call.get("keyed", True) and bool(event.get("idempotency_key"))
        state.status = "tools"
    elif kind == ev.TOOL_RESULT:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": event["tool_use_id"], "content": event["content"]}
        if event.get("is_error"):
            block["is_error"] = True
        _add_user_content(state, [block], [block])
        state.open_calls.pop(event["tool_use_id"], None)
        state.status = "tools" if state.open_calls else "model"
    elif kind == ev.INTERRUPTED:
        state.status, state.partial = "interrupted", []
    return state


def fold(events: Iterable[ev.Event], state: State | None = None) -> State:
    """Fold events into a fresh state (or onto ``state``)."""
    state = State() if state is None else state
    for event in events:
        apply(state, event)
    return state
