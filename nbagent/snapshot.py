"""Snapshots: the folded state written atomically beside the log, so opening replays only the tail.

File layout: a one-line JSON header (where in the log the snapshot ends, the length and
checksum of each line after it, a summary for listings), a small state line (every field
but the messages, their count and the last message), then the messages before the last as
one JSON array.  Opening reads the header and the state line; the big line is read when the
messages are first read (see transcript.py).  The log always wins: a snapshot that disagrees
with the log, or fails a check, is ignored.
"""

from __future__ import annotations

import contextlib
import json
import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from . import events
from .errors import LogError
from .fold import State
from .log import OS_FILES, FileOps
from .transcript import Message, Prefix, Transcript

KIND = "nbagent.snapshot"
VERSION = 2
_STATE_KEYS = frozenset(f.name for f in fields(State)) - {"messages"}


def path_for(log_path: Path) -> Path:
    """Where the snapshot of a log lives."""
    return log_path.with_name(log_path.name + ".snapshot")


def _file_id(stat: os.stat_result) -> tuple[int, ...]:
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


@dataclass
class Snapshot:
    """A snapshot whose header passed its checks; each line after it is read and checked only when asked for."""

    header: dict[str, Any]
    path: Path
    body_offset: int  # where the state line starts
    file_id: tuple[int, ...]  # the file the header was read from (a newer snapshot replaces it by rename)

    @property
    def seq(self) -> int:
        """Seq of the last event folded into it."""
        return int(self.header["seq"])

    @property
    def offset(self) -> int:
        """Byte offset in the log just past that event."""
        return int(self.header["offset"])

    def _line(self, start: int, name: str) -> bytes:
        """The ``name`` line at ``start``, checked against the length and CRC-32 in the header (raises OSError or ValueError)."""
        size, crc = int(self.header[f"{name}_len"]), self.header[f"{name}_crc"]
        with open(self.path, "rb") as handle:
            if _file_id(os.fstat(handle.fileno())) != self.file_id:
                raise ValueError("the snapshot file was replaced since it was opened")
            handle.seek(start)
            data = handle.read(size + 1)
        if data[size:] != b"\n" or f"{zlib.crc32(memoryview(data)[:size]):08x}" != crc:
            raise ValueError(f"snapshot {name} line fails its checksum")
        return data[:size]

    def state_line(self) -> bytes:
        """The state line's JSON, checked."""
        return self._line(self.body_offset, "state")

    def messages_line(self) -> bytes:
        """The JSON array of the messages before the last, checked."""
        return self._line(self.body_offset + int(self.header["state_len"]) + 1, "messages")

    def state(self, from_log: Callable[[str], State] | None = None) -> State:
        """The state from the state line; the messages before the last stay encoded until first read.

        If they then fail a check, they are taken from ``from_log(why)`` (the log folded up
        to this snapshot), whose other fields must match this snapshot's; without it the error is raised.
        """
        line = self.state_line()
        data = json.loads(line)
        if not isinstance(data, dict) or set(data) != _STATE_KEYS | {"message_count", "last_message"}:
            raise ValueError("snapshot state line does not hold a state")
        count, last = data.pop("message_count"), data.pop("last_message")
        if not isinstance(count, int) or count < 0 or not (last is None if count == 0 else isinstance(last, dict)):
            raise ValueError("snapshot state line has a bad message count or last message")

        def messages_from_log(why: str) -> list[Message]:
            assert from_log is not None
            logged = from_log(why)
            if json.loads(_ENCODER.encode(_record(logged))) != json.loads(line):  # parsed again: the state has moved on
                raise LogError(
                    f"{self.path} does not match its log up to event {self.seq}: its messages failed a check ({why}) "
                    "and its other fields differ from the log's. Delete the snapshot and open the session again."
                )
            return list(logged.messages[: count - 1])

        prefix = Prefix(count - 1, self.messages_line, messages_from_log if from_log is not None else None) if count > 1 else None
        return State.from_dict({**data, "messages": Transcript([last] if count else [], prefix)})


def disagreement(header: dict[str, Any], read: Callable[[int, int], bytes], log_size: int) -> str:
    """Why a snapshot's last event is not the log's line where it says ('' if it is); ``read(start, end)`` reads the log."""
    try:
        start, end, seq, crc = int(header["line_start"]), int(header["offset"]), int(header["seq"]), str(header["line_crc"])
    except (KeyError, TypeError, ValueError):
        return "the snapshot header is incomplete"
    if end > log_size or start >= end:
        return "the log is shorter than the snapshot"
    try:
        event = events.decode(read(start, end)[:-1])
    except events.BadLine:
        return "the snapshot does not point at a valid log line"
    if event["seq"] != seq or event["crc"] != crc:
        return "the snapshot does not match the log"
    return ""


def summary(state: State) -> dict[str, Any]:
    """The small record a session listing needs."""
    return {
        "session_id": state.session_id,
        "title": state.title,
        "created": state.created,
        "last_ts": state.last_ts,
        "turns": state.turns,
        "usage": dict(state.usage),
        "status": state.status,
        "frontier": state.frontier,
        "open_calls": len(state.open_calls),
    }


_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))


def _record(state: State) -> dict[str, Any]:
    """What the state line holds: every field but the messages, their count and the last one."""
    # The fields as they are, not state.to_dict(): its deep copy cost more than the encoding itself.
    record = {f.name: getattr(state, f.name) for f in fields(state) if f.name != "messages"}
    record["message_count"] = len(state.messages)
    record["last_message"] = state.messages[-1] if state.messages else None
    return record


class MessageCache:
    """The messages line of the previous snapshot, extended rather than re-encoded while its messages remain.

    The fold never edits a message in place (it replaces the last user message when it
    grows, and appends), so while the same message objects begin the history, the JSON
    written last time is still theirs; a snapshot then encodes only the new messages.
    A prefix still encoded since it was loaded from a snapshot is spliced in as it is.
    The line is kept and written in pieces: copying a long history into one bytes
    object would cost more than encoding the new messages.
    """

    MAX_PIECES = 16

    def __init__(self) -> None:
        self._start = 0  # where the cached run of messages begins (a spliced prefix's length, or 0)
        self._objects: list[dict[str, Any]] = []  # held, so that their ids stay theirs
        self._ids: list[int] = []
        self._pieces: list[bytes] = []  # their JSON, in comma-separated pieces

    def encode(self, state: State) -> tuple[bytes, list[bytes | memoryview]]:
        """The state line of ``state`` and its messages line, in pieces."""
        messages = state.messages
        end = len(messages) - 1  # the last message goes in the state line
        spliced = messages.encoded_prefix() if isinstance(messages, Transcript) else None
        if spliced is not None and spliced[0] > end:  # messages after the prefix were removed (the fold never does)
            spliced, messages = None, list(messages)
        start = spliced[0] if spliced else 0
        current = list(messages[start : max(end, start)])
        known = len(self._objects)
        if start == self._start and known <= len(current) and list(map(id, current[:known])) == self._ids:
            pieces, new = list(self._pieces), current[known:]
        else:
            pieces, new = [], current
        if new:
            pieces.append(",".join(map(_ENCODER.encode, new)).encode("ascii"))
        if len(pieces) > self.MAX_PIECES:
            pieces = [b",".join(pieces)]
        self._start, self._objects, self._ids, self._pieces = start, current, list(map(id, current)), pieces
        line: list[bytes | memoryview] = [memoryview(spliced[1])[:-1] if spliced else b"["]
        for number, piece in enumerate(pieces):
            line += [b",", piece] if number or spliced else [piece]
        line.append(b"]")
        return _ENCODER.encode(_record(state)).encode("ascii"), line


def write(
    log_path: Path,
    state: State,
    *,
    line_start: int,
    offset: int,
    line_crc: str,
    ops: FileOps | None = None,
    vouch: Callable[[bytes], bytes] | None = None,
    cache: MessageCache | None = None,
    durable: bool = True,
) -> Path:
    """Write a snapshot of ``state`` atomically; its last event is the log line at ``[line_start, offset)``.

    ``vouch`` (this user's session signer) signs a header that says every log line up
    to the snapshot was signed by this user, so listings need check only the lines after it.

    Steps: temp file, fsync, rename over the old snapshot, folder fsync; a crash at any
    step leaves the old snapshot or the new one (and the log wins over either).
    Without ``durable`` (a log written with fsync="never") both fsyncs are left out:
    after a power cut the snapshot may then fail its checks, and is ignored.
    """
    ops = OS_FILES if ops is None else ops
    state_line, messages_line = (cache or MessageCache()).encode(state)
    messages_crc = 0
    for piece in messages_line:
        messages_crc = zlib.crc32(piece, messages_crc)
    header = {
        "kind": KIND,
        "v": VERSION,
        "seq": state.seq,
        "offset": offset,
        "line_start": line_start,
        "line_crc": line_crc,
        "state_len": len(state_line),
        "state_crc": f"{zlib.crc32(state_line):08x}",
        "messages_len": sum(len(piece) for piece in messages_line),
        "messages_crc": f"{messages_crc:08x}",
        "summary": summary(state),
    }
    if vouch is not None:
        header["trusted_prefix"] = True
    encoded = json.dumps(header, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    target = path_for(log_path)
    temp = target.with_name(target.name + ".tmp")
    fd = ops.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        try:
            ops.write_all(fd, events.seal(vouch(encoded) if vouch is not None else encoded) + b"\n")
            ops.write_all(fd, state_line + b"\n")
            for piece in messages_line:
                ops.write_all(fd, piece)
            ops.write_all(fd, b"\n")
            if durable:
                ops.fsync(fd)
        finally:
            ops.close(fd)
        ops.replace(temp, target)
    except OSError:
        with contextlib.suppress(OSError):
            ops.unlink(temp)
        raise
    if durable:
        ops.fsync_dir(target.parent)
    return target


def read_header(log_path: Path) -> dict[str, Any] | None:
    """Just the header line of a snapshot (cheap: for listings), or None."""
    found = read_header_bytes(log_path)
    return found[0] if found is not None else None


def read_header_bytes(log_path: Path) -> tuple[dict[str, Any], bytes] | None:
    """The header of a snapshot and its bytes without the checksum (to check its signature), or None."""
    try:
        with open(path_for(log_path), "rb") as handle:
            line = handle.readline().rstrip(b"\n")
        header = _parse_header(line)
    except (OSError, ValueError):
        return None
    return (header, events.unseal(line)[0]) if header.get("kind") == KIND else None


def _parse_header(line: bytes) -> dict[str, Any]:
    """Check the header's own checksum and parse it (ValueError if either fails)."""
    header = json.loads(events.unseal(line)[0])
    if not isinstance(header, dict):
        raise ValueError("snapshot header is not an object")
    return header


def load(log_path: Path) -> tuple[Snapshot | None, str]:
    """The snapshot of a log if its header is sound, else None and why (only the header is read)."""
    target = path_for(log_path)
    try:
        with open(target, "rb") as handle:
            line = handle.readline()
            file_id = _file_id(os.fstat(handle.fileno()))
    except FileNotFoundError:
        return None, "no snapshot"
    except OSError as exc:
        return None, f"snapshot unreadable: {exc}"
    head = line.rstrip(b"\n")
    try:
        header = _parse_header(head)
    except events.BadLine as bad:
        return None, f"snapshot header fails its check: {bad}"
    except ValueError:
        return None, "snapshot header is not JSON"
    if header.get("kind") != KIND:
        return None, "not an nbagent snapshot"
    if header.get("v") != VERSION:
        return None, f"snapshot format v{header.get('v')} is not v{VERSION}"
    try:
        int(header["seq"]), int(header["offset"]), int(header["line_start"]), str(header["line_crc"])
        str(header["state_crc"]), str(header["messages_crc"])
        if int(header["state_len"]) < 0 or int(header["messages_len"]) < 0:
            raise ValueError("negative length")
    except (KeyError, TypeError, ValueError):
        return None, "snapshot header is incomplete"
    return Snapshot(header, target, len(line), file_id), ""
