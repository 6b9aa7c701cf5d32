"""The event stream of a real ``jupyter server``: matches the log, resumes with Last-Event-ID while another process writes,
heartbeats, one shared tail for many clients, a slow client dropped without holding up the others, a SIGKILLed writer."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nbagent.record.log_reader import read_events
from tests.support.server_harness import NbServer, start_writer, write_turns

pytestmark = [pytest.mark.slow]
pytest.importorskip("jupyter_server", reason="jupyter_server is not installed (pip install 'nbagent[server]')")
NOTEBOOK = "nb.ipynb"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NbServer]:
    place = tmp_path_factory.mktemp("server-stream")
    (place / "root").mkdir()
    (place / "root" / NOTEBOOK).write_text("{}")
    args = ["--NbagentServer.heartbeat=0.3", "--NbagentServer.client_queue=8", "--NbagentServer.linger=0.5", "--NbagentServer.buffer=50"]
    nb = NbServer(place / "root", place / "home", args=args)
    nb.start()
    yield nb
    nb.stop()


def log_of(server: NbServer, session: str) -> Path:
    return server.root / ".nbagent" / NOTEBOOK / f"{session}.jsonl"


def wait_for(path: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def writer(server: NbServer, session: str, events: int, interval: float, **options: Any) -> subprocess.Popen[bytes]:
    ready = server.root.parent / f"{session}.ready"
    process = start_writer(log_of(server, session), events, interval, ready=ready, **options)
    wait_for(ready)
    return process


def test_the_stream_matches_the_log_while_another_process_writes(server: NbServer) -> None:
    process = writer(server, "live", 60, 0.01)
    stream = server.stream(NOTEBOOK, "live", since=0)
    try:
        assert stream.status == 200 and stream.response.getheader("Content-Type", "").startswith("text/event-stream")
        records = stream.records(61)
    finally:
        stream.close()
        process.wait(30)
    assert stream.retry == 1000
    assert [r["seq"] for r in records] == list(range(1, 62))
    assert [r["event"] for r in records] == list(read_events(log_of(server, "live")))
    answer = next(r for r in records if r["type"] == "assistant_msg")
    assert "answer at seq" in answer["html"] and answer["stream"] == "replace"
    assert [r["text"] for r in records if r["type"] == "delta"][:1] == ["part 3 "]


@pytest.mark.parametrize("how", ["Last-Event-ID", "since"])
def test_a_client_that_reconnects_at_n_gets_exactly_the_events_after_n(server: NbServer, how: str) -> None:
    session = f"resume-{how.lower()}"
    process = writer(server, session, 240, 0.01)  # about 3 s of writing, while the client comes and goes
    try:
        first = server.stream(NOTEBOOK, session, since=0)
        before = first.records(30)
        first.close()
        time.sleep(0.3)  # the writer goes on meanwhile
        if how == "Last-Event-ID":  # as a browser's EventSource reconnects: same URL, the header wins over ?since
            second = server.stream(NOTEBOOK, session, since=0, last_event_id="30")
        else:
            second = server.stream(NOTEBOOK, session, since=30)
        after = second.records(241)
        second.close()
    finally:
        process.wait(60)
    assert [r["seq"] for r in before] == list(range(1, 31))
    assert [r["seq"] for r in after] == list(range(31, 242))  # no gap, no duplicate
    assert [r["event"] for r in before + after] == list(read_events(log_of(server, session)))


def test_an_idle_stream_sends_heartbeats_and_does_not_end(server: NbServer) -> None:
    write_turns(log_of(server, "idle"), 3, 0)
    stream = server.stream(NOTEBOOK, "idle", since=0)
    try:
        assert [r["seq"] for r in stream.records(4)] == [1, 2, 3, 4]
        start, kinds = time.monotonic(), []
        for message in stream.messages(heartbeats=True):  # nothing but heartbeats comes, and the stream stays open
            kinds.append(message.event)
            if time.monotonic() - start > 1.5:
                break
        assert set(kinds) == {"heartbeat"} and len(kinds) >= 3
    finally:
        stream.close()


def test_many_clients_share_one_tail_that_reads_each_event_once(server: NbServer) -> None:
    write_turns(log_of(server, "shared"), 1, 0)
    streams = [server.stream(NOTEBOOK, "shared", since=0) for _ in range(20)]
    results: list[list[int]] = [[] for _ in streams]

    def read(i: int) -> None:
        results[i] = [r["seq"] for r in streams[i].records(42)]

    threads = [threading.Thread(target=read, args=(i,)) for i in range(len(streams))]
    for thread in threads:
        thread.start()
    process = start_writer(log_of(server, "shared"), 40, 0.01)
    tails = server.get("nbagent/api/tails").body["tails"]
    process.wait(30)
    for thread in threads:
        thread.join(30)
    for stream in streams:
        stream.close()
    assert all(seqs == list(range(1, 43)) for seqs in results), [len(s) for s in results]
    shared = next(t for t in tails if t["log"].endswith("shared.jsonl"))
    assert shared["clients"] == 20
    final = next(t for t in server.get("nbagent/api/tails").body["tails"] if t["log"].endswith("shared.jsonl"))
    assert final["events_read"] == 42  # each event read once, for all twenty clients
    assert final["reads"] <= 42 + 5  # a read per change of the file (not per client)


def test_a_slow_client_is_dropped_without_holding_up_the_others(server: NbServer) -> None:
    write_turns(log_of(server, "busy"), 1, 0)
    slow = server.stream(NOTEBOOK, "busy", since=0)  # never reads while the session writes
    fast = server.stream(NOTEBOOK, "busy", since=0)
    got: list[int] = []
    reader = threading.Thread(target=lambda: got.extend(r["seq"] for r in fast.records(121)))
    reader.start()
    process = start_writer(log_of(server, "busy"), 120, 0.005, size=200_000)  # 24 MB: more than the sockets hold
    process.wait(60)
    reader.join(60)
    fast.close()
    assert got == list(range(1, 122))  # the fast client got everything, on time
    seen: list[int] = []
    with pytest.raises((ConnectionError, OSError)):
        for message in slow.messages():  # what was in the pipe, then the end: the server hung up on it
            if message.event == "message":
                seen.append(int(message.id or 0))
    slow.close()
    assert seen == list(range(1, len(seen) + 1)) and len(seen) < 121
    again = server.stream(NOTEBOOK, "busy", last_event_id=str(seen[-1]) if seen else "0")  # it resumes where it was
    rest = [r["seq"] for r in again.records(121)]
    again.close()
    assert rest == list(range(len(seen) + 1, 122))


def test_a_writer_killed_mid_turn_leaves_a_consistent_stream(server: NbServer) -> None:
    log = log_of(server, "killed")
    ready = server.root.parent / "killed.ready"
    process = start_writer(log, 9, 0.01, torn=True, ready=ready)  # ends inside a streamed answer, then half a line
    deadline = time.monotonic() + 30
    while not (ready.exists() and ready.read_text() == "torn"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    stream = server.stream(NOTEBOOK, "killed", since=0)
    try:
        notice = next(stream.messages())
        assert notice.event == "session" and notice.json()["torn"] is True and notice.json()["last_seq"] == 10
        records = stream.records(10)
        assert [r["seq"] for r in records] == list(range(1, 11)) and records[-1]["type"] == "delta"  # the unfinished turn
        events = server.get(f"nbagent/api/sessions/{NOTEBOOK}/killed/events").body
        assert events["torn"] is True and events["status"] == "unfinished: model reply"
        resumed = start_writer(log, 6, 0.01)  # the session opened again: the torn tail is cut off, writing goes on
        resumed.wait(30)
        more = stream.records(16)
    finally:
        stream.close()
    assert [r["seq"] for r in more] == list(range(11, 17))
    assert [r["event"] for r in records + more] == list(read_events(log))


def test_the_benchmark_runs_on_tiny_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import server as bench

    assert bench.main(["--events", "5", "--interval", "0.01", "--clients", "1,3"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 1 ") or line.startswith("| 3 ")]
    assert len(rows) == 2 and all(row.endswith(" | 0 |") for row in rows)  # no client missed an event
