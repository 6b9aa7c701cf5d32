"""One log line from an event and back: checksummed, ASCII-only, signed when a session writes it, secrets redacted.

A log line is one JSON object whose first keys are always ``v`` and ``seq`` and
whose last key is ``crc``, the CRC-32 of the line without that key.  Lines are
pure ASCII (non-ASCII text is escaped), so a stray byte anywhere is damage.
A line written by a session carries ``sig`` just before ``crc``: its author's
HMAC (see :mod:`nbagent.record.signing`).  Decoded events leave ``sig`` out: who wrote a
line is checked from its bytes, never from a parsed event.  What an event holds: :mod:`nbagent.record.events`.
"""

from __future__ import annotations

import json
import zlib
from typing import TYPE_CHECKING

from . import redact
from .events import Event

if TYPE_CHECKING:
    from .signing import LineSigner

CRC_SUFFIX_LEN = len(',"crc":"00000000"}')

# One encoder for every line: json.dumps with options builds a new encoder per call.
_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), allow_nan=False)


def encode(event: Event, signer: LineSigner | None = None) -> tuple[bytes, Event]:
    """Serialize an event to one checksummed (and, with ``signer``, signed) line; return it with the event as it will read back.

    Secrets (see :mod:`nbagent.record.redact`) are replaced by ``[REDACTED]`` before anything is written.
    """
    body = _ENCODER.encode(event)
    clean = redact.json_body(body, [_ENCODER.encode(b) for b in redact.verbatim_blocks(event)])  # thinking etc. kept verbatim
    if clean is not body:
        body, event = clean, json.loads(clean)
    raw = body.encode("ascii")
    if signer is not None:
        raw = signer.sign(raw)
    crc = f"{zlib.crc32(raw):08x}"
    event["crc"] = crc
    return b'%s,"crc":"%s"}\n' % (raw[:-1], crc.encode()), event  # as seal() makes it, with the newline


class BadLine(ValueError):
    """One log line failed its checks; ``reason`` says which."""


def seal(body: bytes) -> bytes:
    """Append a ``"crc"`` key, the CRC-32 of the JSON object ``body``, as its last key."""
    return body[:-1] + b',"crc":"%08x"}' % zlib.crc32(body)


def unseal(line: bytes) -> tuple[bytes, str]:
    """Check a sealed JSON object; return it without its ``"crc"`` key, and the checksum."""
    if len(line) <= CRC_SUFFIX_LEN or not line.endswith(b'"}'):
        raise BadLine("line is cut short or has no checksum")
    suffix = line[-CRC_SUFFIX_LEN:]
    if not suffix.startswith(b',"crc":"'):
        raise BadLine("line has no checksum")
    body = line[:-CRC_SUFFIX_LEN] + b"}"
    # Compared as the exact bytes the writer makes (8 lowercase hex digits): int(..., 16) would also
    # accept an upper-case digit, '_' or spaces, so a flipped case bit in the checksum went unnoticed.
    if suffix[8:16] != b"%08x" % zlib.crc32(body):
        raise BadLine("checksum mismatch (the line was altered or torn)")
    return body, suffix[8:16].decode()


def decode(line: bytes) -> Event:
    """Parse and check one log line (without its newline)."""
    body, crc = unseal(line)
    try:
        event = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadLine(f"not valid JSON ({exc})") from None
    except RecursionError:
        raise BadLine("JSON nested too deeply") from None
    if not isinstance(event, dict) or not isinstance(event.get("seq"), int) or "type" not in event:
        raise BadLine("not an event record")
    event.pop("sig", None)
    event["crc"] = crc
    return event


def line_seq(line: bytes) -> int | None:
    """Read ``seq`` from a line's fixed prefix without parsing it (for fast skipping)."""
    start = line.find(b'"seq":')
    if start < 0 or start > 16:
        return None
    end = line.find(b",", start)
    try:
        return int(line[start + 6 : end])
    except ValueError:
        return None
