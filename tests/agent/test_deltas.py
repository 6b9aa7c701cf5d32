"""The stream-delta writer on a real session: coalescing, block ends, held key runs, the flusher."""

from __future__ import annotations

import time
from pathlib import Path

import nbagent
from nbagent.agent.deltas import DeltaWriter
from nbagent.record import events as ev


def lines(session: nbagent.Session) -> list[tuple[int, str]]:
    return [(e["index"], e.get("text", e.get("partial_json", ""))) for e in session.events() if e["type"] == ev.DELTA]


def test_pieces_within_the_interval_become_one_line_per_block(log_path: Path) -> None:
    with nbagent.Session.open(log_path) as session:
        writer = DeltaWriter(session, interval=0.5)  # long enough that no pause between these calls reaches it
        for piece in ("Hello ", "there, ", "friend-"):
            writer({"index": 0, "text": piece})
        writer({"index": 1, "partial_json": '{"a": '})  # block 0 has ended: its run is no longer held back
        # The flusher writes them an interval after the first piece: a line per block.
        assert wait_for_lines(session, 2) == [(0, "Hello there, friend-"), (1, '{"a": ')]
        writer({"index": 1, "partial_json": "1}"})
        writer.close(complete=True)  # some of the reply was streamed: the rest follows it
        assert lines(session) == [(0, "Hello there, friend-"), (1, '{"a": '), (1, "1}")]


def test_a_reply_that_ends_within_the_interval_is_left_to_its_assistant_msg(log_path: Path) -> None:
    with nbagent.Session.open(log_path) as session:
        writer = DeltaWriter(session, interval=3600)
        for piece in ("Hello ", "there, ", "friend."):
            writer({"index": 0, "text": piece})
        writer({"index": 1, "partial_json": '{"a": 1}'})
        writer.close(complete=True)  # nothing of it streamed: the assistant_msg the loop writes next says it all
        assert lines(session) == []


def test_a_reply_cut_within_the_interval_keeps_what_came(log_path: Path) -> None:
    with nbagent.Session.open(log_path) as session:
        writer = DeltaWriter(session, interval=3600)
        writer({"index": 0, "text": "Half an "})
        writer({"index": 0, "text": "answer"})
        writer.close(complete=False)  # no assistant_msg will say it: the log keeps the text, less a held run
        assert lines(session) == [(0, "Half an ")]


def test_a_broken_stream_drops_an_unfinished_key_alphabet_run(log_path: Path) -> None:
    with nbagent.Session.open(log_path) as session:
        writer = DeltaWriter(session, interval=0)
        writer({"index": 0, "text": "my key is sk-ant-"})
        writer({"index": 0, "text": "api03-abc"})
        writer.close(complete=False)  # the stream broke off mid-run: the run may be a secret's head
        assert lines(session) == [(0, "my key is ")]


def test_the_flusher_writes_a_stalled_stream_after_the_interval(log_path: Path) -> None:
    with nbagent.Session.open(log_path) as session:
        writer = DeltaWriter(session, interval=0.05)
        writer({"index": 0, "text": "stalled here "})
        deadline = time.monotonic() + 10
        while not lines(session) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert lines(session) == [(0, "stalled here ")]
        writer.close(complete=True)
        assert lines(session) == [(0, "stalled here ")]  # nothing twice


def wait_for_lines(session: nbagent.Session, count: int) -> list[tuple[int, str]]:
    deadline = time.monotonic() + 10
    while len(lines(session)) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return lines(session)


def test_a_stall_after_a_stream_that_ended_is_flushed_whichever_deadline_comes_first(tmp_path: Path) -> None:
    """The flusher sleeps until the deadline of a stream that ended; a later stall is flushed by its own deadline all the same."""
    for first, then in ((3600, 0.05), (0.05, 0.3)):  # woken for an earlier deadline; wakes by itself for a later one
        with nbagent.Session.open(tmp_path / f"{first}.jsonl") as session:
            ended = DeltaWriter(session, interval=first)
            ended({"index": 0, "text": "ended "})
            ended.close(complete=True)  # within its interval: no line (its assistant_msg would say it)
            stalled = DeltaWriter(session, interval=then)
            stalled({"index": 1, "text": "stalled "})
            assert wait_for_lines(session, 1) == [(1, "stalled ")]
            stalled.close(complete=True)


def test_a_closed_writer_is_not_flushed_later(log_path: Path) -> None:
    with nbagent.Session.open(log_path) as session:
        writer = DeltaWriter(session, interval=0.05)
        writer({"index": 0, "text": "done "})
        writer.close(complete=False)  # cut off: what came is written now
        assert lines(session) == [(0, "done ")]
        time.sleep(0.2)  # past the deadline the flusher had for it
        assert lines(session) == [(0, "done ")]
