"""Searching the requests, replies and tool calls of many sessions."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import LogCorruptError, LogVersionError
from ..record import events as ev
from ..record.log_reader import iter_events
from ..record.readfile import read_log_bytes
from ..render.text import text_of as _text_of
from .find import session_name


@dataclass(frozen=True)
class Match:
    """One place where a search text occurs."""

    name: str
    path: str
    seq: int
    where: str  # request | reply | tool call | tool result
    snippet: str


def searchable(event: ev.Event) -> Iterator[tuple[str, str]]:
    """The (where, text) pairs of an event that a search looks at."""
    kind = event["type"]
    if kind == ev.USER_MSG:
        yield "request", _text_of(event.get("content"))
    elif kind == ev.ASSISTANT_MSG:
        for block in event.get("content") or []:
            if block.get("type") == "text":
                yield "reply", str(block.get("text", ""))
            elif block.get("type") == "tool_use":
                yield "tool call", f"{block.get('name')} {json.dumps(block.get('input'), ensure_ascii=False)}"
    elif kind == ev.TOOL_RESULT:
        yield "tool result", _text_of(event.get("content"))


def _snippet(text: str, at: int, length: int, width: int = 100) -> str:
    start = max(0, at - (width - length) // 2)
    piece = " ".join(text[start : start + width].split())
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")


def matches_in(events: Iterable[ev.Event], name: str, path: str, needle: str) -> Iterator[Match]:
    """Case-insensitive matches of ``needle`` in one session's requests, replies and tool input/output."""
    wanted = needle.casefold()
    for event in events:
        for where, text in searchable(event):
            at = text.casefold().find(wanted)
            if at >= 0:
                yield Match(name, path, event["seq"], where, _snippet(text, at, len(needle)))


def grep(paths: Iterable[Path], needle: str) -> Iterator[Match]:
    """Case-insensitive search of requests, replies and tool input/output across sessions (damaged logs are skipped)."""
    for path in paths:
        try:
            yield from matches_in(iter_events(read_log_bytes(path), path=str(path)), session_name(path), str(path), needle)
        except (OSError, LogCorruptError, LogVersionError):
            continue
