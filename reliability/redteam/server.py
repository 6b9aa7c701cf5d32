"""Defect 6 of issue 20: the server holding whole logs in memory, through a real Jupyter server.

A long log (a session's first line, then model calls streaming deltas) is served by a real
``jupyter server`` keeping only 100 recent events, so a stream from 0 is a catch-up from the
log's start.  The attacks: ``events?limit=1`` must read about one chunk of the log, not all of
it (counted in bytes the server process read, ``/proc/<pid>/io``); a client that sends its
request and never reads must be disconnected while two others read everything; and the server's
peak memory over three catch-ups must stay below twice the log's size plus 64 MiB: what the
session's tail holds once, whatever the number of clients (each catch-up held the log rendered
whole, many times its size, before).
"""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

from nbagent import Session
from nbagent.record import events as ev
from nbagent.record import line_codec
from nbagent.server.source import CHUNK
from tests.support.server_harness import NbServer, session_api

from . import Context, Finding

NOTEBOOK = "long.ipynb"
SESSION = "long"


def write_long_log(path: Path, events: int, size: int = 300) -> Path:
    """A log of ``events`` events (the first a session's, then unsigned model calls each streaming 49 deltas), quick to write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with Session.open(path, snapshot_every=0):
        pass

    def event(seq: int) -> ev.Event:
        if seq % 50 == 2:
            return ev.make(seq, "model_call", {"model": "m", "attempt": 1})
        return ev.make(seq, "delta", {"index": 0, "text": f"{seq} " + "x" * size})

    with open(path, "ab") as handle:
        handle.writelines(line_codec.encode(event(seq))[0] for seq in range(2, events + 1))
    return path


def _proc(pid: int, name: str, key: str) -> int:
    """A number from ``/proc/<pid>/<name>`` (``status``: kB, ``io``: bytes)."""
    for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def _request(server: NbServer) -> bytes:
    path = session_api(NOTEBOOK, SESSION) + "/stream?since=0"
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: token {server.token}\r\n\r\n".encode()


async def _read_all(server: NbServer, last: int, timeout: float) -> bool:
    """Read the stream from 0 until event ``last`` came (True), or the server closed it or time ran out (False)."""
    stream, writer = await asyncio.open_connection("127.0.0.1", server.port, limit=1 << 22)
    writer.write(_request(server))
    needle, tail = b"\nid: %d\n" % last, b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            chunk = await asyncio.wait_for(stream.read(1 << 20), max(0.1, deadline - time.monotonic()))
            if not chunk:
                return False
            if needle in tail + chunk:
                return True
            tail = chunk[-64:]
        return False
    except asyncio.TimeoutError:
        return False
    finally:
        writer.close()


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closed, within ``timeout`` seconds, a connection this side never read (what it sent is thrown away)."""
    deadline = time.monotonic() + timeout
    try:
        while (left := deadline - time.monotonic()) > 0:  # heartbeats would keep a connection that stays open busy
            sock.settimeout(left)
            if not sock.recv(1 << 20):
                return True
        return False
    except OSError:
        return False
    finally:
        sock.close()


def attacks(ctx: Context) -> list[Finding]:
    """Defect 6's attacks: a bounded ``events?limit=1``, a client that never reads, the catch-up's memory."""
    events = 60_000 if ctx.quick else 300_000
    root = ctx.folder / "root"
    root.mkdir(parents=True, exist_ok=True)
    (root / NOTEBOOK).write_text("{}")
    log = write_long_log(root / ".nbagent" / NOTEBOOK / f"{SESSION}.jsonl", events)
    size = log.stat().st_size
    args = ["--NbagentServer.buffer=100", "--NbagentServer.send_timeout=2", "--NbagentServer.linger=0.5"]
    server = NbServer(root, ctx.folder / "home", args=args).start()
    findings = []
    try:
        assert server.process is not None
        pid = server.process.pid

        before = _proc(pid, "io", "rchar")
        reply = server.get(session_api(NOTEBOOK, SESSION) + "/events?limit=1")
        read = _proc(pid, "io", "rchar") - before
        problems = []
        if reply.status != 200 or [e["seq"] for e in reply.body["events"]] != [1] or not reply.body["more"]:
            problems.append(f"events?limit=1 answered {reply.status}: {str(reply.body)[:200]}")
        elif reply.body["last_seq"] != events:
            problems.append(f"last_seq {reply.body['last_seq']}, not {events}")
        if read > 4 * CHUNK:
            problems.append(f"events?limit=1 made the server read {read / 2**20:.1f} MiB of a {size / 2**20:.1f} MiB log")
        findings.append(Finding(6, f"events?limit=1 on a {size / 2**20:.0f} MiB log", "inert", problems))

        rss_before = _proc(pid, "status", "VmRSS")
        idle = socket.socket()
        idle.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        idle.connect(("127.0.0.1", server.port))
        idle.sendall(_request(server))

        async def readers() -> list[bool]:
            return list(await asyncio.gather(*(_read_all(server, events, 300.0) for _ in range(2))))

        got = asyncio.run(readers())
        dropped = closed_by_server(idle, 20.0)
        peak = _proc(pid, "status", "VmHWM") - rss_before
        problems = []
        if not all(got):
            problems.append(f"the reading clients got every event: {got}")
        if not dropped:
            problems.append("a client that never reads was not disconnected")
        findings.append(Finding(6, "a stream client that never reads, beside two that read everything", "refused", problems))
        # Bounded per session, not per client: the shared pages (8 of about 2 MiB) and one chunk, plus what the session's
        # tail still holds once (its trust check reads the log's bytes once; the presenter keeps the folded messages, about
        # the log's size again). Before the fix each catch-up held the whole log rendered, several times its size, per client.
        bound = 2 * size + (64 << 20)
        problems = [] if peak * 1024 < bound else [f"the catch-up took the server from {rss_before >> 10} MiB to +{peak >> 10} MiB"]
        findings.append(Finding(6, f"three catch-ups from 0 of a {size / 2**20:.0f} MiB log: peak memory", "inert", problems))
    finally:
        server.stop()
    return findings
