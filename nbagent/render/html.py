"""Events as safe HTML: the one renderer of the live panel, its static transcript and the replay.

Model output is untrusted: its Markdown becomes HTML only through :mod:`.safe_html` (no raw HTML, an
allow-list, no image, no live link to this machine). The only images shown are tool-result images within
the pixel limits of :mod:`.images`, whose ``data:`` URIs this module builds itself from checked base64.

Every colour and style is in one stylesheet (:mod:`.style`), scoped by the class ``nbagent``, put once
in each output by nbagent itself around the sanitized content: the static transcript and the live
panel and replay (in their header widget) look the same.  Colours are JupyterLab's theme variables,
so Light and Dark both read; the fallbacks are for pages without them (nbconvert's classic template).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..record import events as ev
from ..record import redact
from ..state import lineage
from ..state.asides import Asides, to_model
from .code import MAX_TOOL_TEXT, hidden_note_html, mark_hidden, python_html, request_html
from .image_view import checked_image
from .parts import (
    Start,
    abandoned_words,
    clip,
    compacting_words,
    compaction_words,
    content_blocks,
    dumps,
    esc,
    kind_of,
    note_summary,
    note_text,
    note_words,
    request_parts,
    server_compaction_words,
    superseded_starts,
    text_of,
    thinking_length,
    thinking_shown,
    tool_name,
)
from .rows import PYTHON, Row, ToolCalls, Work, call_row, decision_words, input_of, question, result_row, work
from .safe_html import markdown_html
from .style import MATH, NO_MATH, STYLE
from .view import stream_effect

Event = Mapping[str, Any]


def _pre(text: str) -> str:
    return f"<pre>{esc(clip(text, MAX_TOOL_TEXT, note='more characters in the log'))}</pre>"


def _details(summary: str, body: str, *, error: bool = False, open_: bool = False) -> str:
    kind = "nbagent-tool nbagent-tool-error" if error else "nbagent-tool"
    return f'<details class="{kind}"{" open" if open_ else ""}><summary>{summary}</summary>{body}</details>'


def image_html(block: Mapping[str, Any]) -> str:
    """An ``image`` content block (base64 source) as an <img> with a data URI, or a note if it is not a safe image."""
    image = checked_image(block)
    if isinstance(image, tuple):
        return f'<img src="data:{image[0]};base64,{image[1]}" alt="tool image">'
    return f"<p><i>[image not shown: {esc(image)}]</i></p>"


def _result_html(content: Any, *, images: bool = True) -> str:
    parts = []
    for block in content_blocks(content):
        kind = block.get("type")
        if kind == "text":
            parts.append(_pre(str(block.get("text", ""))))
        elif kind == "image":
            parts.append(image_html(block) if images else "")
        else:
            parts.append(_pre(dumps(block)))
    return "".join(parts)


def row_html(row: Row) -> str:
    """A row's words: the lead in bold, the path, command or call as code, then its facts."""
    head = " ".join(
        part for part in (f"<b>{esc(row.lead)}</b>" if row.lead else "", f"<code>{esc(row.code)}</code>" if row.code else "") if part
    )
    return head + "".join(f" · {esc(fact)}" for fact in row.facts)


def tool_call_html(name: str, arguments: Any) -> str:
    """A collapsed tool call: what it asks for in one row, its arguments inside (the python tool's code highlighted, others as JSON)."""
    if name == PYTHON and isinstance(arguments, dict) and isinstance(arguments.get("code"), str):
        rest = {k: v for k, v in arguments.items() if k != "code"}
        body = python_html(arguments["code"]) + (_pre(json.dumps(rest, ensure_ascii=False, indent=2, default=str)) if rest else "")
    else:
        body = _pre(json.dumps(arguments, ensure_ascii=False, indent=2, default=str))
    return _details(row_html(call_row(name, arguments)), body)


def work_html(shown: Work) -> str:
    """The work a result shows open (see :func:`nbagent.render.rows.work`): images, printed output, an error."""
    parts = [
        image_html(b) if b.get("type") == "image" else f'<pre class="nbagent-output">{esc(b.get("text", ""))}</pre>' for b in shown.blocks
    ]
    if shown.more:
        parts.append(
            f'<div class="nbagent-dim">… {shown.more:,} more line{"s" if shown.more != 1 else ""}: open the row above for the whole result</div>'
        )
    return f'<div class="nbagent-work">{"".join(parts)}</div>' if parts else ""


def tool_result_html(name: str, content: Any, *, is_error: bool = False, arguments: Any = None) -> str:
    """A tool result: one row saying what the call did (``arguments``: its input), the work shown open, the raw result collapsed."""
    row, shown = result_row(name, arguments, content, is_error=is_error), work(name, content, is_error=is_error)
    summary = row_html(row)
    head = _details(summary, _result_html(content, images=False)) if shown.raw else f'<div class="nbagent-row">{summary}</div>'
    return f'<div class="nbagent-result{" nbagent-result-error" if row.error else ""}">{head}{work_html(shown)}</div>'


def working_html(names: Mapping[str, str] | None, tool_use_id: Any, attempt: Any = 1) -> str:
    """A call running now, in the live panel until its result takes its place: its row, then "working…"."""
    again = f" (attempt {attempt})" if isinstance(attempt, int) and attempt > 1 else ""
    row = row_html(call_row(tool_name(names, tool_use_id), input_of(names, tool_use_id)))
    return f'<div class="nbagent-result nbagent-working"><div class="nbagent-row">{row} <span class="nbagent-dim">· working…{again}</span></div></div>'


def approval_html(name: str, arguments: Any, reason: Any, *, logged: str = "", label: str = "approval needed") -> str:
    """An approval question in plain words ("Run this shell command?"), with all of what will run shown as code.

    ``arguments`` None: the call's input is not known here, and ``logged`` (the log's own question) is shown.
    Invisible and direction-changing characters are shown escaped and marked, with a warning naming them.
    """
    asked = question(name, arguments, reason, logged)
    code = python_html(asked.code, whole=True) if asked.language == "python" else f'<pre class="nbagent-code">{esc(asked.code)}</pre>'
    why = f' <span class="nbagent-dim">{esc(asked.why)}</span>' if asked.why else ""
    shown = f'{hidden_note_html(asked.code)}<div class="nbagent-approval-code">{mark_hidden(code)}</div>' if asked.code else ""
    words = mark_hidden(esc(asked.question))
    return f'<div class="nbagent-approval"><span class="nbagent-label">{esc(label)}</span> {words}{why}{shown}</div>'


def decision_html(decision: Any, by: Any, note: Any = "") -> str:
    """What an approval was decided, and with what: 'approved by you in the panel'."""
    verdict, _, rest = decision_words(decision, by, note).partition(" ")
    return f'<div class="nbagent-approval nbagent-decided"><span class="nbagent-label">{esc(verdict)}</span> {esc(rest)}</div>'


def note_html(words: str, *, label: str = "note") -> str:
    """A note: to the model (the restart note, the interruption note, ...) or to people; the one way notes look.

    A note of several lines (what the notebook did since the last turn) shows its first line; the rest on a click.
    """
    summary, rest = note_summary(words)
    if rest:
        head = f'<summary><span class="nbagent-label">{esc(label)}</span> {esc(summary)}</summary>'
        return f'<details class="nbagent-note">{head}<pre class="nbagent-note-text">{esc(rest)}</pre></details>'
    return f'<div class="nbagent-note"><span class="nbagent-label">{esc(label)}</span> {esc(words)}</div>'


def model_notes_html(notes: Iterable[str]) -> str:
    """Notes to the model (their ``[nbagent note: ...]`` text), as notes."""
    return "".join(note_html(note_words(n), label="note to the model") for n in notes)


def model_markdown_html(text: str) -> str:
    """The model's Markdown, sanitized, in the one element of an output MathJax may typeset (see :data:`.style.NO_MATH`)."""
    return f'<div class="nbagent-text {MATH}">{markdown_html(text)}</div>'


CUT_OFF = "the reply stopped here, unfinished: its stream was cut off (an interrupt, an error or a crash)"


def cut_off_html(streamed: str) -> str:
    """Text the model streamed before it was cut off (no finished message replaced it), labelled so."""
    return f"{model_markdown_html(streamed)}{note_html(CUT_OFF, label='cut off')}"


def header_html(title: str, status: str = "", *, origin: str = "", link: str = "") -> str:
    """A view's header: its title, its status (with the tokens used), where it comes from, and a link to its live page.

    ``link`` is a path on the same Jupyter server (nbagent.render.page_links), built by nbagent, never by the model.
    """
    line = f'<b>{esc(title)}</b> <span class="nbagent-dim">— {esc(status)}</span>' if status else f"<b>{esc(title)}</b>"
    if link:
        line += (
            f' <a class="nbagent-origin nbagent-live-link" href="{esc(link)}" target="_blank" rel="noopener">live view in a browser tab</a>'
        )
    where = f'<div class="nbagent-origin">{esc(origin)}</div>' if origin else ""
    return f'<div class="nbagent-header">{line}{where}</div>'


# One function per event type ---------------------------------------------------------------------------
Names = Mapping[str, str]  # a ToolCalls (nbagent.render.rows) also knows each call's input: its rows then say more


class Context(NamedTuple):
    """What showing an event depends on besides the event: tool names, and the notes the fold put before a request."""

    names: Names
    notes: Sequence[str] = ()


def thinking_html(block: Mapping[str, Any]) -> str:
    """A thinking block, collapsed and redacted (it is verbatim in the log); nothing for one with no words to read."""
    if not thinking_shown(block):
        return ""
    summary = f'Thinking <span class="nbagent-dim">({thinking_length(block):,} characters)</span>'
    return _details(summary, _pre(redact.block_text(dict(block))))  # as written: the model's notes, not Markdown


def compaction_html(words: str, summary: str) -> str:
    """A compaction as its own entry: what it did, and the summary (redacted) collapsed under it."""
    body = f'<details class="{MATH}"><summary>Summary</summary>{markdown_html(summary)}</details>' if summary else ""
    return f'<div class="nbagent-compaction"><span class="nbagent-label">compaction</span> {esc(words)}{body}</div>'


BLOCKS: dict[str, Callable[[dict[str, Any]], str]] = {
    "text": lambda b: model_markdown_html(str(b.get("text", ""))),
    "tool_use": lambda b: tool_call_html(str(b.get("name", "?")), b.get("input", {})),
    "thinking": thinking_html,  # verbatim in the log, redacted when shown
    "redacted_thinking": thinking_html,
    "compaction": lambda b: compaction_html(server_compaction_words(b), redact.block_text(b)),
}


def _nothing(e: Event, c: Context) -> str:
    return ""  # shown only as the panel's status


def _session_start(e: Event, c: Context) -> str:
    forked = lineage.of_meta(e.get("meta"))  # a fork's own first event: the events before it are its parent's
    return note_html(f"{forked.words}: the events above are its parent's, this session goes on from here", label="fork") if forked else ""


def _user_msg(e: Event, c: Context) -> str:
    legacy, content = request_parts(e.get("content"))
    text = request_html(text_of(content, only_text=True))  # an expanded {In[3]} or {Err} shows as a block, not as ``` fences
    expanded = expanded_words((e.get("meta") or {}).get("expanded"))
    fields = note_html(expanded, label="expanded") if expanded else ""
    return f'{model_notes_html([*c.notes, *legacy])}<div class="nbagent-user"><b>You:</b> {text}</div>{fields}'


def expanded_words(pairs: Any, limit: int = 600) -> str:
    """What the fields of a request became (its meta's ``expanded``: notebook/interpolate.py), in one line; '' if none."""
    if not isinstance(pairs, list):
        return ""
    line = ", ".join(f"{p[0]} → {p[1]}" for p in pairs if isinstance(p, list) and len(p) == 2)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _assistant_msg(e: Event, c: Context) -> str:
    return "".join(BLOCKS[str(b.get("type"))](b) for b in content_blocks(e.get("content")) if b.get("type") in BLOCKS)


def _tool_result(e: Event, c: Context) -> str:
    name = tool_name(c.names, e.get("tool_use_id"))
    if e.get("abandoned"):
        return note_html(abandoned_words(name, e.get("abandoned")))
    return tool_result_html(name, e.get("content"), is_error=bool(e.get("is_error")), arguments=input_of(c.names, e.get("tool_use_id")))


def _model_error(e: Event, c: Context) -> str:
    return f'<div class="nbagent-error"><span class="nbagent-label">model error</span> {esc(e.get("message", ""))}</div>'


def _approval(e: Event, c: Context) -> str:
    if e.get("decision") == "pending":
        call = e.get("tool_use_id")
        known = str(call) in getattr(c.names, "inputs", {})
        logged = str(e.get("question", ""))
        return approval_html(
            tool_name(c.names, call), input_of(c.names, call) if known else None, e.get("reason"), logged=logged, label="approval asked"
        )
    return decision_html(e.get("decision"), e.get("by"), e.get("note"))


def _interrupted(e: Event, c: Context) -> str:
    return f'<div class="nbagent-error"><span class="nbagent-label">interrupted</span> during {esc(e.get("during", "?"))}</div>'


def _note(e: Event, c: Context) -> str:
    return "" if to_model(e) is not None else note_html(note_text(e))  # a note to the model shows with its request


def _compaction_started(e: Event, c: Context) -> str:
    return f'<div class="nbagent-compaction nbagent-dim">{esc(compacting_words(e))}…</div>'


def _compaction(e: Event, c: Context) -> str:
    return compaction_html(compaction_words(e), redact.text(str(e.get("summary", ""))))


HTML: dict[str, Callable[[Event, Context], str]] = {
    ev.SESSION_START: _session_start,
    ev.USER_MSG: _user_msg,
    ev.MODEL_CALL: _nothing,
    ev.DELTA: _nothing,  # the panel streams deltas itself (see notebook/panel.py)
    ev.ASSISTANT_MSG: _assistant_msg,
    ev.MODEL_ERROR: _model_error,
    ev.APPROVAL: _approval,
    ev.TOOL_STARTED: _nothing,
    ev.TOOL_RESULT: _tool_result,
    ev.INTERRUPTED: _interrupted,
    ev.NOTE: _note,
    ev.TRUST: _nothing,
    ev.CONTEXT: _nothing,  # settings, not conversation: the header shows the window it sets
    ev.COMPACTION_STARTED: _compaction_started,
    ev.COMPACTION: _compaction,
}


def event_html(event: Event, *, tool_names: Names | None = None, notes: Sequence[str] = ()) -> str:
    """One event as a safe HTML fragment ('' for events that show nothing, like deltas).

    ``notes``: for a request, the notes to the model the fold put before it (see :class:`nbagent.state.asides.Asides`).
    """
    return HTML.get(kind_of(event), _nothing)(event, Context(tool_names or {}, notes))


def transcript_html(
    events: Iterable[Event], *, title: str = "", status: str = "", origin: str = "", start: Start | None = None, after: str = ""
) -> str:
    """A whole transcript as one self-contained, safe HTML fragment, with its stylesheet.

    ``start``: where the session stood before the first event (for a view that starts mid-session); ``after``: what to
    do next, for people (a note at the end: an interrupted panel's).
    """
    listed = list(events)
    names, asides = start.fresh()[:2] if start is not None else ({}, Asides())
    known = ToolCalls(names)
    for event in listed:
        known.learn(event)
    parts: list[str] = []
    stream: list[str] = []  # streamed text stays where a stream was cut off, as the live panel showed it
    finished = superseded_starts(listed)  # a compaction's "in progress" line, once the compaction itself is there
    for index, event in enumerate(listed):
        if index in finished:
            continue
        effect = stream_effect(event)
        if effect is not None:
            parts.append(cut_off_html("".join(stream)) if stream and effect == "end" else "")
            stream = []
        if kind_of(event) == ev.DELTA:
            stream += [event["text"]] if isinstance(event.get("text"), str) else []
        else:
            parts.append(event_html(event, tool_names=known, notes=asides.see(event)))
    body = "".join(parts) + (cut_off_html("".join(stream)) if stream else "")
    if asides.notes:  # written, but their request has not come yet
        body += "".join(note_html(note_words(n), label="note to the model, for the next request") for n in asides.notes)
    if after:
        body += note_html(after, label="next")
    head = header_html(title, status, origin=origin) if title or status else ""
    return f'<div class="nbagent nbagent-transcript {NO_MATH}">{STYLE}{head}{body}</div>'
