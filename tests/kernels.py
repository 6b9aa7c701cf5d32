"""Helpers for tests that drive a real ipykernel through jupyter_client."""

from __future__ import annotations

import queue
import textwrap
import time
from collections.abc import Callable
from typing import Any

TIMEOUT = 60


def run_cell(
    kc: Any, code: str, *, on_message: Callable[[dict[str, Any]], None] | None = None, timeout: float = TIMEOUT
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Execute code; collect its iopub messages (and comm messages meanwhile) until idle, and the reply.

    ``on_message(msg)`` sees each collected message as it arrives, so a test can act (say, click) mid-cell.
    """
    msg_id = kc.execute(textwrap.dedent(code), allow_stdin=True)
    messages: list[dict[str, Any]] = []
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
    reply = kc.get_shell_msg(timeout=timeout)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=timeout)
    return messages, reply
