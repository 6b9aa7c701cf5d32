"""Take a snapshot file apart and put it back together (format v4), for tests that damage or forge one."""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nbagent.record import line_codec, signing
from nbagent.stores import snapshot


def parts(log_path: Path) -> tuple[dict[str, Any], bytes, bytes]:
    """The header (without its seal), the state line and the messages line of a log's snapshot."""
    head, state_line, messages_line, end = snapshot.path_for(log_path).read_bytes().split(b"\n")
    assert end == b""
    header = json.loads(head)
    header.pop("crc")
    header.pop("sig", None)
    return header, state_line, messages_line


def put(log_path: Path, header: dict[str, Any], state_line: bytes, messages_line: bytes, *, sign: bool = True) -> None:
    """Write a snapshot from its parts: lengths and digests made to match, header resealed and (``sign``) re-signed by this user."""
    header = dict(header, state_len=len(state_line), messages_len=len(messages_line))
    for name, line in (("state", state_line), ("messages", messages_line)):  # whichever checks the format has
        if f"{name}_sha256" in header:
            header[f"{name}_sha256"] = hashlib.sha256(line).hexdigest()
        if f"{name}_crc" in header:
            header[f"{name}_crc"] = f"{zlib.crc32(line):08x}"
    body = json.dumps(header, separators=(",", ":")).encode()
    user = signing.signer() if sign else None
    if user is not None:
        body = user.keyed(signing.SNAPSHOT, header["summary"]["session_id"]).sign(body)
    head = line_codec.seal(body)
    snapshot.path_for(log_path).write_bytes(head + b"\n" + state_line + b"\n" + messages_line + b"\n")


def rewrite_state(log_path: Path, change: Callable[[dict[str, Any]], None], *, sign: bool = True) -> None:
    """Edit the snapshot's state line and fix up its digest, as a consistent (but different) snapshot."""
    header, state_line, messages_line = parts(log_path)
    state = json.loads(state_line)
    change(state)
    put(log_path, header, json.dumps(state, separators=(",", ":")).encode(), messages_line, sign=sign)


def flip_messages_byte(log_path: Path, marker: bytes) -> None:
    """Change one byte inside the messages line (at ``marker``), leaving its checksum as it was."""
    target = snapshot.path_for(log_path)
    data = bytearray(target.read_bytes())
    header, state_line, _ = parts(log_path)
    start = data.index(b"\n") + 1 + len(state_line) + 1
    at = data.index(marker, start)
    data[at] ^= 0x20  # a letter changes case: still valid JSON, so only the checksum can tell
    target.write_bytes(bytes(data))
