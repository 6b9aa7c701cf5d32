"""The replay widget of ``%agent_replay``: a recorded session's transcript, by turns, with a cursor that moves by event.

Play, pause, speed, scrub, previous/next turn, a turn to jump to, times on demand, and search (each match
shown in context; choosing one moves the cursor there).  It only reads, through the store seam
(:class:`~nbagent.stores.Store`: a log file is read with ``read_events``, without a lock or a repair; a
database session from its table), so a session that another kernel is writing can be replayed, and is
followed as it is written (``Store.follow``: LISTEN/NOTIFY on a database, the file polled); nothing in
the log is executed and no model is called.  What is shown comes from a
:class:`~nbagent.render.timeline.Timeline` (frames, turns, statuses, search); this module holds the
widgets, :mod:`.playback` the playing thread, :mod:`.matchlist` the list of matches.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from .. import threads
from ..errors import LogError, NbagentError
from ..record import events as ev
from ..record import trust
from ..record.log_reader import read_events
from ..render import html
from ..render.live_views import LIVE
from ..render.matches import Found
from ..render.parts import esc
from ..render.style import NO_MATH, STYLE, sibling_style
from ..render.timeline import MAX_GAP, REPLAY_STYLE, Timeline, short_source
from ..stores import FILES, Store, session_url
from .comm_route import keep_on_main_shell
from .follow import Follower
from .matchlist import MatchList
from .playback import FRAME, SPEEDS, Playback
from .widget_ops import close_all, set_value

HINT = "Re-run this cell to replay it interactively."
SUMMARY_EVERY = 2.0  # seconds: while following, the static summary (a whole transcript) is sent again at most this often


def _wrapping() -> widgets.Layout:
    """A row of controls that wraps in a narrow cell rather than cutting their labels (a layout per widget: closing one closes it)."""
    return widgets.Layout(flex_flow="row wrap", align_items="center")


def load_events(path: str | os.PathLike[str]) -> list[ev.Event]:
    """Every complete event of a log, read without locking or repairing it (an unfinished last line is left out).

    Raises ``LogCorruptError`` for damage before the last line and ``LogVersionError`` for a newer schema.
    """
    return list(read_events(path))  # the reader checks versions, seqs and shapes


def trust_word(store: Store, path: Path) -> str:
    """Who signed a session's lines, in the word the session listing shows ('' if that cannot be told)."""
    from .. import history

    user = trust.user_signer_or_none()
    try:
        if store.url:
            data = history.read_bytes(path, store)
            return trust.check_log(data, user=user).verdict if data else ""
        return history.trust_of(path, user=user).verdict
    except (LogError, OSError, ValueError):
        return ""


class Replay(Playback):
    """A read-only replay of one session's events, as an ipywidgets view with a static HTML/text fallback.

    Its output is two: a static summary, then the widget.  The summary's stylesheet hides it while the
    widget is mounted beside it, and hides the widget's output when it is not (a reopened notebook).
    """

    def __init__(
        self,
        events: Sequence[ev.Event],
        *,
        source: str = "",
        max_gap: float = MAX_GAP,
        frame: float = FRAME,
        store: Store | None = None,
        path: Path | None = None,
        notebook: str = "",
        trust: str = "",
    ) -> None:
        if not events:
            raise NbagentError(f"{source or 'The log'} has no complete events yet, so there is nothing to replay.")
        self.about = {"notebook": notebook, "trust": trust}  # what the first frame says besides the log's own words
        self.source, self.name = source, short_source(source, Path.cwd(), Path.home())  # the name its header shows
        self.timeline = Timeline(events, source=self.name, max_gap=max_gap, **self.about)
        # Where more events come from: a store and the session's path in it (by default the log file named by source).
        self.store: Store | None = store if store is not None else (FILES if source else None)
        self.path = Path(path if path is not None else source)
        self.max_gap, self.frame = max_gap, frame
        self.widget_updates = 0
        self.display_id = uuid.uuid4().hex
        self.shown = False
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._quiet = False  # set while the turn list follows the cursor, so that it does not move it back
        self._follower: Follower | None = None
        self._summary_due = False  # a timer will send the static summary again
        self.found: list[int] = []  # indices of the events matching the search
        self.matched: list[Found] = []  # ... with their snippets

        self.static_id = uuid.uuid4().hex  # the static summary's display
        self.header = widgets.HTML(value=STYLE + REPLAY_STYLE + self.timeline.header_html())
        self.play_button = widgets.Button(description="Play", icon="play", tooltip="play / pause", layout=widgets.Layout(width="auto"))
        self.prev_button = widgets.Button(
            description="Previous turn",
            icon="step-backward",
            tooltip="start of this turn, or the one before",
            layout=widgets.Layout(width="auto"),
        )
        self.next_button = widgets.Button(
            description="Next turn", icon="step-forward", tooltip="start of the next turn", layout=widgets.Layout(width="auto")
        )
        wide = {"description_width": "initial"}  # the label takes its own width, not the select's: "instant" whole
        self.speed = widgets.Dropdown(
            options=list(SPEEDS), value=1.0, description="speed", style=wide, layout=widgets.Layout(width="165px")
        )
        self.slider = widgets.IntSlider(
            value=1, min=1, max=len(self.events), description="event", continuous_update=True, layout=widgets.Layout(width="420px")
        )
        self.turns = widgets.Dropdown(options=[], description="turn", style=wide, layout=widgets.Layout(width="320px"))
        self.times = widgets.Checkbox(value=False, description="times and event numbers", indent=False, layout=widgets.Layout(width="auto"))
        self.search = widgets.Text(placeholder="words in the transcript", description="search", continuous_update=True)
        self.match_count = widgets.Label(value="")
        self.next_match_button = widgets.Button(description="Next match", disabled=True, layout=widgets.Layout(width="auto"))
        self.matches = MatchList(self.go)
        self.reload_button = widgets.Button(
            description="Reload", icon="refresh", tooltip="read events appended since", layout=widgets.Layout(width="auto")
        )
        self.position = widgets.HTML()
        self.live = widgets.HTML()  # whether new events are followed, or why not
        self.transcript = widgets.HTML()  # scrolls itself, keeping the cursor at its end in sight (REPLAY_STYLE)
        self.widget = widgets.VBox(
            [
                self.header,
                widgets.HBox(
                    [self.prev_button, self.play_button, self.next_button, self.speed, self.slider, self.reload_button], layout=_wrapping()
                ),
                widgets.HBox([self.turns, self.times, self.search, self.next_match_button, self.match_count], layout=_wrapping()),
                self.matches.widget,
                self.live,
                self.position,
                self.transcript,
            ],
            layout=widgets.Layout(border="1px solid var(--jp-border-color2, #e0e0e0)", padding="4px 8px"),
        )
        self.widget.add_class("nbagent")
        self.widget.add_class(f"nbagent-live-{self.display_id}")
        self.play_button.on_click(lambda _: self.toggle())
        self.prev_button.on_click(lambda _: self.previous_turn())
        self.next_button.on_click(lambda _: self.next_turn())
        self.next_match_button.on_click(lambda _: self.next_match())
        self.reload_button.on_click(lambda _: self.reload())
        self.slider.observe(self._on_slider, "value")
        self.speed.observe(lambda _: self._wake.set(), "value")
        self.search.observe(lambda change: self.find(change["new"]), "value")
        self.turns.observe(self._on_turn, "value")
        self.times.observe(lambda _: self._show(self.index), "value")
        keep_on_main_shell(self.widget)
        self._list_turns()
        self._show(0)

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], **options: Any) -> Replay:
        """Replay the log at ``path`` (read without locking; raises LogCorruptError / LogVersionError / OSError)."""
        return cls.from_store(FILES, Path(path), **options)

    @classmethod
    def from_store(cls, store: Store, path: Path, **options: Any) -> Replay:
        """Replay the session at ``path`` of ``store`` (a file, or a database's rows), read without its writer's lock."""
        from ..history import notebook_of

        about = {"notebook": notebook_of(path) if not store.url else "", "trust": trust_word(store, path)}
        return cls(list(store.read(path)), source=session_url(store, path), store=store, path=path, **{**about, **options})

    @property
    def events(self) -> list[ev.Event]:
        """The events replayed."""
        return self.timeline.events

    # Position ------------------------------------------------------------------------------------------
    @property
    def index(self) -> int:
        """The current event, 0-based (the slider shows it 1-based)."""
        return self.slider.value - 1

    def go(self, index: int) -> None:
        """Show event ``index`` (0-based; clamped to the log)."""
        with self._lock:
            self.slider.value = self.timeline.clamp(index) + 1

    def previous_turn(self) -> None:
        """Jump to the start of the previous turn (or of the first event)."""
        self.go(self.timeline.previous_turn(self.index))

    def next_turn(self) -> None:
        """Jump to the start of the next turn (or to the last event)."""
        self.go(self.timeline.next_turn(self.index))

    def go_to_turn(self, turn: int) -> None:
        """Move the cursor to the start of turn ``turn`` (1-based)."""
        self.go(self.timeline.turn_start(turn))

    def _on_turn(self, change: Mapping[str, Any]) -> None:
        if not self._quiet and change["new"] is not None:
            self.go_to_turn(change["new"])

    def _list_turns(self) -> None:
        options = [(self.timeline.turn_heading(t), t) for t in range(1, len(self.timeline.turn_starts) + 1)]
        if list(self.turns.options) != options:
            with self._quietly():
                self.turns.options = options

    @contextlib.contextmanager
    def _quietly(self) -> Iterator[None]:
        """While the widgets follow the cursor, their observers do not move it."""
        self._quiet = True
        try:
            yield
        finally:
            self._quiet = False

    def _on_slider(self, change: Mapping[str, Any]) -> None:
        with self._lock:
            self._show(change["new"] - 1)
        if threading.current_thread() is not self._thread:
            self._wake.set()  # a playing thread notices the jump (its own moves need no wake-up)

    # Search ----------------------------------------------------------------------------------------------
    def find(self, query: str) -> list[int]:
        """List the events matching ``query`` (case-insensitive; deltas are searched as whole messages), each in context."""
        needle = query.strip()
        found = self.timeline.find(needle)
        with self._lock:
            self.matches.show(found, self.timeline.match_html, visible=bool(needle))
            more = (
                f" (first {len(self.matches.events)} listed; Next match goes through all)" if len(found) > len(self.matches.events) else ""
            )
            self.match_count.value = f"{len(found)} matching event{'s' if len(found) != 1 else ''}{more}" if needle else ""
            self.next_match_button.disabled = not found
            self.matched, self.found = found, [f.index for f in found]
        return self.found

    def next_match(self) -> None:
        """Jump to the first match after the current event (wrapping around)."""
        target = self.timeline.next_match(self.found, self.index)
        if target is not None:
            self.go(target)

    # Reading more ---------------------------------------------------------------------------------------
    @property
    def last_seq(self) -> int:
        """The seq of the last event replayed."""
        return int(self.events[-1]["seq"])

    def reload(self) -> int:
        """Read the events written since (another kernel may still be writing); keep the position; return how many are new."""
        if self.store is None:
            return 0
        return self.add(list(self.store.read(self.path, since=self.last_seq)))

    def add(self, events: Sequence[ev.Event], *, live: bool = False) -> int:
        """Add events that came after the last one (any already replayed are skipped), keeping the position.

        ``live`` (followed events): at the last event the view moves on to the new last, and the
        static summary is sent again within SUMMARY_EVERY seconds rather than now.
        """
        with self._lock:
            fresh = [e for e in events if e["seq"] > self.last_seq]
            if not fresh:
                return 0
            if fresh[0]["seq"] != self.last_seq + 1:
                raise NbagentError(f"{self.source}: events {self.last_seq + 1} to {fresh[0]['seq'] - 1} are missing from what was read")
            index = self.index
            at_end = live and index == len(self.events) - 1 and not self.playing
            self.timeline = Timeline(self.events + fresh, source=self.name, max_gap=self.max_gap, **self.about)
            self.slider.max = len(self.events)
            self.header.value = STYLE + REPLAY_STYLE + self.timeline.header_html()
            self._list_turns()
            self.find(self.search.value)
            if at_end:
                self.go(len(self.events) - 1)  # following the end, as a live view does
            else:
                self._show(index)
        if not live:
            self._send_summary()
        else:
            with self._lock:
                due, self._summary_due = self._summary_due, True
            if not due:
                threads.timer(SUMMARY_EVERY, self._send_summary).start()
        return len(fresh)

    def _send_summary(self) -> None:
        """Send the static summary again: a notebook saved later shows what was read."""
        self._summary_due = False
        if self.shown:
            from IPython.display import update_display

            update_display(self.static_bundle(), raw=True, display_id=self.static_id)

    # Following -------------------------------------------------------------------------------------------
    @property
    def following(self) -> bool:
        """Whether events are added as their writer stores them."""
        return self._follower is not None and not self._follower.stopped

    def follow(self) -> None:
        """Add events as they are written (on a daemon thread; LISTEN/NOTIFY on a database, see :mod:`.follow`)."""
        with self._lock:
            if self.store is None or self.following:
                return
            self._follower = Follower(self.store, self.path, self.last_seq, self._followed, self._stopped)
            self._live(f"Following: new events are added as {self.name} is written.")

    def stop_following(self, why: str = "Not following new events; Reload reads them.") -> None:
        """Add no more events as they are written."""
        with self._lock:
            if self.following:
                assert self._follower is not None
                self._follower.stop()
                self._live(why)

    def _followed(self, events: list[ev.Event]) -> None:
        try:
            self.add(events, live=True)
        except NbagentError as exc:
            self.stop_following(f"Stopped following: {str(exc).rstrip('.')}. Reload reads new events.")

    def _stopped(self, why: str) -> None:
        self._live(f"Stopped following: {why.rstrip('.')}. Reload reads new events.")

    def _live(self, text: str) -> None:
        self.widget_updates += set_value(self.live, f'<div class="nbagent-following">{esc(text)}</div>')

    # Rendering ---------------------------------------------------------------------------------------------
    def _show(self, index: int) -> None:
        times = self.times.value
        self.widget_updates += set_value(
            self.position, f'<div class="nbagent-position">{esc(self.timeline.position_text(index, times=times))}</div>'
        )
        self.widget_updates += set_value(self.transcript, self.timeline.frame(index, times=times))
        self.prev_button.disabled = index == 0
        self.next_button.disabled = index >= len(self.events) - 1
        turn = self.timeline.turn_of[index] or None
        if self.turns.value != turn:
            with self._quietly():
                self.turns.value = turn

    # Display ----------------------------------------------------------------------------------------------
    def static_bundle(self) -> dict[str, Any]:
        """The static summary output: what the session is, the hint to re-run the cell, the whole transcript (folded)."""
        transcript, plain = self.timeline.static()
        timeline, key = self.timeline, self.display_id
        summary = html.header_html(
            f"Replay: {timeline.title}", self.name, origin=f"{timeline.size_text()} · {timeline.forked_text()}{timeline.statuses[-1]}"
        )
        page = (
            f'{sibling_style(key)}<div class="nbagent nbagent-static-{key} {NO_MATH}">{STYLE}{summary}'
            f'<p class="nbagent-hint"><b>{esc(HINT)}</b></p><details><summary>the whole transcript</summary>{transcript}</details></div>'
        )
        return {"text/html": page, "text/plain": f"{HINT}\n{plain}"}

    def bundle(self) -> dict[str, Any]:
        """The widget's own output: the widget view, and a line of text for viewers without widgets."""
        return {**(self.widget._repr_mimebundle_() or {}), "text/plain": f"Replay of {self.name or 'a session'}. {HINT}"}

    def show(self) -> None:
        """Display the replay: the static summary, then the widget (the summary hides itself while the widget is mounted)."""
        from IPython.display import display

        display(self.static_bundle(), raw=True, display_id=self.static_id)
        display(self.bundle(), raw=True, metadata=LIVE, display_id=self.display_id)  # saved unlinked by nbagent.server
        self.shown = True

    def _ipython_display_(self) -> None:
        self.show()

    def close(self) -> None:
        """Stop playback and following, and close the widgets."""
        self.stop_following()
        self.pause()
        close_all(self.widget)
