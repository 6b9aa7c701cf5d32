"""The server on one big log: peak memory of a catch-up from 0 with 1 and 10 clients (one never reads), and ``events?limit=1``.

A log of ``--events`` events (the scripted mix, written once through ``nbagent.Session`` and kept in
``--cache``) is served by a fresh ``jupyter server`` (tests/support/server_harness.py) per case:

- *1 client*: one SSE client reads the stream from 0 to the log's last event;
- *10 clients*: nine read from 0 to the end, one sends its request and never reads (a small receive buffer);
  whether the server dropped it is checked at the end;
- *events?limit=1*: one ``GET .../events?limit=1``: its time, and the bytes the server process read (``rchar``).

Memory is the server process's peak resident set (``VmHWM`` of ``/proc/<pid>/status``); a case whose resident
set passes ``--cap`` MiB is stopped there (reported as ``> cap``).

Usage: ``python -m benchmarks.server_memory [--events 1000000] [--cap 8192]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbagent
from benchmarks.scripted import event_mix
from reliability.redteam.server import closed_by_server
from tests.support.server_harness import NbServer, session_api

NOTEBOOK = "bench.ipynb"


def status_mib(pid: int, key: str) -> float:
    """A ``/proc/<pid>/status`` size (``VmRSS``, ``VmHWM``) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def bytes_read(pid: int) -> int:
    """Bytes a process has read so far (``rchar`` of ``/proc/<pid>/io``)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


def build_log(cache: Path, events: int) -> tuple[Path, int]:
    """The big log (written once, then reused) under ``cache``'s server root, and its last seq."""
    log = cache / "root" / ".nbagent" / NOTEBOOK / f"big-{events}.jsonl"
    (cache / "root").mkdir(parents=True, exist_ok=True)
    (cache / "root" / NOTEBOOK).write_text("{}")
    if not log.exists():
        partial = log.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        with nbagent.Session.open(partial, fsync="never", snapshot_every=0) as session:
            for kind, payload in event_mix(events - 1):  # session_start is the first event
                session.append(kind, **payload)
        partial.rename(log)
    with open(log, "rb") as handle:
        handle.seek(max(0, os.fstat(handle.fileno()).st_size - (1 << 16)))
        last = json.loads(handle.read().rstrip(b"\n").rsplit(b"\n", 1)[-1])["seq"]
    return log, int(last)


class Watch:
    """Samples a process's resident set; past ``cap`` MiB it sets ``over`` (the case stops)."""

    def __init__(self, pid: int, cap: float) -> None:
        self.pid, self.cap = pid, cap
        self.over = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.wait(0.05):
            if status_mib(self.pid, "VmRSS") > self.cap:
                self.over.set()
                return

    def stop(self) -> float:
        """Stop sampling; the peak resident set (MiB)."""
        self.done.set()
        self.thread.join()
        return status_mib(self.pid, "VmHWM")


def request(path: str, server: NbServer) -> bytes:
    """A GET request for ``path`` with the server's token."""
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: token {server.token}\r\nAccept: text/event-stream\r\n\r\n".encode()


async def reader(server: NbServer, path: str, last: int, watch: Watch) -> str:
    """Read the stream until the event ``last`` arrives: ``done``, ``dropped`` (the server closed it) or ``stopped``."""
    stream, writer = await asyncio.open_connection("127.0.0.1", server.port, limit=1 << 22)
    writer.write(request(path, server))
    await writer.drain()
    needle, tail = b"\nid: %d\n" % last, b""
    try:
        while not watch.over.is_set():
            chunk = await stream.read(1 << 20)
            if not chunk:
                return "dropped"
            if needle in tail + chunk:
                return "done"
            tail = chunk[-64:]
        return "stopped"
    finally:
        writer.close()


def idle_client(server: NbServer, path: str) -> socket.socket:
    """A client that sends its request and never reads (a 4 KiB receive buffer)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(request(path, server))
    return sock


def was_dropped(sock: socket.socket, wait: float = 10.0) -> bool:
    """Whether the server closed the idle client's connection (the campaign's check: reliability/redteam/server.py)."""
    return closed_by_server(sock, wait)


async def catch_up(server: NbServer, path: str, last: int, readers: int, idle: int, cap: float) -> dict[str, object]:
    """Peak memory of ``readers`` clients reading from 0 to ``last``, with ``idle`` clients that never read."""
    assert server.process is not None
    pid = server.process.pid
    before = status_mib(pid, "VmRSS")
    watch = Watch(pid, cap)
    started = time.perf_counter()
    idlers = [idle_client(server, path) for _ in range(idle)]
    outcomes = await asyncio.gather(*(reader(server, path, last, watch) for _ in range(readers)))
    seconds = time.perf_counter() - started
    peak = watch.stop()
    dropped = [await asyncio.get_running_loop().run_in_executor(None, was_dropped, sock) for sock in idlers]
    return {
        "before": before,
        "peak": peak,
        "over": watch.over.is_set(),
        "seconds": seconds,
        "outcomes": outcomes,
        "idle_dropped": dropped,
    }


def limit_one(server: NbServer, api: str) -> tuple[float, int, int]:
    """``events?limit=1``: seconds, bytes the server read meanwhile, HTTP status."""
    assert server.process is not None
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
    read_before = bytes_read(server.process.pid)
    started = time.perf_counter()
    connection.request("GET", f"{api}/events?since=0&limit=1", headers={"Authorization": f"token {server.token}"})
    reply = connection.getresponse()
    reply.read()
    seconds = time.perf_counter() - started
    return seconds, bytes_read(server.process.pid) - read_before, reply.status


def fresh_server(cache: Path, home: Path) -> NbServer:
    """A new server process (its peak memory is this case's alone)."""
    return NbServer(cache / "root", home).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--cap", type=float, default=8192, help="MiB of server memory at which a case is stopped")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "nbagent-bench-server-memory")
    parser.add_argument("--cases", default="limit,1,10")
    args = parser.parse_args(argv)
    os.environ.setdefault("NBAGENT_DATA_DIR", str(args.cache / "data"))
    started = time.perf_counter()
    log, last = build_log(args.cache, args.events)
    print(f"log: {log} ({log.stat().st_size / 2**20:.0f} MiB, {last} events; built or found in {time.perf_counter() - started:.0f} s)")
    api = session_api(NOTEBOOK, log.stem)
    rows = []
    with tempfile.TemporaryDirectory(prefix="nbagent-bench-home-") as home:
        for case in args.cases.split(","):
            server = fresh_server(args.cache, Path(home))
            try:
                if case == "limit":
                    seconds, read, status = limit_one(server, api)
                    rows.append(f"| `events?limit=1` | {status_mib(server.process.pid, 'VmHWM'):.0f} MiB | {seconds:.2f} s | "  # type: ignore[union-attr]
                                f"server read {read / 2**20:.1f} MiB (HTTP {status}) |")  # fmt: skip
                    continue
                clients = int(case)
                found = asyncio.run(
                    catch_up(server, api + "/stream?since=0", last, clients - 1 if clients > 1 else 1, int(clients > 1), args.cap)
                )
                peak = f"> {args.cap:.0f}" if found["over"] else f"{found['peak']:.0f}"
                idle = found["idle_dropped"]
                rows.append(
                    f"| {clients} client{'s' if clients > 1 else ''} from 0{' (1 never reads)' if idle else ''} | {peak} MiB "
                    f"(before: {found['before']:.0f}) | {found['seconds']:.1f} s | readers: {', '.join(sorted(set(found['outcomes'])))}"  # type: ignore[arg-type]
                    f"{'; idle client dropped: ' + ('yes' if all(idle) else 'no') if idle else ''} |"  # type: ignore[arg-type]
                )
            finally:
                server.stop()
            print(rows[-1], flush=True)
    print(
        f"\nServer on one log of {last:,} events ({log.stat().st_size / 2**20:.0f} MiB); {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}\n"
    )
    print("| case | server peak RSS (VmHWM) | time | notes |\n|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
