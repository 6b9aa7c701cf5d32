"""Export a session log as a notebook (nbformat) or as Markdown.

Requests and replies become Markdown, the agent's ``python`` tool calls become
code cells carrying their recorded outputs, other tool calls become Markdown
with their arguments and results in code fences.  Text from the model, tools
or the user never reaches the output as raw HTML: outside code blocks ``<``
and ``&`` are escaped and ``javascript:``-style link targets are defused.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import nbformat
from markdown_it import MarkdownIt
from nbformat import NotebookNode
from nbformat import v4 as nbf

from . import events as ev
from . import fold

Format = Literal["ipynb", "md"]
FORMATS: tuple[str, ...] = ("ipynb", "md")
PYTHON_TOOL = "python"
RESULT_LIMIT = 20_000  # characters of one tool result kept in an export
SAFE_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_SCRIPT_SCHEME = re.compile(r"(?i)\b(java|vb)(\s*script)(\s*):")
_parser = MarkdownIt("commonmark")
_SENTINEL = "nbagent-end-of-fragment"
_MARKUP = re.compile(r"([\\`*_\[\]])")


def plain(text: str) -> str:
    """Text shown literally on one Markdown line: no emphasis, code, link, HTML or entity can form."""
    flat = " ".join(str(text).split())
    return _MARKUP.sub(r"\\\1", flat.replace("&", "&amp;").replace("<", "&lt;"))


def code_span(text: str) -> str:
    """Text as one inline code span (shown verbatim: Markdown, HTML and entities are not interpreted in it)."""
    flat = " ".join(str(text).split())
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    return f"{ticks} {flat} {ticks}"


def _self_contained(markdown: str) -> bool:
    """Whether nothing in ``markdown`` (an unclosed code fence, say) runs on into what follows it."""
    tokens = _parser.parse(markdown + "\n\n" + _SENTINEL)
    return len(tokens) >= 3 and tokens[-3].type == "paragraph_open" and tokens[-3].level == 0 and tokens[-2].content == _SENTINEL


def safe_markdown(text: str) -> str:
    """Markdown that renders as the author wrote it but can carry no raw HTML or script link.

    Lines inside fenced or indented code blocks (found with a CommonMark parser)
    are kept verbatim, since code is never rendered as HTML; elsewhere ``&`` and
    ``<`` become entities and ``javascript:``/``vbscript:`` lose their colon.
    """
    if not _self_contained(text):
        # An unclosed fence would swallow what follows and change what counts as code there.
        return fenced(text)
    lines = text.splitlines()
    verbatim: set[int] = set()
    for token in _parser.parse(text):
        if token.type in ("fence", "code_block") and token.map:
            start, end = token.map
            # The fence lines themselves go through escaping too (harmless: they hold no '<').
            inner = range(start + 1, end - 1) if token.type == "fence" else range(start, end)
            verbatim.update(inner)
    out = []
    for number, line in enumerate(lines):
        if number in verbatim:
            out.append(line)
        else:
            line = line.replace("&", "&amp;").replace("<", "&lt;")
            out.append(_SCRIPT_SCHEME.sub(r"\1\2-blocked\3:", line))
    return "\n".join(out)


def fenced(text: str, info: str = "") -> str:
    """``text`` in a code fence that nothing inside it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _clip(text: str, limit: int = RESULT_LIMIT) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n… [{len(text) - limit} more characters not exported]"


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _image(block: dict[str, Any]) -> tuple[str, str] | None:
    source = block.get("source") or {}
    if source.get("type") == "base64" and source.get("media_type") in SAFE_IMAGE_TYPES and isinstance(source.get("data"), str):
        try:  # re-encoded, so nothing but base64 can follow "data:...;base64," in a link or an output
            return source["media_type"], base64.b64encode(base64.b64decode(source["data"], validate=True)).decode("ascii")
        except (binascii.Error, ValueError):
            return None
    return None


# The transcript as a sequence of parts -----------------------------------------------------------
@dataclass
class Part:
    """One piece of a transcript: a request, a reply, a tool call with its result, or a note."""

    kind: Literal["request", "reply", "call", "note"]
    seq: int
    text: str = ""
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    result: list[dict[str, Any]] | None = None
    is_error: bool = False
    tool_use_id: str = ""


def parts(events: Iterable[ev.Event]) -> Iterator[Part]:
    """Walk the events in order and yield the transcript's parts (streamed deltas are skipped)."""
    open_calls: dict[str, Part] = {}
    for event in events:
        kind, seq = event["type"], event["seq"]
        if kind == ev.USER_MSG:
            yield from _unanswered(open_calls)
            text = "\n".join(b.get("text", "") for b in _blocks(event.get("content")) if b.get("type") == "text")
            yield Part("request", seq, text)
        elif kind == ev.ASSISTANT_MSG:
            yield from _unanswered(open_calls)
            for block in _blocks(event.get("content")):
                if block.get("type") == "text" and block.get("text"):
                    yield Part("reply", seq, str(block["text"]))
                elif block.get("type") == "tool_use":
                    call = Part("call", seq, name=str(block.get("name")), arguments=dict(block.get("input") or {}),
                                tool_use_id=str(block.get("id")))
                    open_calls[call.tool_use_id] = call
        elif kind == ev.TOOL_RESULT:
            call = open_calls.pop(event.get("tool_use_id", ""), None)
            if call is not None:
                call.result, call.is_error = _blocks(event.get("content")), bool(event.get("is_error"))
                yield call
        elif kind == ev.MODEL_ERROR:
            yield Part("note", seq, f"Model error: {event.get('message', '')}")
        elif kind == ev.INTERRUPTED:
            yield Part("note", seq, f"Interrupted (during {event.get('during', '?')}).")
        elif kind == ev.APPROVAL and event.get("decision") in ("approved", "declined"):
            yield Part("note", seq, f"Approval {event['decision']} by {event.get('by', '?')}" + (f": {event['note']}" if event.get("note") else "."))
    yield from _unanswered(open_calls)


def _unanswered(open_calls: dict[str, Part]) -> Iterator[Part]:
    yield from open_calls.values()
    open_calls.clear()


def _is_python(part: Part) -> bool:
    return part.name == PYTHON_TOOL and isinstance(part.arguments.get("code"), str)


def _result_text(part: Part) -> str:
    return "\n".join(str(b.get("text", "")) for b in part.result or [] if b.get("type") == "text")


def _header(state: fold.State, source: Path, events: list[ev.Event]) -> str:
    title = plain(state.title) if state.title else "(no request)"
    models = sorted({str(e["model"]) for e in events if e["type"] == ev.ASSISTANT_MSG and e.get("model")})
    lines = [
        f"# Agent session: {title}",
        "",
        f"Exported by nbagent from {plain(source.name)} (session {plain(state.session_id[:12])}), "
        f"{state.turns} turn(s), {sum(state.usage.values())} tokens.",
    ]
    if models:
        lines.append(f"Model: {plain(', '.join(models))}.")
    lines.append("Code cells are the agent's recorded `python` tool calls with the outputs recorded at the time.")
    return "\n".join(lines)


# Notebook ----------------------------------------------------------------------------------------
def _outputs(part: Part) -> list[NotebookNode]:
    outputs: list[NotebookNode] = []
    if part.result is None:
        return [nbf.new_output("stream", name="stderr", text="(no result recorded: the call did not finish)\n")]
    stream = "stderr" if part.is_error else "stdout"
    for block in part.result:
        if block.get("type") == "text" and block.get("text"):
            text = _clip(str(block["text"]))
            outputs.append(nbf.new_output("stream", name=stream, text=text if text.endswith("\n") else text + "\n"))
        elif block.get("type") == "image":
            image = _image(block)
            if image is not None:
                outputs.append(nbf.new_output("display_data", data={image[0]: image[1], "text/plain": "<image>"}))
            else:
                outputs.append(nbf.new_output("stream", name="stderr", text="(an image in a format not exported)\n"))
    return outputs


def _call_markdown(part: Part, *, images: bool) -> str:
    label = "Tool error" if part.is_error else "Tool call"
    text = [f"**{label}:** {code_span(part.name)}", "", fenced(json.dumps(part.arguments, indent=2, ensure_ascii=False), "json")]
    if part.result is None:
        text += ["", "_No result recorded: the call did not finish._"]
    else:
        body = _result_text(part)
        if body:
            text += ["", "Result:", "", fenced(_clip(body))]
        if images:
            for block in part.result:
                image = _image(block) if block.get("type") == "image" else None
                if image is not None:
                    text += ["", f"![tool image](data:{image[0]};base64,{image[1]})"]
    return "\n".join(text)


def to_notebook(events: Iterable[ev.Event], *, source: Path = Path("session.jsonl")) -> NotebookNode:
    """The session as a notebook (validated by ``nbformat.validate``)."""
    events = list(events)
    state = fold.fold(events)
    notebook = nbf.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata["language_info"] = {"name": "python"}
    notebook.metadata["nbagent"] = {"session_id": state.session_id, "source": source.name, "events": state.seq}
    cells = [nbf.new_markdown_cell(_header(state, source, events))]
    for part in parts(events):
        meta = {"nbagent": {"seq": part.seq, "kind": part.kind}}
        if part.kind == "request":
            cells.append(nbf.new_markdown_cell("**Request**\n\n" + safe_markdown(part.text), metadata=meta))
        elif part.kind == "reply":
            cells.append(nbf.new_markdown_cell("**Assistant**\n\n" + safe_markdown(part.text), metadata=meta))
        elif part.kind == "note":
            cells.append(nbf.new_markdown_cell("_" + plain(part.text) + "_", metadata=meta))
        elif _is_python(part):
            meta["nbagent"]["tool_use_id"] = part.tool_use_id
            cells.append(nbf.new_code_cell(part.arguments["code"], metadata=meta, outputs=_outputs(part)))
        else:
            cells.append(nbf.new_markdown_cell(_call_markdown(part, images=False), metadata=meta))
            images = [b for b in part.result or [] if b.get("type") == "image" and _image(b)]
            if images:
                # Images go in as image outputs of an empty, clearly marked code cell (never as HTML).
                holder = nbf.new_code_cell("# images returned by the tool call above", metadata=meta)
                holder.outputs = [nbf.new_output("display_data", data={_image(b)[0]: _image(b)[1], "text/plain": "<image>"})  # type: ignore[index]
                                  for b in images]
                cells.append(holder)
    notebook.cells = cells
    nbformat.validate(notebook)
    return notebook


# Markdown ----------------------------------------------------------------------------------------
def to_markdown(events: Iterable[ev.Event], *, source: Path = Path("session.jsonl")) -> str:
    """The session as one Markdown document."""
    events = list(events)
    state = fold.fold(events)
    sections = [_header(state, source, events)]
    for part in parts(events):
        if part.kind == "request":
            sections.append("## Request\n\n" + safe_markdown(part.text))
        elif part.kind == "reply":
            sections.append("**Assistant**\n\n" + safe_markdown(part.text))
        elif part.kind == "note":
            sections.append("_" + plain(part.text) + "_")
        elif _is_python(part):
            text = ["**Python** (run by the agent)", "", fenced(part.arguments["code"], "python")]
            if part.result is None:
                text += ["", "_No result recorded: the call did not finish._"]
            else:
                body = _result_text(part)
                if body:
                    text += ["", "Error:" if part.is_error else "Output:", "", fenced(_clip(body))]
                for block in part.result:
                    image = _image(block) if block.get("type") == "image" else None
                    if image is not None:
                        text += ["", f"![output image](data:{image[0]};base64,{image[1]})"]
            sections.append("\n".join(text))
        else:
            sections.append(_call_markdown(part, images=True))
    return "\n\n".join(sections) + "\n"


def format_for(out: Path, chosen: str | None = None) -> Format:
    """The export format: ``chosen``, or from the output file's extension."""
    name = chosen or out.suffix.lstrip(".").lower()
    if name == "markdown":
        name = "md"
    if name not in FORMATS:
        raise ValueError(f"cannot tell the export format from {out.name!r}: use a .ipynb or .md file name, or --format ipynb|md")
    return name  # type: ignore[return-value]


def export(events: Iterable[ev.Event], out: str | os.PathLike[str], *, fmt: str | None = None, source: Path = Path("session.jsonl")) -> Path:
    """Write the session to ``out`` as a notebook or Markdown; returns the path written."""
    target = Path(out)
    chosen = format_for(target, fmt)
    if chosen == "ipynb":
        text = nbformat.writes(to_notebook(events, source=source))
    else:
        text = to_markdown(events, source=source)
    target.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    return target
