"""Storage faults (issue 5, scenarios 1-7 and 10): quick variants of reliability/storage.py, the fault layer itself, a reader fuzzer."""

from __future__ import annotations

import errno
import json
import logging
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent import LogCorruptError, LogVersionError, LogWriteError, NotALogError, Session, read_events
from nbagent.record import events as ev
from nbagent.record import line_codec
from nbagent.record.log_reader import iter_events, scan
from nbagent.stores.writer import EventLog
from reliability import storage
from tests.support.faults import NO_SYNC, Crash, Fault, FaultyFiles

FIXTURE = Path(__file__).parents[1] / "fixtures" / "v1_session.jsonl"


# The quick campaign --------------------------------------------------------------------------------------
@pytest.mark.slow  # the storage campaign, quick: 1-2 s a scenario
@pytest.mark.parametrize("name", list(storage.SCENARIOS))
def test_quick_storage_scenario_passes(name: str) -> None:
    row = storage.SCENARIOS[name](True, 5)
    assert row["result"] == "pass", json.dumps(row["failures"], indent=1)
    assert row["cases"] > 0 and row["checks"] >= row["cases"]


# The fault layer itself (so that a passing scenario means something) ---------------------------------
def test_a_crash_image_keeps_only_what_was_fsynced_unless_asked(tmp_path: Path) -> None:
    ops = FaultyFiles()
    path = str(tmp_path / "f")
    fd = ops.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    ops.write_all(fd, b"one\n")
    ops.fsync(fd)
    ops.write_all(fd, b"two\n")
    assert path not in ops.crash_image("drop")  # created, but its folder entry was never fsynced
    ops.fsync_dir(tmp_path)
    assert ops.crash_image("drop")[path] == b"one\n"
    assert ops.crash_image("keep")[path] == b"one\ntwo\n"
    garbled = ops.crash_image("garble", 1)[path]
    assert garbled[:4] == b"one\n" and len(garbled) == 8 and garbled[4:] != b"two\n"
    assert ops.durable_bytes(path) == b"one\n"
    ops.close(fd)


def test_a_rename_not_followed_by_a_folder_fsync_may_be_lost(tmp_path: Path) -> None:
    (tmp_path / "target").write_bytes(b"old")
    ops = FaultyFiles()
    temp, target = str(tmp_path / "temp"), str(tmp_path / "target")
    fd = ops.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    ops.write_all(fd, b"new")
    ops.fsync(fd)
    ops.close(fd)
    ops.replace(temp, target)
    assert ops.crash_image("drop")[target] == b"old" and ops.crash_image("keep")[target] == b"new"
    ops.fsync_dir(tmp_path)
    assert ops.crash_image("drop")[target] == b"new" and temp not in ops.crash_image("drop")


def test_faults_fire_on_the_nth_call_once_or_persistently_and_crashes_stick(tmp_path: Path) -> None:
    ops = FaultyFiles(faults=[Fault("write", 2, errno.ENOSPC)], crash_at=6)
    fd = ops.open(str(tmp_path / "f"), os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)  # step 1
    ops.write(fd, b"a")  # 2
    with pytest.raises(OSError) as info:
        ops.write(fd, b"b")  # 3
    assert info.value.errno == errno.ENOSPC
    ops.write(fd, b"c")  # 4: a one-off fault
    ops.fsync(fd)  # 5
    with pytest.raises(Crash):
        ops.write(fd, b"d")
    with pytest.raises(Crash):
        ops.fsync(fd)
    ops.close(fd)
    short = FaultyFiles(faults=[Fault("write", 1, short=True)])
    fd = short.open(str(tmp_path / "g"), os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    assert short.write(fd, b"abcd") == 2
    with pytest.raises(OSError):
        short.write(fd, b"cd")
    short.close(fd)


def test_the_ordering_check_catches_a_log_that_is_never_fsynced() -> None:
    """Negative control for scenario 10: with fsync="never" the same check must report late events."""
    row = storage.run_ordering(True, 0, fsync="never")
    assert row["result"] == "fail" and any("not yet durable" in f for f in row["failures"])


# Engine behaviour found by the campaign ------------------------------------------------------------------
def test_a_case_flipped_checksum_digit_is_damage(tmp_path: Path) -> None:
    data = FIXTURE.read_bytes()
    at = data.index(b'"crc":"9618b0fc"') + len('"crc":"9618')
    flipped = data[:at] + b"B" + data[at + 1 :]
    path = tmp_path / "s.jsonl"
    path.write_bytes(flipped)
    with pytest.raises(LogCorruptError, match="checksum mismatch"):
        Session.open(path, snapshot_every=0)


def test_a_failed_write_leaves_the_log_refusing_and_unrepaired_until_reopened(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    ops = FaultyFiles(faults=[Fault("write", 3, errno.ENOSPC, short=True)])
    session = Session.open(path, snapshot_every=0, ops=ops)
    session.append(ev.NOTE, text="fine")
    with pytest.raises(LogWriteError, match="refuses writes"):
        session.append(ev.NOTE, text="x" * 100)  # half written, then ENOSPC
    writes, size = ops.counts["write"], path.stat().st_size
    with pytest.raises(LogWriteError, match="refused a write"):
        session.append(ev.NOTE, text="never written")
    assert session.state.seq == 2  # still readable: the partial line is ignored, not cut
    assert (ops.counts["write"], path.stat().st_size) == (writes, size) and not list(tmp_path.glob("*.torn-*"))
    session.close()
    with Session.open(path, snapshot_every=0) as reopened:  # reopening cuts the partial line and carries on
        assert reopened.seq == 2 and reopened.repair is not None
        reopened.append(ev.NOTE, text="after")
    assert [e["seq"] for e in read_events(path)] == [1, 2, 3]


def test_a_snapshot_that_cannot_be_written_does_not_fail_the_append(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "s.jsonl"
    ops = FaultyFiles()
    with Session.open(path, snapshot_every=2, ops=ops) as session:
        ops.faults.append(Fault("write", ops.counts["write"] + 2, errno.ENOSPC))
        with caplog.at_level(logging.WARNING, logger="nbagent"):
            session.append(ev.USER_MSG, content="hello")  # written; the snapshot after it hits a full disk
        assert "could not write a snapshot" in caplog.text
        assert not list(tmp_path.glob("*.snapshot*"))  # no temp file left behind
        session.append(ev.NOTE, text="x")
    assert [e["seq"] for e in read_events(path)] == [1, 2, 3]


# The reader fuzzer ---------------------------------------------------------------------------------------
DOCUMENTED = (LogCorruptError, LogVersionError, NotALogError)
_LINES = FIXTURE.read_bytes().splitlines(keepends=True)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def _sealed_event(draw: st.DrawFn, seq: int) -> bytes:
    """A line with a correct checksum but an arbitrary (often malformed) event: what a hand-edited or hostile log holds."""
    event = {
        "v": draw(st.sampled_from([1, 1, 1, 0, 2, "1"])),
        "seq": seq,
        "type": draw(st.sampled_from(sorted(ev.EVENT_TYPES) + ["other"])),
    }
    event.update(
        draw(
            st.dictionaries(
                st.sampled_from(["session_id", "content", "tool_use_id", "usage", "meta", "text", "ts", "stop_reason"]), _json, max_size=4
            )
        )
    )
    return line_codec.seal(json.dumps(event, ensure_ascii=True, separators=(",", ":")).encode()) + b"\n"


@st.composite
def _log_bytes(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["raw", "mutated", "sealed"]))
    if kind == "raw":
        return draw(st.binary(max_size=600))
    if kind == "sealed":
        start = draw(st.integers(0, 3))  # after a few real lines, or from the first line
        return b"".join(_LINES[:start]) + b"".join(draw(_sealed_event(start + i + 1)) for i in range(draw(st.integers(1, 4))))
    data = bytearray(b"".join(_LINES[: draw(st.integers(1, 12))]))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["flip", "insert", "delete", "zero"]))
        if action == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif action == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif action == "delete":
            del data[at : at + draw(st.integers(1, 16))]
        else:
            data[at : at + 16] = bytes(len(data[at : at + 16]))
    return bytes(data)


@pytest.mark.slow  # hypothesis-heavy: 400 fuzzed logs
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=_log_bytes())
def test_fuzzed_bytes_never_raise_anything_but_the_documented_log_errors(tmp_path: Path, data: bytes) -> None:
    for reader in (lambda: scan(data, path="fuzz"), lambda: list(iter_events(data, path="fuzz"))):
        try:
            reader()
        except DOCUMENTED:
            pass
    path = tmp_path / "fuzz.jsonl"
    for leftover in tmp_path.iterdir():
        leftover.unlink()
    path.write_bytes(data)
    try:
        list(read_events(path))
    except DOCUMENTED:
        pass
    try:
        with Session.open(path, snapshot_every=0, ops=NO_SYNC) as session:
            session.state, session.messages  # noqa: B018 - folding must not fail either
            assert session.state.frontier in ("empty", "model", "tools", "done")
    except DOCUMENTED:
        assert path.read_bytes() == data  # refused: the file is left as it was
    EventLog(path).close()  # whatever happened, the lock was released


def test_opening_and_closing_a_log_without_writing_costs_no_fsync(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Session.open(path) as session:
        session.append("user_msg", content="hello")
    ops = FaultyFiles()
    with Session.open(path, ops=ops):
        pass
    assert ops.counts["fsync"] == 0
    with Session.open(path, ops=ops) as session:
        session.append("note", text="one durable line")
    assert ops.counts["fsync"] >= 1  # the write is fsynced; closing after it adds no second sync of the same bytes
