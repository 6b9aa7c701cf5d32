"""The live panel of one ``%agent`` cell (ipywidgets); terminal IPython's view is :mod:`.text_view`.

It is a session subscriber: ``session.subscribe(panel)`` feeds it every
event.  Events may arrive on the agent loop's thread; the panel serializes
them with a lock and batches streamed text so that a long answer costs at
most ``1 / interval`` widget updates per second.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

import ipywidgets as widgets

from .. import threads
from ..agent import approval as approvals
from ..record import events as ev
from ..render import html as render
from ..render.live_views import LIVE
from ..render.parts import esc
from ..render.style import STYLE
from ..render.view import FINAL_STATUSES, stream_effect
from ..state.approval_rule import DECLINED, ApprovalRequest, Decision, Here, who_can_answer
from .activity import Countdown, activity_html  # the header's marks, and a retry's wait counted down
from .comm_route import keep_on_main_shell
from .output import CellOutput
from .pump import CommPump, current_kernel
from .text_view import TextView as TextView  # terminal IPython's view, defined here before: still importable from here
from .widget_ops import close_all, set_value

BATCH_INTERVAL = 0.1  # seconds between streamed-text updates (at most ~10 widget updates a second)


class Pages(Protocol):
    """Where else a question is shown and may be answered: every notebook page on the kernel (cells_comm.Bridge)."""

    def waiting(self, session: str, tool_use_id: str, answer: Callable[[bool], None], question_html: str, cell_id: str | None) -> None:
        """A question waits; ``answer(approved)`` answers it as the buttons do."""

    def ended(self, session: str, tool_use_id: str, decision: str, by: str) -> None:
        """The question ended: approved, declined or interrupted."""


class Panel(CellOutput):
    """Live view of one agent cell: request, streamed answer, tool calls and results, approvals, status, usage.

    When the turn ends (:meth:`finish`, also after an interrupt or an error) its output becomes the static
    transcript and its widgets are closed: a reopened notebook shows the transcript, never a missing widget.
    """

    shows_questions = True

    def __init__(
        self,
        title: str,
        *,
        interval: float = BATCH_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        link: str = "",
        session: str = "",
        cell_id: str | None = None,
    ) -> None:
        super().__init__(title)
        self.link = link  # the session's live page on the Jupyter server, shown in the header while the turn runs
        self.session_name = session  # the session's name, and the cell running the turn: a question's address for the pages
        self.cell_id = cell_id
        self.pages: Pages | None = None  # the notebook pages on the kernel, where a question also waits (docs/cells.md)
        self.describe: Callable[[ApprovalRequest], str] = lambda request: ""  # a question worded elsewhere (a cell edit's), else ''
        self.interval = interval
        self.clock = clock
        self.widget_updates = 0  # widget value changes made so far (measures batching)
        self.display_id = uuid.uuid4().hex
        self.shown = False
        self._lock = threading.RLock()
        self._stream_text: list[str] = []  # text of the message being streamed
        self._stream_widget: widgets.HTML | None = None
        self._dirty = False  # streamed text not yet on screen
        self._last_flush = float("-inf")
        self._timer: threading.Timer | None = None
        self._pending: dict[str, widgets.HTML] = {}  # a logged approval question, until the panel asks it itself
        self._asked: set[str] = set()  # calls whose approval the panel's own widget shows, decision included
        self._working: dict[str, widgets.HTML] = {}  # calls running now (several side by side): their result takes the row's place
        self._waiting = 0  # approvals the panel is asking now (the header says so until each is answered)
        self.header = widgets.HTML(value=self._header_html())
        self._countdown = Countdown(self._lock, self._set_status)  # a retry's wait, counted down in the header (activity.py)
        self.items = widgets.VBox([])
        self.widget = widgets.VBox([self.header, self.items])  # laid out as the static transcript is (style.py)
        self.widget.add_class("nbagent")

    # Receiving events ----------------------------------------------------------------------------
    def __call__(self, event: ev.Event) -> None:
        """Render one session event (thread-safe): streamed text is batched, everything else shown at once."""
        with self._lock:
            if self.finished:  # its output is the static transcript now: no more widgets
                self._follow(event)
                return
            if event["type"] == ev.DELTA:
                self.events.append(event)  # the static transcript keeps a stream that was cut off
                if "text" in event:
                    self._stream_text.append(event["text"])
                    self._dirty = True
                    self._maybe_flush()
                return
            self._flush()
            effect = stream_effect(event)
            if effect is not None:
                self._end_stream(replace=effect == "replace")
            notes, new_status = self._follow(event)
            if new_status is not None:
                self._set_status(new_status)
            self._countdown.follow(event)
            call = str(event.get("tool_use_id"))
            if event["type"] == ev.APPROVAL and call in self._asked:
                return  # the panel's own question shows the decision
            if event["type"] == ev.TOOL_STARTED:
                self._show_working(call, event.get("attempt"))
                return
            fragment = render.event_html(event, tool_names=self._tool_names, notes=notes)
            working = self._working.pop(call, None) if event["type"] == ev.TOOL_RESULT else None
            if fragment:
                child = widgets.HTML(value=fragment)
                if working is not None and working in self.items.children:
                    self._swap(working, child)
                else:
                    self._add(child)
                if event["type"] == ev.APPROVAL and event.get("decision") == "pending":
                    self._pending[call] = child

    def _maybe_flush(self) -> None:
        wait = self._last_flush + self.interval - self.clock()
        if wait <= 0:
            self._flush()
        elif self._timer is None:
            # Whatever arrives before the timer fires goes out with it: a stalled stream still shows its tail.
            self._timer = threads.timer(wait, self._timer_flush)
            self._timer.start()

    def _timer_flush(self) -> None:
        with self._lock:
            self._timer = None
            self._flush()

    def _flush(self) -> None:
        """Put the streamed text on screen now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._dirty:
            return
        self._dirty = False
        self._last_flush = self.clock()
        html = render.markdown_html("".join(self._stream_text))
        if self._stream_widget is None:
            self._stream_widget = widgets.HTML(value=html)
            self.widget_updates += 1
            self._add(self._stream_widget)
        else:
            self.widget_updates += set_value(self._stream_widget, html)

    def _end_stream(self, *, replace: bool = False) -> None:
        """Forget the streamed text; with ``replace`` its widget is removed (the full message is rendered instead), else labelled cut off."""
        if replace and self._stream_widget is not None:
            self.items.children = tuple(c for c in self.items.children if c is not self._stream_widget)
            self.widget_updates += 1
            close_all(self._stream_widget)
        elif self._stream_widget is not None and self._stream_text:
            self.widget_updates += set_value(self._stream_widget, render.cut_off_html("".join(self._stream_text)))
        self._stream_widget, self._stream_text, self._dirty = None, [], False

    def _show_working(self, call: str, attempt: Any) -> None:
        """A row saying the call is running (one per call: a call run again reuses it)."""
        html = render.working_html(self._tool_names, call, attempt)
        row = self._working.get(call)
        if row is None:
            self._working[call] = row = widgets.HTML(value=html)
            self._add(row)
        else:
            self.widget_updates += set_value(row, html)

    def _swap(self, old: widgets.Widget, new: widgets.Widget) -> None:
        self.items.children = tuple(new if c is old else c for c in self.items.children)
        self.widget_updates += 1
        close_all(old)

    def _add(self, child: widgets.Widget) -> None:
        self.items.children = (*self.items.children, child)
        self.widget_updates += 1

    def _set_status(self, status: str) -> None:
        self.status = status
        self.widget_updates += set_value(self.header, self._header_html())

    def _header_html(self) -> str:
        header = render.header_html(self.title, self.status_line(), origin=self.origin, link=self.link)
        return STYLE + ("" if self.finished else activity_html(waiting=self._waiting > 0)) + header

    def _wait(self, step: int) -> None:
        """Count an approval asked (1) or answered (-1), and redraw the header's mark."""
        with self._lock:
            self._waiting = max(0, self._waiting + step)
            self.widget_updates += set_value(self.header, self._header_html())

    def recorded(self, then: str) -> None:
        """Say in the header that the events so far come from the log (see :meth:`CellOutput.recorded`)."""
        with self._lock:
            super().recorded(then)
            self.widget_updates += set_value(self.header, self._header_html())

    # Display ----------------------------------------------------------------------------------------
    def bundle(self) -> dict[str, Any]:
        """The display bundle: the live widget view and the transcript so far; once finished, the transcript alone."""
        with self._lock:
            if self.finished:
                return self.static_bundle()
            return {**(self.widget._repr_mimebundle_() or {}), **self.static_bundle()}

    def transcript_html(self) -> str:
        """The static transcript of what this panel has shown."""
        return str(self.static_bundle()["text/html"])

    def show(self) -> None:
        """Display the panel (live widget + static fallback) in the current cell's output."""
        from IPython.display import display

        # Marked live: the server extension saves it without its widget reference (nbagent/render/live_views.py).
        display(self.bundle(), raw=True, metadata=LIVE, display_id=self.display_id)
        self.shown = True

    def finish(self, status: str | None = None) -> None:
        """End the panel: flush, set the final status, make its output the static transcript, close its widgets.

        A finished panel never changes again, so its output no longer needs a widget: JupyterLab would
        show "model not found" for one in a reopened notebook (its widget manager has no fallback).
        """
        with self._lock:
            if self.finished:
                return
            self._flush()
            self.finished = True  # first: the header's last value has no "working…" mark
            self._countdown.stop()
            if status is not None:
                self._set_status(status)
            elif self.status not in FINAL_STATUSES:
                self._set_status("done")
            bundle = self.static_bundle()
        if self.shown:
            from IPython.display import update_display

            update_display(bundle, raw=True, metadata=self.final_metadata(), display_id=self.display_id)
        self.close()

    def close(self) -> None:
        """Close every widget of the panel (the frontend drops them)."""
        with self._lock:
            self._countdown.stop()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            close_all(self.widget)

    # Approval ---------------------------------------------------------------------------------------
    def here(self) -> Here:
        """What can be told now of who could answer: the kernel, and whether the request's front end lets a person answer."""
        kernel = current_kernel()
        terminal = approvals.TERMINAL.here()  # outside a kernel the panel asks as the terminal does
        return replace(terminal, kernel=kernel is not None, frontend_stdin=kernel is not None and _frontend_can_answer(kernel))

    def ask(self, request: ApprovalRequest) -> Decision:
        """Ask the user to approve a tool call with buttons in the panel; blocks until answered (or interrupted).

        Buttons are used inside a kernel whose frontend can answer (the request
        allows stdin, which headless runners like nbclient do not); where they
        cannot be pumped, a text prompt on stdin is used; where nobody can
        answer, the call is declined with a note for the model.
        """
        who = who_can_answer(self.here())
        if who != "panel":
            return self._ask_text(request) if who == "console" else self._nobody(request)
        pump = CommPump.for_current_kernel()
        if pump is None and threading.current_thread() is threading.main_thread():
            return self._ask_text(request)
        return self._ask_buttons(request, pump)

    def _ask_buttons(self, request: ApprovalRequest, pump: CommPump | None) -> Decision:
        answered = threading.Event()
        answer: list[Decision] = []

        def choose(decision: Decision) -> None:
            if not answer:
                answer.append(decision)
                answered.set()

        def reply(approved: bool) -> None:  # a click here, or an approval_answer from any page on the kernel
            choose(Decision(True, "panel") if approved else Decision(False, "panel", DECLINED))

        # a server's claims under its name (an MCP server's annotations), then nbagent's own words: never one label for both
        about = f'<div class="nbagent-approval-about">{esc(request.about)}</div>' if request.about else ""
        claims = (render.note_html(request.claims, label="the server says") if request.claims else "") + about
        question = widgets.HTML(
            value=self.describe(request) or render.approval_html(request.tool_name, request.input, request.reason) + claims
        )
        buttons: list[widgets.Button] = []
        asking = False  # the header says so, until the finally block
        pages = self.pages
        told = False  # the pages were told the question waits: the finally block tells them how it ended
        try:  # an interrupt may land anywhere from here on: the finally block always closes the question
            approve = widgets.Button(description="Approve", icon="check", tooltip="run this call")
            decline = widgets.Button(description="Decline", icon="times", tooltip="do not run it; the model is told")
            approve.add_class("nbagent-approve")
            decline.add_class("nbagent-decline")
            buttons += [approve, decline]
            approve.on_click(lambda _: reply(True))
            decline.on_click(lambda _: reply(False))
            box = widgets.VBox([question, widgets.HBox([approve, decline])])
            keep_on_main_shell(box)
            with self._lock:
                self._flush()
                self._place(request.tool_use_id, box)
                self._waiting, asking = self._waiting + 1, True
                self._set_status("waiting for approval")
            if pages is not None:
                told = True
                pages.waiting(self.session_name, request.tool_use_id, reply, question.value, self.cell_id)
            if pump is None:
                while not answered.wait(0.1):  # the kernel's loop delivers the click (it is not blocked by us)
                    pass
            else:
                with pump:
                    while not answered.is_set() and pump.poll(0.1):
                        pass
                if not answered.is_set():  # the pump failed (it warned): ask on stdin instead
                    choose(self._ask_text(request))
        finally:
            for button in buttons:  # gone once decided: the question's own line says what was decided
                button.disabled, button.layout.display = True, "none"
            with self._lock:
                if asking:
                    self._wait(-1)
                if answer:
                    decided = answer[0]
                    verdict = "approved" if decided.approved else "declined"
                    self.widget_updates += set_value(question, question.value + render.decision_html(verdict, decided.by, decided.note))
                else:
                    self.widget_updates += set_value(question, f"{question.value} — <i>not answered (interrupted)</i>")
            if told and pages is not None:
                pages.ended(self.session_name, request.tool_use_id, verdict if answer else "interrupted", answer[0].by if answer else "")
        return answer[0]

    def _ask_text(self, request: ApprovalRequest) -> Decision:
        """Ask at a y/N prompt in the cell's output, as the terminal does (the header says the panel waits)."""
        with self._lock:
            self._flush()
            self._waiting += 1
            self._set_status("waiting for approval")
        try:
            return approvals.console(request, out=sys.stdout, prompt="Approve? [y/N] ")
        except Exception as exc:  # e.g. StdinNotImplementedError: the frontend has no stdin
            return self._nobody(request, why=f"no way to ask ({type(exc).__name__})")
        finally:
            self._wait(-1)

    def _nobody(self, request: ApprovalRequest, *, why: str = "no person can answer here") -> Decision:
        """Decline as the terminal does where nobody can answer, and show the question with that answer in the panel."""
        decision = approvals.nobody(request, why)
        with self._lock:
            asked = render.approval_html(request.tool_name, request.input, request.reason)
            self._place(request.tool_use_id, widgets.HTML(value=asked + render.decision_html("declined", "nobody", decision.note)))
        return decision

    def _place(self, tool_use_id: str, child: widgets.Widget) -> None:
        """Show the panel's own approval question where the logged one is (once: it shows the decision too)."""
        logged = self._pending.pop(tool_use_id, None)
        self._asked.add(tool_use_id)
        if logged is None or logged not in self.items.children:
            self._add(child)
            return
        self.items.children = tuple(child if c is logged else c for c in self.items.children)
        self.widget_updates += 1
        close_all(logged)


def _frontend_can_answer(kernel: Any) -> bool:
    """Whether the running request came from an interactive frontend (headless runners send allow_stdin=False)."""
    try:
        parent = kernel.get_parent("shell") or {}
    except Exception:
        return False
    return bool((parent.get("content") or {}).get("allow_stdin", False))
