"""A session's messages, whose prefix loaded from a snapshot stays encoded JSON until something reads it.

Resuming needs only the length and the last message (for the frontier); the whole
history is decoded the first time something iterates, slices or indexes into it.
"""

from __future__ import annotations

import gc
import json
import operator
import threading
from collections.abc import Callable, Iterable, Iterator, MutableSequence
from dataclasses import dataclass
from typing import Any

Message = dict[str, Any]


@dataclass(frozen=True)
class Prefix:
    """The first ``count`` messages as a JSON array, not read yet."""

    count: int
    read: Callable[[], bytes]  # the array's bytes, checked (raises OSError or ValueError if they fail the check)
    # The same messages from elsewhere (the log), given why the bytes failed; without one the error is raised.
    fallback: Callable[[str], list[Message]] | None = None


def parse(data: bytes) -> Any:
    """``json.loads`` with the cyclic GC paused."""
    # Parsing a long transcript allocates many containers and can trigger a full
    # collection mid-parse (a 10x slowdown seen at 100k events); none of them are garbage.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return json.loads(data)
    finally:
        if enabled:
            gc.enable()


def _tail_position(prefix: Prefix | None, tail: list[Message], index: Any) -> int | None:
    """Where an int index falls in the tail while the prefix is encoded (None: in the prefix, or nothing is encoded)."""
    if prefix is None or isinstance(index, slice):
        return None
    at = operator.index(index)
    if at < 0:
        at += prefix.count + len(tail)
    return at - prefix.count if at >= prefix.count else None


class Transcript(MutableSequence[Message]):
    """A list of messages; the first ``prefix.count`` stay encoded until read, then it is a plain list inside."""

    def __init__(self, tail: Iterable[Message] = (), prefix: Prefix | None = None) -> None:
        self._lock = threading.Lock()
        self._data: bytes | None = None  # the prefix's bytes, once read
        # The encoded prefix (None once decoded) and the decoded messages after it, replaced as
        # one tuple so that a reader on another thread never pairs the old one with the new.
        self._parts: tuple[Prefix | None, list[Message]] = (prefix if prefix is not None and prefix.count else None, list(tail))

    @property
    def encoded(self) -> int:
        """How many leading messages are still encoded (0 once decoded)."""
        prefix = self._parts[0]
        return prefix.count if prefix is not None else 0

    def encoded_prefix(self) -> tuple[int, bytes] | None:
        """The count and checked bytes of the still-encoded prefix; None once decoded (or if the bytes fail: then they are decoded from the fallback)."""
        with self._lock:
            prefix = self._parts[0]
            if prefix is None:
                return None
            try:
                return prefix.count, self._read(prefix)
            except (OSError, ValueError):
                self._decode()
                return None

    def _read(self, prefix: Prefix) -> bytes:
        if self._data is None:
            self._data = prefix.read()
        return self._data

    def _decode(self) -> list[Message]:
        """Decode the prefix if it is still encoded and return the plain list (call with the lock held)."""
        prefix, tail = self._parts
        if prefix is None:
            return tail
        try:
            messages = parse(self._read(prefix))
            if not isinstance(messages, list) or len(messages) != prefix.count:
                raise ValueError(f"the snapshot's messages line does not hold {prefix.count} messages")
        except (OSError, ValueError) as exc:
            if prefix.fallback is None:
                raise
            messages = list(prefix.fallback(str(exc)))
        messages.extend(tail)
        self._parts, self._data = (None, messages), None
        return messages

    def _list(self) -> list[Message]:
        """All messages as a plain list (decoding the prefix first if needed)."""
        prefix, tail = self._parts
        if prefix is None:
            return tail
        with self._lock:
            return self._decode()

    def as_list(self) -> list[Message]:
        """The plain list inside (decoding the prefix first): live, so treat it as read-only."""
        return self._list()

    def copy(self) -> list[Message]:
        """A plain list of the messages."""
        return list(self._list())

    def __len__(self) -> int:
        prefix, tail = self._parts
        return len(tail) + (prefix.count if prefix is not None else 0)

    def __getitem__(self, index: Any) -> Any:
        prefix, tail = self._parts
        at = _tail_position(prefix, tail, index)
        if at is not None:
            return tail[at]
        if prefix is not None and isinstance(index, slice):
            start, stop, step = index.indices(prefix.count + len(tail))
            if step == 1 and start >= prefix.count:
                return tail[start - prefix.count : max(stop - prefix.count, 0)]
        return self._list()[index]

    def __setitem__(self, index: Any, value: Any) -> None:
        with self._lock:
            prefix, tail = self._parts
            at = _tail_position(prefix, tail, index)
            if at is not None:
                tail[at] = value
            else:
                self._decode()[index] = value

    def __delitem__(self, index: Any) -> None:
        with self._lock:
            prefix, tail = self._parts
            at = _tail_position(prefix, tail, index)
            if at is not None:
                del tail[at]
            else:
                del self._decode()[index]

    def insert(self, index: int, value: Message) -> None:
        """Insert before ``index`` (in the prefix, this decodes it first)."""
        with self._lock:
            prefix, tail = self._parts
            at = _tail_position(prefix, tail, index)
            if at is not None:
                tail.insert(at, value)
            else:
                self._decode().insert(index, value)

    def append(self, value: Message) -> None:
        """Add a message at the end (never decodes the prefix)."""
        with self._lock:
            self._parts[1].append(value)

    def __iter__(self) -> Iterator[Message]:
        return iter(self._list())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Transcript):
            return len(self) == len(other) and self._list() == other._list()
        if isinstance(other, list):
            return len(self) == len(other) and self._list() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        return repr(self._list())

    def __reduce__(self) -> tuple[Any, ...]:
        # copy, deepcopy and pickle give a plain list.
        return list, (self._list(),)
