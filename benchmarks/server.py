"""The session stream of nbagent.server under load: log append to SSE delivery, server CPU and memory.

A real ``jupyter server`` (tests/support/server_harness.py) on 127.0.0.1 and 1, 10 and 100 SSE clients on one
session (asyncio connections in this process), while this process appends events through
``nbagent.Session`` at a steady rate (like a streamed answer: a delta every 50 ms by default).

- *latency*: the event's own ``ts`` (``time.time()`` when it was appended, fsync included) to the moment
  the client has parsed its SSE message; every (client, event) pair counts;
- *server CPU per event per client*: the server process's user+system CPU (``/proc/<pid>/stat``) while the
  events were written, divided by events x clients (idle heartbeats included; none were due);
- *memory*: the server's resident set (``VmRSS``) before any client connected and with the clients
  connected, after the run;
- *log reads per event*: reads of the log file by the shared tail per new event (``api/tails``); one tail
  per client would read it once per client.

Usage: ``python -m benchmarks.server [--events N] [--interval S] [--clients 1,10,100]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from nbagent import Session
from tests.support.server_harness import NbServer, session_api

NOTEBOOK = "bench.ipynb"


def cpu_seconds(pid: int) -> float:
    """User plus system CPU of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """Resident set of a process, MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def client(port: int, path: str, token: str, until: int, arrivals: dict[int, float], opened: asyncio.Event) -> None:
    """One SSE client: note when each event's message arrived."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 24)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: token {token}\r\nAccept: text/event-stream\r\n\r\n".encode())
    await writer.drain()
    try:
        while (line := await reader.readline()) not in (b"\r\n", b""):
            pass
        opened.set()
        while True:
            line = await reader.readline()
            if not line:
                return
            if line.startswith(b'data: {"seq":'):
                now = time.time()
                seq = int(line[len(b'data: {"seq":') :].split(b",", 1)[0])
                arrivals[seq] = now
                if seq >= until:
                    return
    finally:
        writer.close()


async def run_case(server: NbServer, clients: int, events: int, interval: float, session: str) -> dict[str, Any]:
    log = server.root / ".nbagent" / NOTEBOOK / f"{session}.jsonl"
    with Session.open(log) as writer:
        writer.append("user_msg", content="benchmark")
        start_seq = writer.seq
        path = session_api(NOTEBOOK, session) + f"/stream?since={start_seq}"
        assert server.process is not None
        pid = server.process.pid
        rss_before = rss_mib(pid)
        arrivals: list[dict[int, float]] = [{} for _ in range(clients)]
        opened = [asyncio.Event() for _ in range(clients)]
        until = start_seq + events
        tasks = [asyncio.ensure_future(client(server.port, path, server.token, until, arrivals[i], opened[i])) for i in range(clients)]
        await asyncio.wait_for(asyncio.gather(*(o.wait() for o in opened)), 60)
        await asyncio.sleep(0.5)
        cpu_before = cpu_seconds(pid)
        appended: dict[int, float] = {}
        writer.append("model_call", model="bench", attempt=1)
        appended[writer.seq] = writer.state.last_ts
        loop = asyncio.get_running_loop()
        for i in range(events - 1):
            await asyncio.sleep(interval)
            event = await loop.run_in_executor(None, lambda i=i: writer.append("delta", index=0, text=f"word {i} " * 4))
            appended[event["seq"]] = event["ts"]
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
        cpu = cpu_seconds(pid) - cpu_before
        rss_with = rss_mib(pid)
    latencies = [(got[seq] - appended[seq]) * 1000 for got in arrivals for seq in appended if seq in got]
    missing = sum(len(appended) - len([s for s in appended if s in got]) for got in arrivals)
    tails = json.loads(json.dumps(server.get("nbagent/api/tails").body))["tails"]
    tail = next(t for t in tails if t["log"].endswith(f"{session}.jsonl"))
    latencies.sort()
    return {
        "clients": clients,
        "events": events,
        "p50": statistics.median(latencies),
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "cpu_us": cpu / (events * clients) * 1e6,
        "cpu_event_us": cpu / events * 1e6,
        "rss_before": rss_before,
        "rss_with": rss_with,
        "reads_per_event": tail["reads"] / max(1, tail["events_read"]),
        "missing": missing,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between two appended events")
    parser.add_argument("--clients", default="1,10,100")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.clients.split(",")]
    with tempfile.TemporaryDirectory(prefix="nbagent-bench-server-") as folder:
        place = Path(folder)
        os.environ.setdefault("NBAGENT_DATA_DIR", str(place / "data"))
        (place / "root").mkdir()
        (place / "root" / NOTEBOOK).write_text("{}")
        server = NbServer(place / "root", place / "home")
        server.start()
        try:
            rows = [asyncio.run(run_case(server, n, args.events, args.interval, f"bench-{n}")) for n in counts]
        finally:
            server.stop()
    print(f"Server stream: {args.events} events appended every {args.interval * 1000:.0f} ms through nbagent.Session; "
          f"server poll interval 20 ms (NbagentServer.poll_interval); {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}\n")  # fmt: skip
    print(
        "| clients | latency p50 | latency p99 | server CPU per event | per event per client | server RSS before the clients "
        "| RSS with them | log reads per event | missed |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['clients']} | {r['p50']:.1f} ms | {r['p99']:.1f} ms | {r['cpu_event_us']:.0f} µs | {r['cpu_us']:.0f} µs | {r['rss_before']:.1f} MiB | "
            f"{r['rss_with']:.1f} MiB | {r['reads_per_event']:.2f} | {r['missing']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
