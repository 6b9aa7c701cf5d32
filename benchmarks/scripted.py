"""A deterministic scripted model, a trivial tool and the event mix both benchmarks share.

The model follows nbagent's ``Model`` protocol but does no I/O: each reply is
computed from the conversation so far and streamed as a fixed number of
deltas.  It keeps a stopwatch of its own time (excluding the delta callbacks,
which are harness work) and of tool time, per turn, so that the harness
overhead can be separated out.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from nbagent.model.claude import ModelRequest

DELTAS_PER_REPLY = 20
TOOL_NAME = "lookup"
WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches".split()


@dataclass
class Stopwatch:
    """Per-turn start times and the model's and tools' own time in each turn (seconds)."""

    starts: list[float] = field(default_factory=list)
    model_own: list[float] = field(default_factory=list)
    tool_own: list[float] = field(default_factory=list)

    def begin_turn(self) -> None:
        self.starts.append(time.perf_counter())
        self.model_own.append(0.0)
        self.tool_own.append(0.0)

    def overheads(self, end: float) -> list[float]:
        """Harness time of each turn: its wall time minus model and tool time."""
        bounds = self.starts[1:] + [end]
        return [b - s - m - t for s, b, m, t in zip(self.starts, bounds, self.model_own, self.tool_own)]


def reply_text(step: int, tool: bool) -> str:
    """The text of reply number ``step`` (a little over 100 characters)."""
    words = [WORDS[(step * 7 + i) % len(WORDS)] for i in range(DELTAS_PER_REPLY)]
    lead = "Let me look that up." if tool else "Here is the answer."
    return f"{lead} Step {step}: " + " ".join(words)


def split_deltas(text: str, count: int) -> list[str]:
    """``text`` cut into ``count`` consecutive non-empty pieces (``text`` is longer than ``count``)."""
    bounds = [i * len(text) // count for i in range(count + 1)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def reply_for(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The scripted reply to a conversation: a tool call after a user request, a final answer after a tool result."""
    step = len(messages)
    last = messages[-1]
    after_request = isinstance(last["content"], str) or any(b.get("type") == "text" for b in last["content"])
    text = reply_text(step, after_request)
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if after_request:
        content.append({"type": "tool_use", "id": f"toolu_{step:08d}", "name": TOOL_NAME, "input": {"key": f"item-{step}"}})
    return {
        "id": f"msg_{step:08d}",
        "model": "scripted",
        "content": content,
        "stop_reason": "tool_use" if after_request else "end_turn",
        "usage": {"input_tokens": 40 * step, "output_tokens": 30},
    }


class ScriptedModel:
    """An offline model for benchmarks: replies from a script, streams ``deltas`` deltas per reply."""

    name = "scripted (benchmark, not Claude)"

    def __init__(self, stopwatch: Stopwatch | None = None, *, deltas: int = DELTAS_PER_REPLY) -> None:
        self.stopwatch = stopwatch or Stopwatch()
        self.deltas = deltas

    def stream(self, request: ModelRequest, on_delta: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Stream the scripted reply; the callback time is not counted as the model's."""
        self.stopwatch.begin_turn()
        started = time.perf_counter()
        in_callbacks = 0.0
        reply = reply_for(request.messages)
        pieces = split_deltas(reply["content"][0]["text"], self.deltas - (len(reply["content"]) - 1))
        deltas: list[dict[str, Any]] = [{"index": 0, "text": p} for p in pieces]
        for index, block in enumerate(reply["content"][1:], start=1):
            deltas.append({"index": index, "partial_json": json.dumps({"key": block["input"]["key"]})})
        for delta in deltas:
            before = time.perf_counter()
            on_delta(delta)
            in_callbacks += time.perf_counter() - before
        self.stopwatch.model_own[-1] += time.perf_counter() - started - in_callbacks
        return reply


def make_lookup(stopwatch: Stopwatch | None = None) -> Callable[[str], str]:
    """The trivial tool: returns a fixed-size text derived from its key, and times itself."""

    def lookup(key: str) -> str:
        """Look up a key and return what is known about it."""
        started = time.perf_counter()
        result = f"{key}: " + " ".join(WORDS) + " (record found)"
        if stopwatch is not None:
            stopwatch.tool_own[-1] += time.perf_counter() - started
        return result

    return lookup


def prompt(number: int) -> str:
    """The user's request number ``number``."""
    return f"Request {number}: please look up item {number} and tell me what you find about it."


def event_mix(count: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """``count`` events (type, payload) shaped like the scripted session: mostly deltas, a few turn events."""
    produced, request = 0, 0
    lookup = make_lookup()
    messages: list[dict[str, Any]] = []
    while True:
        request += 1
        pending: list[tuple[str, dict[str, Any]]] = [("user_msg", {"content": prompt(request)})]
        messages.append({"role": "user", "content": prompt(request)})
        for _ in range(2):
            reply = reply_for(messages)
            pending.append(("model_call", {"model": "scripted", "attempt": 1}))
            for piece in split_deltas(reply["content"][0]["text"], DELTAS_PER_REPLY - (len(reply["content"]) - 1)):
                pending.append(("delta", {"index": 0, "text": piece}))
            calls = [b for b in reply["content"] if b["type"] == "tool_use"]
            for block in calls:
                pending.append(("delta", {"index": 1, "partial_json": json.dumps({"key": block["input"]["key"]})}))
            pending.append(("assistant_msg", {k: reply[k] for k in ("model", "content", "stop_reason", "usage")}))
            messages.append({"role": "assistant", "content": reply["content"]})
            for block in calls:
                result = lookup(**block["input"])
                pending.append(("tool_started", {"tool_use_id": block["id"], "name": TOOL_NAME, "effect": "write", "attempt": 1}))
                pending.append(("tool_result", {"tool_use_id": block["id"], "content": result}))
                messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": result}]})
        for item in pending:
            if produced == count:
                return
            produced += 1
            yield item
