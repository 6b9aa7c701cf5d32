"""Export a session log as a notebook (nbformat) or as Markdown.

Requests and replies become Markdown, the agent's ``python`` tool calls become
code cells carrying their recorded outputs, other tool calls become Markdown
with their arguments and results in code fences.  Text from the model, tools
or the user never reaches the output as raw HTML: outside code blocks ``<``
and ``&`` are escaped.  Links are judged on the URL a renderer would use (see
:func:`defuse_links`): only http(s), mailto and relative links stay links, and
only nbagent's own inline base64 images stay images, so opening an export loads
nothing remote and no link runs script.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

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
    return defuse_links("\n".join(out))


# Links and images ----------------------------------------------------------------------------------
# Decided on the URL a renderer would put in href/src (markdown-it has already decoded entities and
# backslash escapes there), never on the raw text: what is not allowed is unmade in the source.
LINK_SCHEMES = frozenset({"http", "https", "mailto"})  # and relative links (no scheme)
_SAFE_IMAGE_URL = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=]*", re.IGNORECASE)
_SCHEME = re.compile(r"([^/?#]*?):")
_INVISIBLE = re.compile(r"[\x00-\x20\x7f-\xa0\u00ad\u1680\u180e\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\ufeff]+")
_LINK_CLOSE = re.compile(r"(?<!\\)((?:\\\\)*)\](?=[(\[])")  # a live "](" or "][" (not backslash-escaped)
_IMAGE_OPEN = re.compile(r"(?<!\\)((?:\\\\)*)!(?=\[)")  # a live "!["
_DEFUSE_ROUNDS = 8
_LINE_END = re.compile(r"(\r\n|\r|\n)")


def decoded_url(url: str) -> str:
    """``url`` as a lenient browser might finally read it: entities and %-escapes decoded (repeatedly), spaces and controls gone."""
    for _ in range(4):
        before, url = url, unquote(html.unescape(url), errors="replace")
        if url == before:
            break
    return _INVISIBLE.sub("", url).lower()


def link_allowed(url: str) -> bool:
    """Whether a link may point at ``url``: http(s), mailto or relative, judged on the decoded URL."""
    match = _SCHEME.match(decoded_url(url))
    return match is None or match.group(1) in LINK_SCHEMES


def image_allowed(url: str) -> bool:
    """Whether an image may show ``url``: only inline base64 data of a safe image type (nothing is fetched)."""
    return _SAFE_IMAGE_URL.fullmatch(url.strip()) is not None


def _link_parser() -> MarkdownIt:
    """CommonMark as a renderer without a URL filter sees it, noting where each reference definition starts."""
    parser = MarkdownIt("commonmark")
    parser.validateLink = lambda url: True  # type: ignore[method-assign]
    reference = parser.block.ruler.__rules__[parser.block.ruler.__find__("reference")].fn

    def noting_reference(state: Any, start: int, end: int, silent: bool) -> bool:
        known = set(state.env.get("references", {}))
        found = bool(reference(state, start, end, silent))
        if found and not silent:
            for label in set(state.env.get("references", {})) - known:
                state.env.setdefault("nbagent_definitions", []).append((start, state.env["references"][label]["href"]))
        return found

    parser.block.ruler.at("reference", noting_reference)
    return parser


_links = _link_parser()


def _offending_lines(markdown: str) -> tuple[set[int], set[int], set[int]]:
    """Lines holding a forbidden link, a non-inline image, and starting a forbidden reference definition."""
    env: dict[str, Any] = {}
    tokens = _links.parse(markdown, env)
    links: set[int] = set()
    images: set[int] = set()
    definitions = {line for line, href in env.get("nbagent_definitions", []) if not link_allowed(href)}
    for token in tokens:
        if token.type != "inline" or not token.map:
            continue
        lines = set(range(*token.map))
        for child in token.children or []:
            if child.type == "link_open" and not link_allowed(str(child.attrs.get("href", ""))):
                links |= lines
            elif child.type == "image" and not image_allowed(str(child.attrs.get("src", ""))):
                images |= lines
    return links, images, definitions


def defuse_links(markdown: str) -> str:
    """``markdown`` with no link to a script, data or file URL and no image that loads anything.

    The source is parsed as CommonMark with no URL filter; where a link's decoded
    target is not http(s), mailto or relative, its ``](``/``][`` is backslash-escaped
    (the text stays, the link goes); a reference definition with such a target loses
    its opening ``[``; an image that is not inline base64 data loses its ``!`` and so
    becomes a plain link (which the next round judges like any other).  Repeated until
    the parse is clean; if it never is, the whole text goes into a code block.
    """
    for _ in range(_DEFUSE_ROUNDS):
        links, images, definitions = _offending_lines(markdown)
        if not (links or images or definitions):
            return markdown
        lines, breaks = _split_lines(markdown)
        for number in images:
            lines[number] = _IMAGE_OPEN.sub(r"\1\\!", lines[number])
        for number in links - images:  # an image's own link is judged after it has become one
            lines[number] = _LINK_CLOSE.sub(r"\1\\]", lines[number])
        for number in definitions:
            at = lines[number].find("[")
            if at >= 0:
                lines[number] = lines[number][:at] + "\\" + lines[number][at:]
        markdown = "".join(line + brk for line, brk in zip(lines, breaks))
    return fenced(markdown) if any(_offending_lines(markdown)) else markdown


def _split_lines(text: str) -> tuple[list[str], list[str]]:
    """The lines as markdown-it numbers them (it reads CR LF, CR and LF as line ends), and each one's line end."""
    pieces = _LINE_END.split(text)
    return pieces[0::2], [*pieces[1::2], ""]


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
                    call = Part(
                        "call", seq, name=str(block.get("name")), arguments=dict(block.get("input") or {}), tool_use_id=str(block.get("id"))
                    )
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
            yield Part(
                "note",
                seq,
                f"Approval {event['decision']} by {event.get('by', '?')}" + (f": {event['note']}" if event.get("note") else "."),
            )
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
                holder.outputs = [
                    nbf.new_output("display_data", data={_image(b)[0]: _image(b)[1], "text/plain": "<image>"})  # type: ignore[index]
                    for b in images
                ]
                cells.append(holder)
    for cell in cells:
        if cell.cell_type == "markdown":
            cell.source = defuse_links(cell.source)
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
        text = nbformat.writes(to_notebook(events, source=source))
    else:
        text = to_markdown(events, source=source)
    target.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    return target
