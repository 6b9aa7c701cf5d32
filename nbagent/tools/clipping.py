"""Tool output bounded while it is written: keep the head and the tail, count the characters in between.

A tool that prints gigabytes must not hold them: :class:`HeadTail` stores at most about
``limit`` characters (plus one write's worth) however much is written, and :class:`ByteHeadTail`
decodes UTF-8 bytes as they are read (a character split between two reads is kept whole).
:func:`fit` shares one limit between several outputs (stdout, stderr, ...), so a short one is
shown whole and the long ones are cut in the middle, each with a note saying how many
characters were left out.
"""

from __future__ import annotations

import codecs
import io


def note(left_out: int) -> str:
    """The line that stands for ``left_out`` characters not shown."""
    return f"\n[... {left_out} more characters not shown]\n"


class HeadTail(io.TextIOBase):
    """A writable text stream keeping only its first and last characters, up to ``limit`` in all.

    Up to ``limit`` characters written are kept whole; past that, the first ``limit // 2``
    and the last ``limit - limit // 2`` are kept and the rest is only counted.
    """

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self._head: list[str] = []
        self._head_len = 0
        self._tail: list[str] = []
        self._tail_len = 0
        self.dropped = 0  # characters between the head and the tail, counted, not kept

    def writable(self) -> bool:
        """A HeadTail is written to."""
        return True

    def write(self, text: str) -> int:
        """Keep what the head or the tail needs of ``text``; count the rest."""
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        rest = text
        if self._head_len < self.head_limit:
            room = self.head_limit - self._head_len
            self._head.append(rest[:room])
            self._head_len += min(room, len(rest))
            rest = rest[room:]
        if rest:
            if len(rest) > self.tail_limit:
                self.dropped += self._tail_len + len(rest) - self.tail_limit
                self._tail, self._tail_len = [rest[-self.tail_limit :]], self.tail_limit
            else:
                self._tail.append(rest)
                self._tail_len += len(rest)
                if self._tail_len > 2 * self.tail_limit:  # compact now and then: amortised O(1) a character
                    self._trim()
        return len(text)

    def _trim(self) -> None:
        joined = "".join(self._tail)
        self.dropped += len(joined) - self.tail_limit
        self._tail, self._tail_len = [joined[-self.tail_limit :]], self.tail_limit

    @property
    def total(self) -> int:
        """How many characters were written."""
        return self._head_len + self.dropped + self._tail_len

    def text(self, limit: int | None = None) -> str:
        """What was written, or (if longer than ``limit``, at most this stream's own) its head, a note and its tail."""
        limit = self.limit if limit is None else min(limit, self.limit)
        if self._tail_len > self.tail_limit:
            self._trim()
        head, tail = "".join(self._head), "".join(self._tail)
        if self.dropped == 0:  # all of it is here: cut it as one text
            head, tail = head + tail, head + tail
        if self.total <= limit:
            return head
        keep_head = limit // 2
        return head[:keep_head] + note(self.total - limit) + tail[len(tail) - (limit - keep_head) :]


class ByteHeadTail(HeadTail):
    """A :class:`HeadTail` fed UTF-8 bytes (invalid bytes become U+FFFD, as ``decode(errors="replace")`` does)."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes, final: bool = False) -> None:
        """Decode ``data`` (a character cut at its end waits for the next bytes) and keep what is needed."""
        self.write(self._decoder.decode(data, final))


def clipped(text: str, limit: int) -> str:
    """``text``, or its head and tail with a note of how many characters were left out."""
    if len(text) <= limit:
        return text
    kept = HeadTail(limit)
    kept.write(text)
    return kept.text()


def fit(parts: list[HeadTail], limit: int) -> list[str]:
    """Each part's text, sharing ``limit`` characters: parts shorter than an even share are whole, the rest cut evenly."""
    shares = [0] * len(parts)
    left = limit
    order = sorted(range(len(parts)), key=lambda i: parts[i].total)
    for n, i in enumerate(order):
        shares[i] = min(parts[i].total, left // (len(parts) - n))
        left -= shares[i]
    return [part.text(share) for part, share in zip(parts, shares, strict=True)]
