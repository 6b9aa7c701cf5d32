"""Events as safe HTML and plain text: for the live panel, its static fallback, exports and replays.

Model output is untrusted.  Markdown is rendered with raw HTML disabled, then
sanitized with nh3 (Ammonia) against a small allow-list: no script, no event
handlers, no ``style``, no ``id``/``name``, no svg or iframes, only http(s) and
mailto links, and no images at all (a remote image in model output could leak
data through its URL).  The only images shown are tool-result images, whose
``data:`` URIs this module builds itself from checked base64.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
from collections.abc import Iterable, Mapping
from typing import Any

import nh3
from markdown_it import MarkdownIt

from .. import events as ev
from .. import redact
from ..terminal import safe

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
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
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


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _pre(text: str) -> str:
    if len(text) > MAX_TOOL_TEXT:
        text = text[:MAX_TOOL_TEXT] + f"\n… ({len(text) - MAX_TOOL_TEXT} more characters in the log)"
    return f'<pre style="white-space:pre-wrap;margin:2px 0">{_esc(text)}</pre>'


def _details(summary: str, body: str, *, error: bool = False, open_: bool = False) -> str:
    color = "#b00020" if error else "#555"
    return (
        f'<details class="nbagent-tool"{" open" if open_ else ""} style="margin:4px 0">'
        f'<summary style="cursor:pointer;color:{color}">{summary}</summary>{body}</details>'
    )


def image_html(block: Mapping[str, Any]) -> str:
    """An ``image`` content block (base64 source) as an <img> with a data URI, or a note if it is not a safe image."""
    source = block.get("source") or {}
    media_type = source.get("media_type")
    data = source.get("data")
    if source.get("type") != "base64" or media_type not in IMAGE_TYPES or not isinstance(data, str):
        return "<p><i>[image not shown: only base64 PNG, JPEG, GIF or WebP images are displayed]</i></p>"
    try:
        clean = base64.b64encode(base64.b64decode(data, validate=True)).decode("ascii")
    except (binascii.Error, ValueError):
        return "<p><i>[image not shown: invalid base64 data]</i></p>"
    return f'<img src="data:{media_type};base64,{clean}" alt="tool image" style="max-width:100%">'


def _content_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b if isinstance(b, dict) else {"type": "text", "text": str(b)} for b in content]
    return [{"type": "text", "text": json.dumps(content, ensure_ascii=False, default=str)}]


def _result_html(content: Any) -> str:
    parts = []
    for block in _content_blocks(content):
        kind = block.get("type")
        if kind == "text":
            parts.append(_pre(str(block.get("text", ""))))
        elif kind == "image":
            parts.append(image_html(block))
        else:
            parts.append(_pre(json.dumps(block, ensure_ascii=False, default=str)))
    return "".join(parts)


def _arguments(arguments: Any) -> str:
    return json.dumps(arguments, ensure_ascii=False, indent=2, default=str)


def tool_call_html(name: str, arguments: Any) -> str:
    """A collapsed tool call: its name, and its arguments inside."""
    return _details(f"🔧 <b>{_esc(name)}</b>", _pre(_arguments(arguments)))


def tool_result_html(name: str, content: Any, *, is_error: bool = False) -> str:
    """A collapsed tool result (text, images); errors are marked."""
    label = "error from" if is_error else "result of"
    return _details(f"↳ {label} <b>{_esc(name)}</b>", _result_html(content), error=is_error)


def _user_text(content: Any) -> str:
    return "\n".join(str(b.get("text", "")) for b in _content_blocks(content) if b.get("type") == "text")


def event_html(event: Event, *, tool_names: Mapping[str, str] | None = None) -> str:
    """One event as a safe HTML fragment ('' for events that show nothing, like deltas)."""
    kind = event.get("type")
    if kind == ev.USER_MSG:
        text = _user_text(event.get("content"))
        return f'<div class="nbagent-user" style="margin:4px 0"><b>You:</b> <span style="white-space:pre-wrap">{_esc(text)}</span></div>'
    if kind == ev.ASSISTANT_MSG:
        parts = []
        for block in event.get("content") or []:
            btype = block.get("type")
            if btype == "text":
                parts.append(f'<div class="nbagent-text">{markdown_html(str(block.get("text", "")))}</div>')
            elif btype == "tool_use":
                parts.append(tool_call_html(str(block.get("name", "?")), block.get("input", {})))
            elif btype == "thinking":
                parts.append(_details("thinking", _pre(redact.block_text(block))))  # verbatim in the log, redacted when shown
        return "".join(parts)
    if kind == ev.TOOL_RESULT:
        name = (tool_names or {}).get(str(event.get("tool_use_id")), "tool")
        return tool_result_html(name, event.get("content"), is_error=bool(event.get("is_error")))
    if kind == ev.MODEL_ERROR:
        return f'<div class="nbagent-error" style="color:#b00020">⚠ model error: {_esc(event.get("message", ""))}</div>'
    if kind == ev.APPROVAL:
        decision = event.get("decision")
        if decision == "pending":
            return f'<div class="nbagent-approval">❓ {_esc(event.get("question", "approval needed"))}</div>'
        note = f": {_esc(event['note'])}" if event.get("note") else ""
        return f'<div class="nbagent-approval">{"✔" if decision == "approved" else "✘"} {_esc(decision)} by {_esc(event.get("by", "?"))}{note}</div>'
    if kind == ev.INTERRUPTED:
        return f'<div class="nbagent-interrupted" style="color:#b00020">⏹ interrupted (during {_esc(event.get("during", "?"))})</div>'
    if kind == ev.NOTE:
        return f'<div class="nbagent-note"><i>{_esc(_note(event))}</i></div>'
    return ""


def _note(event: Event) -> str:
    text = event.get("text") or event.get("message")
    if text:
        return str(text)
    return json.dumps({k: v for k, v in event.items() if k not in ("v", "seq", "ts", "type", "crc")}, ensure_ascii=False, default=str)


def _tool_names(events: Iterable[Event]) -> tuple[list[Event], dict[str, str]]:
    listed = list(events)
    names = {
        str(b.get("id")): str(b.get("name"))
        for e in listed
        if e.get("type") == ev.ASSISTANT_MSG
        for b in e.get("content") or []
        if b.get("type") == "tool_use"
    }
    return listed, names


def usage_text(usage: Mapping[str, int]) -> str:
    """Token totals in one short line."""
    cached = int(usage.get("cache_read_input_tokens", 0))
    text = f"{int(usage.get('input_tokens', 0)):,} in / {int(usage.get('output_tokens', 0)):,} out tokens"
    return text + (f" ({cached:,} read from cache)" if cached else "")


def transcript_html(events: Iterable[Event], *, title: str = "", status: str = "") -> str:
    """A whole transcript as one self-contained, safe HTML fragment."""
    listed, names = _tool_names(events)
    body = "".join(event_html(e, tool_names=names) for e in listed)
    head = ""
    if title or status:
        head = f'<div style="font-weight:bold;border-bottom:1px solid #ccc;margin-bottom:4px">{_esc(title)}'
        head += f' <span style="font-weight:normal;color:#555">— {_esc(status)}</span></div>' if status else "</div>"
    return f'<div class="nbagent-transcript">{head}{body}</div>'


def _result_text(content: Any) -> str:
    parts = []
    for block in _content_blocks(content):
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "image":
            parts.append(f"[image {block.get('source', {}).get('media_type', '')}]")
        else:
            parts.append(json.dumps(block, ensure_ascii=False, default=str))
    return "\n".join(parts)


def event_text(event: Event, *, tool_names: Mapping[str, str] | None = None) -> str:
    """One event as plain text ('' for events that show nothing)."""
    kind = event.get("type")
    if kind == ev.USER_MSG:
        return f"You: {_user_text(event.get('content'))}"
    if kind == ev.ASSISTANT_MSG:
        parts = []
        for block in event.get("content") or []:
            if block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif block.get("type") == "tool_use":
                parts.append(f"[tool call] {block.get('name')}({json.dumps(block.get('input', {}), ensure_ascii=False, default=str)})")
        return "\n".join(parts)
    if kind == ev.TOOL_RESULT:
        name = (tool_names or {}).get(str(event.get("tool_use_id")), "tool")
        label = "tool error" if event.get("is_error") else "tool result"
        return f"[{label}] {name}: {_result_text(event.get('content'))}"
    if kind == ev.MODEL_ERROR:
        return f"[model error] {event.get('message', '')}"
    if kind == ev.APPROVAL:
        if event.get("decision") == "pending":
            return f"[approval] {event.get('question', '')}"
        note = f": {event['note']}" if event.get("note") else ""
        return f"[approval] {event.get('decision')} by {event.get('by', '?')}{note}"
    if kind == ev.INTERRUPTED:
        return f"[interrupted during {event.get('during', '?')}]"
    if kind == ev.NOTE:
        return f"[note] {_note(event)}"
    return ""


def transcript_text(events: Iterable[Event], *, title: str = "", status: str = "") -> str:
    """A whole transcript as plain text."""
    listed, names = _tool_names(events)
    lines = [f"{title} — {status}" if status else title] if (title or status) else []
    lines += [t for t in (event_text(e, tool_names=names) for e in listed) if t]
    return safe("\n\n".join(lines))  # text/plain is what a terminal frontend prints
