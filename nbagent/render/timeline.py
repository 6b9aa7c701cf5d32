"""A recorded session as the replay shows it, computed once from its events: no widgets, no threads.

Every event gets the live panel's HTML (:mod:`.html`) and the terminal text (:mod:`.text`), its
time and the gap before it, a playback time (quiet gaps longer than ``max_gap`` play as ``max_gap``)
and the status line the panel showed after it (:mod:`.view`).  Streamed text is gathered into one
entry, shown growing and then replaced by the finished message, as the panel does.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import events as ev
from ..fold import Asides, State
from ..terminal import safe
from . import html, text
from .parts import ToolNames, clip, esc, gap, kind_of, shorten, superseded_starts, timestamp, when
from .style import STYLE
from .view import STARTING, follow, status, status_line, stream_effect

MAX_GAP = 2.0  # seconds: a longer quiet gap between two events plays as this long
SHOWN_ITEMS = 100  # transcript entries shown above the current event; earlier ones are reached by moving back
MAX_MATCHES = 500  # search results listed
TEXT_LIMIT = 2000  # characters of a tool result in an event's text


@dataclass
class Item:
    """One entry of the transcript: an event's rendering, or a streamed answer built from deltas."""

    anchor: int  # index of the event that puts it on screen
    html: str = ""
    deltas: list[int] = field(default_factory=list)  # for a stream: indices of its text deltas
    until: int | None = None  # for a stream: index of the message that replaces it (a compaction's start: of the compaction)


class Timeline:
    """What a replay shows at each event of a recorded session."""

    def __init__(self, events: Sequence[ev.Event], *, source: str = "", max_gap: float = MAX_GAP) -> None:
        self.events = list(events)
        self.source = source
        self.max_gap = max_gap
        self.names = ToolNames.of_events(self.events)
        self.times = [timestamp(e) for e in self.events]
        self.gaps: list[float | None] = [None]
        self.gaps += [(b - a) if a is not None and b is not None else None for a, b in zip(self.times, self.times[1:])]
        # Playback time: real gaps, negative ones as 0 and long ones shortened to max_gap.
        self.play_times = [0.0]
        for seconds in self.gaps[1:]:
            self.play_times.append(self.play_times[-1] + min(max(seconds or 0.0, 0.0), self.max_gap))
        asides = Asides()
        rendered = [self._render(e, asides) for e in self.events]
        self.htmls = [fragment for fragment, _ in rendered]
        self.texts = [shown for _, shown in rendered]
        self._collect_items()
        self._fold()
        self.search_texts = [f"{kind_of(e)} {shown.text}".casefold() if shown.line else "" for e, shown in zip(self.events, self.texts)]

    def __len__(self) -> int:
        return len(self.events)

    def _render(self, event: ev.Event, asides: Asides) -> tuple[str, text.Shown]:
        """The panel's HTML and the terminal text of one event; a malformed event gets an inert note instead."""
        try:
            notes = asides.see(event)
            return (
                html.event_html(event, tool_names=self.names, notes=notes),
                text.show(event, self.names, result_limit=TEXT_LIMIT, notes=notes),
            )
        except Exception as exc:  # noqa: BLE001 - whatever the log holds, the replay shows the rest
            note = f"[event {event.get('seq')} ({event.get('type')}) could not be rendered: {type(exc).__name__}]"
            return html.note_html(note), text.Shown(note)

    def _collect_items(self) -> None:
        self.items: list[Item] = []
        stream: Item | None = None
        finished = superseded_starts(self.events)
        for i, event in enumerate(self.events):
            effect = stream_effect(event)
            if effect is not None and stream is not None:
                if effect == "replace":
                    stream.until = i  # the panel replaced the streamed text by the finished message
                stream = None
            if self.texts[i].stream:
                if stream is None:
                    stream = Item(i)
                    self.items.append(stream)
                stream.deltas.append(i)
            elif self.htmls[i]:
                self.items.append(Item(i, html=self.htmls[i], until=finished.get(i)))
        self.anchors = [item.anchor for item in self.items]
        self._stream_of = {i: item for item in self.items for i in item.deltas}

    def _fold(self) -> None:
        self.statuses: list[str] = []
        self.turn_starts: list[int] = []
        state, current = State(), STARTING
        for i, event in enumerate(self.events):
            turns = state.turns
            follow(state, event)
            if state.turns > turns:
                self.turn_starts.append(i)
            current = status(event, state) or current
            self.statuses.append(status_line(current, state))
        self.title = state.title or Path(self.source).stem or "session"

    # Moving ---------------------------------------------------------------------------------------------
    def clamp(self, index: int) -> int:
        """``index`` within the events."""
        return min(max(index, 0), len(self.events) - 1)

    def previous_turn(self, index: int) -> int:
        """The start of the turn before ``index`` (or the first event)."""
        before = bisect.bisect_left(self.turn_starts, index) - 1
        return self.turn_starts[before] if before >= 0 else 0

    def next_turn(self, index: int) -> int:
        """The start of the turn after ``index`` (or the last event)."""
        after = bisect.bisect_right(self.turn_starts, index)
        return self.turn_starts[after] if after < len(self.turn_starts) else len(self.events) - 1

    def at_play_time(self, played: float, *, not_before: int = 0) -> int:
        """The event on screen ``played`` seconds into playback (never before ``not_before``)."""
        return max(not_before, bisect.bisect_right(self.play_times, played) - 1)

    # Search -----------------------------------------------------------------------------------------------
    def find(self, query: str) -> list[int]:
        """The events matching ``query`` (case-insensitive; streamed text is searched as the whole message)."""
        needle = query.strip().casefold()
        return [i for i, searched in enumerate(self.search_texts) if needle in searched] if needle else []

    @staticmethod
    def next_match(found: Sequence[int], index: int) -> int | None:
        """The first of ``found`` after ``index``, wrapping around (None if nothing was found)."""
        return found[bisect.bisect_right(found, index) % len(found)] if found else None

    def match_label(self, i: int) -> str:
        """One line naming event ``i`` in a list of matches."""
        return f"#{i + 1}  {when(self.times[i], date=False, ms=True)}  {kind_of(self.events[i])}: {shorten(self.texts[i].text, 100)}"

    # What is shown -----------------------------------------------------------------------------------------
    def size_text(self) -> str:
        """How many events and turns, and when they were written."""
        known = [t for t in self.times if t is not None]
        span = f" · {when(known[0], ms=True)} → {when(known[-1], ms=True)}" if known else ""
        return f"{len(self.events)} events · {len(self.turn_starts)} turns{span}"

    def header_html(self) -> str:
        """The replay's title, source, size and span."""
        about = (
            f"{self.size_text()} · read-only: nothing is run and no model is called · "
            f"quiet gaps longer than {self.max_gap:g} s play as {self.max_gap:g} s"
        )
        return html.header_html(f"Replay: {self.title}", self.source, origin=about)

    def gutter(self, i: int) -> str:
        """Event number, time and the gap before it."""
        if not i:
            return f"#1 · {when(self.times[0], ms=True)}"
        return f"#{i + 1} · {when(self.times[i], date=False, ms=True)} · {gap(self.gaps[i])}"

    def _stream_html(self, item: Item, index: int) -> str:
        if item.until is not None and item.until <= index:
            return ""
        shown = item.deltas[: bisect.bisect_right(item.deltas, index)]
        return html.markdown_html("".join(self.texts[i].stream for i in shown)) if shown else ""

    def transcript_at(self, index: int) -> str:
        """The transcript as the live panel showed it right after event ``index`` (its last entries)."""
        entries: list[str] = []
        for item in reversed(self.items[: bisect.bisect_right(self.anchors, index)]):
            body = (item.html if item.until is None or item.until > index else "") or self._stream_html(item, index)
            if not body:
                continue
            current = " nbagent-current" if item.anchor == index or self._stream_of.get(index) is item else ""
            entries.append(
                f'<div class="nbagent-replay-item{current}"><div class="nbagent-gutter">{esc(self.gutter(item.anchor))}</div>{body}</div>'
            )
            if len(entries) >= SHOWN_ITEMS:
                break
        hidden = bisect.bisect_right(self.anchors, index) - len(entries)
        more = (
            '<div class="nbagent-dim"><i>… earlier entries: move the slider back to see them</i></div>'
            if hidden > 0 and len(entries) >= SHOWN_ITEMS
            else ""
        )
        return f'<div class="nbagent-transcript">{more}{"".join(reversed(entries))}</div>'

    def event_at(self, index: int) -> str:
        """Event ``index`` on its own: the panel's rendering, the text streamed so far, or its line of text."""
        body = self.htmls[index]
        stream = self._stream_of.get(index)
        if not body and stream is not None:
            body = f'<div class="nbagent-dim"><i>streaming…</i></div>{self._stream_html(stream, index)}'
        if not body:
            label = clip(self.texts[index].text, TEXT_LIMIT)
            body = f'<div class="nbagent-dim nbagent-request"><i>{esc(label)}</i></div>'
        return f'<div class="nbagent-replay-current">{body}</div>'

    def position_text(self, index: int) -> str:
        """Where the replay is: event number, type, time, time since the previous event, status."""
        since_last = self.gaps[index]
        played = self.play_times[index] - self.play_times[index - 1] if index else 0.0
        shortened = f" (plays as {played:g} s)" if since_last is not None and since_last > self.max_gap else ""
        since = f" · {gap(since_last)} after the previous event{shortened}" if index else ""
        return (
            f"event {index + 1} of {len(self.events)} · {kind_of(self.events[index])} · "
            f"{when(self.times[index], ms=True)}{since} · {self.statuses[index]}"
        )

    def static(self) -> tuple[str, str]:
        """The whole transcript as HTML and as plain text (a saved notebook's fallback for the widgets)."""
        renderable = [e for e, shown in zip(self.events, self.texts) if not shown.line.startswith("[event ")]
        title, state = f"Replay: {self.title}", self.statuses[-1] if self.statuses else ""
        try:
            return (
                html.transcript_html(renderable, title=title, status=state),
                text.transcript_text(renderable, title=title, status=state),
            )
        except Exception:  # noqa: BLE001 - fall back to the per-event renderings made safely above
            plain = "\n".join(shown.text for shown in self.texts if shown.line)
            return f'<div class="nbagent nbagent-transcript">{STYLE}{"".join(self.htmls)}</div>', safe(plain)
