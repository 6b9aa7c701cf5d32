"""Snapshots: the folded state written atomically beside the log, so opening replays only the tail.

File layout: a one-line JSON header (where in the log the snapshot ends, checksums,
a summary for listings), then the state as one JSON line.  The log always wins: a
snapshot that disagrees with the log, or fails a check, is ignored.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from . import events
from .fold import State
from .log import OS_FILES, FileOps

KIND = "nbagent.snapshot"
VERSION = 1


def path_for(log_path: Path) -> Path:
    """Where the snapshot of a log lives."""
    return log_path.with_name(log_path.name + ".snapshot")


@dataclass
class Snapshot:
    """A snapshot whose header passed its checks; the body is read, checked and parsed only when asked for."""

    header: dict[str, Any]
    path: Path
    body_offset: int
    _body: bytes | None = None

    @property
    def body(self) -> bytes:
        """The state's JSON (read from the file on first use)."""
        if self._body is None:
            with open(self.path, "rb") as handle:
                handle.seek(self.body_offset)
                data = handle.read()
            self._body = data[:-1] if data.endswith(b"\n") else data
        return self._body

    @property
    def seq(self) -> int:
        """Seq of the last event folded into it."""
        return int(self.header["seq"])

    @property
    def offset(self) -> int:
        """Byte offset in the log just past that event."""
        return int(self.header["offset"])

    def check(self) -> None:
        """Check the body's checksum (raises ValueError)."""
        if len(self.body) != self.header["body_len"] or f"{zlib.crc32(self.body):08x}" != self.header["body_crc"]:
            raise ValueError("snapshot body fails its checksum")

    def state(self) -> State:
        """Parse the state (call :meth:`check` first)."""
        # Parsing a long transcript allocates many containers and can trigger a full
        # collection mid-parse (a 10x slowdown seen at 100k events); none of them are garbage.
        enabled = gc.isenabled()
        gc.disable()
        try:
            return State.from_dict(json.loads(self.body))
        finally:
            if enabled:
                gc.enable()


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


class MessageCache:
    """Each message's JSON from the previous snapshot, reused while the same message object remains.

    The fold never edits a message in place (it replaces the last user message when it
    grows), so an unchanged object means unchanged JSON; a snapshot then encodes only the
    few new messages instead of the whole history.
    """

    def __init__(self) -> None:
        self._encoded: dict[int, tuple[dict[str, Any], str]] = {}

    def encode(self, state: State) -> bytes:
        """The snapshot body of ``state``."""
        fresh: dict[int, tuple[dict[str, Any], str]] = {}
        parts = []
        for message in state.messages:
            hit = self._encoded.get(id(message))
            text = hit[1] if hit is not None and hit[0] is message else _ENCODER.encode(message)
            fresh[id(message)] = (message, text)
            parts.append(text)
        self._encoded = fresh
        # The fields as they are, not state.to_dict(): its deep copy cost more than the encoding itself.
        rest = _ENCODER.encode({f.name: getattr(state, f.name) for f in fields(state) if f.name != "messages"})
        return (rest[:-1] + ',"messages":[' + ",".join(parts) + "]}").encode("ascii")


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
) -> Path:
    """Write a snapshot of ``state`` atomically; its last event is the log line at ``[line_start, offset)``.

    ``vouch`` (this user's session signer) signs a header that says every log line up
    to the snapshot was signed by this user, so listings need check only the lines after it.

    Steps: temp file, fsync, rename over the old snapshot, folder fsync; a crash at any
    step leaves the old snapshot or the new one (and the log wins over either).
    """
    ops = OS_FILES if ops is None else ops
    body = (cache or MessageCache()).encode(state)
    header = {
        "kind": KIND,
        "v": VERSION,
        "seq": state.seq,
        "offset": offset,
        "line_start": line_start,
        "line_crc": line_crc,
        "body_len": len(body),
        "body_crc": f"{zlib.crc32(body):08x}",
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
            ops.write_all(fd, body)
            ops.write_all(fd, b"\n")
            ops.fsync(fd)
        finally:
            ops.close(fd)
        ops.replace(temp, target)
    except OSError:
        with contextlib.suppress(OSError):
            ops.unlink(temp)
        raise
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
        int(header["seq"]), int(header["offset"]), int(header["line_start"]), str(header["line_crc"]), int(header["body_len"])
    except (KeyError, TypeError, ValueError):
        return None, "snapshot header is incomplete"
    return Snapshot(header, target, len(line)), ""
