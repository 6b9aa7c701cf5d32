"""Sessions: appends, events, subscribers under concurrent appends, snapshots (and every way they can be wrong), the v1 fixture."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import anthropic
import pytest

import nbagent
from nbagent import LogError, Session, read_events
from nbagent.errors import UntrustedLogError
from nbagent.record import events as ev
from nbagent.record import line_codec, signing, trust
from nbagent.state.fold import State, fold
from nbagent.stores import snapshot
from nbagent.stores.writer import FileOps
from nbagent.tools.decorator import idempotency_key
from tests.support import snapshots
from tests.support.fake_anthropic import FakeAnthropic

FIXTURES = Path(__file__).parents[1] / "fixtures"


def full_replay(path: Path) -> State:
    return fold(read_events(path))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def add_turns(session: Session, count: int, tag: str = "") -> None:
    """Append ``count`` events shaped like real turns: request, stream, tool call, result, answer."""
    target = session.seq + count
    step = 0
    while session.seq < target:
        n = session.seq
        kind = step % 7
        if kind == 0:
            session.append(ev.USER_MSG, content=f"request {tag}{n}")
        elif kind == 1:
            session.append(ev.MODEL_CALL, model="m", attempt=1)
        elif kind == 2:
            session.append(ev.DELTA, index=0, text=f"piece {n}")
        elif kind == 3:
            content = [{"type": "text", "text": f"calling {n}"}, {"type": "tool_use", "id": f"t{tag}{n}", "name": "add", "input": {"n": n}}]
            session.append(ev.ASSISTANT_MSG, content=content, stop_reason="tool_use", usage={"input_tokens": n, "output_tokens": 1})
        elif kind == 4:
            call = next(iter(session.state.open_calls), None)
            if call:
                session.append(ev.TOOL_STARTED, tool_use_id=call, name="add", effect="write", attempt=1)
        elif kind == 5:
            call = next(iter(session.state.open_calls), None)
            if call:
                session.append(ev.TOOL_RESULT, tool_use_id=call, content=str(n))
        else:
            session.append(
                ev.ASSISTANT_MSG, content=[{"type": "text", "text": f"done {n}"}], stop_reason="end_turn", usage={"output_tokens": 2}
            )
        step += 1


# Appending and reading ----------------------------------------------------------------------------
def test_append_events_and_state(log_path: Path) -> None:
    with Session.open(log_path, fsync="never") as session:
        assert session.seq == 1 and len(session.id) == 32 and session.messages == []
        event = session.append(ev.USER_MSG, content="hello")
        assert event["seq"] == 2 and event["type"] == ev.USER_MSG and event["v"] == ev.SCHEMA_VERSION
        assert session.messages == [{"role": "user", "content": "hello"}] and session.state.frontier == "model"
        add_turns(session, 20)
        assert [e["seq"] for e in session.events()] == list(range(1, 23))
        assert [e["seq"] for e in session.events(since=19)] == [20, 21, 22]
        assert list(session.events(since=22)) == []
        assert list(session.events()) == list(read_events(log_path))
        assert session.state == full_replay(log_path)
        assert session.usage == full_replay(log_path).usage
        with pytest.raises(ValueError):
            session.append("not_a_type")
        assert session.seq == 22  # a refused event takes no seq
    assert session.closed
    with pytest.raises(LogError, match="closed"):
        session.append(ev.NOTE, text="too late")
    with Session.open(log_path) as again:
        assert again.id == session.id and again.seq == 22 and again.state == full_replay(log_path)


# Subscribers --------------------------------------------------------------------------------------
class Recorder:
    """A subscriber that keeps the seqs it was given (and can check the session's state as it goes)."""

    def __init__(self, session: Session | None = None) -> None:
        self.seqs: list[int] = []
        self.session = session
        self.mismatches: list[int] = []

    def __call__(self, event: ev.Event) -> None:
        self.seqs.append(event["seq"])
        if self.session is not None and event["seq"] % 97 == 0:
            # Delivered live under the session's lock: the state must already include this event.
            if self.session.seq == event["seq"] and self.session.state != full_replay(self.session.path):
                self.mismatches.append(event["seq"])


def test_subscribers_joining_while_another_thread_appends_see_no_gap_and_no_duplicate(log_path: Path) -> None:
    session = Session.open(log_path, fsync="never", snapshot_every=0)
    add_turns(session, 50)
    total = 2000
    start = threading.Event()
    failures: list[BaseException] = []

    def writer() -> None:
        start.wait()
        try:
            add_turns(session, total)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    joined: list[tuple[int, Recorder]] = []
    checker = Recorder(session)
    joined.append((0, checker))
    session.subscribe(checker, since=0)
    start.set()
    for threshold in (100, 400, 800, 1200, 1600, 1900):
        while session.seq < threshold and thread.is_alive():
            threading.Event().wait(0.0005)
        now = session.seq
        for since in (0, max(0, now - 37), now, now + 25):  # from the start, a little back, right now, in the future
            recorder = Recorder()
            session.subscribe(recorder, since=since)
            joined.append((since, recorder))
    thread.join()
    late = Recorder()
    session.subscribe(late, since=total - 10)
    joined.append((total - 10, late))
    assert not failures
    end = session.seq
    assert end == 51 + total
    for since, recorder in joined:
        assert recorder.seqs == list(range(since + 1, end + 1)), f"subscriber joined at {since}"
    assert checker.mismatches == []
    assert session.state == full_replay(log_path)
    session.close()


def test_a_subscriber_that_raises_is_detached_and_breaks_nothing(log_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with Session.open(log_path, fsync="never") as session:
        add_turns(session, 5)
        before, after = Recorder(), Recorder()
        calls: list[int] = []

        def flaky(event: ev.Event) -> None:
            calls.append(event["seq"])
            if len(calls) == 3:
                raise RuntimeError("subscriber bug")

        session.subscribe(before, since=0)
        session.subscribe(flaky, since=session.seq)
        session.subscribe(after, since=session.seq)
        add_turns(session, 10)
        assert calls == [7, 8, 9]
        assert before.seqs == list(range(1, 17)) and after.seqs == list(range(7, 17))
        assert "subscriber bug" in caplog.text and "detached" in caplog.text

        def broken_from_the_start(event: ev.Event) -> None:
            calls.append(-event["seq"])
            raise ValueError("fails while catching up")

        unsubscribe = session.subscribe(broken_from_the_start, since=14)
        add_turns(session, 3)
        unsubscribe()
        assert calls == [7, 8, 9, -15]
        assert before.seqs == list(range(1, 20))
        assert session.state == full_replay(log_path)


def test_unsubscribe(log_path: Path) -> None:
    with Session.open(log_path, fsync="never") as session:
        gone, stays = Recorder(), Recorder()
        unsubscribe = session.subscribe(gone)
        session.subscribe(stays)
        session.append(ev.NOTE, text="a")
        unsubscribe()
        unsubscribe()  # twice is harmless
        session.append(ev.NOTE, text="b")
        assert gone.seqs == [1, 2] and stays.seqs == [1, 2, 3]

        seen: list[int] = []
        holder: list[Callable[[], None]] = []

        def once(event: ev.Event) -> None:  # unsubscribes itself from inside a delivery
            seen.append(event["seq"])
            holder[0]()

        holder.append(session.subscribe(once, since=3))
        session.append(ev.NOTE, text="c")
        session.append(ev.NOTE, text="d")
        assert seen == [4] and stays.seqs == [1, 2, 3, 4, 5]


def test_a_subscriber_joining_ahead_of_the_log_gets_only_later_events(log_path: Path) -> None:
    with Session.open(log_path, fsync="never") as session:
        add_turns(session, 4)
        ahead = Recorder()
        session.subscribe(ahead, since=session.seq + 3)  # seq is 5: wants 9 and later
        add_turns(session, 6)
        assert ahead.seqs == [9, 10, 11]


def test_a_subscriber_that_unsubscribes_itself_and_then_raises(log_path: Path) -> None:
    with Session.open(log_path, fsync="never") as session:
        holder: list[Callable[[], None]] = []
        others = Recorder()

        def leave_badly(event: ev.Event) -> None:
            holder[0]()
            raise RuntimeError("and then it failed")

        holder.append(session.subscribe(leave_badly, since=1))
        session.subscribe(others, since=1)
        session.append(ev.NOTE, text="a")  # must not raise: the event is written
        session.append(ev.NOTE, text="b")
        assert others.seqs == [2, 3] and session.seq == 3


def test_close_detaches_subscribers(log_path: Path) -> None:
    session = Session.open(log_path)
    recorder = Recorder()
    session.subscribe(recorder)
    session.close()
    session.close()  # idempotent
    assert recorder.seqs == [1]


# Reading from the middle ---------------------------------------------------------------------------
class CountedReads(FileOps):
    """Plain file operations that remember the offset and length of every read."""

    def __init__(self) -> None:
        self.reads: list[tuple[int, int]] = []

    def pread(self, fd: int, length: int, offset: int) -> bytes:  # type: ignore[override]
        self.reads.append((offset, length))
        return os.pread(fd, length, offset)


class InterruptedWrite(FileOps):
    """Writes half of the ``nth`` line, then raises KeyboardInterrupt (Ctrl-C inside the write)."""

    def __init__(self, nth: int) -> None:
        self.nth, self.count = nth, 0

    def write(self, fd: int, data: bytes | memoryview) -> int:  # type: ignore[override]
        self.count += 1
        if self.count == self.nth:
            os.write(fd, bytes(data[: len(data) // 2]))
            raise KeyboardInterrupt
        return os.write(fd, data)


def line_starts(path: Path) -> dict[int, int]:
    """Seq → the byte offset where its line starts, for every whole line of the log on disk."""
    data, starts, pos = path.read_bytes(), {}, 0
    while (nl := data.find(b"\n", pos)) >= 0:
        seq = line_codec.line_seq(data[pos:nl])
        assert seq is not None
        starts[seq], pos = pos, nl + 1
    return starts


def assert_marks_are_true(session: Session) -> None:
    """Every offset the session remembers is where its line starts in the log as it is now (or the end, for the next line)."""
    starts = line_starts(session.path)
    end = session.path.stat().st_size
    for seq, start in zip(session._feed.marks.seqs, session._feed.marks.starts):
        assert starts.get(seq) == start or (seq == session.seq + 1 and start == end), f"seq {seq} at {start}"


@pytest.mark.parametrize("snapshot_every", [0, 1000])
def test_events_from_the_middle_are_read_from_a_known_line_near_them(log_path: Path, snapshot_every: int) -> None:
    with Session.open(log_path, fsync="never", snapshot_every=snapshot_every) as session:
        add_turns(session, 700)  # closing writes a snapshot if snapshot_every is set
    everything = list(read_events(log_path))
    starts = line_starts(log_path)
    ops = CountedReads()
    with Session.open(log_path, fsync="never", snapshot_every=snapshot_every, ops=ops) as session:
        assert list(session.events(since=650)) == everything[650:]  # nothing learned yet: read from the start
        assert list(session.events()) == everything  # a read from the start learns where lines are
        for since in (0, 1, 63, 64, 65, 128, 300, 555, 699, 700, 701, 750):
            ops.reads.clear()
            assert list(session.events(since)) == [e for e in everything if e["seq"] > since], since
            if since >= session.seq:
                assert ops.reads == []  # after the last line: nothing to read
            else:  # at most 63 lines before the first wanted one were read (and skipped unparsed)
                assert min(offset for offset, _ in ops.reads) >= starts[max(1, since + 1 - 63)], since
        assert_marks_are_true(session)


@pytest.mark.parametrize("reread", [False, True])
def test_a_turn_is_read_from_its_request_line(log_path: Path, reread: bool) -> None:
    """Requests are marks: re-rendering one turn reads from its user_msg, skipping nothing before it."""
    with Session.open(log_path, fsync="never", snapshot_every=0) as session:
        add_turns(session, 500)
    requests = [e["seq"] for e in read_events(log_path) if e["type"] == ev.USER_MSG]
    starts = line_starts(log_path)
    ops = CountedReads()
    with Session.open(log_path, fsync="never", snapshot_every=0, ops=ops) as session:
        if reread:
            list(session.events())  # the marks are learned by reading
        else:
            add_turns(session, 70)  # ... and by writing
            requests = [e["seq"] for e in read_events(log_path) if e["type"] == ev.USER_MSG and e["seq"] > 500]
            starts = line_starts(log_path)
        for seq in requests:
            ops.reads.clear()
            assert next(iter(session.events(since=seq - 1)))["seq"] == seq
            assert min(offset for offset, _ in ops.reads) == starts[seq], seq
        assert_marks_are_true(session)


def test_a_reader_that_stops_early_reads_little_and_long_lines_cross_chunks(log_path: Path) -> None:
    from nbagent.agent.feed import FIRST_CHUNK

    with Session.open(log_path, fsync="never", snapshot_every=0) as session:
        add_turns(session, 300)
        session.append(ev.NOTE, text="x" * (3 * FIRST_CHUNK))  # a line longer than two chunks
        add_turns(session, 300)
    everything = list(read_events(log_path))
    assert log_path.stat().st_size > 3 * FIRST_CHUNK
    ops = CountedReads()
    with Session.open(log_path, fsync="never", snapshot_every=0, ops=ops) as session:
        assert list(session.events()) == everything  # across every chunk boundary, the long line included
        ops.reads.clear()
        first = next(iter(session.events(since=100)))  # one turn of a long log, as a re-rendered cell reads it
        assert first == everything[100] and sum(length for _, length in ops.reads) <= FIRST_CHUNK
        caught: list[ev.Event] = []
        session.subscribe(caught.append, since=50)()
        assert caught == everything[50:]


def test_events_appended_by_the_session_are_readable_at_once(log_path: Path) -> None:
    with Session.open(log_path, fsync="never", snapshot_every=0) as session:
        for n in range(200):
            event = session.append(ev.NOTE, text=f"note {n}")
            assert [e["seq"] for e in session.events(since=event["seq"] - 1)] == [event["seq"]]
            assert list(session.events(since=event["seq"])) == []
        assert len(session._feed.marks.seqs) == 4  # seqs 1, 65, 129, 193: learned while appending, nothing read
        assert_marks_are_true(session)
        assert list(session.events(since=150)) == list(read_events(log_path, since=150))


def test_an_interrupted_append_and_its_repair_leave_no_offset_past_the_log(log_path: Path) -> None:
    ops = InterruptedWrite(129)  # the write of seq 129, a line whose offset the session would remember
    with Session.open(log_path, fsync="never", snapshot_every=0, ops=ops) as session:
        for n in range(2, 129):
            session.append(ev.NOTE, text=f"note {n}")
        assert len(list(session.events())) == 128
        with pytest.raises(KeyboardInterrupt):
            session.append(ev.NOTE, text="x" * 500)
        assert [e["seq"] for e in session.events(since=100)] == list(range(101, 129))  # the half line is never read
        session.append(ev.NOTE, text="after")  # re-reads the log and cuts the half line off (kept beside it)
        assert session.repair is not None and session.seq == 129
        for n in range(130, 300):
            session.append(ev.NOTE, text=f"note {n}" * (n % 7))
        everything = list(read_events(log_path))
        for since in (0, 64, 100, 128, 129, 200, 298, 299):
            assert list(session.events(since)) == everything[since:], since
        assert_marks_are_true(session)


def test_an_offset_past_the_end_is_never_used(log_path: Path) -> None:
    with Session.open(log_path, fsync="never", snapshot_every=0) as session:
        add_turns(session, 199)
        session._feed.marks.note(161, log_path.stat().st_size + 100)  # what a cut the session missed would leave
        assert list(session.events(since=160)) == list(read_events(log_path, since=160))
        assert_marks_are_true(session)
        recorder = Recorder()
        session._feed.marks.note(186, log_path.stat().st_size + 100)
        session.subscribe(recorder, since=185)
        assert recorder.seqs == list(range(186, 201))


# Snapshots ----------------------------------------------------------------------------------------
def header(path: Path) -> dict:
    found = snapshot.read_header(path)
    assert found is not None
    return found


def test_a_snapshot_is_written_every_k_events_and_on_close(log_path: Path) -> None:
    snap = snapshot.path_for(log_path)
    with Session.open(log_path, fsync="never", snapshot_every=10) as session:
        for _ in range(8):
            session.append(ev.USER_MSG, content="q")
        assert not snap.exists()
        session.append(ev.USER_MSG, content="q")  # seq 10
        assert header(log_path)["seq"] == 10
        for _ in range(12):
            session.append(ev.DELTA, index=0, text="x")  # deltas never trigger one
        assert header(log_path)["seq"] == 10
        session.append(ev.USER_MSG, content="q")
        assert header(log_path)["seq"] == 23
        for _ in range(9):
            session.append(ev.TOOL_RESULT, tool_use_id="x", content="r")
        assert header(log_path)["seq"] == 23
        session.append(ev.ASSISTANT_MSG, content=[{"type": "text", "text": "a"}], stop_reason="end_turn", usage={})
        assert header(log_path)["seq"] == 33
        session.append(ev.NOTE, text="not yet in a snapshot")
    assert header(log_path)["seq"] == 34  # written on close
    assert header(log_path)["summary"]["title"] == "q" and header(log_path)["summary"]["turns"] == 10
    with Session.open(log_path, snapshot_every=0) as session:
        session.append(ev.NOTE, text="snapshot_every=0 never writes one")
    assert header(log_path)["seq"] == 34


def test_opening_loads_the_snapshot_and_replays_only_the_tail(log_path: Path) -> None:
    with Session.open(log_path, fsync="never", snapshot_every=10) as session:
        add_turns(session, 40)
    with Session.open(log_path, fsync="never", snapshot_every=0) as session:
        add_turns(session, 17, tag="tail")
    assert header(log_path)["seq"] == 41
    with Session.open(log_path) as session:
        assert session.snapshot_note == ""
        assert session.seq == 58 and session.state == full_replay(log_path)
    # Prove the snapshot is what was loaded: a consistent snapshot with a different title wins over the head of the log.
    snapshots.rewrite_state(log_path, lambda s: s.update(title="from the snapshot"))
    with Session.open(log_path, fsync="never", snapshot_every=0) as session:
        assert session.snapshot_note == ""
        assert session.state.title == "from the snapshot"
        add_turns(session, 3, tag="more")
        expected = full_replay(log_path)
        expected.title = "from the snapshot"
        assert session.state == expected


def _truncated(log_path: Path, other: Path) -> None:
    lines = log_path.read_bytes().splitlines(keepends=True)
    log_path.write_bytes(b"".join(lines[:20]))


def _truncated_then_regrown(log_path: Path, other: Path) -> None:
    lines = log_path.read_bytes().splitlines(keepends=True)
    log_path.write_bytes(b"".join(lines[:20]))
    kept = snapshot.path_for(log_path).read_bytes()
    snapshot.path_for(log_path).unlink()
    with Session.open(log_path, fsync="never", snapshot_every=0) as session:
        add_turns(session, 40, tag="regrown")
    snapshot.path_for(log_path).write_bytes(kept)


def _replaced(log_path: Path, other: Path) -> None:
    shutil.copyfile(other, log_path)


def _another_logs_snapshot(log_path: Path, other: Path) -> None:
    shutil.copyfile(snapshot.path_for(other), snapshot.path_for(log_path))


def _edit_header(change: Callable[[dict], None], *, reseal: bool = True, resign: bool = True) -> Callable[[Path, Path], None]:
    """Edit the header; resealed and re-signed (a consistent edit that deeper checks must catch) unless told not to."""

    def edit(log_path: Path, other: Path) -> None:
        snap = snapshot.path_for(log_path)
        head, rest = snap.read_bytes().split(b"\n", 1)
        meta = json.loads(head)
        meta.pop("crc")
        meta.pop("sig", None)
        change(meta)
        line = json.dumps(meta, separators=(",", ":")).encode()
        summary = meta.get("summary")
        if reseal and resign and isinstance(summary, dict) and isinstance(summary.get("session_id"), str):
            line = signing.signer().keyed(signing.SNAPSHOT, summary["session_id"]).sign(line)  # as this user's own nbagent would
        snap.write_bytes((line_codec.seal(line) if reseal else line) + b"\n" + rest)

    return edit


def _header_not_json(log_path: Path, other: Path) -> None:
    snap = snapshot.path_for(log_path)
    snap.write_bytes(b"{not json" + snap.read_bytes()[9:])


def _flip_state_byte(log_path: Path, other: Path) -> None:
    snap = snapshot.path_for(log_path)
    data = bytearray(snap.read_bytes())
    at = data.index(b"request", data.index(b"\n"))  # the title, in the state line (not the header's summary)
    data[at] = ord("R")
    snap.write_bytes(bytes(data))


def _flip_messages_byte(log_path: Path, other: Path) -> None:
    snapshots.flip_messages_byte(log_path, b"request")


def _messages_not_an_array(log_path: Path, other: Path) -> None:
    header, state_line, _ = snapshots.parts(log_path)
    snapshots.put(log_path, header, state_line, b'{"not":"an array"}')  # consistent checksums, wrong content


def _messages_one_short(log_path: Path, other: Path) -> None:
    header, state_line, messages_line = snapshots.parts(log_path)
    messages = json.loads(messages_line)
    snapshots.put(log_path, header, state_line, json.dumps(messages[1:], separators=(",", ":")).encode())


def _cut_body(log_path: Path, other: Path) -> None:
    snap = snapshot.path_for(log_path)
    data = snap.read_bytes()
    snap.write_bytes(data[: len(data) - 40])


def _empty(log_path: Path, other: Path) -> None:
    snapshot.path_for(log_path).write_bytes(b"")


BAD_SNAPSHOTS = {
    "log-truncated-back-past-it": (_truncated, "shorter"),
    "log-truncated-then-regrown": (_truncated_then_regrown, ""),
    "log-replaced": (_replaced, ""),
    "from-another-log": (_another_logs_snapshot, ""),
    "header-not-json": (_header_not_json, "fails its check"),
    "header-edited-without-its-checksum": (_edit_header(lambda h: h.update(turns=1), reseal=False), "fails its check"),
    "header-seq-changed": (_edit_header(lambda h: h.update(seq=h["seq"] - 1)), "does not match"),
    "header-offset-changed": (_edit_header(lambda h: h.update(offset=h["offset"] - 1)), ""),
    "header-line-crc-changed": (_edit_header(lambda h: h.update(line_crc="00000000")), "does not match"),
    "header-kind-changed": (_edit_header(lambda h: h.update(kind="something.else")), "not an nbagent snapshot"),
    "header-newer-version": (_edit_header(lambda h: h.update(v=99)), "v99"),
    "header-field-missing": (_edit_header(lambda h: h.pop("line_crc")), "incomplete"),
    "header-summary-missing": (_edit_header(lambda h: h.pop("summary")), "incomplete"),
    "header-summary-not-a-dict": (_edit_header(lambda h: h.update(summary=[1])), "incomplete"),
    "header-state-digest-changed": (_edit_header(lambda h: h.update(state_sha256="0" * 64)), "checksum"),
    "header-messages-digest-changed": (_edit_header(lambda h: h.update(messages_sha256="0" * 64)), "checksum"),
    "header-messages-len-changed": (_edit_header(lambda h: h.update(messages_len=h["messages_len"] - 1)), "lengths"),
    "header-lengths-beyond-the-file": (_edit_header(lambda h: h.update(messages_len=1 << 60)), "lengths"),
    "header-not-signed": (_edit_header(lambda h: None, resign=False), "not signed by you"),
    "header-trust-record-inflated": (_edit_header(lambda h: h["trust"].update(lines=h["seq"] + 5)), "trust record"),
    "header-old-format": (_edit_header(lambda h: h.update(v=1)), f"snapshot format v1 is not v{snapshot.VERSION}"),
    "state-byte-flipped": (_flip_state_byte, "checksum"),
    "state-without-a-field": (lambda log, other: snapshots.rewrite_state(log, lambda s: s.pop("usage")), "does not hold a state"),
    "messages-byte-flipped": (_flip_messages_byte, "messages line fails its checksum"),
    "messages-not-an-array": (_messages_not_an_array, "does not hold"),
    "messages-one-short": (_messages_one_short, "does not hold"),
    "body-cut-short": (_cut_body, "lengths"),
    "empty-file": (_empty, "cut short"),
}


@pytest.mark.parametrize("damage", list(BAD_SNAPSHOTS), ids=list(BAD_SNAPSHOTS))
def test_a_stale_or_damaged_snapshot_falls_back_to_the_full_log(tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    change, why = BAD_SNAPSHOTS[damage]
    log_path, other = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with Session.open(other, fsync="never", snapshot_every=10) as session:
        add_turns(session, 20 if damage == "from-another-log" else 70, tag="other")
    with Session.open(log_path, fsync="never", snapshot_every=10) as session:
        add_turns(session, 40)
    change(log_path, other)
    before = digest(log_path)
    with Session.open(log_path, snapshot_every=0) as session:
        # The messages line is checked only when the messages are read: compare them first.
        assert session.messages == full_replay(log_path).messages
        assert session.state == full_replay(log_path)
        note = session.snapshot_note
        assert note.startswith("snapshot ignored (") and note.endswith("replayed the whole log")
        assert why in note
    assert note in caplog.text
    assert digest(log_path) == before  # the log always wins and is never touched
    with Session.open(log_path) as session:  # a session that reads its messages and closes writes a fresh snapshot...
        list(session.messages)
    with Session.open(log_path) as session:  # ... which the next open uses
        assert session.state == full_replay(log_path) and session.snapshot_note == ""


def test_a_snapshot_claiming_another_session_id_is_not_trusted(log_path: Path) -> None:
    with Session.open(log_path, fsync="never", snapshot_every=10) as session:
        add_turns(session, 30)
        real_id = session.id
    _edit_header(lambda h: h["summary"].update(session_id="0" * 32))(log_path, log_path)
    with Session.open(log_path, snapshot_every=0) as session:
        # The id seeds every idempotency key: it must come from the log, never from a damaged header.
        assert session.id == real_id == session.state.session_id
        assert "session" in session.snapshot_note
        assert session.state == full_replay(log_path)


def test_a_damaged_summary_in_the_snapshot_header_is_noticed(log_path: Path) -> None:
    with Session.open(log_path, fsync="never", snapshot_every=10) as session:
        add_turns(session, 30)
    _edit_header(lambda h: h["summary"].update(title="not this session's title", turns=999), reseal=False)(log_path, log_path)
    with Session.open(log_path, snapshot_every=0) as session:
        assert session.snapshot_note != ""
        assert session.state == full_replay(log_path)


def test_snapshot_files_are_owner_only_and_the_temp_file_never_lingers(log_path: Path) -> None:
    old = os.umask(0)
    try:
        temp = snapshot.path_for(log_path).with_name(snapshot.path_for(log_path).name + ".tmp")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        temp.write_bytes(b"left behind by a crash in the middle of a snapshot")
        with Session.open(log_path, fsync="never", snapshot_every=5) as session:
            assert session.snapshot_note == ""  # a leftover temp file is not a snapshot
            add_turns(session, 60)
            assert not temp.exists()
        assert stat.S_IMODE(snapshot.path_for(log_path).stat().st_mode) == 0o600
        assert sorted(p.name for p in log_path.parent.iterdir()) == sorted(
            [log_path.name, log_path.name + ".lock", log_path.name + ".snapshot"]
        )
        assert header(log_path)["seq"] == 61
    finally:
        os.umask(old)


# The version-1 fixture ------------------------------------------------------------------------------
def test_the_v1_fixture_replays_to_the_same_state_forever(tmp_path: Path, fake: FakeAnthropic) -> None:
    original = FIXTURES / "v1_session.jsonl"
    expected = json.loads((FIXTURES / "v1_session.expected.json").read_text())
    path = tmp_path / "v1_session.jsonl"
    shutil.copyfile(original, path)
    before = digest(path)
    events = list(read_events(path))
    assert {e["v"] for e in events} == {1}
    kinds = [e["type"] for e in events]
    assert {"session_start", "user_msg", "model_call", "delta", "assistant_msg", "model_error", "tool_started", "tool_result"} <= set(kinds)
    with Session.open(path) as session:
        state = session.state
        assert session.repair is None and session.snapshot_note == ""
        assert state.session_id == expected["session_id"] and session.id == expected["session_id"]
        assert state.seq == expected["seq"]
        assert state.messages == expected["messages"]
        assert state.usage == expected["usage"]
        assert state.turns == expected["turns"] and state.title == expected["title"] and state.frontier == expected["frontier"]
        # The idempotency key of a call is derived the same way forever.
        started = next(e for e in events if e["type"] == "tool_started" and "idempotency_key" in e)
        key = idempotency_key(session.id, started["tool_use_id"])
        assert started["idempotency_key"] == key
        assert any(key in json.dumps(m) for m in state.messages)
        # Its lines are unsigned, so this user did not write it: the library does not continue it (issue 20 #11), no model call.
        client = anthropic.Anthropic(base_url=fake.base_url, api_key="test-key", max_retries=0)
        with pytest.raises(UntrustedLogError, match="nbagent trust"):
            nbagent.run(session, client=client)
        assert fake.requests == []
    assert digest(path) == before
    # Opening again from the snapshot that close() wrote gives the same state.
    with Session.open(path) as session:
        assert session.snapshot_note == "" and session.state.messages == expected["messages"]
    assert digest(original) == digest(path)


def test_a_subscriber_that_appends_from_its_callback_keeps_every_subscriber_in_order(log_path: Path) -> None:
    seen: dict[str, list[int]] = {"first": [], "second": []}
    with Session.open(log_path, fsync="never") as session:

        def first(event: dict) -> None:
            seen["first"].append(event["seq"])
            if event["type"] == ev.USER_MSG:
                session.append(ev.NOTE, text="seen a request")  # re-entrant append

        session.subscribe(first, since=session.seq)
        session.subscribe(lambda event: seen["second"].append(event["seq"]), since=session.seq)
        start = session.seq
        session.append(ev.USER_MSG, content="hello")
        session.append(ev.MODEL_CALL, model="m", attempt=1)
    expected = list(range(start + 1, start + 4))
    assert seen["first"] == expected
    assert seen["second"] == expected


def test_snapshot_bodies_reuse_encoded_messages_but_never_a_replaced_one(log_path: Path) -> None:
    cache = snapshot.MessageCache()
    state = State(session_id="s")
    for step in range(30):
        if step % 3 == 2:
            # The fold grows the open user message by replacing it: the cache must not serve the old one.
            nbagent.state.fold.apply(state, {"seq": step + 1, "type": ev.TOOL_RESULT, "tool_use_id": f"t{step}", "content": f"r{step}"})
        elif step % 3 == 1:
            state.messages.append({"role": "assistant", "content": [{"type": "text", "text": f"a{step}"}]})
        else:
            nbagent.state.fold.apply(state, {"seq": step + 1, "type": ev.USER_MSG, "content": f"u{step}"})
        snapshot.write(
            log_path,
            state,
            line_start=0,
            offset=1,
            line_crc="0",
            line_sig=b"",
            report=trust.Report(lines=step + 1),
            sign=None,
            prefix_sha256=lambda: "0" * 64,
            cache=cache,
        )
        loaded, why = snapshot.load(log_path)
        assert loaded is not None, why
        assert loaded.state() == state


class CountingFiles(FileOps):
    """The real file operations, counting fsyncs (of files and folders)."""

    def __init__(self) -> None:
        self.fsyncs = 0

    def fsync(self, fd: int) -> None:  # type: ignore[override]
        self.fsyncs += 1
        os.fsync(fd)


@pytest.mark.parametrize("policy", ["never", "turn"])
def test_snapshots_fsync_only_when_the_log_does(log_path: Path, policy: str) -> None:
    files = CountingFiles()
    with Session.open(log_path, fsync=policy, snapshot_every=0, ops=files) as session:  # type: ignore[arg-type]
        session.append(ev.DELTA, index=0, text="not durable")
        before = files.fsyncs
        session.snapshot()
        during = files.fsyncs - before
    assert during == (0 if policy == "never" else 3)  # the log's unsynced delta, the snapshot file, its folder
    with Session.open(log_path, snapshot_every=0) as reopened:  # written either way, and used
        assert reopened.seq == 2 and reopened.snapshot_note == ""


def test_each_snapshot_pins_exactly_the_bytes_before_it(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Session.open(path, fsync="never", snapshot_every=0) as session:
        for round_ in range(3):  # the digest is carried from one snapshot to the next: each must still be of every byte
            session.append(ev.USER_MSG, content=f"q{round_}")
            written = session.snapshot()
            header = json.loads(written.read_bytes().split(b"\n", 1)[0])
            assert header["prefix_sha256"] == hashlib.sha256(path.read_bytes()[: header["offset"]]).hexdigest()
