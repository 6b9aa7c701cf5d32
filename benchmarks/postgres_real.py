"""The PostgreSQL store on the real path, one nbagent tree against another: ``python -m benchmarks.postgres_real [--base REV]``.

What a user's turn costs: N turns through ``nbagent.run`` (defaults: snapshots on, fsync "turn") on a
database session, minus the same turns on the file store with fsync "never" (the engine and SDK alone),
is the store's work per turn.  Its floor: the same rows inserted with plain psycopg, one committed
transaction each, ``synchronous_commit`` on.  Resume: opening a database session of 10,000 and
100,000 events (in this process, and in a fresh one) against a bare connection and one query.
Each measurement runs in a child process importing nbagent from a tree: ``--base`` (a commit,
unpacked with ``git archive``) and the working tree, in turns, against one throwaway cluster
(fsync on, its Unix socket) and one fake Messages API in a process of its own.  Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from .cases import REPO

_FAKE = r"""
import sys
sys.path.insert(0, sys.argv[1])
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use

def respond(request):
    last = request.body["messages"][-1]
    if isinstance(last["content"], list) and any(b.get("type") == "tool_result" for b in last["content"]):
        return text("The totals rise each month; March is the highest. " * 3)
    return tool_use("lookup", {"month": "2026-03"}, text="Let me look up the month.")

with FakeAnthropic() as fake:
    fake.responder = respond
    print(fake.base_url, flush=True)
    sys.stdin.read()
"""

_TURNS = r"""
import json, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import anthropic, psycopg
import nbagent
from nbagent import stores
url, base_url, turns = sys.argv[2], sys.argv[3], int(sys.argv[4])

@nbagent.tool(effect="read")
def lookup(month: str) -> str:
    "Look up a month's total."
    return f"{month}: " + "1234.5, " * 40

client = anthropic.Anthropic(base_url=base_url, api_key="bench-key", max_retries=0)
folder = Path(tempfile.mkdtemp())

def run(store, fsync, name):
    path = folder / name / "s.jsonl"
    with nbagent.Session.open(path, store=store, fsync=fsync) as session:
        for n in range(3):  # warm: imports, prepared statements
            nbagent.run(session, f"warm {n}", tools=[lookup], client=client, model="claude-test")
        began = time.perf_counter()
        for n in range(turns):
            nbagent.run(session, f"request {n}: what was the total of month {n}?", tools=[lookup], client=client, model="claude-test")
        elapsed = time.perf_counter() - began
    return elapsed / turns * 1000, path

def floor(lines):
    with psycopg.connect(url, autocommit=True) as conn:
        table = "floor_" + folder.name.lower().replace("-", "_")
        conn.execute(f"CREATE TABLE {table} (session bigint, seq integer, line text, PRIMARY KEY (session, seq))")
        began = time.perf_counter()
        for seq, line in enumerate(lines, 1):
            conn.execute(f"INSERT INTO {table} VALUES (1, %s, %s)", (seq, line))
        elapsed = time.perf_counter() - began
        conn.execute(f"DROP TABLE {table}")
    return elapsed

files_ms, path = run(stores.FILES, "never", "files")
db_ms, _ = run(stores.get_store(url), "turn", "db")
lines = path.read_bytes().decode("ascii").splitlines()
rows_per_turn = len(lines) / (turns + 3)
floor_ms = floor(lines) / len(lines) * rows_per_turn * 1000
print(json.dumps({"files_ms": files_ms, "db_ms": db_ms, "floor_ms": floor_ms, "rows_per_turn": rows_per_turn}))
"""

_OPEN = r"""
import json, sys, time
began_process = time.perf_counter()
sys.path.insert(0, sys.argv[1])
import psycopg
import nbagent
from nbagent import stores
url, target, kind = sys.argv[2], sys.argv[3], sys.argv[4]
time.sleep(0.05)
if kind == "bare":
    began = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT last_seq FROM nbagent_sessions ORDER BY id LIMIT 1").fetchone()
    fresh = time.perf_counter() - began
    times = []
    for _ in range(7):
        began = time.perf_counter()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SELECT last_seq FROM nbagent_sessions ORDER BY id LIMIT 1").fetchone()
        times.append(time.perf_counter() - began)
else:
    store = stores.get_store(url)
    began = time.perf_counter()
    with nbagent.Session.open(target, store=store) as session:
        _ = session.state.frontier
    fresh = time.perf_counter() - began
    times = []
    for _ in range(7):
        began = time.perf_counter()
        with nbagent.Session.open(target, store=store) as session:
            _ = session.state.frontier
        times.append(time.perf_counter() - began)
print(json.dumps({"fresh_ms": fresh * 1000, "warm_ms": sorted(times)[len(times) // 2] * 1000}))
"""


def _child(code: str, *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=tempfile.gettempdir())
    if done.returncode:
        raise RuntimeError(f"child failed: {done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def unpack(rev: str, into: Path) -> Path:
    """The nbagent package and tests/support of commit ``rev``, unpacked read-only with ``git archive`` (no worktree is made)."""
    into.mkdir(parents=True)
    archive = into / "tree.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "-C", str(REPO), "archive", rev, "nbagent", "tests/support", "tests/__init__.py"], stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()
    return into


def build_session(url: str, tree: Path, folder: Path, events: int) -> Path:
    """A database session of ``events`` events (appended through nbagent, then closed so its snapshot is stored)."""
    code = r"""
import sys
sys.path[:0] = [sys.argv[1], sys.argv[5]]  # nbagent from the tree measured (its snapshot format), add_turn from this repo
from benchmarks.postgres import add_turn
from nbagent import stores
from nbagent.agent.session import Session
url, target, size = sys.argv[2], sys.argv[3], int(sys.argv[4])
with Session.open(target, fsync="never", snapshot_every=0, store=stores.get_store(url)) as session:
    n = 0
    while session.seq < size:
        add_turn(session, n)
        n += 1
with Session.open(target, store=stores.get_store(url)):
    pass
"""
    target = folder / f"resume-{events}" / "big.jsonl"
    done = subprocess.run([sys.executable, "-c", code, str(tree), url, str(target), str(events), str(REPO)], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"building a session failed: {done.stderr[-3000:]}")
    return target


def compare(url: str, trees: dict[str, Path], turns: int, rounds: int, sizes: tuple[int, ...]) -> dict[str, Any]:
    """Every measurement for each tree, in turns; medians over ``rounds``."""
    fake = subprocess.Popen([sys.executable, "-c", _FAKE, str(REPO)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert fake.stdout is not None and fake.stdin is not None
    base_url = fake.stdout.readline().strip()
    results: dict[str, Any] = {name: {"turn": [], "open": {}} for name in trees}
    try:
        order = list(trees.items())
        for index in range(rounds):
            for name, tree in order if index % 2 == 0 else order[::-1]:
                results[name]["turn"].append(_child(_TURNS, str(tree), url, base_url, str(turns)))
        with tempfile.TemporaryDirectory() as scratch:
            for size in sizes:
                for name, tree in trees.items():
                    target = build_session(url, tree, Path(scratch) / name, size)
                    runs = [_child(_OPEN, str(tree), url, str(target), "session") for _ in range(rounds)]
                    bare = [_child(_OPEN, str(tree), url, str(target), "bare") for _ in range(rounds)]
                    results[name]["open"][size] = {key: statistics.median(r[key] for r in runs) for key in ("fresh_ms", "warm_ms")} | {
                        "bare_" + key: statistics.median(r[key] for r in bare) for key in ("fresh_ms", "warm_ms")
                    }
    finally:
        fake.terminate()  # its server's open connections would keep it waiting
        fake.wait(30)
    return results


def report(results: dict[str, Any], turns: int) -> str:
    """The Markdown tables."""
    out = [f"{turns} turns through `nbagent.run` each round (a request, a tool call, its result, the answer); medians.\n"]
    out.append(
        "| tree | file store, fsync never (ms/turn) | database, defaults (ms/turn) | store work (ms/turn) | floor (ms/turn) | store / floor |"
    )
    out.append("|---|---:|---:|---:|---:|---:|")
    for name, found in results.items():
        rows = found["turn"]
        files = statistics.median(r["files_ms"] for r in rows)
        db = statistics.median(r["db_ms"] for r in rows)
        work = statistics.median(r["db_ms"] - r["files_ms"] for r in rows)
        floor = statistics.median(r["floor_ms"] for r in rows)
        ratio = statistics.median((r["db_ms"] - r["files_ms"]) / r["floor_ms"] for r in rows)
        out.append(f"| {name} | {files:.1f} | {db:.1f} | {work:.1f} | {floor:.1f} | {ratio:.2f}x |")
    out.append(
        "\n| tree | events | open, in process (ms) | bare connection + 1 query (ms) | ratio | open, fresh process (ms) | bare, fresh (ms) | ratio |"
    )
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, found in results.items():
        for size, o in found["open"].items():
            out.append(
                f"| {name} | {size:,} | {o['warm_ms']:.1f} | {o['bare_warm_ms']:.1f} | {o['warm_ms'] / o['bare_warm_ms']:.2f}x "
                f"| {o['fresh_ms']:.1f} | {o['bare_fresh_ms']:.1f} | {o['fresh_ms'] / o['bare_fresh_ms']:.2f}x |"
            )
    for name, found in results.items():
        sizes = sorted(found["open"])
        if len(sizes) > 1:
            first, last = found["open"][sizes[0]], found["open"][sizes[-1]]
            out.append(
                f"\n{name}: opening at {sizes[-1]:,} events / at {sizes[0]:,}: {last['warm_ms'] / first['warm_ms']:.2f}x in process, "
                f"{last['fresh_ms'] / first['fresh_ms']:.2f}x fresh."
            )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    """Run both trees and print the tables."""
    from tests.support.pg_harness import Cluster

    parser = argparse.ArgumentParser(prog="python -m benchmarks.postgres_real", description=__doc__)
    parser.add_argument("--base", default="HEAD", help="the commit to compare the working tree with (default HEAD)")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per tree (medians are reported)")
    args = parser.parse_args(argv)
    turns, rounds, sizes = (20, 1, (1_000, 3_000)) if args.quick else (150, args.rounds, (10_000, 100_000))
    cluster = Cluster(fsync=True)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            trees = {f"before ({args.base})": unpack(args.base, Path(scratch) / "base"), "after (working tree)": REPO}
            results = compare(cluster.new_database(socket=True), trees, turns, rounds, sizes)
    finally:
        cluster.destroy()
    print(f"PostgreSQL {cluster.bindir.parent.name} over its Unix socket, fsync on.\n")
    print(report(results, turns))


if __name__ == "__main__":
    main()
