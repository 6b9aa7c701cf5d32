"""Text for a terminal: nothing taken from a log can reach it as a control sequence.

A log holds text written by a model, by tools and by whoever else wrote the
file (a cloned repository, say).  Printed raw, that text could drive the
terminal: set the clipboard (OSC 52), the window title, hide a link target
(OSC 8), conceal or overwrite text (CSI, CR, backspace), or reorder what is
shown (bidi overrides, "Trojan Source").  :func:`safe` shows every such
character visibly escaped instead (``\\x1b``, ``\\x9b``, ``\\r``, ``\\u202e``);
``\\n`` and ``\\t`` stay layout.  :class:`SafeWriter` applies it to everything
written through it, and :func:`json_dumps` gives JSON that is both valid and
free of those characters.

The program's own formatting (it uses none today) goes through
:meth:`SafeWriter.control`, which writes only when the stream is a terminal.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any, TextIO

# C0 controls but \t and \n, DEL, C1 controls (U+009B is a one-character CSI on some
# terminals), bidi embeddings/overrides/isolates, and lone surrogates (unprintable, and
# a UTF-8 stream raises on them).
_UNSAFE_CLASS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE = re.compile(f"[{_UNSAFE_CLASS}]")
_CODE_POINTS = [
    *range(0x00, 0x09),
    *range(0x0B, 0x20),
    *range(0x7F, 0xA0),
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
    *range(0xD800, 0xE000),
]


def _visible(code: int) -> str:
    if code == 0x0D:
        return "\\r"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


_TABLE = {code: _visible(code) for code in _CODE_POINTS}
_JSON_TABLE = {code: f"\\u{code:04x}" for code in _CODE_POINTS}


def safe(text: str) -> str:
    """``text`` with every terminal control character, C1 control and bidi override shown escaped (``\\n``, ``\\t`` kept)."""
    if _UNSAFE.search(text) is None:  # the common case: one scan, no copy
        return text
    return text.translate(_TABLE)


def json_dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` whose output is valid JSON with no character :func:`safe` would escape.

    Non-ASCII text stays readable (``ensure_ascii=False``); control characters,
    DEL, C1 controls, bidi overrides and lone surrogates are written as
    ``\\uXXXX`` escapes, so a JSON reader gets back exactly the same strings.
    (JSON's structure is ASCII, so such a character can only be inside a string.)
    """
    kwargs.setdefault("ensure_ascii", False)
    text = json.dumps(obj, **kwargs)
    if _UNSAFE.search(text) is None:
        return text
    return text.translate(_JSON_TABLE)


# What a person cannot see, or what changes how the text around it is shown ("Trojan Source"), by Unicode category:
# controls (Cc), format characters (Cf: bidi marks, embeddings, overrides and isolates, zero-width characters,
# tags), surrogates (Cs) and the line and paragraph separators (Zl, Zp). \n and \t stay layout.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_ASCII_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


def is_hidden(char: str) -> bool:
    """Whether one character is invisible or changes the direction of the text around it (:data:`HIDDEN_CATEGORIES`)."""
    return char not in "\n\t" and unicodedata.category(char) in HIDDEN_CATEGORIES


def escape_char(char: str) -> str:
    """One character as its escape: ``\\r``, ``\\x1b``, ``\\u202e``, ``\\U000e0041``."""
    code = ord(char)
    if code == 0x0D:
        return "\\r"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def hidden_chars(text: str) -> list[str]:
    """The hidden characters of ``text`` (see :func:`is_hidden`), each once, in the order they first appear."""
    if text.isascii() and _ASCII_HIDDEN.search(text) is None:  # the common case: one scan
        return []
    return list(dict.fromkeys(c for c in text if is_hidden(c)))


def char_name(char: str) -> str:
    """'U+202E RIGHT-TO-LEFT OVERRIDE' ('U+001B control character' where Unicode gives no name)."""
    return f"U+{ord(char):04X} {unicodedata.name(char, '') or 'control character'}"


def visible(text: str) -> str:
    """``text`` with every hidden character (:func:`is_hidden`) shown escaped (``\\u202e``), so none acts on the text around it."""
    found = hidden_chars(text)
    return text.translate({ord(c): escape_char(c) for c in found}) if found else text


def hidden_words(text: str) -> str:
    """A sentence naming the hidden characters of ``text`` ('' if none): said above an approval's text that shows them escaped."""
    found = hidden_chars(text)
    if not found:
        return ""
    names = ", ".join(f"{escape_char(c)} ({char_name(c)})" for c in found)
    return f"The text below holds characters that are invisible or change the direction of the text around them; shown escaped: {names}."


class SafeWriter:
    """A text stream wrapper that escapes, with :func:`safe`, everything written through it."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(safe(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        try:
            return bool(isatty()) if isatty is not None else False
        except (OSError, ValueError):
            return False

    def control(self, sequence: str) -> None:
        """Write one of the program's own escape sequences (colour, say) unescaped, and only to a terminal."""
        if self.isatty():
            self.stream.write(sequence)

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, closed, ... of the wrapped stream
        return getattr(self.stream, name)


def wrap(stream: TextIO) -> TextIO:
    """``stream`` behind a :class:`SafeWriter` (once: an already wrapped stream is returned as is)."""
    return stream if isinstance(stream, SafeWriter) else SafeWriter(stream)  # type: ignore[return-value]
