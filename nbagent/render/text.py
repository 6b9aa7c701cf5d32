"""Events as terminal text: the transcript printer of ``nbagent show`` and ``tail``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any, TextIO

from .. import events as ev


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            parts.append(f"{block.get('name')}({json.dumps(block.get('input'), ensure_ascii=False)})")
        elif block.get("type") == "tool_result":
            parts.append(text_of(block.get("content")))
        elif block.get("type") == "image":
            parts.append("[image]")
    return "\n".join(parts)


def when(ts: float) -> str:
    """A timestamp as local date and time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def clip(text: str, limit: int) -> str:
    """At most ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit} more characters]"


def shorten(text: str, limit: int) -> str:
    """At most ``limit`` characters on one line, ending in an ellipsis when cut."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines() or [""])


def _content_preview(content: Any, limit: int) -> str:
    text = text_of(content)
    return clip(text, limit)


class Printer:
    """Writes events to a terminal as a readable transcript; streamed text is written as it arrives.

    Call it with each event in order (it is a session subscriber).  ``deltas``
    says whether streamed text is shown live; when it was, the finished
    assistant message does not repeat it.
    """

    def __init__(self, out: TextIO, *, result_limit: int = 600, deltas: bool = True, stamps: bool = True) -> None:
        self.out = out
        self.result_limit = result_limit
        self.deltas = deltas
        self.stamps = stamps
        self._streamed = False  # text deltas were printed since the last model_call
        self._mid_line = False
        self._last_ts = 0.0
        self._names: dict[str, str] = {}

    def _line(self, text: str, ts: float | None = None) -> None:
        self._end_stream_line()
        stamp = ""
        if self.stamps and ts:
            gap = f" +{ts - self._last_ts:.1f}s" if self._last_ts and ts - self._last_ts >= 1 else ""
            stamp = f"[{time.strftime('%H:%M:%S', time.localtime(ts))}{gap}] "
            self._last_ts = ts
        self.out.write(stamp + text + "\n")
        self.out.flush()

    def _end_stream_line(self) -> None:
        if self._mid_line:
            self.out.write("\n")
            self._mid_line = False

    def __call__(self, event: ev.Event) -> None:
        kind, ts = event["type"], event.get("ts")
        if kind == ev.SESSION_START:
            self._line(f"session {event.get('session_id', '')[:12]} started", ts)
        elif kind == ev.USER_MSG:
            self._line("request:", ts)
            self.out.write(_indent(text_of(event.get("content"))) + "\n")
        elif kind == ev.MODEL_CALL:
            self._streamed = False
            attempt = event.get("attempt", 1)
            self._line(f"calling {event.get('model', 'the model')}" + (f" (attempt {attempt})" if attempt != 1 else ""), ts)
        elif kind == ev.DELTA:
            if self.deltas and event.get("text"):
                if not self._mid_line:
                    self.out.write("  assistant> ")
                self.out.write(event["text"])
                self.out.flush()
                self._streamed = self._mid_line = True
        elif kind == ev.ASSISTANT_MSG:
            self._assistant(event, ts)
        elif kind == ev.MODEL_ERROR:
            self._line(f"model error: {event.get('message', '')}" + (" (will retry)" if event.get("retryable") else ""), ts)
        elif kind == ev.APPROVAL:
            name = self._names.get(event.get("tool_use_id", ""), "tool")
            if event.get("decision") == "pending":
                self._line(f"approval asked for {name}: {event.get('question', '')}", ts)
            else:
                note = f" ({event['note']})" if event.get("note") else ""
                self._line(f"approval {event.get('decision')} by {event.get('by', '?')} for {name}{note}", ts)
        elif kind == ev.TOOL_STARTED:
            self._names[event.get("tool_use_id", "")] = str(event.get("name"))
            key = " [idempotency key]" if event.get("idempotency_key") else ""
            attempt = event.get("attempt", 1)
            again = f" (attempt {attempt}: an earlier attempt left no result, e.g. the process was killed)" if attempt != 1 else ""
            self._line(f"running {event.get('name')} ({event.get('effect')}){key}{again}", ts)
        elif kind == ev.TOOL_RESULT:
            name = self._names.get(event.get("tool_use_id", ""), "tool")
            label = "error from" if event.get("is_error") else "result of"
            self._line(f"{label} {name}:", ts)
            self.out.write(_indent(_content_preview(event.get("content"), self.result_limit)) + "\n")
        elif kind == ev.INTERRUPTED:
            pending = event.get("open_calls") or []
            extra = f", {len(pending)} tool call(s) open" if pending else ""
            self._line(f"interrupted (during {event.get('during', '?')}{extra})", ts)
        elif kind == ev.NOTE:
            body = {k: v for k, v in event.items() if k not in ("v", "seq", "ts", "type", "crc")}
            self._line(f"note: {clip(json.dumps(body, ensure_ascii=False), 200)}", ts)
        else:
            self._line(f"{kind} (event {event['seq']})", ts)
        self.out.flush()

    def _assistant(self, event: ev.Event, ts: float | None) -> None:
        streamed = self._streamed and self.deltas
        self._end_stream_line()
        usage = event.get("usage") or {}
        tokens = f"{usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out tokens"
        self._line(f"assistant ({event.get('stop_reason') or 'no stop reason'}; {tokens})", ts)
        for block in event.get("content") or []:
            if block.get("type") == "text" and not streamed:
                self.out.write(_indent(str(block.get("text", ""))) + "\n")
            elif block.get("type") == "tool_use":
                self._names[block.get("id", "")] = str(block.get("name"))
                arguments = clip(json.dumps(block.get("input"), ensure_ascii=False), 400)
                self.out.write(f"    -> {block.get('name')}({arguments})\n")
        self._streamed = False

    def finish(self) -> None:
        """End a half-written streamed line."""
        self._end_stream_line()
        self.out.flush()


def transcript(events: Iterable[ev.Event], out: TextIO, *, result_limit: int = 600) -> None:
    """Write a finished session's transcript (streamed text shown once, from the final messages)."""
    printer = Printer(out, result_limit=result_limit, deltas=False)
    for event in events:
        if event["type"] != ev.DELTA:
            printer(event)
    printer.finish()
