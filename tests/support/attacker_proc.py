"""A second user's process for tests/security/test_attacks.py: it writes the hostile logs with its own secret.

Run as ``python tests/support/attacker_proc.py COMMAND ...`` with its own ``NBAGENT_DATA_DIR``
(so its own signing key); it never reads the victim's secret.

Commands:

* ``splice SRC OUT unsigned|signed``: OUT is SRC with its first line replaced by a
  ``session_start`` claiming SRC's session id (unsigned, or signed with this
  process's key), followed by SRC's lines 2..N byte for byte.
* ``resequence SRC OUT A B``: OUT is SRC with its lines A and B swapped, their ``seq``
  fixed to their new places and their crcs made valid again (the signatures are kept).
* ``graft DONOR TARGET OUT N``: OUT is TARGET with DONOR's line N appended.
* ``tamper PATH N OLD NEW``: in PATH's line N, OLD is replaced by NEW (of the same length)
  and the line's crc made valid again; the file is changed in place, nothing else is touched.
* ``session OUT SPEC``: a log at OUT written through ``Session.open`` with this
  process's key; SPEC is a JSON list of ``[event_type, payload]`` to append.
* ``hostile FOLDER``: the hostile files of the listing test (names in ``HOSTILE``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbagent
from nbagent.record import events as ev
from nbagent.record import line_codec, signing
from nbagent.stores import snapshot
from reliability.attacker import write_log

HUGE = 2**60
# name -> what it is; every one is a .jsonl log in FOLDER (some with a hostile .snapshot beside it)
HOSTILE = {
    "snap-huge-len": "a valid log whose snapshot header claims messages_len 2**60",
    "snap-negative-len": "a valid log whose snapshot header has a negative state_len",
    "snap-long-header": "a valid log whose snapshot is a 2 MiB first line with no newline",
    "snap-deep-json": "a valid log whose snapshot header is [ nested 100000 deep (with a valid crc)",
    "deep-json-first": "a log whose first line is [ nested 100000 deep (with a valid crc)",
    "deep-json-middle": "a valid header, then a [ nested 100000 deep line (valid crc), then a valid line",
    "line-17mib": "a valid header, then a valid 17 MiB user_msg line",
    "header-2mib": "a 2 MiB first line with no newline that begins like a header",
    "passwd": "a text file whose first line is not an nbagent record",
}


def splice(src: str, out: str, first: str) -> None:
    lines = Path(src).read_bytes().splitlines(keepends=True)
    original = line_codec.decode(lines[0].rstrip(b"\n"))
    claim = {
        "v": original["v"],
        "seq": 1,
        "ts": original["ts"],
        "type": ev.SESSION_START,
        "session_id": original["session_id"],
        "meta": {"by": "someone else"},
    }
    user = signing.signer() if first == "signed" else None
    signer = user.for_session(original["session_id"]) if user is not None else None
    line, _ = line_codec.encode(claim, signer)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_bytes(line + b"".join(lines[1:]))


def resequence(src: str, out: str, a: str, b: str) -> None:
    lines = Path(src).read_bytes().splitlines()
    first, second = int(a), int(b)
    lines[first - 1], lines[second - 1] = lines[second - 1], lines[first - 1]
    for number in (first, second):
        line = lines[number - 1]
        body, _crc = line_codec.unseal(line)
        old = line_codec.decode(line)["seq"]
        lines[number - 1] = line_codec.seal(body.replace(b'"seq":%d,' % old, b'"seq":%d,' % number, 1))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_bytes(b"\n".join(lines) + b"\n")


def graft(donor: str, target: str, out: str, number: str) -> None:
    line = Path(donor).read_bytes().splitlines(keepends=True)[int(number) - 1]
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_bytes(Path(target).read_bytes() + line)


def tamper(path: str, number: str, old: str, new: str) -> None:
    assert len(old) == len(new)
    lines = Path(path).read_bytes().splitlines(keepends=True)
    body, _crc = line_codec.unseal(lines[int(number) - 1].rstrip(b"\n"))
    assert old.encode() in body
    lines[int(number) - 1] = line_codec.seal(body.replace(old.encode(), new.encode())) + b"\n"
    Path(path).write_bytes(b"".join(lines))


def session(out: str, spec: str) -> None:
    write_log(Path(out), json.loads(spec))


def _valid_log(path: Path) -> None:
    """A small finished session of this process's (closing it writes its snapshot)."""
    with nbagent.Session.open(path, fsync="never") as opened:
        opened.append(ev.USER_MSG, content=f"hello from {path.stem}")
        opened.append(ev.ASSISTANT_MSG, stop_reason="end_turn", usage={}, content=[{"type": "text", "text": "hi"}])


def _reseal_snapshot_header(path: Path, **changes: object) -> None:
    snap = path.with_name(path.name + ".snapshot")
    head, rest = snap.read_bytes().split(b"\n", 1)
    header = json.loads(head)
    header.pop("crc", None)
    header.pop("sig", None)
    header.update(changes)
    snap.write_bytes(line_codec.seal(json.dumps(header, separators=(",", ":")).encode()) + b"\n" + rest)


def _sealed(event: dict[str, object]) -> bytes:
    return line_codec.encode(event)[0]


def hostile(folder: str) -> None:
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    deep = line_codec.seal(b"[" * 100_000 + b"}")  # passes its crc; json.loads recurses 100000 deep

    for name in ("snap-huge-len", "snap-negative-len", "snap-long-header", "snap-deep-json"):
        _valid_log(root / f"{name}.jsonl")
    _reseal_snapshot_header(root / "snap-huge-len.jsonl", messages_len=HUGE)
    _reseal_snapshot_header(root / "snap-negative-len.jsonl", state_len=-5)
    (root / "snap-long-header.jsonl.snapshot").write_bytes(
        b'{"kind":"nbagent.stores.snapshot","v":%d,"pad":"' % snapshot.VERSION + b"x" * (2 << 20)
    )
    snap = root / "snap-deep-json.jsonl.snapshot"
    snap.write_bytes(deep + b"\n" + snap.read_bytes().split(b"\n", 1)[1])

    header = _sealed({"v": ev.SCHEMA_VERSION, "seq": 1, "ts": 1.0, "type": ev.SESSION_START, "session_id": "f" * 32, "meta": {}})
    after = _sealed({"v": ev.SCHEMA_VERSION, "seq": 3, "ts": 3.0, "type": ev.NOTE, "text": "after"})
    (root / "deep-json-first.jsonl").write_bytes(deep + b"\n" + after)
    (root / "deep-json-middle.jsonl").write_bytes(header + deep + b"\n" + after)
    big = _sealed({"v": ev.SCHEMA_VERSION, "seq": 2, "ts": 2.0, "type": ev.USER_MSG, "content": "x" * (17 << 20)})
    (root / "line-17mib.jsonl").write_bytes(header + big)
    (root / "header-2mib.jsonl").write_bytes(b'{"v":2,"seq":1,"ts":' + b"1" * (2 << 20))
    (root / "passwd.jsonl").write_bytes(b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n")


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    {"splice": splice, "resequence": resequence, "graft": graft, "tamper": tamper, "session": session, "hostile": hostile}[command](*rest)
