"""The naive durable loop of the reference design, written for comparison.

Every event is written by opening the file, appending one JSON line and
fsyncing; every step re-reads the whole log and re-folds the messages from
scratch.  It logs the streamed deltas too (one event each, like the engine),
but none of the engine's extra events (model_call, tool_started).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nbagent.model.claude import ModelRequest

from .scripted import ScriptedModel


def append_event(path: Path, event: dict[str, Any]) -> None:
    """Open, append one line, flush and fsync."""
    event["ts"] = time.time()
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(event) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def load_events(path: Path) -> list[dict[str, Any]]:
    """Every event in the log (the whole file, every time)."""
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def rebuild_messages(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fold the events into Messages-API messages, from the start."""
    messages: list[dict[str, Any]] = []
    for event in events:
        kind = event["type"]
        if kind == "user_msg":
            messages.append({"role": "user", "content": event["content"]})
        elif kind == "assistant_msg":
            messages.append({"role": "assistant", "content": event["content"]})
        elif kind == "tool_result":
            block = {"type": "tool_result", "tool_use_id": event["tool_use_id"], "content": event["result"]}
            messages.append({"role": "user", "content": [block]})
    return messages


def run_tool_guarded(path: Path, events: list[dict[str, Any]], call: dict[str, Any], tools: dict[str, Callable[..., str]]) -> str:
    """Return a recorded result for this tool_use_id, or run the tool once and log its result."""
    for event in events:
        if event["type"] == "tool_result" and event["tool_use_id"] == call["id"]:
            return event["result"]
    result = tools[call["name"]](**call["input"])
    append_event(path, {"type": "tool_result", "tool_use_id": call["id"], "result": result})
    return result


def run(path: Path, request: str | None, model: ScriptedModel, tools: dict[str, Callable[..., str]]) -> str:
    """Add ``request`` (if any) and loop until the model ends its turn; return its final text."""
    events = load_events(path)
    if request:
        append_event(path, {"type": "user_msg", "content": request})
        events = load_events(path)
    while True:
        messages = rebuild_messages(events)
        reply = model.stream(ModelRequest(messages), lambda delta: append_event(path, {"type": "delta", **delta}))
        append_event(path, {"type": "assistant_msg", "content": reply["content"], "stop_reason": reply["stop_reason"]})
        events = load_events(path)
        if reply["stop_reason"] != "tool_use":
            return "".join(b.get("text", "") for b in reply["content"] if b["type"] == "text")
        for block in reply["content"]:
            if block["type"] == "tool_use":
                run_tool_guarded(path, events, block, tools)
        events = load_events(path)
