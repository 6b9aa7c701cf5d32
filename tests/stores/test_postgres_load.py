"""Load on the PostgreSQL store: 200 sessions open at once from 8 processes on loopback, bounded in count and time."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from nbagent import stores
from tests.support.store_fixtures import database

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
PROCESSES, SESSIONS, EVENTS = 8, 25, 20

WORKER = """
import sys
from pathlib import Path
from nbagent.record import events as ev
from nbagent.agent.session import Session
url, folder, worker, sessions, events = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
opened = [Session.open(folder / f"w{worker}-s{i}.jsonl", store=url, fsync="turn") for i in range(sessions)]
print("OPEN", flush=True)
sys.stdin.readline()  # every process has its sessions open: go
for n in range(events):
    for session in opened:
        session.append(ev.USER_MSG if n % 2 else ev.DELTA, **({"content": f"request {n}"} if n % 2 else {"index": 0, "text": "x"}))
for session in opened:
    session.close()
print("DONE", flush=True)
"""


def test_200_sessions_from_8_processes_at_once(tmp_path: Path) -> None:
    url = database(f"load-{tmp_path.name}")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, url, str(tmp_path), str(w), str(SESSIONS), str(EVENTS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in range(PROCESSES)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "OPEN"
        started = time.monotonic()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            out, _ = proc.communicate(timeout=300)
            assert proc.returncode == 0 and "DONE" in out
        elapsed = time.monotonic() - started
    finally:
        for proc in procs:
            proc.kill()
    store = stores.get_store(url)
    listed = store.list()
    assert len(listed) == PROCESSES * SESSIONS
    assert {item.events for item in listed} == {EVENTS + 1}
    for item in listed[:: len(listed) // 10]:  # a sample read back whole: gapless and in order
        assert [e["seq"] for e in store.read(tmp_path / f"{item.name}.jsonl")] == list(range(1, EVENTS + 2))
    assert elapsed < 240  # a bound against a hang, not a speed target (benchmarks/postgres.py measures)


def test_the_postgres_benchmark_runs_on_tiny_sizes() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.postgres", "--quick"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| postgres | turn |" in done.stdout and "NOTIFY to a follower" in done.stdout and "| 10,000 |" in done.stdout
