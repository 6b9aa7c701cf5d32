"""A recorded session as the replay shows it, computed once from its events: no widgets, no threads.

Every event gets the live panel's HTML (:mod:`.html`) and the terminal text (:mod:`.text`), its
time and the gap before it, a playback time (quiet gaps longer than ``max_gap`` play as ``max_gap``),
its turn and the status line the panel showed after it (:mod:`.view`).  A frame (:meth:`Timeline.frame`)
is the transcript as the panel showed it right after one event: top to bottom, a heading per turn, a
cursor at the end.  It opens with what the session was (:meth:`Timeline.cover_html`).  Streamed text is
one entry, shown growing and then replaced by the finished message, as the panel does.  Search: :mod:`.matches`.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..record import events as ev
from ..state import lineage
from ..state.asides import Asides
from ..state.fold import State
from ..terminal import safe
from . import html, safe_html, text
from .matches import Found, Part, parts_of, search
from .parts import esc, gap, kind_of, request_parts, shorten, superseded_starts, text_of, timestamp, when
from .rows import ToolCalls
from .style import NO_MATH, ROOT, STYLE
from .view import STARTING, follow, status, status_line, stream_effect

MAX_GAP = 2.0  # seconds: a longer quiet gap between two events plays as this long
SHOWN_ITEMS = 100  # transcript entries shown above the cursor; earlier ones are reached by moving back
TEXT_LIMIT = 2000  # characters of a tool result in an event's text
HEADING_LIMIT = 80  # characters of a request in its turn's heading
# The replay's own rules, beside render.style's (the widget puts them once in its header): the transcript's
# box keeps its end in sight (a column-reverse box starts scrolled to its end), turns, the cursor, search hits.
REPLAY_STYLE = (
    f"<style>{ROOT}{{"
    "& .nbagent-replay-scroll{max-height:480px;overflow:auto;display:flex;flex-direction:column-reverse}"
    "& .nbagent-replay-cover{border:1px solid var(--jp-border-color1,#bdbdbd);padding:4px 8px;margin:4px 0}"
    "& .nbagent-turn-heading{border-top:2px solid var(--jp-border-color1,#bdbdbd);margin:12px 0 4px;padding-top:4px;font-weight:bold}"
    "& .nbagent-cursor{border-top:3px solid var(--jp-brand-color1,#1976d2);margin:6px 0 2px;padding-top:2px}"
    "& mark.nbagent-hit{background-color:#ffe066;color:#1a1a1a;padding:0 1px}"
    "& .nbagent-hit-turn{font-weight:bold}"
    "}</style>"
)


def short_source(source: str, cwd: Path, home: Path) -> str:
    """How a replay names its log: relative to the working folder (the notebook's) where it is inside it, else from ``~``.

    A database session's name (``postgresql://...#<notebook>/<session>``) is shown as it is.
    """
    if not source or "://" in source:
        return source
    path = Path(source)
    for base, prefix in ((cwd, ""), (home, "~/")):
        if path.is_absolute() and path.is_relative_to(base) and path != base:
            return prefix + path.relative_to(base).as_posix()
    return source


@dataclass
class Item:
    """One entry of the transcript: an event's rendering, or a streamed answer built from deltas."""

    anchor: int  # index of the event that puts it on screen
    html: str = ""
    deltas: list[int] = field(default_factory=list)  # for a stream: indices of its text deltas
    until: int | None = None  # for a stream: index of the message that replaces it (a compaction's start: of the compaction)


class Timeline:
    """What a replay shows at each event of a recorded session."""

    def __init__(
        self, events: Sequence[ev.Event], *, source: str = "", max_gap: float = MAX_GAP, notebook: str = "", trust: str = ""
    ) -> None:
        self.events = list(events)
        self.source = source
        self.max_gap = max_gap
        self.trust = trust  # who signed the lines, the word the session listing shows ('' if unknown)
        meta = self.events[0].get("meta") if self.events else None
        recorded = meta.get("notebook") if isinstance(meta, dict) else None
        self.notebook = recorded if isinstance(recorded, str) and recorded else notebook
        self.names = ToolCalls.of_events(self.events)  # names and inputs: each result row says what its call did
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
        self.turn_of = [bisect.bisect_right(self.turn_starts, i) for i in range(len(self.events))]  # 0: before the first
        self.requests = [self._request(self.events[i]) for i in self.turn_starts]
        self.parts: list[list[Part]] = [parts_of(e, shown.line, self.names) for e, shown in zip(self.events, self.texts)]
        for item in self.items:  # text cut off mid-stream is searched where it ends
            if item.deltas and item.until is None:
                self.parts[item.deltas[-1]] = [("reply (cut off)", "".join(self.texts[i].stream for i in item.deltas))]

    def __len__(self) -> int:
        return len(self.events)

    @staticmethod
    def _request(event: ev.Event) -> str:
        try:
            return text_of(request_parts(event.get("content"))[1], only_text=True)
        except Exception:  # noqa: BLE001 - a malformed request still starts its turn
            return ""

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
        self.forked: lineage.Lineage | None = None  # a fork's own session_start (the last one) names its parent
        for i, event in enumerate(self.events):
            if event.get("type") == ev.SESSION_START:
                self.forked = lineage.of_meta(event.get("meta") if isinstance(event.get("meta"), dict) else None)
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

    def turn_start(self, turn: int) -> int:
        """The first event of turn ``turn`` (1-based; 0: the first event)."""
        return self.turn_starts[turn - 1] if 0 < turn <= len(self.turn_starts) else 0

    # Search -----------------------------------------------------------------------------------------------
    def find(self, query: str) -> list[Found]:
        """The events whose words contain ``query`` (case-insensitive; streamed text as the message it became), with snippets."""
        return search(self.parts, self.turn_of, query)

    @staticmethod
    def next_match(found: Sequence[int], index: int) -> int | None:
        """The first of ``found`` after ``index``, wrapping around (None if nothing was found)."""
        return found[bisect.bisect_right(found, index) % len(found)] if found else None

    def match_html(self, found: Found) -> str:
        """A match as a list shows it: its turn, where it is, the text around it with the match marked."""
        return found.html(f"Turn {found.turn}" if found.turn else "Before the first turn")

    # What is shown -----------------------------------------------------------------------------------------
    def size_text(self) -> str:
        """How many events and turns, and when they were written."""
        known = [t for t in self.times if t is not None]
        span = f" · {when(known[0], ms=True)} → {when(known[-1], ms=True)}" if known else ""
        return f"{len(self.events)} events · {plural(len(self.turn_starts), 'turn')}{span}"

    def forked_text(self) -> str:
        """Where a fork came from, followed by " · " ("forked from 20261204-101500-a1b2 at event 12 · "); '' if not a fork."""
        return f"{self.forked.words} · " if self.forked is not None else ""

    def header_html(self) -> str:
        """The replay's title, source, size and span."""
        about = (
            f"{self.size_text()} · {self.forked_text()}read-only: nothing is run and no model is called · "
            f"quiet gaps longer than {self.max_gap:g} s play as {self.max_gap:g} s"
        )
        return html.header_html(f"Replay: {self.title}", self.source, origin=about)

    def turn_heading(self, turn: int) -> str:
        """A turn's heading: its number and its request, clipped."""
        request = shorten(self.requests[turn - 1], HEADING_LIMIT) if 0 < turn <= len(self.requests) else ""
        return f"Turn {turn} · {request}" if request else f"Turn {turn}"

    def about(self) -> list[tuple[str, str]]:
        """What the session was, as (label, words) lines: its notebook, when it was written, who signed it, its size."""
        known = [t for t in self.times if t is not None]
        span = f"{when(known[0])} → {when(known[-1])} (local time)" if known else "not recorded"
        return [
            ("notebook", self.notebook or "not recorded"),
            ("when", span),
            ("written by", f"{self.trust or '?'} (who signed its lines, as %agent_sessions lists it)"),
            ("size", f"{plural(len(self.turn_starts), 'turn')} · {plural(len(self.events), 'event')}"),
        ]

    def cover_html(self) -> str:
        """The first thing a replay shows: the session's title, then :meth:`about`."""
        lines = "".join(f'<div><span class="nbagent-dim">{esc(label)}:</span> {esc(words)}</div>' for label, words in self.about())
        return f'<div class="nbagent-replay-cover"><div>Session <b>{esc(self.title)}</b></div>{lines}</div>'

    def gutter(self, i: int) -> str:
        """Event number, time and the gap before it."""
        if not i:
            return f"#1 · {when(self.times[0], ms=True)}"
        return f"#{i + 1} · {when(self.times[i], date=False, ms=True)} · {gap(self.gaps[i])}"

    def _stream_html(self, item: Item, index: int) -> str:
        if item.until is not None and item.until <= index:
            return ""
        shown = item.deltas[: bisect.bisect_right(item.deltas, index)]
        return safe_html.markdown_html("".join(self.texts[i].stream for i in shown)) if shown else ""

    def _entries(self, index: int, times: bool) -> tuple[list[tuple[int, str]], bool]:
        """The (turn, HTML) entries on screen after event ``index`` (the last SHOWN_ITEMS), and whether earlier ones are left out."""
        entries: list[tuple[int, str]] = []
        on_screen = bisect.bisect_right(self.anchors, index)
        for item in reversed(self.items[:on_screen]):
            body = (item.html if item.until is None or item.until > index else "") or self._stream_html(item, index)
            if not body:
                continue
            current = " nbagent-current" if item.anchor == index or self._stream_of.get(index) is item else ""
            gutter = f'<div class="nbagent-gutter">{esc(self.gutter(item.anchor))}</div>' if times else ""
            entries.append((self.turn_of[item.anchor], f'<div class="nbagent-replay-item{current}">{gutter}{body}</div>'))
            if len(entries) >= SHOWN_ITEMS:
                break
        entries.reverse()
        return entries, len(entries) >= SHOWN_ITEMS and on_screen > len(entries)

    def frame(self, index: int, *, times: bool = False) -> str:
        """The transcript as the live panel showed it right after event ``index``, by turns, with the cursor at its end.

        ``times``: each entry with its event number, time and the gap before it.
        """
        entries, cut = self._entries(index, times)
        shown = ['<div class="nbagent-dim"><i>… earlier entries: move back to see them</i></div>' if cut else self.cover_html()]
        turn = 0
        for entry_turn, entry in entries:
            if entry_turn != turn:
                shown.append(f'<div class="nbagent-turn-heading">{esc(self.turn_heading(entry_turn))}</div>')
                turn = entry_turn
            shown.append(entry)
        if self.turn_of[index] != turn:  # the cursor is in a turn with nothing on screen yet
            shown.append(f'<div class="nbagent-turn-heading">{esc(self.turn_heading(self.turn_of[index]))}</div>')
        shown.append(self.cursor_html(index, times=times))
        return f'<div class="nbagent-replay-scroll"><div class="nbagent-transcript">{"".join(shown)}</div></div>'

    def transcript_at(self, index: int) -> str:
        """The frame after event ``index`` (without times)."""
        return self.frame(index)

    def cursor_words(self, index: int) -> str:
        """What the cursor says: where the replay stands, in the panel's status words."""
        if index == 0:
            return f"the start of the session · {plural(len(self.turn_starts), 'turn')} to replay"
        return self.statuses[index]

    def cursor_html(self, index: int, *, times: bool = False) -> str:
        """The cursor: a marked line at the end of the transcript saying where the replay stands."""
        gutter = f' <span class="nbagent-gutter">{esc(self.gutter(index))}</span>' if times else ""
        return f'<div class="nbagent-cursor"><span class="nbagent-label">now</span> {esc(self.cursor_words(index))}{gutter}</div>'

    def position_text(self, index: int, *, times: bool = False) -> str:
        """Where the replay is: its turn; with ``times`` also the event number, type, time and time since the previous event."""
        turn = self.turn_of[index]
        where = f"turn {turn} of {len(self.turn_starts)}" if turn else "before the first turn"
        if not times:
            return where
        since_last = self.gaps[index]
        played = self.play_times[index] - self.play_times[index - 1] if index else 0.0
        shortened = f" (plays as {played:g} s)" if since_last is not None and since_last > self.max_gap else ""
        since = f" · {gap(since_last)} after the previous event{shortened}" if index else ""
        return (
            f"{where} · event {index + 1} of {len(self.events)} · {kind_of(self.events[index])} · {when(self.times[index], ms=True)}{since}"
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
            return f'<div class="nbagent nbagent-transcript {NO_MATH}">{STYLE}{"".join(self.htmls)}</div>', safe(plain)


def plural(count: int, word: str) -> str:
    """``count`` and ``word``, with an s unless there is one."""
    return f"{count} {word}{'' if count == 1 else 's'}"
