"""The log on disk: fsync policy, one writer, owner-only files, tail repair, damage, versions, reading and following."""

from __future__ import annotations

import hashlib
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nbagent import LogCorruptError, LogLockedError, LogVersionError, Session, follow, read_events
from nbagent.record import events as ev
from nbagent.record import line_codec
from nbagent.stores.writer import EventLog

REPO = Path(__file__).resolve().parents[2]


def write_log(path: Path, count: int) -> list[bytes]:
    """A real log of ``count`` events (session_start, then user/assistant pairs); returns its lines."""
    with Session.open(path, fsync="never", snapshot_every=0) as session:
        while session.seq < count:
            if session.seq % 2:
                session.append(ev.USER_MSG, content=f"request {session.seq}")
            else:
                session.append(
                    ev.ASSISTANT_MSG,
                    content=[{"type": "text", "text": f"answer {session.seq}"}],
                    stop_reason="end_turn",
                    usage={"output_tokens": 1},
                )
    return path.read_bytes().splitlines(keepends=True)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def offset_of(lines: list[bytes], index: int) -> int:
    return sum(len(line) for line in lines[:index])


def side_files(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name != path.name and not p.name.endswith(".lock"))


def follow_until(path: Path, since: int, last: int, **options: float) -> list[ev.Event]:
    """Follow ``path`` until event ``last`` arrives (a generous idle timeout guards against a hang)."""
    seen = []
    for event in follow(path, since=since, idle_timeout=30.0, **options):
        seen.append(event)
        if event["seq"] >= last:
            break
    return seen


def child(code: str, *args: str) -> subprocess.Popen[str]:
    """A real Python child process running ``code`` with the package importable."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


# fsync policy --------------------------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["always", "turn", "never"])
def test_each_fsync_policy_writes_a_readable_log(log_path: Path, policy: str) -> None:
    with Session.open(log_path, fsync=policy) as session:
        session.append(ev.USER_MSG, content="hi")
        session.append(ev.DELTA, index=0, text="he")
    assert [e["type"] for e in read_events(log_path)] == [ev.SESSION_START, ev.USER_MSG, ev.DELTA]


@pytest.mark.parametrize("policy", ["sometimes", "", "Always", None])
def test_an_unknown_fsync_policy_is_refused_before_anything_is_created(tmp_path: Path, policy: object) -> None:
    path = tmp_path / "sub" / "s.jsonl"
    with pytest.raises(ValueError, match="fsync must be one of always, turn, never"):
        Session.open(path, fsync=policy)  # type: ignore[arg-type]
    assert not path.parent.exists()


# One writer -----------------------------------------------------------------------------------------
def test_a_second_writer_in_the_same_process_is_refused_at_once(log_path: Path) -> None:
    with Session.open(log_path) as first:
        first.append(ev.USER_MSG, content="mine")
        before = log_path.read_bytes()
        with pytest.raises(LogLockedError, match="open for writing in another process or session"):
            Session.open(log_path)
        assert log_path.read_bytes() == before
        first.append(ev.USER_MSG, content="still mine")  # the refused open did not disturb the holder
    with Session.open(log_path) as again:  # released on close
        assert again.seq == 3


HOLD = """
import sys, time
from nbagent import Session
session = Session.open(sys.argv[1])
print("holding", flush=True)
time.sleep(120)
"""

TRY_OPEN = """
import sys, time
from nbagent import Session, LogLockedError
started = time.monotonic()
try:
    Session.open(sys.argv[1]).close()
    print("opened")
except LogLockedError as exc:
    print("locked", round(time.monotonic() - started, 3), exc)
"""


def test_a_second_writer_in_another_process_is_refused_at_once(log_path: Path) -> None:
    with Session.open(log_path):
        proc = child(TRY_OPEN, str(log_path))
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.startswith("locked "), out
    assert "open for writing in another process" in out


def test_a_writer_killed_while_holding_the_lock_releases_it(log_path: Path) -> None:
    holder = child(HOLD, str(log_path))
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "holding", holder.stderr.read() if holder.stderr else ""
        with pytest.raises(LogLockedError):
            Session.open(log_path)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert holder.returncode == -signal.SIGKILL
    with Session.open(log_path) as session:  # the kernel dropped the dead holder's lock
        assert session.seq == 1 and session.state.session_id


# Owner-only files ------------------------------------------------------------------------------------
@pytest.fixture
def open_umask() -> Iterator[None]:
    """A permissive umask, so owner-only modes must come from the code, not from the environment."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_files_and_folder_are_owner_only(tmp_path: Path, open_umask: None) -> None:
    path = tmp_path / "logs" / "s.jsonl"
    session = Session.open(path, snapshot_every=2)
    session.append(ev.USER_MSG, content="hi")
    lock = Path(str(path) + ".lock")
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    session.close()
    snap = Path(str(path) + ".snapshot")
    assert stat.S_IMODE(snap.stat().st_mode) == 0o600
    with path.open("ab") as handle:
        handle.write(b'{"v":1,"seq":3,')
    with Session.open(path) as session:
        assert session.repair is not None
        assert stat.S_IMODE(session.repair.kept.stat().st_mode) == 0o600


# Torn tails -------------------------------------------------------------------------------------------
def _no_newline(lines: list[bytes]) -> bytes:
    return lines[-1][: len(lines[-1]) // 2]


def _bad_json(lines: list[bytes]) -> bytes:
    return b'{"v":1,"seq":10,"ts":17\n'


def _bad_checksum(lines: list[bytes]) -> bytes:
    return lines[-1].replace(b"request", b"requesT")


def _zeros(lines: list[bytes]) -> bytes:
    return b"\x00" * 64  # what a crash can leave where the file grew but its data never landed


@pytest.mark.parametrize("tear", [_no_newline, _bad_json, _bad_checksum, _zeros], ids=["no-newline", "bad-json", "bad-checksum", "zeros"])
def test_a_torn_last_line_is_cut_off_kept_and_reported(log_path: Path, tear, caplog: pytest.LogCaptureFixture) -> None:
    lines = write_log(log_path, 10)
    good = b"".join(lines[:9])
    torn = tear(lines)
    log_path.write_bytes(good + torn)
    with Session.open(log_path, fsync="never") as session:
        repair = session.repair
        assert repair is not None
        assert repair.offset == len(good) and repair.length == len(torn)
        assert repair.kept == log_path.with_name(f"{log_path.name}.torn-{len(good)}")
        assert repair.kept.read_bytes() == torn
        assert repair.reason
        assert session.seq == 9
        assert log_path.read_bytes() == good
        session.append(ev.USER_MSG, content="after the repair")
        session.append(ev.USER_MSG, content="and one more")
    assert "cut off a torn last line" in caplog.text
    back = list(read_events(log_path))
    assert [e["seq"] for e in back] == list(range(1, 12))
    assert back[-2]["content"] == "after the repair"
    assert log_path.read_bytes().startswith(good)
    with Session.open(log_path) as again:
        assert again.repair is None and again.seq == 11


def test_several_torn_lines_at_the_end_are_cut_together(log_path: Path) -> None:
    lines = write_log(log_path, 6)
    good = b"".join(lines)
    torn = b"garbage line\n" + b'{"v":1,"seq":7,"ts":1.0,"type":"note","crc":"00000000"}\n' + b'{"v":1,"se'
    log_path.write_bytes(good + torn)
    with Session.open(log_path) as session:
        assert session.repair is not None and session.repair.kept.read_bytes() == torn
        assert session.seq == 6
    assert log_path.read_bytes().startswith(good)


# Damage, gaps, versions -----------------------------------------------------------------------------
def test_damage_before_the_last_line_is_an_error_naming_file_line_and_offset(log_path: Path) -> None:
    lines = write_log(log_path, 10)
    data = bytearray(b"".join(lines))
    at = offset_of(lines, 2) + lines[2].index(b'"type"') + 3  # a byte inside line 3
    data[at] ^= 0x01
    log_path.write_bytes(bytes(data))
    before = digest(log_path)
    with pytest.raises(LogCorruptError) as info:
        Session.open(log_path)
    err = info.value
    assert (err.path, err.line, err.offset) == (str(log_path), 3, offset_of(lines, 2))
    message = str(err)
    assert str(log_path) in message and "line 3" in message and f"byte offset {offset_of(lines, 2)}" in message
    assert "checksum" in message
    assert digest(log_path) == before
    # Nothing cut and no snapshot; a copy of the damaged file is kept beside it (once, however often it is opened).
    assert side_files(log_path) == [Path(err.kept).name] and Path(err.kept).read_bytes() == bytes(data)
    assert f"A copy of the damaged file was kept at {err.kept}" in message
    with pytest.raises(LogCorruptError):
        Session.open(log_path)
    assert side_files(log_path) == [Path(err.kept).name]
    with pytest.raises(LogCorruptError) as info:
        list(read_events(log_path))
    assert (info.value.line, info.value.offset) == (3, offset_of(lines, 2))
    EventLog(log_path).close()  # the failed open released its lock


@pytest.mark.parametrize(("how", "line", "found"), [("missing", 5, 6), ("repeated", 6, 5), ("swapped", 5, 6)])
def test_a_seq_gap_is_an_error_and_changes_nothing(log_path: Path, how: str, line: int, found: int) -> None:
    lines = write_log(log_path, 10)
    if how == "missing":
        changed = lines[:4] + lines[5:]
    elif how == "repeated":
        changed = lines[:5] + lines[4:]
    else:
        changed = lines[:4] + [lines[5], lines[4]] + lines[6:]
    log_path.write_bytes(b"".join(changed))
    before = digest(log_path)
    with pytest.raises(LogCorruptError, match=rf"line {line} \(byte offset \d+\).*expected seq {line} but found seq {found}") as info:
        Session.open(log_path)
    assert (info.value.line, info.value.offset) == (line, offset_of(changed, line - 1))
    assert digest(log_path) == before
    assert side_files(log_path) == [Path(info.value.kept).name]


@pytest.mark.parametrize("where", ["last", "middle"])
def test_a_log_from_a_newer_schema_is_refused_and_left_alone(log_path: Path, where: str) -> None:
    lines = write_log(log_path, 6)
    newer, _ = line_codec.encode({"v": 9, "seq": 7, "ts": 1.0, "type": "something_new", "payload": [1]})
    line_codec.decode(newer[:-1])  # a perfectly valid line, just from the future
    later = []
    if where == "middle":
        later = [line_codec.encode(ev.make(8, ev.NOTE, {"text": "after"}))[0]]
    log_path.write_bytes(b"".join(lines) + newer + b"".join(later))
    before = digest(log_path)
    with pytest.raises(LogVersionError) as info:
        Session.open(log_path)
    message = str(info.value)
    assert "v9" in message and str(log_path) in message and "line 7" in message and "not changed" in message
    assert digest(log_path) == before
    assert side_files(log_path) == []
    EventLog(log_path).close()


def test_opening_a_valid_log_never_changes_its_bytes(log_path: Path) -> None:
    write_log(log_path, 50)
    before = digest(log_path)
    for snapshot_every in (0, 10):
        for fsync in ("always", "turn", "never"):
            with Session.open(log_path, fsync=fsync, snapshot_every=snapshot_every) as session:
                assert session.seq == 50 and session.messages
                assert list(session.events(45))[0]["seq"] == 46
            assert digest(log_path) == before
    assert side_files(log_path) == [log_path.name + ".snapshot"]


def test_an_empty_file_becomes_a_new_session(log_path: Path) -> None:
    log_path.touch()
    with Session.open(log_path, meta={"notebook": "a.ipynb"}) as session:
        assert session.seq == 1 and len(session.id) == 32
        assert session.state.meta == {"notebook": "a.ipynb"}
    first = next(read_events(log_path))
    assert first["type"] == ev.SESSION_START and first["session_id"] == session.id


# Reading and following --------------------------------------------------------------------------------
def test_follow_stops_after_idle_timeout(log_path: Path) -> None:
    write_log(log_path, 3)
    assert [e["seq"] for e in follow(log_path, since=1, poll=0.01, idle_timeout=0.05)] == [2, 3]


def test_read_events_since(log_path: Path) -> None:
    write_log(log_path, 20)
    assert [e["seq"] for e in read_events(log_path)] == list(range(1, 21))
    assert [e["seq"] for e in read_events(log_path, since=17)] == [18, 19, 20]
    assert list(read_events(log_path, since=20)) == []


def test_read_events_stops_quietly_at_a_torn_tail(log_path: Path) -> None:
    lines = write_log(log_path, 5)
    log_path.write_bytes(b"".join(lines) + lines[-1][:20])
    assert [e["seq"] for e in read_events(log_path)] == [1, 2, 3, 4, 5]
    assert log_path.read_bytes().endswith(lines[-1][:20])  # a reader never repairs


def test_follow_a_log_another_thread_appends_to(log_path: Path) -> None:
    session = Session.open(log_path, fsync="never")
    for i in range(30):
        session.append(ev.NOTE, text=f"before {i}")
    done = threading.Event()

    def writer() -> None:
        for i in range(300):
            session.append(ev.DELTA, index=0, text=f"piece {i} ")
            if i % 50 == 0:
                time.sleep(0.02)
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    seen = [e["seq"] for e in follow_until(log_path, 25, 331, poll=0.01)]
    thread.join()
    session.close()
    assert done.is_set()
    assert seen == list(range(26, 332))


def test_follow_never_yields_half_a_line(log_path: Path) -> None:
    lines = write_log(log_path, 3)
    more = [line_codec.encode(ev.make(seq, ev.NOTE, {"text": "x" * 500}))[0] for seq in range(4, 40)]

    def writer() -> None:
        with log_path.open("ab", buffering=0) as out:
            for line in more:
                for cut in range(0, len(line), 97):  # every line arrives in several pieces
                    out.write(line[cut : cut + 97])
                    time.sleep(0.001)

    thread = threading.Thread(target=writer)
    thread.start()
    seen = follow_until(log_path, 0, 39, poll=0.002)
    thread.join()
    assert [e["seq"] for e in seen] == list(range(1, 40))
    assert all(e["text"] == "x" * 500 for e in seen[3:])
    assert len(lines) == 3


FOLLOWED = """
import sys, time
from nbagent import Session
with Session.open(sys.argv[1], fsync="never") as session:
    for i in range(200):
        session.append("delta", index=0, text="from the child %d" % i)
        if i % 40 == 0:
            time.sleep(0.05)
print("done", session.seq, flush=True)
"""


def test_follow_a_log_another_process_writes(log_path: Path) -> None:
    write_log(log_path, 4)
    proc = child(FOLLOWED, str(log_path))
    seen = follow_until(log_path, 2, 204, poll=0.01)
    out, err = proc.communicate(timeout=60)
    assert out.strip() == "done 204", err
    assert [e["seq"] for e in seen] == list(range(3, 205))


CRASH_THEN_RESUME = """
import os, sys, time
from nbagent import Session
from nbagent.record import events as ev, line_codec
path = sys.argv[1]
with Session.open(path, fsync="never", snapshot_every=0) as session:
    session.append("note", text="before the crash")
    time.sleep(0.3)
# a crash: half a line reaches the file, then the writer is gone
line, _ = line_codec.encode(ev.make(session.seq + 1, "note", {"text": "torn " * 40}))
with open(path, "ab") as out:
    out.write(line[: len(line) // 2])
time.sleep(0.5)
# a new writer repairs the tail and goes on
with Session.open(path, fsync="never") as session:
    for i in range(5):
        session.append("note", text="after %d" % i)
print(session.seq, flush=True)
"""


def test_follow_survives_a_torn_tail_that_a_new_writer_repairs(log_path: Path) -> None:
    write_log(log_path, 2)
    proc = child(CRASH_THEN_RESUME, str(log_path))
    seen = follow_until(log_path, 0, 8, poll=0.01)
    out, err = proc.communicate(timeout=60)
    assert out.strip() == "8", err
    assert [e["seq"] for e in seen] == list(range(1, 9))
    assert [e.get("text") for e in seen[2:]] == ["before the crash"] + [f"after {i}" for i in range(5)]
