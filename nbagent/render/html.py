"""Events as safe HTML: the one renderer of the live panel, its static transcript and the replay.

Model output is untrusted.  Markdown is rendered with raw HTML disabled, then
sanitized with nh3 (Ammonia) against a small allow-list: no script, no event
handlers, no ``style``, no ``id``/``name``, no svg or iframes, only http(s) and
mailto links, and no images at all (a remote image in model output could leak
data through its URL).  The only images shown are tool-result images, whose
``data:`` URIs this module builds itself from checked base64.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import nh3
from markdown_it import MarkdownIt

from .. import events as ev
from .. import redact
from .parts import IMAGE_TYPES, ToolNames, clip, content_blocks, dumps, esc, image_data, kind_of, note_text, text_of, tool_name

Event = Mapping[str, Any]

ALLOWED_TAGS = frozenset(
    {
        "a",
        "b",
        "blockquote",
        "br",
        "code",
        "del",
        "em",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "i",
        "li",
        "ol",
        "p",
        "pre",
        "s",
        "strong",
        "sub",
        "sup",
        "table",
        "tbody",
        "td",
        "th",
        "thead",
        "tr",
        "ul",
    }
)
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
MAX_TOOL_TEXT = 20_000  # characters of a tool result shown before it is cut (the log keeps all of it)

_cleaner = nh3.Cleaner(
    tags=set(ALLOWED_TAGS),
    clean_content_tags={"script", "style", "iframe", "object", "embed", "svg", "math", "template", "noscript"},
    attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
    url_schemes={"http", "https", "mailto"},
    url_relative="deny",  # a relative link would point into the Jupyter server itself
    link_rel="noopener noreferrer nofollow",
    strip_comments=True,
)


def _image_as_link(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    alt = html.escape(token.content or "image")
    src = html.escape(token.attrGet("src") or "", quote=True)
    return f'<a href="{src}">[image: {alt}]</a>'


_markdown = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
_markdown.add_render_rule("image", _image_as_link)


def sanitize(fragment: str) -> str:
    """Clean an HTML fragment against the allow-list."""
    return _cleaner.clean(fragment)


def markdown_html(text: str) -> str:
    """Markdown (from the model) to sanitized HTML."""
    return sanitize(_markdown.render(text))


def _pre(text: str) -> str:
    return f'<pre style="white-space:pre-wrap;margin:2px 0">{esc(clip(text, MAX_TOOL_TEXT, note="more characters in the log"))}</pre>'


def _details(summary: str, body: str, *, error: bool = False, open_: bool = False) -> str:
    color = "#b00020" if error else "#555"
    return (
        f'<details class="nbagent-tool"{" open" if open_ else ""} style="margin:4px 0">'
        f'<summary style="cursor:pointer;color:{color}">{summary}</summary>{body}</details>'
    )


def image_html(block: Mapping[str, Any]) -> str:
    """An ``image`` content block (base64 source) as an <img> with a data URI, or a note if it is not a safe image."""
    image = image_data(block)
    if image is not None:
        return f'<img src="data:{image[0]};base64,{image[1]}" alt="tool image" style="max-width:100%">'
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "base64" and source.get("media_type") in IMAGE_TYPES:
        return "<p><i>[image not shown: invalid base64 data]</i></p>"
    return "<p><i>[image not shown: only base64 PNG, JPEG, GIF or WebP images are displayed]</i></p>"


def _result_html(content: Any) -> str:
    parts = []
    for block in content_blocks(content):
        kind = block.get("type")
        if kind == "text":
            parts.append(_pre(str(block.get("text", ""))))
        elif kind == "image":
            parts.append(image_html(block))
        else:
            parts.append(_pre(dumps(block)))
    return "".join(parts)


def tool_call_html(name: str, arguments: Any) -> str:
    """A collapsed tool call: its name, and its arguments inside."""
    return _details(f"🔧 <b>{esc(name)}</b>", _pre(json.dumps(arguments, ensure_ascii=False, indent=2, default=str)))


def tool_result_html(name: str, content: Any, *, is_error: bool = False) -> str:
    """A collapsed tool result (text, images); errors are marked."""
    label = "error from" if is_error else "result of"
    return _details(f"↳ {label} <b>{esc(name)}</b>", _result_html(content), error=is_error)


# One function per event type ---------------------------------------------------------------------------
Names = Mapping[str, str]
BLOCKS: dict[str, Callable[[dict[str, Any]], str]] = {
    "text": lambda b: f'<div class="nbagent-text">{markdown_html(str(b.get("text", "")))}</div>',
    "tool_use": lambda b: tool_call_html(str(b.get("name", "?")), b.get("input", {})),
    "thinking": lambda b: _details("thinking", _pre(redact.block_text(b))),  # verbatim in the log, redacted when shown
}


def _nothing(e: Event, names: Names) -> str:
    return ""  # shown only as the panel's status


def _user_msg(e: Event, names: Names) -> str:
    text = esc(text_of(e.get("content"), only_text=True))
    return f'<div class="nbagent-user" style="margin:4px 0"><b>You:</b> <span style="white-space:pre-wrap">{text}</span></div>'


def _assistant_msg(e: Event, names: Names) -> str:
    return "".join(BLOCKS[str(b.get("type"))](b) for b in content_blocks(e.get("content")) if b.get("type") in BLOCKS)


def _tool_result(e: Event, names: Names) -> str:
    return tool_result_html(tool_name(names, e.get("tool_use_id")), e.get("content"), is_error=bool(e.get("is_error")))


def _model_error(e: Event, names: Names) -> str:
    return f'<div class="nbagent-error" style="color:#b00020">⚠ model error: {esc(e.get("message", ""))}</div>'


def _approval(e: Event, names: Names) -> str:
    decision = e.get("decision")
    if decision == "pending":
        return f'<div class="nbagent-approval">❓ {esc(e.get("question", "approval needed"))}</div>'
    note = f": {esc(e['note'])}" if e.get("note") else ""
    mark = "✔" if decision == "approved" else "✘"
    return f'<div class="nbagent-approval">{mark} {esc(decision)} by {esc(e.get("by", "?"))}{note}</div>'


def _interrupted(e: Event, names: Names) -> str:
    return f'<div class="nbagent-interrupted" style="color:#b00020">⏹ interrupted (during {esc(e.get("during", "?"))})</div>'


def _note(e: Event, names: Names) -> str:
    return f'<div class="nbagent-note"><i>{esc(note_text(e))}</i></div>'


HTML: dict[str, Callable[[Event, Names], str]] = {
    ev.SESSION_START: _nothing,
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
}


def event_html(event: Event, *, tool_names: Names | None = None) -> str:
    """One event as a safe HTML fragment ('' for events that show nothing, like deltas)."""
    return HTML.get(kind_of(event), _nothing)(event, tool_names or {})


def transcript_html(events: Iterable[Event], *, title: str = "", status: str = "") -> str:
    """A whole transcript as one self-contained, safe HTML fragment."""
    listed = list(events)
    names = ToolNames.of_events(listed)
    body = "".join(event_html(e, tool_names=names) for e in listed)
    head = ""
    if title or status:
        head = f'<div style="font-weight:bold;border-bottom:1px solid #ccc;margin-bottom:4px">{esc(title)}'
        head += f' <span style="font-weight:normal;color:#555">— {esc(status)}</span></div>' if status else "</div>"
    return f'<div class="nbagent-transcript">{head}{body}</div>'
