"""A session's events as the stream sends them: each with its sanitized HTML, computed once per event for every client.

The HTML is the live panel's (:func:`nbagent.render.html.event_html`: Markdown without raw HTML,
cleaned by nh3 against an allow-list), so a hostile log shows as inert text in the browser too.
Streamed text (``delta`` events) is sent as plain text, which the page only ever sets as text.  Every
other event's record also says what the page's header shows of the session after it (``session``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..history.summary import from_state
from ..record import events as ev
from ..record import redact
from ..render import html
from ..render.parts import kind_of
from ..render.view import STARTING, status, status_line, stream_effect
from ..state.asides import Asides
from ..stores import Listed
from .open_turn import runs
from .viewfold import RecentCalls, ViewFold


def request_line(content: Any) -> str:
    """A request in one line of at most 80 characters (the rule the fold titles a session with, by its first)."""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = " ".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    else:
        text = ""
    return " ".join(text.split())[:80]


@dataclass(frozen=True)
class Frame:
    """One event, encoded once for every client."""

    seq: int
    data: bytes


class Presenter:
    """Follows a session from its first event and gives each event's stream record (tool names, notes, stream, status)."""

    def __init__(self) -> None:
        self.names = RecentCalls()  # names and inputs: each result row says what its call did
        self.asides = Asides()
        self._fold = ViewFold()  # bounded: the last messages only (viewfold.py)
        self.state = self._fold.state
        self.stream: list[str] = []
        self.status = STARTING
        self.request = ""  # the latest request, in one line

    def record(self, event: ev.Event) -> dict[str, Any]:
        """The JSON record of one event: ``seq``, ``type``, ``event`` (as shown: ``redact.shown_event``), ``html``, ``stream``, ``text``, ``status``."""
        effect = stream_effect(event)
        fragment = ""
        if effect is not None:
            if self.stream and effect == "end":  # cut off: what streamed stays, as the panel showed it
                fragment = html.cut_off_html("".join(self.stream))
            self.stream = []
        text = event.get("text") if kind_of(event) == ev.DELTA and isinstance(event.get("text"), str) else None
        if text is not None:
            self.stream.append(text)
        self.names.learn(event)
        try:
            fragment += html.event_html(event, tool_names=self.names, notes=self.asides.see(event))
        except Exception as exc:  # noqa: BLE001 - whatever the log holds, the view shows the rest
            fragment += html.note_html(f"[event {event.get('seq')} ({kind_of(event)}) could not be rendered: {type(exc).__name__}]")
        self._fold.apply(event)
        self.status = status(event, self.state) or self.status
        if kind_of(event) == ev.USER_MSG:
            self.request = request_line(event.get("content")) or self.request
        record: dict[str, Any] = {
            "seq": event["seq"],
            "type": kind_of(event),
            "event": redact.shown_event(event),  # thinking and compaction blocks redacted, as everywhere they are shown
            "html": fragment,
            "stream": effect,
            "text": text,
            "status": status_line(self.status, self.state),  # the tokens as every view says them (render/parts.tokens_line)
        }
        if text is None:  # a delta changes nothing of this: the stream stays small
            record["session"] = self.session()
        return record

    def frame(self, event: ev.Event) -> Frame:
        """The event's stream message (see :meth:`record` and :func:`sse_frame`)."""
        return Frame(event["seq"], sse_frame(self.record(event)))

    def session(self) -> dict[str, Any]:
        """The header's view of the session so far: ``title`` (the listing's: its first request), ``request`` (the latest), ``turns``,
        ``status`` (the listing's), ``standing`` (the badge's words: '' while its last turn may run, else how it ended)."""
        try:
            summary = from_state(Listed("", ""), self.state)
            shown, standing = summary.status, standing_words(summary)
        except (KeyError, TypeError, ValueError) as exc:  # a hostile log's state: said as the listing says it
            shown = standing = f"unfinished: damaged log ({type(exc).__name__}): run nbagent verify"
        return {"title": str(self.state.title), "request": self.request, "turns": self.state.turns, "status": shown, "standing": standing}


def standing_words(summary: Listed) -> str:
    """What the page's badge says of a session besides "live": '' while its last turn may be running, else how it stands."""
    if runs(summary):
        return ""
    return "finished" if summary.complete else summary.pending or "not running"


def sse_frame(record: dict[str, Any]) -> bytes:
    """One Server-Sent Events message: ``id: <seq>`` and the record as one line of JSON (ASCII: no line breaks inside)."""
    return b"id: %d\ndata: %s\n\n" % (record["seq"], json.dumps(record, separators=(",", ":")).encode("ascii"))


def sse_notice(kind: str, data: dict[str, Any]) -> bytes:
    """A named SSE message without an id (it does not move the client's Last-Event-ID)."""
    return b"event: %s\ndata: %s\n\n" % (kind.encode("ascii"), json.dumps(data, separators=(",", ":")).encode("ascii"))
