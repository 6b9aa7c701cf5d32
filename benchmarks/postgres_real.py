"""The PostgreSQL store on the real path, one nbagent tree against another: ``python -m benchmarks.postgres_real [--base REV]``.

What a user's turn costs: N turns through ``nbagent.run`` (defaults: snapshots on, fsync "turn") on a
database session, minus the same turns on the file store with fsync "never" (the engine and SDK alone),
is the store's work per turn.  Two floors: the same rows inserted with plain psycopg in a tight loop, one
committed transaction each, ``synchronous_commit`` on (the issue's); and the same INSERTs made at the
same points of the same loop by a minimal store (:mod:`.postgres_floor_store`), minus the file store.
The three stores run in one child, in blocks of 5 turns in a rotating order; besides whole turns, the wall
time inside each store's calls (append, sync, write_snapshot, read) is summed, which leaves the engine's
and the SDK's time (and their noise) out.  ``--no-fsync`` runs the cluster with fsync off: the
statements' and round trips' cost without the disk's.  Resume: opening a database session of 10,000 and
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
import json, os, sys, tempfile, time
from pathlib import Path
sys.path[:0] = [sys.argv[1], sys.argv[5]]  # nbagent from the tree measured, the floor store from this repo
import anthropic, psycopg
import nbagent
from nbagent import stores
from benchmarks.postgres_floor_store import FloorStore
url, base_url, turns = sys.argv[2], sys.argv[3], int(sys.argv[4])
load = os.getloadavg()[0]

@nbagent.tool(effect="read")
def lookup(month: str) -> str:
    "Look up a month's total."
    return f"{month}: " + "1234.5, " * 40

client = anthropic.Anthropic(base_url=base_url, api_key="bench-key", max_retries=0)
folder = Path(tempfile.mkdtemp())

def ask(session, n):
    nbagent.run(session, f"request {n}: what was the total of month {n}?", tools=[lookup], client=client, model="claude-test")

counting, depth = [False], [0]

def timed(call, inside, name):  # a store call's wall time, counted once when calls nest (a snapshot reads the log)
    def wrapper(*args, **kwargs):
        began = time.perf_counter()
        depth[0] += 1
        try:
            return call(*args, **kwargs)
        finally:
            depth[0] -= 1
            if counting[0] and depth[0] == 0:
                inside[name] += time.perf_counter() - began
    return wrapper

def interleaved(stores_by_name):  # turns in blocks of BLOCK, the stores in a rotating order: each block beside the others in time
    opened = {name: nbagent.Session.open(folder / name / "s.jsonl", store=store, fsync=fsync) for name, (store, fsync) in stores_by_name.items()}
    blocks = {name: [] for name in opened}
    cpu = {name: 0.0 for name in opened}
    inside = {name: 0.0 for name in opened}  # wall time inside the store's calls, the engine's noise left out
    for name, session in opened.items():
        log = session._log
        for method in ("append", "sync", "write_snapshot", "read"):
            setattr(log, method, timed(getattr(log, method), inside, name))
    try:
        for n in range(3):  # warm: imports, prepared statements
            for session in opened.values():
                ask(session, -1 - n)
        names = list(opened)
        counting[0] = True
        for b in range(turns // BLOCK):
            for name in names[b % len(names):] + names[: b % len(names)]:
                began, began_cpu = time.perf_counter(), time.process_time()
                for n in range(b * BLOCK, (b + 1) * BLOCK):
                    ask(opened[name], n)
                blocks[name].append((time.perf_counter() - began) / BLOCK * 1000)
                cpu[name] += time.process_time() - began_cpu
    finally:
        for session in opened.values():
            session.close()
    per_turn = lambda spent: {name: value / (len(blocks[name]) * BLOCK) * 1000 for name, value in spent.items()}
    return blocks, per_turn(cpu), per_turn(inside)

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

BLOCK = 5
blocks, cpu, inside = interleaved({"files": (stores.FILES, "never"), "floor": (FloorStore(url, Path(tempfile.mkdtemp())), "turn"), "db": (stores.get_store(url), "turn")})
lines = (folder / "files" / "s.jsonl").read_bytes().decode("ascii").splitlines()
rows_per_turn = len(lines) / (len(blocks["files"]) * BLOCK + 3)
floor_ms = floor(lines) / len(lines) * rows_per_turn * 1000
mean = lambda name: sum(blocks[name]) / len(blocks[name])
work = sorted(d - f for d, f in zip(blocks["db"], blocks["files"]))
loop_floor = sorted(d - f for d, f in zip(blocks["floor"], blocks["files"]))
print(json.dumps({"files_ms": mean("files"), "db_ms": mean("db"), "floor_store_ms": mean("floor"), "floor_ms": floor_ms,
                  "work_ms": work[len(work) // 2], "loop_floor_ms": loop_floor[len(loop_floor) // 2],
                  "cpu_ms": cpu, "inside_ms": inside, "rows_per_turn": rows_per_turn, "load": (load + os.getloadavg()[0]) / 2}))
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
                results[name]["turn"].append(_child(_TURNS, str(tree), url, base_url, str(turns), str(REPO)))
                print(name, json.dumps(results[name]["turn"][-1]), file=sys.stderr, flush=True)  # progress
        with tempfile.TemporaryDirectory() as scratch:
            for size in sizes:  # none with --turns-only
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
    out = [
        f"{turns} turns through `nbagent.run` per store each round (a request, a tool call, its result, the answer), in blocks "
        "of 5 rotating over the three stores in one child; ms per turn, medians over rounds.\n"
    ]
    out.append(
        "| tree | files, fsync never | database, defaults | floor store | store work | in-loop floor | tight-loop floor "
        "| work / in-loop floor | work / tight-loop floor | client CPU: files / database / floor store | load avg |"
    )
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    med = statistics.median
    for name, found in results.items():
        rows = found["turn"]
        files, db, floor_store = (med(r[key] for r in rows) for key in ("files_ms", "db_ms", "floor_store_ms"))
        work, in_loop, floor = (med(r[key] for r in rows) for key in ("work_ms", "loop_floor_ms", "floor_ms"))
        ratio_loop = med(r["work_ms"] / r["loop_floor_ms"] for r in rows)
        ratio = med(r["work_ms"] / r["floor_ms"] for r in rows)
        cpu = " / ".join(f"{med(r['cpu_ms'][key] for r in rows):.1f}" for key in ("files", "db", "floor"))
        loads = [r.get("load", 0.0) for r in rows]
        out.append(
            f"| {name} | {files:.1f} | {db:.1f} | {floor_store:.1f} | {work:.1f} | {in_loop:.1f} | {floor:.1f} | {ratio_loop:.2f}x "
            f"| {ratio:.2f}x | {cpu} | {min(loads):.1f}–{max(loads):.1f} |"
        )
    out.append(
        "\n(store work: database minus files, the median over a round's blocks of each block's difference from the files block "
        "beside it; in-loop floor: the same for the floor store; tight-loop floor: the session's rows inserted in a loop; "
        "ratios: medians of per-round ratios.)"
    )
    out.append(
        "\nInside the store's calls (append, sync, write_snapshot, read; wall time, so a round trip's scheduling counts, the "
        "engine's and the SDK's time does not):\n"
    )
    out.append(
        "| tree | files, fsync never | database | floor store | store work | in-loop floor | work / in-loop floor "
        "| work / tight-loop floor | per round: work / in-loop floor |"
    )
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, found in results.items():
        rows = found["turn"]
        inside = {key: med(r["inside_ms"][key] for r in rows) for key in ("files", "db", "floor")}
        works = [
            (r["inside_ms"]["db"] - r["inside_ms"]["files"], r["inside_ms"]["floor"] - r["inside_ms"]["files"], r["floor_ms"]) for r in rows
        ]
        rounds = ", ".join(f"{w / f:.2f}x" for w, f, _ in works)
        out.append(
            f"| {name} | {inside['files']:.2f} | {inside['db']:.2f} | {inside['floor']:.2f} | {med(w for w, _, _ in works):.2f} "
            f"| {med(f for _, f, _ in works):.2f} | {med(w / f for w, f, _ in works):.2f}x | {med(w / t for w, _, t in works):.2f}x | {rounds} |"
        )
    for name, found in results.items():
        per_round = ", ".join(f"{r['work_ms'] / r['loop_floor_ms']:.2f}x" for r in found["turn"])
        out.append(f"\n{name}: work / in-loop floor per round: {per_round}.")
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
    parser.add_argument("--turns-only", action="store_true", help="measure turns only, not resumes")
    parser.add_argument("--no-fsync", action="store_true", help="the cluster with fsync off: the statements' cost, not the disk's")
    parser.add_argument("--turns", type=int, default=150, help="turns per store per round")
    args = parser.parse_args(argv)
    turns, rounds, sizes = (20, 1, (1_000, 3_000)) if args.quick else (args.turns, args.rounds, (10_000, 100_000))
    sizes = () if args.turns_only else sizes
    cluster = Cluster(fsync=not args.no_fsync)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            trees = {f"before ({args.base})": unpack(args.base, Path(scratch) / "base"), "after (working tree)": REPO}
            results = compare(cluster.new_database(socket=True), trees, turns, rounds, sizes)
    finally:
        cluster.destroy()
    print(f"PostgreSQL {cluster.bindir.parent.name} over its Unix socket, fsync {'off' if args.no_fsync else 'on'}.\n")
    print(report(results, turns))


if __name__ == "__main__":
    main()
