"""What a cell's output shows of a session, and the static panel of a re-rendered turn (no widgets).

A cell that only re-renders recorded turns (a re-run after a restart) imports neither
ipywidgets nor the live panel: it shows one static output, the transcript.
"""

from __future__ import annotations

from typing import Any

from ..agent import approval as approvals
from ..record import events as ev
from ..render import html as render
from ..render.parts import Start, ToolNames, timestamp, when
from ..render.rows import ToolCalls
from ..render.text import transcript_text
from ..render.view import FINAL_STATUSES, STARTING, follow, status, status_line
from ..state import providers
from ..state.approval_rule import ApprovalRequest, Decision, Here
from ..state.asides import Asides
from ..state.fold import State
from .next_step import after_interrupt
from .reopen import metadata


class CellOutput:
    """What a cell's output has shown of a session: its events, title, status and origin, as the static transcript."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.origin = ""  # where the events come from, when not from a run in this cell (see recorded)
        self.status = STARTING
        self.state = State()  # the fold of the events seen, for the status line
        self.events: list[ev.Event] = []  # every event shown, for the static transcript
        self.start = Start(ToolNames(), Asides())  # where the session stood before the first event
        self.finished = False
        self.provider = ""  # where Claude ran, as the last model_call recorded it (the header names a cloud)
        self.session_name = ""  # the session's name: the final output's marker names it
        self.next = ""  # what to do next, said at the end: a live panel's interruption (next_step.py)
        self._tool_names = ToolCalls()  # names and inputs: a result's row says what its call did
        self._asides = Asides()

    @property
    def usage(self) -> dict[str, int]:
        """Tokens used by the messages shown so far."""
        return self.state.usage

    def begin(self, start: Start) -> None:
        """Start from where the session stands (see :class:`Start`): the calls it names, and before the first event, its notes."""
        self._tool_names.update(start.names)
        if not self.events:
            self.start, self._asides = start.fresh(), start.fresh().asides
            self.state.context_tokens, self.state.window = start.context  # the header's "context 143k / 200k" from the start
            self.state.usage.update(start.usage)  # and the session's tokens so far (render/parts.tokens_line), as every view shows them
            self.state.spend.update((key, list(counts)) for key, counts in start.spend)  # and its cost so far
            usage, spend, replies = start.turn  # and those of a request it continues (a new request starts them again)
            self.state.turn_usage.update(usage)
            self.state.turn_spend.update((key, list(counts)) for key, counts in spend)
            self.state.turn_replies = replies

    def recorded(self, then: str) -> None:
        """Say in the header that the events so far come from the log: when they were recorded, and ``then`` what."""
        first = next((ts for ts in map(timestamp, self.events) if ts is not None), None)
        self.origin = f"from the log, recorded {when(first)}; {then}"

    def _follow(self, event: ev.Event) -> tuple[list[str], str | None]:
        """Note an event; the notes to the model the fold put before it, and the status after it."""
        self.events.append(event)
        if event.get("type") == ev.MODEL_CALL and isinstance(event.get("provider"), str):
            self.provider = event["provider"]
        self._tool_names.learn(event)
        notes = self._asides.see(event)
        now = status(event, follow(self.state, event))
        if event.get("type") == ev.INTERRUPTED and getattr(self, "shows_questions", False):  # a re-rendered turn is not continued
            self.next = after_interrupt(self.state)
        elif event.get("type") != ev.NOTE:
            self.next = ""  # the turn went on
        return notes, now

    def status_line(self) -> str:
        """The header's status: the status and token figures, then the cloud Claude ran on ("on Amazon Bedrock"), if one."""
        return " · ".join(part for part in (status_line(self.status, self.state), providers.served_by(self.provider)) if part)

    def static_bundle(self) -> dict[str, Any]:
        """The finished output: the transcript as text/html and text/plain, and no widget (a saved notebook shows it as is)."""
        line = self.status_line()
        return {
            "text/html": render.transcript_html(
                self.events, title=self.title, status=line, origin=self.origin, start=self.start, after=self.next
            ),
            "text/plain": transcript_text(self.events, title=self.title, status=line, start=self.start, after=self.next),
        }

    def final_metadata(self) -> dict[str, Any]:
        """The final output's display metadata: the marker of the events it shows (a reopened page reads it), else {}.

        An interrupted turn with work left (:attr:`next`) says so (``unfinished``): when the kernel stops before
        running anything else, as a server stopped with SIGTERM does right after interrupting it, the page says under
        the cell to run it to continue (labextension/src/gone.ts).
        """
        if not self.session_name or not self.events:
            return {}
        found = metadata((self.session_name, int(self.events[0]["seq"]), int(self.events[-1]["seq"])))
        if self.next:
            found["nbagent"]["unfinished"] = True
        return found


class StaticPanel(CellOutput):
    """The panel of a cell that only re-renders recorded events: no widgets, one static output when it finishes."""

    shows_questions = False

    def __call__(self, event: ev.Event) -> None:
        """Note one session event."""
        self.status = self._follow(event)[1] or self.status

    def finish(self, status: str | None = None) -> None:
        """Set the final status and display the static transcript (once)."""
        from IPython.display import display

        if not self.finished:
            self.finished = True
            self.status = status or (self.status if self.status in FINAL_STATUSES else "done")
            display(self.static_bundle(), raw=True)

    def here(self) -> Here:
        """Nobody can be asked: a re-rendered turn runs nothing."""
        return Here()

    def ask(self, request: ApprovalRequest) -> Decision:
        """Decline: a re-rendered turn runs nothing, so this is never asked."""
        return approvals.nobody(request, "a re-rendered turn asks nothing")
