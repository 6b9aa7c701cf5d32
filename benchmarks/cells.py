"""The kernel's side of "Insert as cells": ``python -m benchmarks.cells [--runs N]``.

A real ipykernel (jupyter_client) with nbagent loaded and a session logged beside its notebook whose turn made 1 or 50
python calls (each with a line of output; every fifth with a 100 kB plot). A client plays the browser extension: it
opens the ``nbagent.cells`` comm and times, from sending an ``insert_request`` to receiving the kernel's ``insert``,
side by side with the ``hello`` round trip on the same comm (the floor: the messages alone), median of ``--runs``.
The browser's own part (the cells appearing in the notebook) is timed in Chromium by ``benchmarks/browser.py``.
"""

from __future__ import annotations

import argparse
import base64
import os
import queue
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from nbagent.agent.session import Session
from nbagent.record import events as ev

PLOT = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(100_000)).decode()  # the size of a small plot, not a valid image


def write_session(folder: Path, calls: int) -> str:
    """A session of one turn with ``calls`` python calls, written by this user; its name."""
    folder.mkdir(parents=True, exist_ok=True)
    name = f"bench{calls}"
    with Session.open(folder / f"{name}.jsonl", fsync="never") as session:
        session.append(ev.USER_MSG, content="make the tables", meta={"cell_id": "agent-cell"})
        uses = [
            {"type": "tool_use", "id": f"toolu_{i:04d}", "name": "python", "input": {"code": f"x{i} = {i}\nprint(x{i})"}}
            for i in range(calls)
        ]
        session.append(ev.ASSISTANT_MSG, content=uses, stop_reason="tool_use")
        for i in range(calls):
            content: list[dict[str, Any]] = [{"type": "text", "text": f"{i}"}]
            if i % 5 == 4:
                content.append({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PLOT}})
            session.append(ev.TOOL_RESULT, tool_use_id=f"toolu_{i:04d}", content=content)
        session.append(ev.ASSISTANT_MSG, content=[{"type": "text", "text": "Done."}], stop_reason="end_turn")
    return name


class Client:
    """The browser's end of the comm, over jupyter_client."""

    def __init__(self, kc: Any) -> None:
        self.kc = kc
        self.comm_id = uuid.uuid4().hex

    def send(self, msg_type: str, data: dict[str, Any]) -> None:
        content = {"comm_id": self.comm_id, "data": data}
        if msg_type == "comm_open":
            content["target_name"] = "nbagent.cells"
        self.kc.shell_channel.send(self.kc.session.msg(msg_type, content))

    def receive(self, kind: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_iopub_msg(timeout=1)
            except queue.Empty:
                continue
            if (
                msg["msg_type"] == "comm_msg"
                and msg["content"].get("comm_id") == self.comm_id
                and msg["content"]["data"].get("type") == kind
            ):
                return dict(msg["content"]["data"])
        raise TimeoutError(f"no {kind} from the kernel")


def measure(counts: tuple[int, ...] = (1, 50), runs: int = 20) -> dict[str, Any]:
    """Median milliseconds of the hello round trip and of each insert, and the insert's size in characters."""
    from jupyter_client.manager import KernelManager

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        names = {n: write_session(root / ".nbagent" / "work.ipynb", n) for n in counts}
        km = KernelManager(kernel_name="python3")
        km.start_kernel(cwd=tmp, env={**os.environ, "JPY_SESSION_NAME": str(root / "work.ipynb")})
        kc = km.blocking_client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=60)
            kc.execute_interactive("%load_ext nbagent", timeout=60)
            client = Client(kc)
            client.send("comm_open", {"v": 1, "type": "hello", "extension": "bench"})
            client.receive("hello")
            hello: list[float] = []
            inserts: dict[int, list[float]] = {n: [] for n in counts}
            size: dict[int, int] = {}
            for _ in range(runs):
                start = time.perf_counter()
                client.send("comm_msg", {"v": 1, "type": "hello", "extension": "bench"})
                client.receive("hello")
                hello.append((time.perf_counter() - start) * 1000)
                for n in counts:
                    start = time.perf_counter()
                    client.send("comm_msg", {"v": 1, "type": "insert_request", "id": uuid.uuid4().hex, "session": names[n], "turn": 1})
                    insert = client.receive("insert")
                    inserts[n].append((time.perf_counter() - start) * 1000)
                    assert len(insert["cells"]) == n
                    size[n] = len(str(insert))
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    return {"hello": statistics.median(hello), "insert": {n: statistics.median(v) for n, v in inserts.items()}, "chars": size}


def report(found: dict[str, Any]) -> str:
    """The figures as a few lines, each insert also as a ratio of the hello round trip."""
    floor = found["hello"]
    lines = [f"hello round trip (the comm's floor): {floor:.2f} ms"]
    for n, ms in found["insert"].items():
        lines.append(
            f"insert_request -> insert, {n} python call(s): {ms:.2f} ms ({ms / floor:.1f}x the floor; {found['chars'][n]:,} characters)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run the measurement and print it."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cells", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="round trips per figure (median)")
    args = parser.parse_args(argv)
    print(report(measure(runs=args.runs)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
