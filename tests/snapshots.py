"""Take a snapshot file apart and put it back together (format v2), for tests that damage or forge one."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nbagent import events as ev
from nbagent import snapshot


def parts(log_path: Path) -> tuple[dict[str, Any], bytes, bytes]:
    """The header (without its seal), the state line and the messages line of a log's snapshot."""
    head, state_line, messages_line, end = snapshot.path_for(log_path).read_bytes().split(b"\n")
    assert end == b""
    header = json.loads(head)
    header.pop("crc")
    return header, state_line, messages_line


def put(log_path: Path, header: dict[str, Any], state_line: bytes, messages_line: bytes) -> None:
    """Write a snapshot from its parts: lengths and checksums made to match, header resealed (a consistent file)."""
    header = dict(header, state_len=len(state_line), state_crc=f"{zlib.crc32(state_line):08x}",
                  messages_len=len(messages_line), messages_crc=f"{zlib.crc32(messages_line):08x}")
    head = ev.seal(json.dumps(header, separators=(",", ":")).encode())
    snapshot.path_for(log_path).write_bytes(head + b"\n" + state_line + b"\n" + messages_line + b"\n")


def rewrite_state(log_path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Edit the snapshot's state line and fix up its checksum, as a consistent (but different) snapshot."""
    header, state_line, messages_line = parts(log_path)
    state = json.loads(state_line)
    change(state)
    put(log_path, header, json.dumps(state, separators=(",", ":")).encode(), messages_line)


def flip_messages_byte(log_path: Path, marker: bytes) -> None:
    """Change one byte inside the messages line (at ``marker``), leaving its checksum as it was."""
    target = snapshot.path_for(log_path)
    data = bytearray(target.read_bytes())
    header, state_line, _ = parts(log_path)
    start = data.index(b"\n") + 1 + len(state_line) + 1
    at = data.index(marker, start)
    data[at] ^= 0x20  # a letter changes case: still valid JSON, so only the checksum can tell
    target.write_bytes(bytes(data))
