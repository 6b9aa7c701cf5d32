"""What a search of a replay finds: the text around each match, which turn it is in, and where (pure, no widgets).

Each event is searched in the words a reader sees: a request, a reply, a tool call (its name and input), a
tool result, a note or an error; streamed text is searched as the message it became (or, cut off, as far as
it got).  A match is shown as a snippet of its text with the match marked, everything escaped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..record import events as ev
from ..terminal import safe
from .parts import content_blocks, esc, kind_of, request_parts, text_of, tool_name

WIDTH = 120  # characters of a snippet: the match and the text around it
SKIPPED = frozenset({ev.SESSION_START, ev.MODEL_CALL, ev.DELTA, ev.TOOL_STARTED, ev.TRUST, ev.CONTEXT})  # statuses, not words
Part = tuple[str, str]  # (where: request | reply | tool call | ..., text)


@dataclass(frozen=True)
class Found:
    """One event that matches: where in it, and the snippet around its first match."""

    index: int  # the event, 0-based
    turn: int  # its turn, 1-based (0: before the first request)
    where: str
    before: str
    hit: str
    after: str

    def html(self, heading: str = "") -> str:
        """The snippet with the match marked, after its turn's heading and where it was found (all escaped)."""
        turn = f'<span class="nbagent-hit-turn">{esc(heading)}</span> ' if heading else ""
        return (
            f'<span class="nbagent-replay-hit">{turn}<span class="nbagent-dim">{esc(self.where)}:</span> '
            f'{esc(self.before)}<mark class="nbagent-hit">{esc(self.hit)}</mark>{esc(self.after)}</span>'
        )

    def text(self) -> str:
        """The snippet as one line of plain text, the match in brackets."""
        return f"{self.where}: {self.before}[{self.hit}]{self.after}"


def parts_of(event: ev.Event, line: str = "", names: Mapping[str, str] | None = None) -> list[Part]:
    """What a search looks at in one event; ``line``: its one line of terminal text, for events shown only that way.

    ``names``: the tool of each call id, so that a result says whose it is.
    """
    kind = kind_of(event)
    if kind == ev.USER_MSG:
        return [("request", text_of(request_parts(event.get("content"))[1], only_text=True))]
    if kind == ev.ASSISTANT_MSG:
        found: list[Part] = []
        for block in content_blocks(event.get("content")):
            if block.get("type") == "text":
                found.append(("reply", str(block.get("text", ""))))
            elif block.get("type") == "tool_use":
                found.append(("tool call", f"{block.get('name')} {json.dumps(block.get('input'), ensure_ascii=False)}"))
        return found
    if kind == ev.TOOL_RESULT:
        return [(f"result of {tool_name(names, event.get('tool_use_id'))}", text_of(event.get("content")))]
    if kind in SKIPPED or not line:
        return []
    return [(kind.replace("_", " "), line)]


def _squash(text: str) -> str:
    return safe(re.sub(r"\s+", " ", text))


def snippet(text: str, start: int, end: int, width: int = WIDTH) -> tuple[str, str, str]:
    """The text before, at and after ``text[start:end]``, about ``width`` characters in all, whitespace squashed."""
    room = max(width - (end - start), 0)
    first = max(0, start - room // 2)
    last = min(len(text), end + room - (start - first))
    first = max(0, start - (room - (last - end)))  # near the end, the room left after goes before
    before = ("…" if first else "") + _squash(text[first:start])
    after = _squash(text[end:last]) + ("…" if last < len(text) else "")
    return before, _squash(text[start:end]), after


def search(parts: Sequence[Sequence[Part]], turns: Sequence[int], query: str) -> list[Found]:
    """The events whose words contain ``query`` (case-insensitive), each with the snippet of its first match."""
    needle = query.strip()
    if not needle:
        return []
    pattern = re.compile(re.escape(needle), re.IGNORECASE)
    found: list[Found] = []
    for index, event_parts in enumerate(parts):
        for where, words in event_parts:
            match = pattern.search(words)
            if match:
                found.append(Found(index, turns[index], where, *snippet(words, match.start(), match.end())))
                break
    return found
