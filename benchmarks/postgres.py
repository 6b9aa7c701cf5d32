"""The PostgreSQL store beside the file store, in one run: ``python -m benchmarks.postgres [--quick]`` prints Markdown tables.

A throwaway cluster (tests/support/pg_harness.py, fsync on, reached over its Unix socket) is started for
the run.  Measured: per-turn cost and appends per second for each store and fsync policy, against
the same lines inserted with plain psycopg, one transaction each (the floor); NOTIFY-to-subscriber
latency; listing 1,000 and 100,000 sessions from the index; resume time at 10k and 100k events.
``--real`` measures what a user's turn costs instead (``nbagent.run`` against the fake API, store work
against plain psycopg's floor) and opening at 10k and 100k events against a bare connection, one
commit against another: :mod:`benchmarks.postgres_real`.  Nothing is asserted: these are measurements.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from nbagent import stores
from nbagent.agent.session import Session
from nbagent.record import events as ev
from nbagent.record import line_codec

TURN = 13  # events in one turn of add_turn: request, model call, 5 deltas, tool call, start, result, call, delta, answer


def add_turn(session: Session, n: int) -> None:
    """One realistic turn: a request, a streamed reply calling a tool, its result, and a streamed answer."""
    session.append(ev.USER_MSG, content=f"request {n}: summarize the monthly totals of data.csv")
    session.append(ev.MODEL_CALL, model="m", attempt=1)
    for i in range(5):
        session.append(ev.DELTA, index=0, text=f"piece {i} of the reply " * 3)
    call = f"toolu_{n}"
    session.append(
        ev.ASSISTANT_MSG,
        content=[
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": call, "name": "read_file", "input": {"path": "data.csv"}},
        ],
        stop_reason="tool_use",
        usage={"input_tokens": 900, "output_tokens": 40},
    )
    session.append(ev.TOOL_STARTED, tool_use_id=call, name="read_file", effect="read", attempt=1)
    session.append(ev.TOOL_RESULT, tool_use_id=call, content="month,total\n" + "2026-01,100\n" * 20)
    session.append(ev.MODEL_CALL, model="m", attempt=1)
    session.append(ev.DELTA, index=0, text="The totals rise each month.")
    session.append(ev.ASSISTANT_MSG, content=[{"type": "text", "text": "The totals rise each month."}], stop_reason="end_turn", usage={})


def append_rates(url: str, folder: Path, turns: int) -> list[tuple[str, str, float, float]]:
    """(store, policy, ms per turn, events per second) for each store and fsync policy."""
    found = []
    for store_name, store in (("file", stores.FILES), ("postgres", stores.get_store(url))):
        for policy in ("always", "turn", "never"):
            path = folder / f"{store_name}-{policy}" / "bench.jsonl"
            with Session.open(path, fsync=policy, snapshot_every=0, store=store) as session:  # type: ignore[arg-type]
                add_turn(session, 0)  # warm
                started = time.perf_counter()
                for n in range(1, turns + 1):
                    add_turn(session, n)
                elapsed = time.perf_counter() - started
            found.append((store_name, policy, elapsed / turns * 1000, turns * TURN / elapsed))
    return found


def floor_rate(url: str, folder: Path) -> float:
    """Events per second inserting the same lines with plain psycopg, one committed transaction each (synchronous_commit on)."""
    import psycopg

    data = (folder / "file-turn" / "bench.jsonl").read_bytes().splitlines()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS floor (session bigint, seq integer, line text, PRIMARY KEY (session, seq))")
        started = time.perf_counter()
        for seq, line in enumerate(data, 1):
            conn.execute("INSERT INTO floor VALUES (1, %s, %s)", (seq, line.decode("ascii")))
        elapsed = time.perf_counter() - started
    return len(data) / elapsed


def notify_latency(url: str, folder: Path, count: int) -> tuple[float, float]:
    """p50 and p99 (ms) from the writer's append (its commit included) to the event reaching a follower in another connection.

    Timed from the call, not from its return: the follower can see the NOTIFY before the writer's thread runs again.
    """
    store = stores.get_store(url)
    path = folder / "notify" / "live.jsonl"
    with Session.open(path, fsync="turn", store=store) as session:
        session.append(ev.USER_MSG, content="start")
    arrived: dict[int, float] = {}
    sent: dict[int, float] = {}
    ready = threading.Event()

    def follow() -> None:
        for event in store.follow(path, since=2, idle_timeout=3):
            arrived[event["seq"]] = time.perf_counter()
            ready.set()

    thread = threading.Thread(target=follow)
    thread.start()
    with Session.open(path, fsync="turn", store=store) as session:
        session.append(ev.NOTE, kind="bench", text="go")
        ready.wait(10)
        for _ in range(count):
            sent[session.seq + 1] = time.perf_counter()
            session.append(ev.USER_MSG, content="ping")
            time.sleep(0.002)
    thread.join()
    delays = sorted((arrived[s] - sent[s]) * 1000 for s in sent if s in arrived)
    return statistics.median(delays), delays[min(len(delays) - 1, int(len(delays) * 0.99))]


def listing(url: str, sizes: tuple[int, ...]) -> list[tuple[int, float, float, float, float]]:
    """(sessions, ms to list: all, one notebook's matching a text, one folder's (1/50), the folder by filtering all) from the index."""
    import psycopg

    found = []
    for size in sizes:
        db = url  # a fresh database per size: only the sizes' rows are in it
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("DELETE FROM nbagent_sessions WHERE notebook LIKE '/team/%%'")
            conn.execute(
                "INSERT INTO nbagent_sessions (notebook, name, session_id, title, requests, created, last_ts, last_seq, turns) "
                "SELECT '/team/p' || (i %% 50) || '/nb' || (i %% 500) || '.ipynb', 's' || i, md5(i::text), 'analysis ' || i, 'request ' || i, 1e9 + i, 1e9 + i, 10, 2 "
                "FROM generate_series(1, %s) AS i",
                (size,),
            )
            conn.execute("ANALYZE nbagent_sessions")
        store = stores.get_store(url)
        started = time.perf_counter()
        everything = store.list()
        whole = time.perf_counter() - started
        started = time.perf_counter()
        some = store.list(notebook="/team/p7/nb7.ipynb", text="analysis 50")
        filtered = time.perf_counter() - started
        started = time.perf_counter()
        folder = store.list(under="/team/p7")
        in_folder = time.perf_counter() - started
        started = time.perf_counter()
        by_python = [s for s in store.list() if s.notebook.startswith("/team/p7/")]  # how a folder was listed before
        in_python = time.perf_counter() - started
        assert len(everything) >= size and some and len(folder) == len(by_python) == size // 50
        found.append((size, whole * 1000, filtered * 1000, in_folder * 1000, in_python * 1000))
    return found


def _opening(where: Path, store: Any, runs: int = 3) -> float:
    """Seconds to open a session and know its frontier (the median of ``runs``; garbage from building it collected first)."""
    gc.collect()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        with Session.open(where, store=store, snapshot_every=0) as session:
            _ = session.state.frontier
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def resume(url: str, folder: Path, sizes: tuple[int, ...]) -> list[tuple[int, float, float, float]]:
    """(events, ms to open and fold: file, postgres with a snapshot, postgres replaying every row)."""
    import psycopg

    found = []
    store = stores.get_store(url)
    for size in sizes:
        path = folder / f"resume-{size}" / "big.jsonl"
        with Session.open(path, fsync="never", snapshot_every=0) as session:
            n = 0
            while session.seq < size:
                add_turn(session, n)
                n += 1
        data = path.read_bytes()
        target = folder / f"resume-{size}-db" / "big.jsonl"
        log: Any = store.open_log(target)
        with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cursor:
            start = 0
            with cursor.copy("COPY nbagent_events (session, seq, start_at, ts, type, line) FROM STDIN") as copy:
                for line in data.splitlines():
                    event = line_codec.decode(line)
                    copy.write_row((log._id, event["seq"], start, event["ts"], event["type"], line.decode("ascii")))
                    start += len(line) + 1
            conn.execute("UPDATE nbagent_sessions SET last_seq = %s, size = %s WHERE id = %s", (event["seq"], start, log._id))
        log.close()
        timings = []
        for where, opened_store in ((path, stores.FILES), (target, store)):
            with Session.open(where, store=opened_store) as session:  # closing writes the snapshot
                _ = session.state
            timings.append(_opening(where, opened_store))
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM nbagent_snapshots WHERE session = %s", (log._id,))
        timings.append(_opening(target, store))
        found.append((size, timings[0] * 1000, timings[1] * 1000, timings[2] * 1000))
    return found


def main(argv: list[str] | None = None) -> None:
    """Run everything and print the tables."""
    from tests.support.pg_harness import Cluster

    parser = argparse.ArgumentParser(prog="python -m benchmarks.postgres")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--real", action="store_true", help="the real path and opening, before and after (benchmarks.postgres_real)")
    args = parser.parse_args(argv)
    if args.real:
        from .postgres_real import main as real

        real(["--quick"] if args.quick else [])
        return
    turns = 20 if args.quick else 150
    cluster = Cluster(fsync=True)
    try:
        url = cluster.new_database(socket=True)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            rates = append_rates(url, folder, turns)
            floor = floor_rate(url, folder)
            p50, p99 = notify_latency(url, folder, 50 if args.quick else 400)
            listed = listing(url, (1_000, 10_000) if args.quick else (1_000, 100_000))
            resumed = resume(url, folder, (1_000,) if args.quick else (10_000, 100_000))
    finally:
        cluster.destroy()
    print(f"PostgreSQL {cluster.bindir.parent.name} over its Unix socket, fsync on; {turns} turns of {TURN} events each.\n")
    print("| store | fsync | ms per turn | events/s | vs plain psycopg floor |")
    print("|---|---|---:|---:|---:|")
    for store_name, policy, per_turn, rate in rates:
        print(f"| {store_name} | {policy} | {per_turn:.2f} | {rate:,.0f} | {rate / floor:.2f}x |")
    print(f"| plain psycopg INSERT, one transaction each (floor) | on | {TURN * 1000 / floor:.2f} | {floor:,.0f} | 1.00x |")
    print(f"\nNOTIFY to a follower in another connection: p50 {p50:.2f} ms, p99 {p99:.2f} ms.\n")
    print(
        "| sessions in the index | list all (ms) | one notebook, text filter (ms) | one folder, 1/50 (ms) | the folder by filtering all (ms) | ratio |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for size, whole, filtered, folder, by_python in listed:
        print(f"| {size:,} | {whole:.0f} | {filtered:.1f} | {folder:.1f} | {by_python:.0f} | {folder / by_python:.2f}x |")
    print("\n| events | resume: file, snapshot (ms) | postgres, snapshot (ms) | postgres, every row (ms) |")
    print("|---:|---:|---:|---:|")
    for size, file_ms, pg_ms, rows_ms in resumed:
        print(f"| {size:,} | {file_ms:.0f} | {pg_ms:.0f} | {rows_ms:.0f} |")


if __name__ == "__main__":
    main()
