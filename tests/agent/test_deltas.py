"""The stream-delta writer on a real session: coalescing, block ends, held key runs, and both flushers (flusher.py)."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import nbagent
from nbagent.agent import flusher as flushers
from nbagent.agent.deltas import DeltaWriter
from nbagent.record import events as ev

LINUX = pytest.mark.skipif(not flushers.timer_available(), reason="the timerfd flusher is Linux's")


@pytest.fixture(params=["timerfd", "condition"])
def flusher(request: pytest.FixtureRequest) -> Iterator[flushers.Flusher]:
    """A flusher of its own for the test: the kernel timer's (Linux) and the condition's (everywhere else)."""
    if request.param == "timerfd" and not flushers.timer_available():
        pytest.skip("the timerfd flusher is Linux's")
    made: flushers.Flusher = flushers.TimerFlusher() if request.param == "timerfd" else flushers.ConditionFlusher()
    yield made
    made.stop()


def lines(session: nbagent.Session) -> list[tuple[int, str]]:
    return [(e["index"], e.get("text", e.get("partial_json", ""))) for e in session.events() if e["type"] == ev.DELTA]


def test_pieces_within_the_interval_become_one_line_per_block(log_path: Path, flusher: flushers.Flusher) -> None:
    with nbagent.Session.open(log_path) as session:
        writer = DeltaWriter(session, interval=0.5, flusher=flusher)  # long enough that no pause between these calls reaches it
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


def test_the_flusher_writes_a_stalled_stream_after_the_interval(log_path: Path, flusher: flushers.Flusher) -> None:
    with nbagent.Session.open(log_path) as session:
        writer = DeltaWriter(session, interval=0.05, flusher=flusher)
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


def test_a_stall_after_a_stream_that_ended_is_flushed_whichever_deadline_comes_first(tmp_path: Path, flusher: flushers.Flusher) -> None:
    """The flusher sleeps until the deadline of a stream that ended; a later stall is flushed by its own deadline all the same."""
    for first, then in ((3600, 0.05), (0.05, 0.3)):  # woken for an earlier deadline; wakes by itself for a later one
        with nbagent.Session.open(tmp_path / f"{first}.jsonl") as session:
            ended = DeltaWriter(session, interval=first, flusher=flusher)
            ended({"index": 0, "text": "ended "})
            ended.close(complete=True)  # within its interval: no line (its assistant_msg would say it)
            stalled = DeltaWriter(session, interval=then, flusher=flusher)
            stalled({"index": 1, "text": "stalled "})
            assert wait_for_lines(session, 1) == [(1, "stalled ")]
            stalled.close(complete=True)


def test_a_closed_writer_is_not_flushed_later(log_path: Path, flusher: flushers.Flusher) -> None:
    with nbagent.Session.open(log_path) as session:
        writer = DeltaWriter(session, interval=0.05, flusher=flusher)
        writer({"index": 0, "text": "done "})
        writer.close(complete=False)  # cut off: what came is written now
        assert lines(session) == [(0, "done ")]
        time.sleep(0.2)  # past the deadline the flusher had for it
        assert lines(session) == [(0, "done ")]


@LINUX
def test_streams_that_end_in_time_never_wake_the_timer_flusher(tmp_path: Path) -> None:
    """Each stream arms the kernel timer and disarms it as it ends: the thread sleeps through them (flusher.py)."""
    assert isinstance(flushers.make(), flushers.TimerFlusher)
    timer = flushers.TimerFlusher()
    try:
        with nbagent.Session.open(tmp_path / "s.jsonl") as session:
            for number in range(50):  # each ends well within its interval, even on a loaded machine
                writer = DeltaWriter(session, interval=1.0, flusher=timer)
                writer({"index": 0, "text": f"reply {number} "})
                writer.close(complete=True)
            time.sleep(1.2)  # past every deadline they had
            assert timer.wakes == 0
            stalled = DeltaWriter(session, interval=0.05, flusher=timer)
            stalled({"index": 0, "text": "stalled "})
            assert wait_for_lines(session, 1) == [(0, "stalled ")]
            assert timer.wakes == 1
            stalled.close(complete=True)
    finally:
        timer.stop()


def test_a_stopped_flusher_starts_again_for_the_next_stall(log_path: Path, flusher: flushers.Flusher) -> None:
    with nbagent.Session.open(log_path) as session:
        first = DeltaWriter(session, interval=0.05, flusher=flusher)
        first({"index": 0, "text": "first "})
        flusher.stop()  # as before a fork: the writer waiting is forgotten, and writes at its next delta or end
        first.close(complete=False)
        assert lines(session) == [(0, "first ")]
        again = DeltaWriter(session, interval=0.05, flusher=flusher)
        again({"index": 1, "text": "again "})
        assert wait_for_lines(session, 2) == [(0, "first "), (1, "again ")]
        again.close(complete=True)


def child_exit_code(pid: int, timeout: float = 30) -> int | None:
    """The forked child's exit code; None (and the child killed) if it has not exited within ``timeout`` (a deadlock)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_flushes_its_own_stalls_and_leaves_the_parents_timer_alone(tmp_path: Path, flusher: flushers.Flusher) -> None:
    """The child gets a flusher thread of its own; the timerfd it inherited is the parent's too, and it is never set."""
    with nbagent.Session.open(tmp_path / "parent.jsonl") as session:
        parent = DeltaWriter(session, interval=0.5, flusher=flusher)
        parent({"index": 0, "text": "parent "})  # the flusher's thread is running, its timer armed
        pid = os.fork()
        if pid == 0:  # the child: a stream of its own stalls, then ends; it must not disturb the parent's timer
            code = 1
            try:
                with nbagent.Session.open(tmp_path / "child.jsonl") as child_session:
                    child = DeltaWriter(child_session, interval=0.05, flusher=flusher)
                    child({"index": 0, "text": "child "})
                    code = 0 if wait_for_lines(child_session, 1) == [(0, "child ")] else 1
                    child.close(complete=True)
                    flusher.cancel(parent)  # the parent's writer, copied: the child's flusher never had it
            finally:
                sys.stdout.flush()
                os._exit(code)
        assert child_exit_code(pid) == 0, "the child's stalled stream was not flushed"
        assert wait_for_lines(session, 1) == [(0, "parent ")]
        parent.close(complete=True)


def test_without_a_timerfd_the_condition_flusher_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """A C library without timerfd (or a Python without ctypes) still gets a flusher: the condition one."""

    def no_timer() -> None:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(flushers, "_TimerFd", no_timer)
    assert isinstance(flushers.make(), flushers.ConditionFlusher)
    assert not flushers.timer_available("darwin") and not flushers.timer_available("win32")
