"""A real ``jupyter server`` with the nbagent extension on 127.0.0.1 (restartable on the same port), an SSE client, and a log writer.

The writer is a separate process appending through ``nbagent.Session`` (``python -m tests.support.server_harness write ...``),
as a kernel does; it can stop in the middle of a turn and leave half a line, for a SIGKILL to find.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.browser.harness import free_port, private_jupyter_env

STARTUP_TIMEOUT = 90.0


@dataclass
class Reply:
    """An HTTP answer: status, headers, body (parsed JSON when it is JSON)."""

    status: int
    headers: dict[str, str]
    body: Any


@dataclass
class NbServer:
    """``jupyter server`` for one root folder, on a port that stays the same across restarts."""

    root: Path
    home: Path
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    def command(self) -> list[str]:
        """The command line."""
        args = [sys.executable, "-m", "jupyter", "server", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}"]
        args += ["--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}", *self.args]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.append("--allow-root")
        return args

    def start(self, timeout: float = STARTUP_TIMEOUT) -> NbServer:
        """Start (on the same port as before, if it ran before) and wait until /api/status answers."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        env = private_jupyter_env(self.home, None, PYTHONUNBUFFERED="1", **self.env)
        self.log_path = self.home / f"server-{self.port}.log"
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command(), cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"jupyter server exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                if self.get("api/status").status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"jupyter server did not start within {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 20 s)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait(10)

    def log_tail(self, lines: int = 60) -> str:
        """The end of the server's log."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def url(self, path: str, **query: str) -> str:
        """A URL on the server, with the token."""
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}?{urllib.parse.urlencode({**query, 'token': self.token})}"

    def get(self, path: str, *, headers: Mapping[str, str] | None = None, token: str | None = "") -> Reply:
        """GET ``path`` (a path and query, no host); ``token`` '' uses the server's, None sends none."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"token {token or self.token}"
        try:
            conn.request("GET", "/" + path.lstrip("/"), headers=sent)
            response = conn.getresponse()
            raw = response.read()
            kind = response.getheader("Content-Type", "")
            body: Any = json.loads(raw) if "json" in kind and raw else raw.decode("utf-8", "replace")
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, body)
        finally:
            conn.close()

    def stream(self, notebook: str, session: str, *, since: int | None = None, last_event_id: str | None = None) -> SSE:
        """Open a session's event stream."""
        query = f"?since={since}" if since is not None else ""
        headers = {"Authorization": f"token {self.token}", "Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        return SSE(self.port, f"{session_api(notebook, session)}/stream{query}", headers)


def session_api(notebook: str, session: str) -> str:
    """The API path of one session (the notebook path as one URL-encoded segment)."""
    return f"/nbagent/api/sessions/{urllib.parse.quote(notebook, safe='')}/{urllib.parse.quote(session, safe='')}"


@dataclass
class Message:
    """One Server-Sent Events message."""

    event: str
    data: str
    id: str | None = None

    def json(self) -> Any:
        """The data, parsed."""
        return json.loads(self.data)


class SSE:
    """A minimal Server-Sent Events client over http.client (comments counted as heartbeats)."""

    def __init__(self, port: int, path: str, headers: Mapping[str, str], timeout: float = 30.0) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.conn.request("GET", path, headers=dict(headers))
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self.heartbeats = 0
        self.retry: int | None = None

    def body(self) -> Any:
        """The body of a refused request (JSON)."""
        return json.loads(self.response.read())

    def messages(self, *, heartbeats: bool = False) -> Iterator[Message]:
        """The messages as they come, and heartbeats too if asked (raises TimeoutError/OSError when the connection stalls or ends)."""
        event, data, ident = "message", [], None
        while True:
            raw = self.response.fp.readline()
            if not raw:
                raise ConnectionError("the stream ended")
            line = raw.decode("utf-8").rstrip("\n")
            if not line:
                if data:
                    yield Message(event, "\n".join(data), ident)
                event, data, ident = "message", [], None
            elif line.startswith(":"):
                self.heartbeats += 1
                if heartbeats:
                    yield Message("heartbeat", line[1:].strip())
            else:
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "data":
                    data.append(value)
                elif name == "event":
                    event = value
                elif name == "id":
                    ident = value
                elif name == "retry":
                    self.retry = int(value)

    def events(self, count: int) -> list[Message]:
        """The next ``count`` event messages (named notices are skipped)."""
        found = []
        for message in self.messages():
            if message.event == "message":
                found.append(message)
                if len(found) == count:
                    return found
        return found

    def records(self, until: int) -> list[dict[str, Any]]:
        """The event records up to seq ``until``, checking each message's id is its seq."""
        found = []
        for message in self.messages():
            if message.event != "message":
                continue
            record = message.json()
            assert message.id == str(record["seq"])
            found.append(record)
            if record["seq"] >= until:
                return found
        return found

    def close(self) -> None:
        """Hang up."""
        self.conn.close()


# The writer --------------------------------------------------------------------------------------------------
def write_turns(
    log: Path, events: int, interval: float, *, torn_after: int | None = None, ready: Path | None = None, size: int = 0
) -> None:
    """Append ``events`` events through nbagent.Session, turn after turn (``size``: characters of padding per delta);
    ``torn_after``: then write half a line and wait to be killed."""
    from nbagent import Session

    with Session.open(log) as session:
        written, turn = session.seq, 0
        while session.seq - written < events:
            turn += 1
            step = (session.seq - written) % 6
            if step == 0:
                session.append("user_msg", content=f"request {turn}: say something")
            elif step == 1:
                session.append("model_call", model="fake", attempt=1)
            elif step in (2, 3, 4):
                session.append("delta", index=0, text=f"part {session.seq} " + "x" * size)
            else:
                content = [{"type": "text", "text": f"answer at seq {session.seq}"}]
                session.append("assistant_msg", message_id=f"m{session.seq}", model="fake", content=content, stop_reason="end_turn",
                               usage={"input_tokens": 3, "output_tokens": 4})  # fmt: skip
            if ready is not None and session.seq - written == 1:
                ready.write_text("1")
            time.sleep(interval)
        if torn_after is not None:
            with open(log, "ab") as handle:  # half a line, as a write cut by a kill leaves it
                handle.write(b'{"v":3,"seq":%d,"ts":1.0,"type":"delta","index":0,"text":"cut sh' % (session.seq + 1))
                handle.flush()
            if ready is not None:
                ready.write_text("torn")
            time.sleep(3600)


def start_writer(log: Path, events: int, interval: float, **options: Any) -> subprocess.Popen[bytes]:
    """The writer in its own process."""
    args = [sys.executable, "-m", "tests.support.server_harness", "write", str(log), str(events), str(interval)]
    if options.get("torn"):
        args.append("--torn")
    if options.get("size"):
        args += ["--size", str(options["size"])]
    if options.get("ready"):
        args += ["--ready", str(options["ready"])]
    return subprocess.Popen(args, cwd=Path(__file__).resolve().parents[2])


def main(argv: list[str] | None = None) -> None:
    """``write LOG EVENTS INTERVAL [--torn] [--ready FILE]``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["write"])
    parser.add_argument("log", type=Path)
    parser.add_argument("events", type=int)
    parser.add_argument("interval", type=float)
    parser.add_argument("--torn", action="store_true")
    parser.add_argument("--ready", type=Path)
    parser.add_argument("--size", type=int, default=0)
    args = parser.parse_args(argv)
    write_turns(args.log, args.events, args.interval, torn_after=0 if args.torn else None, ready=args.ready, size=args.size)


if __name__ == "__main__":
    main()
