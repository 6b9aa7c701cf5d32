"""The one harness for tests and reliability scenarios that drive a real ipykernel through jupyter_client."""

from __future__ import annotations

import os
import queue
import signal
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from jupyter_client.manager import KernelManager

TIMEOUT = 60
Message = dict[str, Any]


def kernel_env(base_url: str | None = None, **extra: str) -> dict[str, str]:
    """This process's environment (so a kernel keeps the tests' data folder), with the API at ``base_url`` and ``extra``."""
    env = dict(os.environ)
    if base_url is not None:
        env.update(ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY="test-key")
    env.update(extra)
    return env


def send(kc: Any, code: str, cell_id: str | None = None, *, allow_stdin: bool = False) -> str:
    """Send a cell the way JupyterLab does (with a cellId when given); returns its msg_id."""
    content = {
        "code": textwrap.dedent(code),
        "silent": False,
        "store_history": True,
        "user_expressions": {},
        "allow_stdin": allow_stdin,
        "stop_on_error": True,
    }
    msg = kc.session.msg("execute_request", content)
    if cell_id:
        msg["metadata"]["cellId"] = cell_id
    kc.shell_channel.send(msg)
    return msg["header"]["msg_id"]


def collect(
    kc: Any, msg_id: str, *, on_message: Callable[[Message], None] | None = None, timeout: float = TIMEOUT
) -> tuple[list[Message], Message]:
    """A sent cell's iopub messages (and any comm messages meanwhile) until it is idle, and its execute_reply.

    ``on_message(msg)`` sees each collected message as it arrives, so a test can act (say, click) mid-cell.
    """
    messages: list[Message] = []
    deadline = time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline, f"cell did not finish; got {[m['msg_type'] for m in messages]}"
        try:
            msg = kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        if msg["parent_header"].get("msg_id") != msg_id and msg["msg_type"] not in ("comm_open", "comm_msg"):
            continue
        messages.append(msg)
        if on_message is not None:
            on_message(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle" and msg["parent_header"].get("msg_id") == msg_id:
            break
    while True:
        reply = kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        if reply["parent_header"].get("msg_id") == msg_id:
            return messages, reply


def run_cell(
    kc: Any,
    code: str,
    *,
    cell_id: str | None = None,
    allow_stdin: bool = True,
    on_message: Callable[[Message], None] | None = None,
    timeout: float = TIMEOUT,
) -> tuple[list[Message], Message]:
    """Execute code on a client; its iopub messages (see ``collect``) and its execute_reply."""
    return collect(kc, send(kc, code, cell_id, allow_stdin=allow_stdin), on_message=on_message, timeout=timeout)


def shown(messages: list[Message], msg_id: str | None = None) -> str:
    """All text a cell showed: streams, displays and their updates, results, error tracebacks."""
    parts = []
    for msg in messages:
        if msg_id is not None and msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            parts.append(content["text"])
        elif kind in ("display_data", "update_display_data", "execute_result"):
            parts.append(content["data"].get("text/plain", ""))
        elif kind == "error":
            parts.append("\n".join(content["traceback"]))
    return "\n".join(parts)


def stream(messages: list[Message], name: str = "stdout") -> str:
    """What a cell printed to one stream."""
    return "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream" and m["content"]["name"] == name)


def stdout(messages: list[Message]) -> str:
    """What a cell printed to stdout."""
    return stream(messages, "stdout")


def errors(messages: list[Message]) -> list[str]:
    """The tracebacks of a cell's errors."""
    return ["\n".join(m["content"]["traceback"]) for m in messages if m["msg_type"] == "error"]


def button_id(msg: Message, description: str) -> str | None:
    """The comm id of a Button widget with this description, if ``msg`` opens one."""
    if msg["msg_type"] != "comm_open":
        return None
    state = msg["content"]["data"].get("state", {})
    if state.get("_model_name") == "ButtonModel" and state.get("description") == description:
        return msg["content"]["comm_id"]
    return None


def click(kc: Any, comm_id: str) -> None:
    """What a frontend sends when the user clicks a Button (ipywidgets protocol)."""
    kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": {"event": "click"}}}))


def send_update(kc: Any, comm_id: str, state: dict[str, Any]) -> None:
    """What a frontend sends when the user changes a widget value (ipywidgets protocol)."""
    kc.shell_channel.send(
        kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {"method": "update", "state": state, "buffer_paths": []}})
    )


def wait_for(condition: Callable[[], object], timeout: float = 30) -> None:
    """Poll until ``condition()`` is true."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


class Kernel:
    """A real ipykernel child process (jupyter_client) and a blocking client that sends cells as JupyterLab does."""

    def __init__(self, cwd: Path | str | None = None, env: dict[str, str] | None = None, *, timeout: float = TIMEOUT) -> None:
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(**({"cwd": str(cwd)} if cwd is not None else {}), env=kernel_env() if env is None else env)
        self.kc = self.km.blocking_client()
        self.kc.start_channels()
        self.closed = False
        try:
            self.kc.wait_for_ready(timeout=timeout)
        except BaseException:
            self.shutdown()
            raise

    def __enter__(self) -> Kernel:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.shutdown()

    def send(self, code: str, cell_id: str | None = None, *, allow_stdin: bool = False) -> str:
        """Send a cell (see ``send``); returns its msg_id."""
        return send(self.kc, code, cell_id, allow_stdin=allow_stdin)

    def execute(self, code: str, **kw: Any) -> tuple[list[Message], Message]:
        """Run a cell (``run_cell``'s options: cell_id, allow_stdin, on_message, timeout); its iopub messages and execute_reply."""
        return run_cell(self.kc, code, **kw)

    def wait(self, msg_id: str, timeout: float = TIMEOUT) -> tuple[dict[str, Any], str]:
        """The execute_reply content of a sent cell and all text it showed."""
        messages, reply = collect(self.kc, msg_id, timeout=timeout)
        return reply["content"], shown(messages, msg_id)

    def try_run(self, code: str, cell_id: str | None = None, *, timeout: float = TIMEOUT, **kw: Any) -> tuple[str, str]:
        """(status, everything shown) of one cell, whatever its status."""
        reply, text = self.wait(self.send(code, cell_id, **kw), timeout)
        return reply["status"], text

    def run(self, code: str, cell_id: str | None = None, *, timeout: float = TIMEOUT, **kw: Any) -> str:
        """Everything one cell showed; it must succeed."""
        reply, text = self.wait(self.send(code, cell_id, **kw), timeout)
        assert reply["status"] == "ok", (reply, text)
        return text

    def kill(self, timeout: float = 60) -> None:
        """SIGKILL, no shutdown request: what a crash or the OOM killer does (then its files are cleaned up)."""
        self.kc.stop_channels()
        self.km.signal_kernel(signal.SIGKILL)
        wait_for(lambda: not self.km.is_alive(), timeout)
        self.shutdown()

    def shutdown(self) -> None:
        """Stop the client and the kernel (once)."""
        if self.closed:
            return
        self.closed = True
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


@contextmanager
def notebook_kernels(folder: Path, base_url: str) -> Iterator[Callable[[], Kernel]]:
    """Starts kernels for the notebook ``work.ipynb`` in ``folder``, their API at ``base_url``; each one still alive is shut down after."""
    env = kernel_env(base_url, JPY_SESSION_NAME=str(folder / "work.ipynb"))
    env.pop("ANTHROPIC_AUTH_TOKEN", None)  # the fake's key, not a token the machine may have
    started: list[Kernel] = []

    def start() -> Kernel:
        started.append(Kernel(folder, env))
        return started[-1]

    try:
        yield start
    finally:
        for kernel in started:
            if kernel.km.is_alive():
                kernel.shutdown()
