"""Model Markdown as safe HTML: markdown-it with raw HTML off, then nh3 (Ammonia) against a small allow-list.

Model output is untrusted. What is left: no script, no event handlers, no ``style``, no ``id``/``name``, no svg
or iframes, only http(s) and mailto links, no images at all (a remote image in model output could leak data
through its URL), and no live link to this machine (:mod:`.hosts`: it may be the Jupyter server). Attacks:
tests/render/test_render.py and the red-team campaigns.
"""

from __future__ import annotations

import html
import re
from functools import cache
from typing import Any

import nh3

from .code import TOKEN_CLASSES, highlight_block
from .hosts import local_link
from .style import ALIGN_CLASSES

ALLOWED_TAGS = frozenset(
    "a b blockquote br code del em h1 h2 h3 h4 h5 h6 hr i li ol p pre s span strong sub sup table tbody td th thead tr ul".split()
)
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}


# The only classes sanitized HTML keeps: highlighted code's, and a table cell's alignment (style.py styles them all).
ALLOWED_CLASSES = {
    "span": set(TOKEN_CLASSES),
    "pre": {"nbagent-code"},
    "th": set(ALIGN_CLASSES.values()),
    "td": set(ALIGN_CLASSES.values()),
}


def _no_local_href(element: str, attribute: str, value: str) -> str | None:
    """nh3's last word on every attribute: a link to this machine loses its target (see :mod:`.hosts`)."""
    return None if attribute == "href" and local_link(value) else value


_cleaner = nh3.Cleaner(
    tags=set(ALLOWED_TAGS),
    clean_content_tags={"script", "style", "iframe", "object", "embed", "svg", "math", "template", "noscript"},
    attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
    allowed_classes=ALLOWED_CLASSES,
    url_schemes={"http", "https", "mailto"},
    url_relative="deny",  # a relative link would point into the Jupyter server itself
    attribute_filter=_no_local_href,  # and so would an absolute one to this machine
    link_rel="noopener noreferrer nofollow",
    strip_comments=True,
)


def _image_as_link(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    alt = html.escape(token.content or "image")
    url = str(token.attrGet("src") or "")
    if local_link(url):
        return f"[image: {alt}] ({html.escape(url)})"
    return f'<a href="{html.escape(url, quote=True)}">[image: {alt}]</a>'


def _inert_local_links(state: Any) -> None:
    """A link to this machine (see :mod:`.hosts`) becomes its text followed by its URL, as plain text."""
    for token in state.tokens:
        opened: list[str | None] = []  # the URL of each enclosing link refused, None for one kept
        for child in token.children or []:
            if child.type == "link_open":
                url = str(child.attrGet("href") or "")
                refused = local_link(url)
                opened.append(url if refused and child.markup != "autolink" else "" if refused else None)
                if refused:
                    child.type, child.tag, child.nesting, child.attrs, child.content = "text", "", 0, {}, ""
            elif child.type == "link_close" and opened:
                shown = opened.pop()
                if shown is not None:
                    child.type, child.tag, child.nesting, child.content = "text", "", 0, f" ({shown})" if shown else ""


def _aligned_cells(state: Any) -> None:
    """A table column's alignment (markdown-it writes it as a style, which the sanitizer drops) as one of style.py's classes."""
    for token in state.tokens:
        if token.type in ("th_open", "td_open") and token.attrs:
            align = ALIGN_CLASSES.get(str(token.attrs.pop("style", "")))
            if align:
                token.attrs["class"] = align


@cache
def _markdown() -> Any:
    """The parser, made at its first use: a re-run cell's one-line answer never needs it (markdown-it is ~60 modules)."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False, "highlight": highlight_block}).enable(["table", "strikethrough"])
    parser.add_render_rule("image", _image_as_link)
    parser.core.ruler.push("nbagent_local_links", _inert_local_links)
    parser.core.ruler.push("nbagent_aligned_cells", _aligned_cells)
    return parser


def sanitize(fragment: str) -> str:
    """Clean an HTML fragment against the allow-list."""
    return _cleaner.clean(fragment)


# One line of prose, starting with a letter, in which no Markdown construct can start (no markup character,
# entity, HTML, line break, trailing space or lone surrogate): markdown-it would only wrap it in a paragraph, and
# the sanitizer then changes nothing but a no-break space (tests/render/test_render.py checks every code point).
_PROSE_LINE = re.compile(r"[^\W\d_][^\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\\`*_\[\]!<>&#~|\"]*(?<!\s)")


def markdown_html(text: str) -> str:
    """Markdown (from the model) to sanitized HTML."""
    if _PROSE_LINE.fullmatch(text):  # a re-run cell's short answer: what parsing and sanitizing make of it, without either
        return f"<p>{text.replace(chr(0xA0), '&nbsp;')}</p>\n"
    return sanitize(_markdown().render(text))
