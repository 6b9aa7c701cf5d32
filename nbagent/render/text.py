"""Events as terminal text: the one renderer of ``nbagent show`` and ``tail``, terminal IPython and the text/plain transcript.

Each event type has one function in ``SHOW`` saying what it shows: a line, and text indented under it
(or, for a delta, text streamed as it comes).  :class:`Printer` writes them through
:func:`nbagent.terminal.wrap`, so no control character from a log reaches a terminal.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TextIO

from .. import terminal
from ..record import events as ev
from ..record import redact
from ..state import lineage
from ..state.asides import Asides, to_model
from .parts import (
    Start,
    abandoned_words,
    clip,
    compacting_words,
    compaction_words,
    content_blocks,
    dumps,
    gap,
    indent,
    kind_of,
    note_summary,
    note_text,
    note_words,
    payload,
    request_parts,
    server_compaction_words,
    short_tokens,
    shorten,
    text_of,
    thinking_shown,
    thinking_words,
    timestamp,
    tool_name,
    usage_text,
    when,
)
from .rows import ToolCalls, decision_words, input_of, question, result_row, work
from .view import stream_effect

__all__ = ["SHOW", "Printer", "Shown", "clip", "show", "shorten", "text_of", "transcript", "transcript_text", "when"]

RESULT_LIMIT = 600  # characters of a tool result shown by ``show`` and ``tail``
VIEW_LIMIT = 2000  # ... by terminal IPython and the text/plain transcript
ARGUMENTS_LIMIT = 400


class Shown(NamedTuple):
    """What one event shows as text."""

    line: str = ""  # the event's own line
    body: str = ""  # text shown indented under it
    stream: str = ""  # text streamed as it arrives (deltas)

    @property
    def text(self) -> str:
        """The line with its body indented under it (or the streamed text)."""
        if not self.line:
            return self.stream
        return f"{self.line}\n{indent(self.body)}" if self.body else self.line


@dataclass
class Context:
    """What showing an event depends on besides the event."""

    names: Mapping[str, str]
    result_limit: int = RESULT_LIMIT
    streamed: bool = False  # the message's text was already streamed live
    notes: Sequence[str] = ()  # for a request: the notes to the model the fold put before it


def _session_start(e: Mapping[str, Any], c: Context) -> Shown:
    forked = lineage.of_meta(e.get("meta"))
    if forked is not None:  # a fork's own first event: what came before it is its parent's
        return Shown(f"session {e.get('session_id', '')} started, {forked.words} (the events above are its parent's)")
    return Shown(f"session {e.get('session_id', '')} started")


def model_notes(notes: Iterable[str], label: str = "note to the model") -> str:
    """Notes to the model, one line each (as people read them); a note of several lines: its first, the rest indented."""
    lines = []
    for note in notes:
        summary, rest = note_summary(note_words(note))
        lines.append(f"{label}: {summary}\n" + (indent(rest) + "\n" if rest else ""))
    return "".join(lines)


def _user_msg(e: Mapping[str, Any], c: Context) -> Shown:
    legacy, content = request_parts(e.get("content"))
    return Shown(f"{model_notes([*c.notes, *legacy])}request:", text_of(content))


def _model_call(e: Mapping[str, Any], c: Context) -> Shown:
    attempt = e.get("attempt", 1)
    return Shown(f"calling {e.get('model') or 'the model'}" + (f" (attempt {attempt})" if attempt != 1 else ""))


def _delta(e: Mapping[str, Any], c: Context) -> Shown:
    text = e.get("text")
    return Shown(stream=text if isinstance(text, str) else "")


def _assistant_msg(e: Mapping[str, Any], c: Context) -> Shown:
    lines = []
    for block in content_blocks(e.get("content")):
        if block.get("type") == "text" and not c.streamed:
            lines.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            lines.append(f"-> {block.get('name')}({clip(dumps(block.get('input')), ARGUMENTS_LIMIT)})")
        elif thinking_shown(block):
            lines.append(f"[{thinking_words(block)}]")  # collapsed
        elif block.get("type") == "compaction":
            lines.append(f"[compaction] {server_compaction_words(block)}:\n{indent(clip(redact.block_text(block), c.result_limit))}")
    return Shown(f"assistant ({e.get('stop_reason') or 'no stop reason'}; {usage_text(e.get('usage'))})", "\n".join(lines))


def _model_error(e: Mapping[str, Any], c: Context) -> Shown:
    return Shown(f"model error: {e.get('message', '')}" + (" (will retry)" if e.get("retryable") else ""))


def _approval(e: Mapping[str, Any], c: Context) -> Shown:
    call = e.get("tool_use_id")
    name = tool_name(c.names, call)
    if e.get("decision") == "pending":
        known = str(call) in getattr(c.names, "inputs", {})
        asked = question(name, input_of(c.names, call) if known else None, e.get("reason"), str(e.get("question", "")))
        return Shown(f"approval asked: {asked.question}" + (f" {asked.why}" if asked.why else ""), asked.code)
    return Shown(f"{name}: {decision_words(e.get('decision'), e.get('by'), e.get('note'))}")


def _tool_started(e: Mapping[str, Any], c: Context) -> Shown:
    key = " [idempotency key]" if e.get("idempotency_key") else ""
    attempt = e.get("attempt", 1)
    again = f" (attempt {attempt}: an earlier attempt left no result, e.g. the process was killed)" if attempt != 1 else ""
    return Shown(f"running {e.get('name')} ({e.get('effect')}){key}{again}")


def _tool_result(e: Mapping[str, Any], c: Context) -> Shown:
    name = tool_name(c.names, e.get("tool_use_id"))
    if e.get("abandoned"):
        return Shown(f"note: {abandoned_words(name, e.get('abandoned'))}")
    content, is_error = e.get("content"), bool(e.get("is_error"))
    row = result_row(name, input_of(c.names, e.get("tool_use_id")), content, is_error=is_error)
    shown = work(name, content, is_error=is_error)
    if not shown.blocks:  # nothing is the work to show: the raw result, cut (a terminal has no collapsed rows)
        return Shown(row.text, clip(text_of(content), c.result_limit))
    body = "\n".join(text_of([b]) for b in shown.blocks)
    more = f"\n… {shown.more:,} more line{'s' if shown.more != 1 else ''} in the log" if shown.more else ""
    return Shown(row.text, clip(body, c.result_limit) + more)


def _interrupted(e: Mapping[str, Any], c: Context) -> Shown:
    pending = e.get("open_calls") or []
    extra = f", {len(pending)} tool call(s) open" if pending else ""
    return Shown(f"interrupted (during {e.get('during', '?')}{extra})")


def _note(e: Mapping[str, Any], c: Context) -> Shown:
    if to_model(e) is not None:
        return Shown()  # a note to the model is shown with the request it goes before
    return Shown(f"note: {clip(note_text(e), c.result_limit)}")


def _trust(e: Mapping[str, Any], c: Context) -> Shown:
    return Shown(f"trusted: this user vouched for the events up to {e.get('vouches', '?')} (nbagent trust)")


def _context(e: Mapping[str, Any], c: Context) -> Shown:
    """The context settings of the requests from here on (a log view shows them; the panel and exports do not)."""
    parts = []
    if isinstance(e.get("window"), int) and e["window"]:
        parts.append(f"window {short_tokens(e['window'])} tokens")
    if isinstance(e.get("compact"), str):
        trigger = e.get("trigger")
        parts.append(f"compaction {e['compact']}" + (f" at {short_tokens(trigger)} tokens" if isinstance(trigger, int) and trigger else ""))
    if "result_budget" in e:
        budget = e.get("result_budget")
        parts.append(
            f"tool results cut at {budget:,} characters in requests" if isinstance(budget, int) and budget else "tool results whole"
        )
    if isinstance(e.get("keep_tool_results"), int) and e["keep_tool_results"] > 0:
        parts.append(f"only the latest {e['keep_tool_results']} tool results kept")
    return Shown(f"context settings: {', '.join(parts) or dumps(payload(e))}")


def _compaction_started(e: Mapping[str, Any], c: Context) -> Shown:
    return Shown(compacting_words(e))


def _compaction(e: Mapping[str, Any], c: Context) -> Shown:
    return Shown(f"compaction: {compaction_words(e)}", clip(redact.text(str(e.get("summary", ""))), c.result_limit))


def _unknown(e: Mapping[str, Any], c: Context) -> Shown:
    return Shown(f"{e.get('type')}: {clip(dumps(payload(e)), ARGUMENTS_LIMIT)}")


SHOW: dict[str, Callable[[Mapping[str, Any], Context], Shown]] = {
    ev.SESSION_START: _session_start,
    ev.USER_MSG: _user_msg,
    ev.MODEL_CALL: _model_call,
    ev.DELTA: _delta,
    ev.ASSISTANT_MSG: _assistant_msg,
    ev.MODEL_ERROR: _model_error,
    ev.APPROVAL: _approval,
    ev.TOOL_STARTED: _tool_started,
    ev.TOOL_RESULT: _tool_result,
    ev.INTERRUPTED: _interrupted,
    ev.NOTE: _note,
    ev.TRUST: _trust,
    ev.CONTEXT: _context,
    ev.COMPACTION_STARTED: _compaction_started,
    ev.COMPACTION: _compaction,
}


def show(
    event: Mapping[str, Any],
    names: Mapping[str, str] | None = None,
    *,
    result_limit: int = RESULT_LIMIT,
    streamed: bool = False,
    notes: Sequence[str] = (),
) -> Shown:
    """What ``event`` shows as text (not yet escaped for a terminal: :class:`Printer` and :func:`transcript_text` do that).

    ``notes``: for a request, the notes to the model the fold put before it (see :class:`nbagent.state.asides.Asides`).
    """
    return SHOW.get(kind_of(event), _unknown)(event, Context(names or {}, result_limit, streamed, notes))


class Printer:
    """Writes events to a terminal as a readable transcript; streamed text is written as it arrives.

    Call it with each event in order (it is a session subscriber).  ``deltas``
    says whether streamed text is shown live; when it was, the finished
    assistant message does not repeat it.  ``stamps`` puts each event's time first.
    """

    def __init__(self, out: TextIO, *, result_limit: int = RESULT_LIMIT, deltas: bool = True, stamps: bool = True) -> None:
        self.out = terminal.wrap(out)
        self.result_limit = result_limit
        self.deltas = deltas
        self.stamps = stamps
        self.names = ToolCalls()
        self.asides = Asides()  # what the fold puts before the next request
        self._streamed = False  # text was streamed since the last event line
        self._held: list[str] = []  # streamed text not shown live (deltas=False)
        self._mid_line = False
        self._last_ts = 0.0

    def begin(self, start: Start) -> None:
        """Start from where a session stands (the events before the first one written here are known only through it)."""
        start = start.fresh()
        self.names.update(start.names)
        self.asides = start.asides

    def __call__(self, event: ev.Event) -> None:
        """Write one event."""
        self.names.learn(event)
        effect = stream_effect(event)
        if effect is not None:
            self._write_held(effect == "end")
        notes = self.asides.see(event)
        shown = show(event, self.names, result_limit=self.result_limit, streamed=self._streamed, notes=notes)
        if shown.stream:
            self._stream(shown.stream)
        elif shown.line:
            self._end_stream_line()
            self.out.write(self._stamp(event) + shown.text + "\n")
            self._streamed = False
        self.out.flush()

    def _stream(self, text: str) -> None:
        if not self.deltas:
            self._held.append(text)  # shown if no finished message replaces it
            return
        if not self._mid_line:
            self.out.write("  assistant> ")
        self.out.write(text)
        self._streamed = self._mid_line = True

    def _write_held(self, show: bool) -> None:
        """Write text streamed but not shown live when nothing will replace it (the stream was cut off); forget it."""
        if show and self._held:
            self._end_stream_line()
            self.out.write(f"  assistant (cut off)> {''.join(self._held)}\n")
        self._held = []

    def _stamp(self, event: ev.Event) -> str:
        ts = timestamp(event)
        if not self.stamps or ts is None:
            return ""
        since = f" {gap(ts - self._last_ts)}" if self._last_ts and ts - self._last_ts >= 1 else ""
        self._last_ts = ts
        return f"[{when(ts, date=False)}{since}] "

    def _end_stream_line(self) -> None:
        if self._mid_line:
            self.out.write("\n")
            self._mid_line = False

    def finish(self) -> None:
        """End a half-written streamed line; say which notes to the model wait for the next request."""
        self._end_stream_line()
        self._write_held(True)
        self.out.write(model_notes(self.asides.notes, "note to the model, for the next request"))
        self.asides.notes = []
        self.out.flush()


def transcript(
    events: Iterable[ev.Event], out: TextIO, *, result_limit: int = RESULT_LIMIT, stamps: bool = True, start: Start | None = None
) -> None:
    """Write a finished session's transcript (streamed text shown once, from the final messages); ``start``: see :class:`Start`."""
    printer = Printer(out, result_limit=result_limit, deltas=False, stamps=stamps)
    if start is not None:
        printer.begin(start)
    for event in events:
        printer(event)
    printer.finish()


def transcript_text(
    events: Iterable[ev.Event],
    *,
    title: str = "",
    status: str = "",
    result_limit: int = VIEW_LIMIT,
    start: Start | None = None,
    after: str = "",
) -> str:
    """A whole transcript as plain text without times, under a title line (the text/plain of a cell's output); ``after``: what next."""
    buffer = io.StringIO()
    if title or status:
        terminal.wrap(buffer).write(f"{title} — {status}\n" if status else f"{title}\n")
    transcript(events, buffer, result_limit=result_limit, stamps=False, start=start)
    if after:
        terminal.wrap(buffer).write(f"next: {after}\n")
    return buffer.getvalue().rstrip("\n")
