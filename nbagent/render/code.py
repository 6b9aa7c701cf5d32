"""Code as highlighted, escaped HTML: tool code and the fenced code blocks of answers (pygments; colours in :mod:`.style`)."""

from __future__ import annotations

import bisect
import functools
import re
from typing import Any

from ..terminal import char_name, escape_char, hidden_chars, hidden_words
from .parts import clip, esc

MAX_TOOL_TEXT = 20_000  # characters of tool code or a tool result shown before it is cut (the log keeps all of it)
MAX_HIGHLIGHT = 100_000  # characters of a code block in an answer highlighted (a longer one is shown plain)


def _token_classes() -> frozenset[str]:
    """The classes pygments gives highlighted code (``pg-k``, ``pg-s1``, ...): the only classes a span may keep."""
    from pygments.token import STANDARD_TYPES  # type: ignore[import-untyped]

    return frozenset(f"pg-{short}" for short in STANDARD_TYPES.values() if short)


TOKEN_CLASSES = _token_classes()


@functools.lru_cache(maxsize=64)
def _lexer(language: str) -> Any:
    """The pygments lexer of a code block's language (None if pygments has none by that name)."""
    from pygments.lexers import get_lexer_by_name  # type: ignore[import-untyped]
    from pygments.util import ClassNotFound  # type: ignore[import-untyped]

    try:
        return get_lexer_by_name(language) if language else None
    except ClassNotFound:
        return None


def highlight_block(code: str, language: str, attributes: str) -> str:
    """A fenced code block of an answer, highlighted as tool code is ('' leaves it to markdown-it: plain and escaped)."""
    lexer = _lexer(language.lower()[:40])
    if lexer is None or len(code) > MAX_HIGHLIGHT:
        return ""
    return f'<pre class="nbagent-code"><code>{_highlighted(code, lexer)}</code></pre>'


def _highlighted(code: str, lexer: Any) -> str:
    from pygments import highlight  # type: ignore[import-untyped]  # (installed with IPython; it has no type stubs)
    from pygments.formatters import HtmlFormatter  # type: ignore[import-untyped]

    return str(highlight(code, lexer, HtmlFormatter(nowrap=True, classprefix="pg-")))


def python_html(code: str, *, whole: bool = False) -> str:
    """Python source as highlighted, escaped HTML (pygments escapes the code; the colours are the stylesheet's).

    Cut at MAX_TOOL_TEXT characters unless ``whole`` (an approval question shows all of what will run).
    """
    code = code if whole else clip(code, MAX_TOOL_TEXT, note="more characters in the log")
    return f'<pre class="nbagent-code">{_highlighted(code, _lexer("python"))}</pre>'


def mark_hidden(escaped: str) -> str:
    """HTML text (already escaped) with each hidden character shown as its escape, marked and named (``nbagent-hidden``).

    Hidden: invisible, or changing the direction of the text around it (:func:`nbagent.terminal.is_hidden`), so a
    Trojan-Source edit reads as what it is. Only for text content, never inside an attribute value.
    """
    found = hidden_chars(escaped)
    if not found:
        return escaped
    marks = {ord(c): f'<span class="nbagent-hidden" title="{esc(char_name(c))}">{esc(escape_char(c))}</span>' for c in found}
    return escaped.translate(marks)


def hidden_note_html(text: str) -> str:
    """A warning naming the hidden characters of ``text``, above the code that shows them marked ('' if it has none)."""
    words = hidden_words(text)
    return f'<div class="nbagent-hidden-note"><span class="nbagent-label">hidden characters</span> {esc(words)}</div>' if words else ""


_FENCE = re.compile(r"(`{3,})([\w+.-]*)[ \t]*")  # a line that opens a fenced block: backticks, then a language


def fenced(text: str) -> list[tuple[str, str | None]]:
    """``text`` as its words and its fenced blocks, in order: ``(words, None)`` and ``(code, language)`` (table: tests/render/test_code.py).

    A block opens on a line of three or more backticks (and a language) and closes on the next line of the same
    backticks; an opening line never closed is words, as written.
    """
    lines = text.split("\n")
    closers: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        if line.startswith("```") and line.rstrip() == "`" * len(line.rstrip()):
            closers.setdefault(line.rstrip(), []).append(i)
    parts: list[tuple[str, str | None]] = []
    words: list[str] = []
    i = 0
    while i < len(lines):
        opened = _FENCE.fullmatch(lines[i])
        ends = closers.get(opened.group(1), []) if opened else []
        close = bisect.bisect_right(ends, i)
        if opened and close < len(ends):
            if words:
                parts.append(("\n".join(words), None))
                words = []
            end = ends[close]
            parts.append(("\n".join(lines[i + 1 : end]), opened.group(2)))
            i = end + 1
            continue
        words.append(lines[i])
        i += 1
    if words:
        parts.append(("\n".join(words), None))
    return parts


def request_html(text: str) -> str:
    """A request as its "You:" line shows it: its words, and each fenced block (an expanded ``{In[3]}``, ``{Err}``) preformatted, without its fences.

    Only how it is shown: the request is sent and logged as written. Hidden characters in a block are shown marked.
    """
    parts = fenced(text)
    if all(language is None for _part, language in parts):
        return f'<span class="nbagent-request">{esc(text)}</span>'
    shown = []
    for part, language in parts:
        if language is None:
            if part.strip("\n"):
                shown.append(f'<span class="nbagent-request">{esc(part.strip(chr(10)))}</span>')
        else:
            shown.append(f'<pre class="nbagent-request-block">{mark_hidden(esc(part))}</pre>')
    return "".join(shown)
