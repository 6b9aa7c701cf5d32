"""Markdown for exports: text from the model, tools or the user can carry no raw HTML, remote image or script link.

Outside code blocks ``<`` and ``&`` are escaped.  Links are judged on the URL a
renderer would use (see :func:`defuse_links`): only http(s), mailto and relative
links stay links (none to this machine: see :mod:`.hosts`), and only nbagent's own inline base64 images stay images, so
opening an export loads nothing remote and no link runs script.
"""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import unquote

from markdown_it import MarkdownIt

from .hosts import local_link

_SCRIPT_SCHEME = re.compile(r"(?i)\b(java|vb)(\s*script)(\s*):")
_parser = MarkdownIt("commonmark")
_SENTINEL = "nbagent-end-of-fragment"
_MARKUP = re.compile(r"([\\`*_\[\]])")


def plain(text: str) -> str:
    """Text shown literally on one Markdown line: no emphasis, code, link, HTML or entity can form."""
    flat = " ".join(str(text).split())
    return _MARKUP.sub(r"\\\1", flat.replace("&", "&amp;").replace("<", "&lt;"))


def note_markdown(text: str) -> str:
    """A note in italics; a note of several lines collapsed: its first line the summary of a <details>, the rest a code block."""
    first, _, rest = str(text).partition("\n")
    if not rest.strip():
        return "_" + plain(text) + "_"
    summary = html.escape(" ".join(first.split()))
    return f"<details><summary>{summary}</summary>\n\n{fenced(rest.strip(chr(10)), 'text')}\n\n</details>"


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
    """Whether a link may point at ``url``: http(s), mailto or relative, judged on the decoded URL, and not to this machine."""
    decoded = decoded_url(url)
    match = _SCHEME.match(decoded)
    return (match is None or match.group(1) in LINK_SCHEMES) and not local_link(url) and not local_link(decoded)


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
