"""What a followed session costs the server, a long log against a short one: ``python -m benchmarks.server_follow [--base REV]``.

For each tree (``--base``, unpacked with ``git archive``, and the working tree) and each log (``--small``
and ``--events`` events of the scripted mix, built once in ``--cache``), a fresh ``jupyter server``
importing nbagent from that tree:

- *follow*: ``--clients`` clients open the stream at the log's end (``since`` = its last seq) and wait
  for its first message, which the server sends once its shared tail has read the log (the tail reads
  it from its first event: the rendering needs tool names and notes from earlier ones); then one more
  event is appended and every client must receive it;
- *events near the end*: ``events?since=<last - 100>&limit=100``;
- *events in the middle*: ``events?since=<half>&limit=100`` (its labels cover the lines up to the page).

Memory is the server's peak resident set (``VmHWM``) minus its resident set before the first request
(``VmRSS``); each case runs in its own server.  The ratio row divides the long log's growth by the
short one's: 1.0 means the cost does not follow the log's length.  Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nbagent
from benchmarks.postgres_real import unpack
from benchmarks.scripted import event_mix
from benchmarks.server_memory import NOTEBOOK, build_log, bytes_read, request, status_mib
from tests.support.server_harness import NbServer, session_api


async def _follower(server: NbServer, path: str, needle: bytes, opened: asyncio.Event, counter: list[int], clients: int) -> bool:
    """One client at the end of the stream: True once the event ``needle`` names came."""
    stream, writer = await asyncio.open_connection("127.0.0.1", server.port, limit=1 << 22)
    writer.write(request(path, server))
    await writer.drain()
    seen, got_open = b"", False
    try:
        while True:
            chunk = await asyncio.wait_for(stream.read(1 << 16), 1800)
            if not chunk:
                return False
            seen = (seen + chunk)[-4096:]
            if not got_open and b"event: session" in seen:
                got_open = True
                counter[0] += 1
                if counter[0] == clients:
                    opened.set()
            if needle in seen:
                return True
    finally:
        writer.close()


async def follow(server: NbServer, log: Path, last: int, clients: int) -> dict[str, Any]:
    """``clients`` followers from the log's end; the seconds until all had their first message, and whether all got one new event."""
    path = session_api(NOTEBOOK, log.stem) + f"/stream?since={last}"
    opened, counter = asyncio.Event(), [0]
    started = time.perf_counter()
    tasks = [asyncio.ensure_future(_follower(server, path, b"id: %d\n" % (last + 1), opened, counter, clients)) for _ in range(clients)]
    await asyncio.wait_for(opened.wait(), 1800)
    ready = time.perf_counter() - started
    with nbagent.Session.open(log, fsync="never", snapshot_every=0) as session:  # one more event, as its kernel would write
        session.append("note", kind="info", text="one more")
    got = await asyncio.wait_for(asyncio.gather(*tasks), 300)
    return {"seconds": ready, "delivered": sum(got)}


def events(server: NbServer, log: Path, since: int) -> dict[str, Any]:
    """One ``events?since=...&limit=100``: seconds, bytes the server read, HTTP status."""
    assert server.process is not None
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=1800)
    before = bytes_read(server.process.pid)
    started = time.perf_counter()
    connection.request(
        "GET", f"{session_api(NOTEBOOK, log.stem)}/events?since={since}&limit=100", headers={"Authorization": f"token {server.token}"}
    )
    reply = connection.getresponse()
    reply.read()
    return {"seconds": time.perf_counter() - started, "read": bytes_read(server.process.pid) - before, "status": reply.status}


def measure(cache: Path, tree: Path, log: Path, last: int, case: str, clients: int) -> dict[str, Any]:
    """One case in a fresh server importing nbagent from ``tree``; the growth of its resident set."""
    with tempfile.TemporaryDirectory(prefix="nbagent-bench-home-") as home:
        server = NbServer(cache / "root", Path(home), env={"PYTHONPATH": str(tree)}).start()
        try:
            assert server.process is not None
            time.sleep(1.0)
            before = status_mib(server.process.pid, "VmRSS")
            if case == "follow":
                found = asyncio.run(follow(server, log, last, clients))
            else:
                found = events(server, log, last - 100 if case == "end" else last // 2)
            found["growth"] = status_mib(server.process.pid, "VmHWM") - before
            return found
        finally:
            server.stop()


def copy_log(log: Path, cache: Path) -> Path:
    """A copy of a built log (the follow case appends to it)."""
    target = log.with_name(log.stem + "-work.jsonl")
    with open(log, "rb") as src, open(target, "wb") as dst:
        while chunk := src.read(1 << 24):
            dst.write(chunk)
    return target


def main(argv: list[str] | None = None) -> int:
    """Both trees, both logs, every case; prints Markdown tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--base", default="HEAD", help="the commit to compare the working tree with")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--cases", default="follow,end,middle")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "nbagent-bench-server-memory")
    args = parser.parse_args(argv)
    os.environ.setdefault("NBAGENT_DATA_DIR", str(args.cache / "data"))
    logs = {size: build_log(args.cache, size) for size in (args.small, args.events)}
    _ = event_mix  # the logs hold the scripted mix (benchmarks/scripted.py)
    results: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        repo = Path(__file__).resolve().parent.parent
        trees = {f"before ({args.base})": unpack(args.base, Path(scratch) / "base"), "after (working tree)": repo}
        for _round in range(args.rounds):
            for case in args.cases.split(","):
                for size, (log, last) in logs.items():
                    for name, tree in trees.items():
                        target = copy_log(log, args.cache) if case == "follow" else log
                        found = measure(args.cache, tree, target, last, case, args.clients)
                        results.setdefault((case, name, size), []).append(found)
                        print(case, name, size, found, flush=True, file=sys.stderr)
    print(f"\nServer memory of a followed session: {args.events:,} events against {args.small:,}; {args.clients} clients; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}\n")  # fmt: skip
    print("| case | tree | growth, short log (MiB) | growth, long log (MiB) | long / short | time, short | time, long | notes |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for case in args.cases.split(","):
        for name in trees:
            short, long = (results[(case, name, size)] for size in (args.small, args.events))
            grow = [statistics.median(r["growth"] for r in rows) for rows in (short, long)]
            secs = [statistics.median(r["seconds"] for r in rows) for rows in (short, long)]
            if case == "follow":
                notes = f"delivered the next event to {long[-1]['delivered']}/{args.clients} clients"
            else:
                notes = f"server read {long[-1]['read'] / 2**20:.1f} MiB for the long log's page (HTTP {long[-1]['status']})"
            print(
                f"| {case} | {name} | {grow[0]:.1f} | {grow[1]:.1f} | {grow[1] / max(grow[0], 0.1):.2f}x | {secs[0]:.2f} s | {secs[1]:.2f} s | {notes} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
