"""The replay widget of ``%agent_replay``: play, pause, speed, scrub, previous/next turn and search over a recorded session.

It only reads: the log is read with ``read_events`` (no lock, no repair), so a
session that another kernel is writing can be replayed too; nothing in the log
is executed and no model is called.  Every event is shown with the live panel's
renderer (``render``, sanitized), with its time and the time since the event
before it.  Playback runs on a daemon thread, so the kernel stays free for other
cells and widget messages; quiet gaps longer than ``max_gap`` play as ``max_gap``.
"""

from __future__ import annotations

import bisect
import datetime
import html
import json
import math
import os
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from .. import events as ev
from ..errors import LogVersionError, NbagentError
from ..fold import State, apply
from ..log import read_events
from . import render

MAX_GAP = 2.0  # seconds: a longer quiet gap between two events plays as this long
FRAME = 0.05  # seconds: playback changes the widgets at most this often (20 updates a second)
SPEEDS: tuple[tuple[str, float], ...] = (("1x", 1.0), ("2x", 2.0), ("5x", 5.0), ("20x", 20.0), ("instant", math.inf))
SHOWN_ITEMS = 100  # transcript entries shown above the current event; the slider reaches older ones
MAX_MATCHES = 500  # search results listed
STATUS_WORDS = {
    "idle": "starting",
    "model": "waiting for the model",
    "tools": "running tools",
    "done": "done",
    "interrupted": "interrupted",
    "error": "model error",
}


def load_events(path: str | os.PathLike[str]) -> list[ev.Event]:
    """Every complete event of a log, read without locking or repairing it (an unfinished last line is left out).

    Raises ``LogCorruptError`` for damage before the last line and ``LogVersionError`` for a newer schema.
    """
    found = []
    for event in read_events(path):
        version = event.get("v")
        if not isinstance(version, int) or version > ev.SCHEMA_VERSION:
            raise LogVersionError(
                f"{path} event {event.get('seq')} uses log schema v{version}, but this nbagent reads up to "
                f"v{ev.SCHEMA_VERSION}. Upgrade nbagent (pip install -U nbagent) to replay it; the file was not changed."
            )
        found.append(event)
    return found


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _timestamp(event: Mapping[str, Any]) -> float | None:
    ts = event.get("ts")
    if isinstance(ts, (int, float)) and not isinstance(ts, bool) and math.isfinite(ts) and 0 <= ts < 1e11:
        return float(ts)
    return None


def clock_text(ts: float | None, *, date: bool = False) -> str:
    """Local wall time of an event, to the millisecond ('?' if the log has none)."""
    if ts is None:
        return "?"
    moment = datetime.datetime.fromtimestamp(ts)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f" if date else "%H:%M:%S.%f")[:-3]


def gap_text(seconds: float | None) -> str:
    """A time between two events, short: '+0.004 s', '+1.5 s', '+3 min 20 s', '+2 h 5 min', '+3 d 4 h'."""
    if seconds is None:
        return "+?"
    if seconds < 0:
        return f"-{gap_text(-seconds)[1:]}"
    if seconds < 10:
        return f"+{seconds:.3f} s" if seconds < 1 else f"+{seconds:.1f} s"
    whole = int(round(seconds))
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"+{days} d {hours} h"
    if hours:
        return f"+{hours} h {minutes} min"
    return f"+{minutes} min {secs} s" if minutes else f"+{secs} s"


def _tool_names(events: Sequence[ev.Event]) -> dict[str, str]:
    """Tool-use id -> tool name, from whatever well-formed tool_use blocks the log has."""
    names = {}
    for event in events:
        content = event.get("content") if event.get("type") == ev.ASSISTANT_MSG else None
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    names[str(block.get("id"))] = str(block.get("name"))
    return names


def _payload_text(event: Mapping[str, Any], limit: int = 2000) -> str:
    payload = {k: v for k, v in event.items() if k not in ("v", "seq", "ts", "type", "crc")}
    text = json.dumps(payload, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more characters)"


def _label(event: Mapping[str, Any]) -> str:
    """Plain words for events the panel shows only as a status (session start, model call, tool started, ...)."""
    kind = event.get("type")
    if kind == ev.SESSION_START:
        return f"session {event.get('session_id', '?')} started"
    if kind == ev.MODEL_CALL:
        return f"model called (attempt {event.get('attempt', 1)})"
    if kind == ev.TOOL_STARTED:
        return f"tool {event.get('name', '?')} started (effect: {event.get('effect', '?')})"
    if kind == ev.DELTA:
        return "streamed: " + str(event.get("text", event.get("partial_json", "")))
    return f"{kind}: {_payload_text(event)}"


def _status(event: Mapping[str, Any], state: State) -> str:
    """The panel's status line right after ``event``."""
    kind = event.get("type")
    if kind in (ev.MODEL_CALL, ev.DELTA) and state.status == "model":
        return "streaming"
    if kind == ev.TOOL_STARTED:
        return f"running tool {event.get('name', '?')}"
    if kind == ev.APPROVAL and event.get("decision") == "pending":
        return "waiting for approval"
    return STATUS_WORDS.get(state.status, str(state.status))


@dataclass
class _Item:
    """One entry of the transcript: an event's rendering, or a streamed answer built from deltas."""

    anchor: int  # index of the event that puts it on screen
    html: str = ""
    deltas: list[int] = field(default_factory=list)  # for a stream: indices of its text deltas
    until: int | None = None  # for a stream: index of the assistant message that replaces it


class Replay:
    """A read-only replay of one session's events, as an ipywidgets view with a static HTML/text fallback."""

    def __init__(self, events: Sequence[ev.Event], *, source: str = "", max_gap: float = MAX_GAP, frame: float = FRAME) -> None:
        if not events:
            raise NbagentError(f"{source or 'The log'} has no complete events yet, so there is nothing to replay.")
        self.events = list(events)
        self.source = source
        self.max_gap, self.frame = max_gap, frame
        self.widget_updates = 0
        self.display_id = uuid.uuid4().hex
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._quiet = False  # set while the search list is refilled, so that refilling it does not jump
        self.found: list[int] = []  # indices of the events matching the search
        self._index()

        self.header = widgets.HTML(value=self._header_html())
        self.play_button = widgets.Button(description="▶ Play", tooltip="play / pause", layout=widgets.Layout(width="90px"))
        self.prev_button = widgets.Button(description="⏮ turn", tooltip="previous turn", layout=widgets.Layout(width="80px"))
        self.next_button = widgets.Button(description="turn ⏭", tooltip="next turn", layout=widgets.Layout(width="80px"))
        self.speed = widgets.Dropdown(options=list(SPEEDS), value=1.0, description="speed", layout=widgets.Layout(width="150px"))
        self.slider = widgets.IntSlider(
            value=1,
            min=1,
            max=len(self.events),
            description="event",
            continuous_update=True,
            layout=widgets.Layout(width="420px"),
        )
        self.search = widgets.Text(placeholder="search events", description="search", continuous_update=True)
        self.match_count = widgets.Label(value="")
        self.next_match_button = widgets.Button(description="next match", disabled=True, layout=widgets.Layout(width="100px"))
        self.matches = widgets.Select(options=[], rows=6, layout=widgets.Layout(width="100%", display="none"))
        self.reload_button = widgets.Button(
            description="↻ reload", tooltip="read events appended since", layout=widgets.Layout(width="90px")
        )
        self.position = widgets.HTML()
        self.current = widgets.HTML()
        self.transcript = widgets.HTML()
        self.widget = widgets.VBox(
            [
                self.header,
                widgets.HBox([self.prev_button, self.play_button, self.next_button, self.speed, self.slider, self.reload_button]),
                widgets.HBox([self.search, self.next_match_button, self.match_count]),
                self.matches,
                self.position,
                self.current,
                widgets.Box([self.transcript], layout=widgets.Layout(max_height="480px", overflow="auto")),
            ],
            layout=widgets.Layout(border="1px solid #ddd", padding="4px 8px"),
        )
        self.play_button.on_click(lambda _: self.toggle())
        self.prev_button.on_click(lambda _: self.previous_turn())
        self.next_button.on_click(lambda _: self.next_turn())
        self.next_match_button.on_click(lambda _: self.next_match())
        self.reload_button.on_click(lambda _: self.reload())
        self.slider.observe(self._on_slider, "value")
        self.speed.observe(lambda _: self._wake.set(), "value")
        self.search.observe(lambda change: self.find(change["new"]), "value")
        self.matches.observe(self._on_match, "value")
        self._show(0)

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], **options: Any) -> Replay:
        """Replay the log at ``path`` (read without locking; raises LogCorruptError / LogVersionError / OSError)."""
        return cls(load_events(path), source=str(path), **options)

    # What the log holds, computed once -----------------------------------------------------------
    def _index(self) -> None:
        events = self.events
        self.names = _tool_names(events)
        self.times = [_timestamp(e) for e in events]
        self.gaps: list[float | None] = [None] + [
            (b - a) if a is not None and b is not None else None for a, b in zip(self.times, self.times[1:])
        ]
        # Playback time: real gaps, negative ones as 0 and long ones shortened to max_gap.
        self.play_times = [0.0]
        for gap in self.gaps[1:]:
            self.play_times.append(self.play_times[-1] + min(max(gap or 0.0, 0.0), self.max_gap))
        self.turn_starts = [i for i, e in enumerate(events) if e.get("type") == ev.USER_MSG]
        self.fragments = [self._fragment(e) for e in events]
        self.items: list[_Item] = []
        stream: _Item | None = None
        for i, event in enumerate(events):
            kind = event.get("type")
            if kind == ev.MODEL_CALL:
                stream = _Item(i)
                self.items.append(stream)
            elif kind == ev.DELTA:
                if stream is not None and isinstance(event.get("text"), str):
                    stream.deltas.append(i)
            elif self.fragments[i][0]:
                if kind == ev.ASSISTANT_MSG and stream is not None:
                    stream.until = i  # the panel replaced the streamed text by the whole message
                self.items.append(_Item(i, html=self.fragments[i][0]))
            if kind in (ev.ASSISTANT_MSG, ev.INTERRUPTED):
                stream = None
        self.anchors = [item.anchor for item in self.items]
        self._stream_of = {i: item for item in self.items for i in item.deltas}
        self.statuses: list[str] = []
        state = State()
        for event in events:
            try:
                apply(state, event)
            except Exception:  # noqa: BLE001 - a malformed event changes nothing here; it is still shown
                pass
            usage = render.usage_text(state.usage) if any(state.usage.values()) else ""
            self.statuses.append(_status(event, state) + (f" · {usage}" if usage else ""))
        self.title = state.title or Path(self.source).stem or "session"
        self.search_texts = [self._search_text(e, self.fragments[i][1]) for i, e in enumerate(events)]

    def _fragment(self, event: ev.Event) -> tuple[str, str]:
        """The panel's HTML and the plain text of one event; a malformed event gets an inert note instead."""
        try:
            return render.event_html(event, tool_names=self.names), render.event_text(event, tool_names=self.names)
        except Exception as exc:  # noqa: BLE001 - whatever the log holds, the replay shows the rest
            note = f"[event {event.get('seq')} ({event.get('type')}) could not be rendered: {type(exc).__name__}]"
            return f'<div class="nbagent-note"><i>{_esc(note)}</i></div>', note

    @staticmethod
    def _search_text(event: ev.Event, text: str) -> str:
        if event.get("type") == ev.DELTA:
            return ""  # the whole message is searched instead of its pieces
        return f"{event.get('type')} {text or _label(event)}".casefold()

    # Position ------------------------------------------------------------------------------------------
    @property
    def index(self) -> int:
        """The current event, 0-based (the slider shows it 1-based)."""
        return self.slider.value - 1

    def go(self, index: int) -> None:
        """Show event ``index`` (0-based; clamped to the log)."""
        with self._lock:
            self.slider.value = min(max(index, 0), len(self.events) - 1) + 1

    def previous_turn(self) -> None:
        """Jump to the start of the previous turn (or of the first event)."""
        before = bisect.bisect_left(self.turn_starts, self.index) - 1
        self.go(self.turn_starts[before] if before >= 0 else 0)

    def next_turn(self) -> None:
        """Jump to the start of the next turn (or to the last event)."""
        after = bisect.bisect_right(self.turn_starts, self.index)
        self.go(self.turn_starts[after] if after < len(self.turn_starts) else len(self.events) - 1)

    def _on_slider(self, change: Mapping[str, Any]) -> None:
        with self._lock:
            self._show(change["new"] - 1)
        if threading.current_thread() is not self._thread:
            self._wake.set()  # a playing thread notices the jump (its own moves need no wake-up)

    # Search ----------------------------------------------------------------------------------------------
    def find(self, query: str) -> list[int]:
        """List the events matching ``query`` (case-insensitive; deltas are searched as whole messages)."""
        needle = query.strip().casefold()
        found = [i for i, text in enumerate(self.search_texts) if needle and needle in text]
        options = [(self._match_label(i), i) for i in found[:MAX_MATCHES]]
        with self._lock:
            self._quiet = True
            try:
                self.matches.index = None
                self.matches.options = options
                self.matches.index = None
            finally:
                self._quiet = False
            self.matches.layout.display = None if needle else "none"
            more = f" (first {MAX_MATCHES} listed)" if len(found) > MAX_MATCHES else ""
            self.match_count.value = f"{len(found)} matching event{'s' if len(found) != 1 else ''}{more}" if needle else ""
            self.next_match_button.disabled = not found
            self.found = found
        return found

    def _match_label(self, i: int) -> str:
        text = " ".join((self.fragments[i][1] or _label(self.events[i])).split())
        text = text if len(text) <= 100 else text[:99] + "…"
        return f"#{i + 1}  {clock_text(self.times[i])}  {self.events[i].get('type')}: {text}"

    def next_match(self) -> None:
        """Jump to the first match after the current event (wrapping around)."""
        if self.found:
            after = bisect.bisect_right(self.found, self.index)
            self.go(self.found[after % len(self.found)])

    def _on_match(self, change: Mapping[str, Any]) -> None:
        if not self._quiet and change["new"] is not None:
            self.go(change["new"])

    # Playback --------------------------------------------------------------------------------------------
    @property
    def playing(self) -> bool:
        """Whether playback is running."""
        return self._thread is not None

    def toggle(self) -> None:
        """Play, or pause if playing."""
        if self.playing:
            self.pause()
        else:
            self.play()

    def play(self) -> None:
        """Play from the current event (from the start if at the end) on a background thread."""
        with self._lock:
            if self._thread is not None:
                return
            last = len(self.events) - 1
            if self.index >= last:
                self.go(0)
            if math.isinf(self.speed.value):
                self.go(last)
                return
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._run, args=(self._stop,), name="nbagent-replay", daemon=True)
            self.play_button.description = "⏸ Pause"
            self._thread.start()

    def pause(self) -> None:
        """Stop playback; returns once the playing thread has stopped."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stop.set()
            self._wake.set()
            self.play_button.description = "▶ Play"
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)

    def _run(self, stop: threading.Event) -> None:
        last = len(self.events) - 1
        speed = self.speed.value
        base_time, base_clock = self.play_times[self.index], time.monotonic()
        expected = self.index
        try:
            while True:
                self._wake.clear()
                now = time.monotonic()
                played = base_time + (now - base_clock) * speed
                with self._lock:
                    if stop.is_set():
                        return
                    index = self.index
                    if index != expected:  # scrubbed while playing: go on from there
                        base_time, base_clock, played = self.play_times[index], now, self.play_times[index]
                    if self.speed.value != speed:
                        base_time, base_clock, speed = played, now, self.speed.value
                    if math.isinf(speed):
                        self.go(last)
                        return
                    target = max(index, bisect.bisect_right(self.play_times, played) - 1)
                    if target != index:
                        self.go(target)
                    expected = target
                    if target >= last:
                        return
                    wait = max(self.frame, (self.play_times[target + 1] - played) / speed)
                self._wake.wait(wait)
        finally:
            with self._lock:
                if self._thread is threading.current_thread():
                    self._thread = None
                    self.play_button.description = "▶ Play"

    # Reading more ---------------------------------------------------------------------------------------
    def reload(self) -> int:
        """Read the log again (another kernel may still be writing it); keep the position; return how many events are new."""
        if not self.source:
            return 0
        fresh = load_events(self.source)
        with self._lock:
            added = len(fresh) - len(self.events)
            if added <= 0:
                return 0
            index = self.index
            self.events = fresh
            self._index()
            self.slider.max = len(self.events)
            self.header.value = self._header_html()
            self.find(self.search.value)
            self._show(index)
            return added

    # Rendering --------------------------------------------------------------------------------------------
    def _header_html(self) -> str:
        known = [t for t in self.times if t is not None]
        span = f" · {_esc(clock_text(known[0], date=True))} → {_esc(clock_text(known[-1], date=True))}" if known else ""
        return (
            f'<div class="nbagent-header"><b>Replay: {_esc(self.title)}</b> '
            f'<span style="color:#555">— {_esc(self.source)}</span><br>'
            f'<span style="color:#555;font-size:0.9em">{len(self.events)} events · {len(self.turn_starts)} turns{span} · '
            f"read-only: nothing is run and no model is called · quiet gaps longer than {self.max_gap:g} s play as {self.max_gap:g} s</span></div>"
        )

    def _gutter(self, i: int) -> str:
        return f"#{i + 1} · {clock_text(self.times[i])} · {gap_text(self.gaps[i])}" if i else f"#1 · {clock_text(self.times[0], date=True)}"

    def _stream_html(self, item: _Item, index: int) -> str:
        if item.until is not None and item.until <= index:
            return ""
        shown = item.deltas[: bisect.bisect_right(item.deltas, index)]
        if not shown:
            return ""
        return render.markdown_html("".join(self.events[i]["text"] for i in shown))

    def transcript_at(self, index: int) -> str:
        """The transcript as the live panel showed it right after event ``index`` (its last entries)."""
        entries: list[str] = []
        for item in reversed(self.items[: bisect.bisect_right(self.anchors, index)]):
            body = item.html or self._stream_html(item, index)
            if not body:
                continue
            current = item.anchor == index or self._stream_of.get(index) is item
            mark = "border-left:3px solid #1976d2" if current else "border-left:3px solid transparent"
            entries.append(
                f'<div class="nbagent-replay-item" style="{mark};padding-left:6px;margin:2px 0">'
                f'<div style="color:#888;font-size:0.8em">{_esc(self._gutter(item.anchor))}</div>{body}</div>'
            )
            if len(entries) >= SHOWN_ITEMS:
                break
        hidden = bisect.bisect_right(self.anchors, index) - len(entries)
        more = (
            '<div style="color:#888"><i>… earlier entries: move the slider back to see them</i></div>'
            if hidden > 0 and len(entries) >= SHOWN_ITEMS
            else ""
        )
        return f'<div class="nbagent-transcript">{more}{"".join(reversed(entries))}</div>'

    def event_at(self, index: int) -> str:
        """Event ``index`` on its own: the panel's rendering, or a plain label for events the panel shows as a status."""
        event = self.events[index]
        body = self.fragments[index][0]
        if not body and event.get("type") == ev.DELTA:
            stream = self._stream_of.get(index)
            body = self._stream_html(stream, index) if stream is not None else ""
            body = f'<div style="color:#555"><i>streaming…</i></div>{body}'
        if not body:
            body = f'<div style="color:#555"><i>{_esc(_label(event))}</i></div>'
        return f'<div class="nbagent-replay-current" style="border:1px solid #cfd8dc;padding:4px 6px;margin:4px 0">{body}</div>'

    def position_text(self, index: int) -> str:
        """Where the replay is: event number, type, time, time since the previous event, status."""
        gap = self.gaps[index]
        played = self.play_times[index] - self.play_times[index - 1] if index else 0.0
        shortened = f" (plays as {played:g} s)" if gap is not None and gap > self.max_gap else ""
        since = f" · {gap_text(gap)} after the previous event{shortened}" if index else ""
        return (
            f"event {index + 1} of {len(self.events)} · {self.events[index].get('type')} · "
            f"{clock_text(self.times[index], date=True)}{since} · {self.statuses[index]}"
        )

    def _show(self, index: int) -> None:
        self._set(self.position, f'<div style="color:#333">{_esc(self.position_text(index))}</div>')
        self._set(self.current, self.event_at(index))
        self._set(self.transcript, self.transcript_at(index))
        self.prev_button.disabled = index == 0
        self.next_button.disabled = index >= len(self.events) - 1

    def _set(self, widget: widgets.HTML, value: str) -> None:
        if widget.value != value:
            widget.value = value
            self.widget_updates += 1

    # Display ----------------------------------------------------------------------------------------------
    def bundle(self) -> dict[str, Any]:
        """The display bundle: the widget view, plus the full transcript as text/html and text/plain."""
        renderable = [e for e, (_, text) in zip(self.events, self.fragments) if not text.startswith("[event ")]
        title = f"Replay: {self.title}"
        status = self.statuses[-1]
        try:
            static_html = render.transcript_html(renderable, title=title, status=status)
            static_text = render.transcript_text(renderable, title=title, status=status)
        except Exception:  # noqa: BLE001 - fall back to the per-event renderings made safely above
            static_html = f'<div class="nbagent-transcript">{"".join(f for f, _ in self.fragments)}</div>'
            static_text = "\n\n".join(t for _, t in self.fragments if t)
        data = dict(self.widget._repr_mimebundle_() or {})
        data["text/html"] = static_html
        data["text/plain"] = static_text
        return data

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return self.bundle()

    def show(self) -> None:
        """Display the replay (widget + static transcript) in the current cell's output."""
        from IPython.display import display

        display(self.bundle(), raw=True, display_id=self.display_id)

    def close(self) -> None:
        """Stop playback and close the widgets."""
        self.pause()
        pending = [self.widget]
        while pending:
            widget = pending.pop()
            pending.extend(getattr(widget, "children", ()))
            widget.close()
