"""The one log reader: every kind of damage through every mode, as a table; the migrations; every reader goes through it."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

import nbagent
from nbagent import LogCorruptError, LogVersionError, NotALogError, history
from nbagent.record import events as ev
from nbagent.record import line_codec
from nbagent.record.log_reader import Reader, read_events, scan, start_problem

FIXTURES = Path(__file__).parents[1] / "fixtures"


def line(seq: int, kind: str, **payload: object) -> bytes:
    """One valid (unsigned) log line."""
    return line_codec.encode({"v": ev.SCHEMA_VERSION, "seq": seq, "ts": 1.0 + seq, "type": kind, **payload})[0]


def resealed(body: dict[str, object]) -> bytes:
    """A line with a valid checksum around any JSON object (to make well-sealed nonsense)."""
    raw = json.dumps(body, separators=(",", ":")).encode()
    return raw[:-1] + b',"crc":"%08x"}\n' % zlib.crc32(raw)


def good_log(count: int = 5) -> list[bytes]:
    lines = [line(1, ev.SESSION_START, session_id="s1", meta={})]
    for seq in range(2, count + 1):
        lines.append(line(seq, ev.USER_MSG, content=f"request {seq}"))
    return lines


def flip(raw: bytes) -> bytes:
    """The same line with one payload byte changed (its checksum no longer matches)."""
    at = raw.index(b"request")
    return raw[:at] + b"R" + raw[at + 1 :]


# Each case: the log's bytes, and what each mode does with it ("ok" with the seqs read, or the error / problem).
Case = tuple[Callable[[], bytes], dict[str, object]]
CASES: dict[str, Case] = {
    "clean": (lambda: b"".join(good_log()), {"seqs": [1, 2, 3, 4, 5], "torn": False, "problems": []}),
    "empty file": (lambda: b"", {"seqs": [], "torn": False, "problems": []}),
    "torn tail, no newline": (
        lambda: b"".join(good_log()) + line(6, ev.USER_MSG, content="cut")[:20],
        {"seqs": [1, 2, 3, 4, 5], "torn": True, "strict": LogCorruptError, "problems": ["torn tail"]},
    ),
    "torn tail, bad last line": (
        lambda: b"".join(good_log()) + flip(line(6, ev.USER_MSG, content="request 6")),
        {"seqs": [1, 2, 3, 4, 5], "torn": True, "strict": LogCorruptError, "problems": ["torn tail"]},
    ),
    "damaged line before valid ones": (
        lambda: b"".join(good_log()[:2] + [flip(good_log()[2])] + good_log()[3:]),
        {"error": LogCorruptError, "problems": ["damaged line: checksum mismatch"], "report_seqs": [1, 2, 4, 5]},
    ),
    "two lines glued by a damaged newline, at the end": (
        lambda: b"".join(good_log()[:3]) + good_log()[3][:-1] + b"X" + good_log()[4],
        {"error": LogCorruptError, "problems": ["damaged line"], "report_seqs": [1, 2, 3]},
    ),
    "a gap in seq": (
        lambda: b"".join(good_log()[:2] + good_log()[3:]),
        {"error": LogCorruptError, "problems": ["expected seq 3 but found seq 4"], "report_seqs": [1, 2, 4, 5]},
    ),
    "a newer schema": (
        lambda: b"".join(good_log()[:2]) + resealed({"v": 9, "seq": 3, "ts": 1.0, "type": "user_msg", "content": "x"}),
        {"error": LogVersionError, "problems": ["log schema v9, newer"], "report_seqs": [1, 2]},
    ),
    "a well-sealed event of the wrong shape": (
        lambda: b"".join(good_log()[:2]) + resealed({"v": 2, "seq": 3, "ts": 1.0, "type": "user_msg", "content": 7}) + good_log()[3],
        {"error": LogCorruptError, "problems": ["a user_msg event is missing fields"], "report_seqs": [1, 2, 3, 4]},
    ),
    "an unknown event type": (
        lambda: b"".join(good_log()[:2]) + resealed({"v": 2, "seq": 3, "ts": 1.0, "type": "mystery"}) + good_log()[3],
        {"error": LogCorruptError, "problems": ["unknown event type 'mystery'"], "report_seqs": [1, 2, 3, 4]},
    ),
    "a tool_use block without an id": (
        lambda: b"".join(good_log()[:2]) + line(3, ev.ASSISTANT_MSG, content=[{"type": "tool_use", "name": "x", "input": {}}]),
        {"error": LogCorruptError, "problems": ["a assistant_msg event is missing fields"], "report_seqs": [1, 2, 3]},
    ),
    "not a log at all": (
        lambda: b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n",
        {"error": NotALogError, "problems": ["not an nbagent log"], "report_seqs": []},
    ),
    "a line over the limit": (
        lambda: b"".join(good_log()[:2]) + b"x" * (ev.MAX_LINE + 2),
        {"error": LogCorruptError, "problems": ["MiB limit"], "report_seqs": [1, 2]},
    ),
}


@pytest.mark.parametrize("mode", ["tolerant", "strict", "follow"])
@pytest.mark.parametrize("name", list(CASES))
def test_every_mode_that_raises_raises_the_same_error(name: str, mode: str) -> None:
    make, expected = CASES[name]
    reader = Reader("x.jsonl", mode)  # type: ignore[arg-type]
    error = expected.get("error") or (expected.get("strict") if mode == "strict" else None)
    if error is not None:
        with pytest.raises(error):  # type: ignore[call-overload]
            list(reader.feed(make()))
        return
    assert [e["seq"] for e in reader.feed(make())] == expected["seqs"]
    assert bool(reader.torn) is expected["torn"]


@pytest.mark.parametrize("name", list(CASES))
def test_report_mode_lists_every_problem_and_reads_on_where_it_can(name: str) -> None:
    make, expected = CASES[name]
    reader = Reader("x.jsonl", "report")
    seqs = [e["seq"] for e in reader.feed(make())]
    assert seqs == expected.get("report_seqs", expected.get("seqs"))
    wanted = expected["problems"]
    assert len(reader.problems) == len(wanted)  # type: ignore[arg-type]
    for problem, text in zip(reader.problems, wanted):  # type: ignore[call-overload]
        assert text in problem.message


def test_follow_mode_goes_on_where_it_stopped_when_a_torn_line_is_finished() -> None:
    lines = good_log(6)
    data = b"".join(lines[:5])
    reader = Reader("x.jsonl", "follow")
    assert [e["seq"] for e in reader.feed(data + lines[5][:10])] == [1, 2, 3, 4, 5]
    assert reader.torn and reader.offset == len(data)
    assert [e["seq"] for e in reader.feed(lines[5])] == [6]
    assert not reader.torn and reader.offset == len(data) + len(lines[5])


def test_since_skips_whole_lines_unparsed_only_while_seqs_run_on() -> None:
    lines = good_log(6)
    assert [e["seq"] for e in Reader("x", since=3).feed(b"".join(lines))] == [4, 5, 6]
    damaged = lines[:2] + [lines[2].replace(b'"seq":3', b'"seq":7')] + lines[3:]  # a damaged seq digit is never skipped
    with pytest.raises(LogCorruptError, match="line 3"):
        list(Reader("x", since=4).feed(b"".join(damaged)))


def test_offsets_stay_absolute_across_feeds_and_scan_gives_them_into_its_data() -> None:
    lines = good_log(4)
    head = len(lines[0]) + len(lines[1])
    found = scan(b"".join(lines[2:]) + b'{"v":2,', path="x", first_seq=3, base_offset=head)
    assert [e["seq"] for e in found.events] == [3, 4]
    assert found.end == len(lines[2]) + len(lines[3]) and found.last_start == len(lines[2]) and found.torn == b'{"v":2,'


def test_a_v1_log_is_read_through_the_migration_chain_and_keeps_its_version() -> None:
    assert ev.MIGRATIONS and sorted(ev.MIGRATIONS) == list(range(1, ev.SCHEMA_VERSION))
    events = list(read_events(FIXTURES / "v1_session.jsonl"))
    assert events and {e["v"] for e in events} == {1}  # v says how the line was written (and signed)
    assert all(ev.shape_problem(e) == "" for e in events)


def test_read_events_refuses_a_newer_schema(tmp_path: Path) -> None:
    """The intended change: the public reader used to yield events of a newer schema without complaint."""
    path = tmp_path / "newer.jsonl"
    path.write_bytes(good_log()[0] + resealed({"v": ev.SCHEMA_VERSION + 1, "seq": 2, "ts": 1.0, "type": "user_msg", "content": "x"}))
    with pytest.raises(LogVersionError, match=f"v{ev.SCHEMA_VERSION + 1}, newer than this nbagent reads"):
        list(nbagent.read_events(path))


def test_every_reader_sees_the_same_damage_the_same_way(tmp_path: Path) -> None:
    """read_events, follow, the listing, verify and Session.open all go through the reader: one rule, one verdict."""
    path = tmp_path / "gap.jsonl"
    path.write_bytes(b"".join(good_log()[:2] + good_log()[3:]))
    with pytest.raises(LogCorruptError, match="expected seq 3 but found seq 4"):
        list(nbagent.read_events(path))
    with pytest.raises(LogCorruptError, match="expected seq 3 but found seq 4"):
        list(nbagent.follow(path, idle_timeout=0.1))
    with pytest.raises(LogCorruptError, match="expected seq 3 but found seq 4"):
        nbagent.Session.open(path).close()
    assert "damaged log" in history.summarize(path).pending
    assert any("expected seq 3 but found seq 4" in p.message for p in history.verify(path).problems)


@pytest.mark.parametrize(
    ("head", "problem"),
    [
        (b"", ""),
        (good_log()[0], ""),
        (good_log()[0][:15], ""),  # a header cut short: a torn new log
        (b'{"v":2,"seq":1,"ts":1.0,"type":"user_msg","content":"x","crc":"00000000"}\n', "not a checksummed"),
        (b"#!/bin/sh\necho hi\n", "not a checksummed"),
        (b"plain text with no newline", "not an nbagent record"),
        (flip(good_log()[1]).replace(b'"seq":2', b'"seq":1') + good_log()[1], ""),  # damaged first line, valid records after
    ],
)
def test_what_may_be_read_as_a_log(head: bytes, problem: str) -> None:
    found = start_problem(head)
    assert (problem in found) if problem else found == ""
