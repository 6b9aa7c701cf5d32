"""Export a session log as a notebook (nbformat) or as Markdown.

Requests and replies become Markdown, the agent's ``python`` tool calls become
code cells carrying their recorded outputs (plots and printed output shown, as in
the panel), other tool calls become Markdown headed by the row that says what the
call did (:mod:`nbagent.render.rows`), with their arguments and results in code
fences; a model error or an interruption is one line, worded as the terminal
transcript words it (:mod:`nbagent.render.text`), and an approval says what it was
decided with.  Everything from the model, tools or the user goes
through :mod:`nbagent.render.markdown`: no raw HTML, no remote image, no script link.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..record import events as ev
from ..record import redact
from ..render import text
from ..render.image_view import checked_image, image_data
from ..render.markdown import code_span, decoded_url, defuse_links, fenced, image_allowed, link_allowed, note_markdown, plain, safe_markdown
from ..render.parts import (
    ToolNames,
    clip,
    compaction_words,
    content_blocks,
    kind_of,
    note_words,
    request_parts,
    server_compaction_words,
    text_of,
    thinking_words,
    tokens_line,
    tool_name,
)
from ..render.rows import Row, call_row, decision_words, result_row
from ..state import fold
from ..state.asides import Asides
from ..state.tokens import Tokens
from . import ipynb
from .ipynb import NotebookNode, code_cell, writes

__all__ = [
    "FORMATS",
    "Part",
    "code_span",
    "decoded_url",
    "defuse_links",
    "export",
    "fenced",
    "format_for",
    "image_allowed",
    "link_allowed",
    "parts",
    "plain",
    "safe_markdown",
    "to_markdown",
    "to_notebook",
]

Format = Literal["ipynb", "md"]
FORMATS: tuple[str, ...] = ("ipynb", "md")
PYTHON_TOOL = "python"
RESULT_LIMIT = 20_000  # characters of one tool result kept in an export


def _clip(text: str) -> str:
    return clip(text, RESULT_LIMIT, note="more characters not exported")


# The transcript as a sequence of parts -----------------------------------------------------------
@dataclass
class Part:
    """One piece of a transcript: a request, a reply, a tool call with its result, or a note."""

    kind: Literal["request", "reply", "call", "note", "thinking", "compaction"]
    seq: int
    text: str = ""
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    result: list[dict[str, Any]] | None = None
    is_error: bool = False
    tool_use_id: str = ""


Calls = dict[str, Part]  # tool calls waiting for their result, by tool-use id


def _unanswered(calls: Calls) -> Iterator[Part]:
    yield from calls.values()
    calls.clear()


def _request(event: ev.Event, calls: Calls, notes: Sequence[str]) -> Iterator[Part]:
    """A request, after the notes to the model that went with it (those the fold put before it, and pre-v3 inline ones)."""
    yield from _unanswered(calls)
    legacy, content = request_parts(event.get("content"))
    for note in (*notes, *legacy):
        yield Part("note", event["seq"], "Note to the model: " + note_words(note))
    yield Part("request", event["seq"], text_of(content, only_text=True))


def _reply(event: ev.Event, calls: Calls, names: ToolNames) -> Iterator[Part]:
    yield from _unanswered(calls)
    for block in content_blocks(event.get("content")):
        if block.get("type") == "text" and block.get("text"):
            yield Part("reply", event["seq"], str(block["text"]))
        elif block.get("type") in ("thinking", "redacted_thinking"):  # verbatim in the log: only its length is exported
            yield Part("thinking", event["seq"], name=thinking_words(block))
        elif block.get("type") == "compaction":
            yield Part("compaction", event["seq"], redact.block_text(block), name=server_compaction_words(block))
        elif block.get("type") == "tool_use":
            arguments = dict(block.get("input") or {})
            call = Part("call", event["seq"], name=str(block.get("name")), arguments=arguments, tool_use_id=str(block.get("id")))
            calls[call.tool_use_id] = call


def _result(event: ev.Event, calls: Calls, names: ToolNames) -> Iterator[Part]:
    call = calls.pop(event.get("tool_use_id", ""), None)
    if call is not None:
        call.result, call.is_error = content_blocks(event.get("content")), bool(event.get("is_error"))
        yield call


def _line(event: ev.Event, calls: Calls, names: ToolNames) -> Iterator[Part]:
    line = text.show(event, names).line
    yield Part("note", event["seq"], line[:1].upper() + line[1:])


def _compaction(event: ev.Event, calls: Calls, names: ToolNames) -> Iterator[Part]:
    yield Part("compaction", event["seq"], redact.text(str(event.get("summary", ""))), name=compaction_words(event))


def _decision(event: ev.Event, calls: Calls, names: ToolNames) -> Iterator[Part]:
    if event.get("decision") in ("approved", "declined"):
        name = tool_name(names, event.get("tool_use_id"))
        yield Part("note", event["seq"], f"Approval of {name}: {decision_words(event['decision'], event.get('by'), event.get('note'))}")


# What each event type besides a request adds to an export; the others (streamed text, model calls, notes, ...) add nothing.
PARTS: dict[str, Callable[[ev.Event, Calls, ToolNames], Iterator[Part]]] = {
    ev.ASSISTANT_MSG: _reply,
    ev.TOOL_RESULT: _result,
    ev.MODEL_ERROR: _line,
    ev.INTERRUPTED: _line,
    ev.APPROVAL: _decision,
    ev.COMPACTION: _compaction,
}


def parts(events: Iterable[ev.Event]) -> Iterator[Part]:
    """Walk the events in order and yield the transcript's parts (a call comes with its result)."""
    calls: Calls = {}
    names = ToolNames()
    asides = Asides()
    for event in events:
        names.learn(event)
        notes = asides.see(event)
        if kind_of(event) == ev.USER_MSG:
            yield from _request(event, calls, notes)
            continue
        step = PARTS.get(kind_of(event))
        if step is not None:
            yield from step(event, calls, names)
    yield from _unanswered(calls)


def _is_python(part: Part) -> bool:
    return part.kind == "call" and part.name == PYTHON_TOOL and isinstance(part.arguments.get("code"), str)


def _images(part: Part) -> list[tuple[str, str]]:
    return [image for image in (image_data(b) for b in part.result or [] if b.get("type") == "image") if image is not None]


def _left_out(part: Part) -> list[str]:
    """Why each image of the result that a view may not show is left out (see nbagent.render.image_view)."""
    return [why for why in (checked_image(b) for b in part.result or [] if b.get("type") == "image") if isinstance(why, str)]


def _header(state: fold.State, source: Path, events: list[ev.Event]) -> str:
    title = plain(state.title) if state.title else "(no request)"
    models = sorted({str(e["model"]) for e in events if kind_of(e) == ev.ASSISTANT_MSG and e.get("model")})
    lines = [
        f"# Agent session: {title}",
        "",
        f"Exported by nbagent from {plain(source.name)} (session {plain(state.session_id[:12])}), "
        f"{state.turns} turn(s)" + (f": {plain(line)}." if (line := tokens_line(Tokens.of_state(state).whole())) else "."),
    ]
    if models:
        lines.append(f"Model: {plain(', '.join(models))}.")
    if state.compactions:
        lines.append(f"The context was compacted {state.compactions} time(s) for the model; this export holds the whole history.")
    lines.append("Code cells are the agent's recorded `python` tool calls with the outputs recorded at the time.")
    return "\n".join(lines)


def _result_sections(part: Part, *, label: str, image_alt: str | None) -> list[str]:
    """A call's result as Markdown: its text in a fence, then (with ``image_alt``) its images inline."""
    if part.result is None:
        return ["", "_No result recorded: the call did not finish._"]
    body = text_of(part.result, only_text=True)
    sections = ["", label, "", fenced(_clip(body))] if body else []
    if image_alt is not None:
        for media_type, data in _images(part):
            sections += ["", f"![{image_alt}](data:{media_type};base64,{data})"]
        sections += ["", f"_(an image not exported: {plain(why)})_"] if (why := "; ".join(_left_out(part))) else []
    return sections


def row_markdown(row: Row) -> str:
    """A tool row (see :mod:`nbagent.render.rows`) as one line of Markdown: the lead in bold, the code as code."""
    head = " ".join(part for part in (f"**{plain(row.lead)}**" if row.lead else "", code_span(row.code) if row.code else "") if part)
    return head + "".join(f" · {plain(fact)}" for fact in row.facts)


def _row(part: Part) -> Row:
    if part.result is None:
        lead, code, _, _ = call_row(part.name, part.arguments)
        return Row(lead, code, ("did not finish",), True)
    return result_row(part.name, part.arguments, part.result, is_error=part.is_error)


def _call_markdown(part: Part, *, images: bool) -> str:
    arguments = fenced(json.dumps(part.arguments, indent=2, ensure_ascii=False), "json")
    head = [row_markdown(_row(part)), "", f"Arguments of {code_span(part.name)}:", "", arguments]
    return "\n".join(head + _result_sections(part, label="Result:", image_alt="tool image" if images else None))


def _python_markdown(part: Part) -> str:
    head = [row_markdown(_row(part)), "", fenced(part.arguments["code"], "python")]
    return "\n".join(head + _result_sections(part, label="Error:" if part.is_error else "Output:", image_alt="output image"))


def _thinking_markdown(part: Part) -> str:
    return f"_[{plain(part.name)}: not exported]_"


def _compaction_markdown(part: Part) -> str:
    summary = "\n\n**Summary**\n\n" + safe_markdown(_clip(part.text)) if part.text else ""
    return f"**Compaction:** {plain(part.name)}{summary}"


# Notebook ----------------------------------------------------------------------------------------
def _not_exported(why: str) -> str:
    return f"(an image not exported: {why})\n"


def _markdown_cell(source: str, meta: dict[str, Any] | None = None) -> NotebookNode:
    return ipynb.cell("markdown", source, meta)


def _stream(name: str, text: str) -> NotebookNode:
    return NotebookNode(output_type="stream", name=name, text=text)


def _image_output(image: tuple[str, str]) -> NotebookNode:
    return NotebookNode(output_type="display_data", data={image[0]: image[1], "text/plain": "<image>"}, metadata={})


def _outputs(part: Part) -> list[NotebookNode]:
    if part.result is None:
        return [_stream("stderr", "(no result recorded: the call did not finish)\n")]
    outputs: list[NotebookNode] = []
    stream = "stderr" if part.is_error else "stdout"
    for block in part.result:
        if block.get("type") == "text" and block.get("text"):
            body = _clip(str(block["text"]))
            outputs.append(_stream(stream, body if body.endswith("\n") else body + "\n"))
        elif block.get("type") == "image":
            image = checked_image(block)
            outputs.append(_image_output(image) if isinstance(image, tuple) else _stream("stderr", _not_exported(image)))
    return outputs


def _call_cells(part: Part, meta: dict[str, Any]) -> list[NotebookNode]:
    if _is_python(part):
        meta["nbagent"]["tool_use_id"] = part.tool_use_id
        return [code_cell(part.arguments["code"], meta, _outputs(part))]
    cells = [_markdown_cell(_call_markdown(part, images=False), meta)]
    images, left_out = _images(part), _left_out(part)
    if images or left_out:
        # Images go in as image outputs of an empty, clearly marked code cell (never as HTML).
        holder = code_cell("# images returned by the tool call above", meta)
        holder.outputs = [_image_output(image) for image in images]
        holder.outputs += [_stream("stderr", _not_exported(why)) for why in left_out]
        cells.append(holder)
    return cells


NOTEBOOK_CELLS: dict[str, Callable[[Part, dict[str, Any]], list[NotebookNode]]] = {
    "request": lambda part, meta: [_markdown_cell("**Request**\n\n" + safe_markdown(part.text), meta)],
    "reply": lambda part, meta: [_markdown_cell("**Assistant**\n\n" + safe_markdown(part.text), meta)],
    "note": lambda part, meta: [_markdown_cell(note_markdown(part.text), meta)],
    "thinking": lambda part, meta: [_markdown_cell(_thinking_markdown(part), meta)],
    "compaction": lambda part, meta: [_markdown_cell(_compaction_markdown(part), meta)],
    "call": _call_cells,
}


def to_notebook(events: Iterable[ev.Event], *, source: Path = Path("session.jsonl")) -> NotebookNode:
    """The session as an nbformat 4.5 notebook (tests/cli/test_export.py validates it with ``nbformat.validate``)."""
    events = list(events)
    state = fold.fold(events)
    notebook = NotebookNode(nbformat=ipynb.NBFORMAT, nbformat_minor=ipynb.NBFORMAT_MINOR, metadata={}, cells=[])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata["language_info"] = {"name": "python"}
    notebook.metadata["nbagent"] = {"session_id": state.session_id, "source": source.name, "events": state.seq}
    cells = [_markdown_cell(_header(state, source, events))]
    for part in parts(events):
        cells += NOTEBOOK_CELLS[part.kind](part, {"nbagent": {"seq": part.seq, "kind": part.kind}})
    for cell in cells:
        if cell.cell_type == "markdown":
            cell.source = defuse_links(cell.source)
    notebook.cells = cells
    return notebook


# Markdown ----------------------------------------------------------------------------------------
MARKDOWN_SECTIONS: dict[str, Callable[[Part], str]] = {
    "request": lambda part: "## Request\n\n" + safe_markdown(part.text),
    "reply": lambda part: "**Assistant**\n\n" + safe_markdown(part.text),
    "note": lambda part: note_markdown(part.text),
    "thinking": _thinking_markdown,
    "compaction": _compaction_markdown,
    "call": lambda part: _python_markdown(part) if _is_python(part) else _call_markdown(part, images=True),
}


def to_markdown(events: Iterable[ev.Event], *, source: Path = Path("session.jsonl")) -> str:
    """The session as one Markdown document."""
    events = list(events)
    sections = [_header(fold.fold(events), source, events)]
    sections += [MARKDOWN_SECTIONS[part.kind](part) for part in parts(events)]
    # Once more on the whole document: a reference definition in one part applies to every other part.
    return defuse_links("\n\n".join(sections)) + "\n"


def format_for(out: Path, chosen: str | None = None) -> Format:
    """The export format: ``chosen``, or from the output file's extension."""
    name = chosen or out.suffix.lstrip(".").lower()
    if name == "markdown":
        name = "md"
    if name not in FORMATS:
        raise ValueError(f"cannot tell the export format from {out.name!r}: use a .ipynb or .md file name, or --format ipynb|md")
    return name  # type: ignore[return-value]


def export(
    events: Iterable[ev.Event], out: str | os.PathLike[str], *, fmt: str | None = None, source: Path = Path("session.jsonl")
) -> Path:
    """Write the session to ``out`` as a notebook or Markdown; returns the path written."""
    target = Path(out)
    chosen = format_for(target, fmt)
    if chosen == "ipynb":
        written = writes(to_notebook(events, source=source))
    else:
        written = to_markdown(events, source=source)
    target.write_text(written if written.endswith("\n") else written + "\n", encoding="utf-8")
    return target
