"""Raw streamed replies for the fake Messages API (``Reply(events=...)``), each event checked against the SDK's own types.

For shapes the fake's blocks do not make (citations, server tools, thinking signatures) and for streams that break
off or carry input that is not JSON. The events follow "Streaming Messages"
(https://platform.claude.com/docs/en/build-with-claude/streaming, "Event flow"): ``message_start``, per content block
``content_block_start``, its deltas and ``content_block_stop``, then ``message_delta`` and ``message_stop``.
"""

from __future__ import annotations

from typing import Any

import anthropic
import pydantic

from tests.support.fake_anthropic import Reply

Event = tuple[str, dict[str, Any]]


def event(name: str, data: dict[str, Any]) -> Event:
    """One SSE event: its name, and its data with the same ``type``."""
    return name, {"type": name, **data}


def stream_of(
    *blocks: tuple[dict[str, Any], list[dict[str, Any]]],
    usage: dict[str, Any],
    stop: str = "end_turn",
    message_id: str = "msg_raw",
    model: str = "claude-served",
) -> list[Event]:
    """A whole stream: message_start, each (opening block, deltas), message_delta with ``usage``, message_stop."""
    start = {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": None}
    out = [event("message_start", {"message": {**start, "stop_sequence": None, "usage": {"input_tokens": 40, "output_tokens": 1}}})]
    for index, (opening, deltas) in enumerate(blocks):
        out.append(event("content_block_start", {"index": index, "content_block": opening}))
        out += [event("content_block_delta", {"index": index, "delta": delta}) for delta in deltas]
        out.append(event("content_block_stop", {"index": index}))
    out.append(event("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage}))
    return [*out, event("message_stop", {})]


def checked(events: list[Event], beta: bool = False) -> Reply:
    """A raw-events reply, each event first validated against the SDK's own stream event type for its endpoint."""
    kind: Any = anthropic.types.beta.BetaRawMessageStreamEvent if beta else anthropic.types.RawMessageStreamEvent
    adapter = pydantic.TypeAdapter(kind)
    for _, data in events:
        adapter.validate_python(data)
    return Reply(events=events)
