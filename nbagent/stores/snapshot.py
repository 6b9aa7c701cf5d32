"""Snapshots: the folded state written atomically beside the log, so opening replays only the tail.

File layout: a one-line JSON header (where in the log the snapshot ends, the length and
SHA-256 of each line after it, a summary for listings, who signed the log up to there), a
small state line (every field but the messages, their count and the last message), then the
messages before the last as one JSON array.  Opening reads the header and the state line;
the big line is read when the messages are first read (see transcript.py).

A snapshot is a cache and never decides anything: it is used only if its header is signed
by this user for this session and names the log's line where it ends (its offset, crc and
mac; a log not all trusted is also pinned by the SHA-256 of its bytes up to there).  The
log always wins: a snapshot that disagrees with the log, or fails a check, is ignored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ..errors import LogError
from ..record import line_codec, signing, trust
from ..record.readfile import NotRegularFile, _kind, open_regular
from ..record.transcript import Message, Prefix, Transcript
from ..state.fold import State
from .writer import OS_FILES, FileOps

KIND = "nbagent.stores.snapshot"
VERSION = 8  # v8: State.turn_usage (a request's own tokens); v7: State.awaiting and held (parallel calls); v6: State.images entries carry their base64 size; an older one is ignored once
MAX_HEADER = 1 << 20  # a header is a few hundred bytes; a longer first line is not a snapshot
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
    header_body: bytes = b""  # the header's bytes without its crc (its signature is checked from them)

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
        size, digest = int(self.header[f"{name}_len"]), self.header[f"{name}_sha256"]
        with open_regular(self.path) as handle:
            if _file_id(os.fstat(handle.fileno())) != self.file_id:
                raise ValueError("the snapshot file was replaced since it was opened")
            handle.seek(start)
            data = handle.read(size + 1)  # the lengths were checked against the file's size when it was opened
        if data[size:] != b"\n" or hashlib.sha256(memoryview(data)[:size]).hexdigest() != digest:
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
        event = line_codec.decode(read(start, end)[:-1])
    except line_codec.BadLine:
        return "the snapshot does not point at a valid log line"
    if event["seq"] != seq or event["crc"] != crc or signing.mac_of(read(start, end)[:-1]).decode() != header.get("line_sig"):
        return "the snapshot does not match the log"
    return ""


def unauthentic(header: dict[str, Any], header_body: bytes, user: signing.Signer | None, read: Callable[[int, int], bytes]) -> str:
    """Why a snapshot was not written by this user for exactly this log prefix ('' if it was).

    Call after :func:`disagreement` found the snapshot's last line in the log.
    """
    summary = header.get("summary")
    session_id = summary.get("session_id") if isinstance(summary, dict) else None
    if user is None or not isinstance(session_id, str):
        return "no signing key to check the snapshot with" if user is None else "the snapshot header is incomplete"
    if user.keyed(signing.SNAPSHOT, session_id).check(header_body) != "mine":
        return "the snapshot is not signed by you for this session"
    try:
        report = trust.Report.from_dict(header.get("trust"))
    except ValueError:
        return "the snapshot's trust record is not valid"
    if report.lines != int(header["seq"]) or report.trusted_upto > report.lines:
        return "the snapshot's trust record does not fit it"
    if not report.trusted:
        # Its last line does not pin the lines before it (they are not all this user's, chained): their bytes do.
        digest = header.get("prefix_sha256")
        if not isinstance(digest, str) or hashlib.sha256(read(0, int(header["offset"]))).hexdigest() != digest:
            return "the log before the snapshot's end is not the one it was written for"
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
        "spend": {key: list(counts) for key, counts in state.spend.items()},  # tokens by price key: a listing's cost (prices.py)
        **({"budget_stopped": True} if state.budget_stopped else {}),  # the loop stopped at a budget (budget.py)
        "status": state.status,
        "frontier": state.frontier,
        "open_calls": len(state.open_calls),
        "context_tokens": state.context_tokens,
        "window": state.window,
        **({"fork": state.meta["fork"]} if "fork" in state.meta else {}),  # a fork's lineage (lineage.py), for listings
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
    line_sig: bytes,
    report: trust.Report,
    sign: signing.LineSigner | None,
    prefix_sha256: Callable[[], str],
    ops: FileOps | None = None,
    cache: MessageCache | None = None,
    durable: bool = True,
) -> Path:
    """Write a snapshot of ``state`` atomically; its last event is the log line at ``[line_start, offset)`` (mac ``line_sig``).

    ``sign`` (this user's snapshot signer for the session) signs the header; without it
    the snapshot is never used.  ``report`` (who signed the log up to here) lets a
    listing or an opening check only the lines after the snapshot; when it is not all
    trusted, ``prefix_sha256()`` pins the bytes before the snapshot's end.

    Steps: temp file, fsync, rename over the old snapshot, folder fsync; a crash at any
    step leaves the old snapshot or the new one (and the log wins over either).
    Without ``durable`` (a log written with fsync="never") both fsyncs are left out:
    after a power cut the snapshot may then fail its checks, and is ignored.
    """
    ops = OS_FILES if ops is None else ops
    state_line, messages_line = (cache or MessageCache()).encode(state)
    messages_digest = hashlib.sha256()
    for piece in messages_line:
        messages_digest.update(piece)
    header = {
        "kind": KIND,
        "v": VERSION,
        "seq": state.seq,
        "offset": offset,
        "line_start": line_start,
        "line_crc": line_crc,
        "line_sig": line_sig.decode("ascii"),
        "state_len": len(state_line),
        "state_sha256": hashlib.sha256(state_line).hexdigest(),
        "messages_len": sum(len(piece) for piece in messages_line),
        "messages_sha256": messages_digest.hexdigest(),
        "summary": summary(state),
        "trust": report.to_dict(),
    }
    # Always: a trust record is only as good as the bytes it was made from (checked before it is used).
    header["prefix_sha256"] = prefix_sha256()
    encoded = json.dumps(header, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    target = path_for(log_path)
    _refuse_special(target)
    temp = target.with_name(target.name + ".tmp")
    _refuse_special(temp)
    fd = ops.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        try:
            ops.write_all(fd, line_codec.seal(sign.sign(encoded) if sign is not None else encoded) + b"\n")
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
    loaded, _why = load(log_path)
    return (loaded.header, loaded.header_body) if loaded is not None else None


def _parse_header(line: bytes) -> dict[str, Any]:
    """Check the header's own checksum and parse it (ValueError if either fails)."""
    header = json.loads(line_codec.unseal(line)[0])
    if not isinstance(header, dict):
        raise ValueError("snapshot header is not an object")
    return header


def check_place(log_path: Path) -> None:
    """Raise NotRegularFile if something other than a regular file stands where the log's snapshot (or its temp file) goes."""
    _refuse_special(path_for(log_path))
    _refuse_special(path_for(log_path).with_name(path_for(log_path).name + ".tmp"))


def _refuse_special(path: Path) -> None:
    """A FIFO, link, device or folder where a snapshot goes is not replaced (an OSError: an automatic snapshot only warns)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise NotRegularFile(path, "a symbolic link" if stat.S_ISLNK(mode) else _kind(mode))


def load(log_path: Path) -> tuple[Snapshot | None, str]:
    """The snapshot of a log if its header is sound, else None and why (only the header is read)."""
    target = path_for(log_path)
    try:
        with open_regular(target) as handle:  # a FIFO or a link here is refused, never waited on
            info = os.fstat(handle.fileno())
            line = handle.readline(MAX_HEADER + 1)
            file_id = _file_id(info)
    except FileNotFoundError:
        return None, "no snapshot"
    except OSError as exc:
        return None, f"snapshot unreadable: {exc}"
    header, why = check_header(line, info.st_size)
    if header is None:
        return None, why
    return Snapshot(header, target, len(line), file_id, line_codec.unseal(line.rstrip(b"\n"))[0]), ""


def check_header(line: bytes, size: int) -> tuple[dict[str, Any] | None, str]:
    """A snapshot's first line (with its newline) parsed if it is a sound header for a snapshot of ``size`` bytes, else None and why."""
    if not line.endswith(b"\n"):
        return None, "snapshot header is cut short or too long"
    head = line.rstrip(b"\n")
    try:
        header = _parse_header(head)
    except line_codec.BadLine as bad:
        return None, f"snapshot header fails its check: {bad}"
    except (ValueError, RecursionError):
        return None, "snapshot header is not JSON"
    if header.get("kind") != KIND:
        return None, "not an nbagent snapshot"
    if header.get("v") != VERSION:
        return None, f"snapshot format v{header.get('v')} is not v{VERSION}"
    numbers = ("seq", "offset", "line_start", "state_len", "messages_len")
    texts = ("line_crc", "line_sig", "state_sha256", "messages_sha256")
    if not all(type(header.get(k)) is int and header[k] >= 0 for k in numbers) or not all(isinstance(header.get(k), str) for k in texts):
        return None, "snapshot header is incomplete"
    # Every length is checked against the file's real size before anything is read by it.
    if len(line) + header["state_len"] + 1 + header["messages_len"] + 1 != size:
        return None, "snapshot lengths do not match its size (cut short, or not written by nbagent)"
    return header, ""
