"""``nbagent verify`` of a fork: its inherited lines against the SHA-256 its own first event recorded, and against its parent."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import NbagentError
from ..record import events as ev
from ..state import lineage
from ..stores import Store
from ..stores import folders as store


@dataclass
class ForkCheck:
    """What checking a log's fork records found: problems (exactly where) and notes."""

    problems: list[tuple[int, int, str]] = field(default_factory=list)  # (line, byte offset, message)
    notes: list[str] = field(default_factory=list)


def check(
    data: bytes,
    events: Sequence[ev.Event],
    line_starts: Mapping[int, int],
    parent_bytes: Callable[[lineage.Lineage], bytes | None],
) -> ForkCheck:
    """Check every fork record of a log (a ``session_start`` after line 1): where it stands and the SHA-256 of the bytes before it.

    ``parent_bytes`` gives the parent's log as it is now (None if it is not found): its bytes up to the
    fork point must still be the inherited ones, or the parent was changed after the fork.
    """
    found = ForkCheck()
    for event in events:
        if event["type"] != ev.SESSION_START or event["seq"] == 1:
            continue
        seq, start = event["seq"], line_starts.get(event["seq"], -1)
        record = lineage.of_meta(event.get("meta"))
        if record is None:
            found.problems.append((seq, start, "a session_start after the first line that names no parent (meta.fork)"))
            continue
        if record.offset != start or record.at != seq - 1:
            found.problems.append(
                (
                    seq,
                    start,
                    f"the fork record says it follows event {record.at} at byte {record.offset}; it is event {seq} at byte {start}",
                )
            )
            continue
        if hashlib.sha256(data[:start]).hexdigest() != record.prefix_sha256:
            found.problems.append(
                (seq, start, "the inherited lines before this fork record are not the ones it was made from (SHA-256 differs)")
            )
            continue
        found.notes.append(f"event {seq}: {record.words}; the {record.at} inherited events match the SHA-256 it recorded")
        parent = parent_bytes(record)
        if parent is None:
            found.notes.append(
                f"the parent session {record.name or record.parent} was not found beside it; checked against the fork's record only"
            )
        elif hashlib.sha256(parent[:start]).hexdigest() != record.prefix_sha256:
            found.problems.append(
                (
                    seq,
                    start,
                    f"the parent session {record.name or record.parent} no longer holds the bytes this fork was made from (changed after the fork)",
                )
            )
        else:
            found.notes.append(f"the parent session {record.name or record.parent} still holds them")
    return found


def beside(path: Path, source: Store) -> Callable[[lineage.Lineage], bytes | None]:
    """How to read a fork's parent: the session of the recorded name beside it (same store, same notebook), if it is that session."""

    def read(record: lineage.Lineage) -> bytes | None:
        try:
            parent = Path(path).with_name(store.check_name(record.name) + store.LOG_SUFFIX)
        except NbagentError:
            return None
        from .find import read_bytes

        try:
            data = read_bytes(parent, source)
        except (NbagentError, OSError):
            return None
        # Another session may have taken the name since: the parent's own id must be in it.
        return data if b'"session_id":"%s"' % record.parent.encode("ascii", "replace") in data[: record.offset] else None

    return read
