"""Handle widget (comm) messages from inside a running cell, so approval buttons work while the agent waits.

A running cell blocks the kernel's main thread, so clicks queue up unread.
``jupyter-ui-poll`` solved this by calling ``kernel.do_one_iteration()``, which
ipykernel 7.4 no longer has (jupyter-ui-poll 1.1.0 then silently does nothing),
so this module does the same job for ipykernel 7: it reads the main shell's
inproc socket directly, dispatches comm messages at once through the kernel's
own ``dispatch_shell(..., concurrent=True)`` (the path ipykernel itself uses
for comms that arrive during an async cell), and holds every other message
(say the next cell's ``execute_request``) to hand back to the kernel's loop,
in order, when pumping stops.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

logger = logging.getLogger("nbagent")

COMM_TYPES = frozenset({"comm_msg", "comm_open", "comm_close"})


def current_kernel() -> Any | None:
    """The ipykernel running this code, or None (terminal IPython, plain Python)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return getattr(shell, "kernel", None) if shell is not None else None


def _main_socket(kernel: Any) -> Any | None:
    thread = getattr(kernel, "shell_channel_thread", None)
    if not getattr(kernel, "_supports_kernel_subshells", False) or thread is None:
        return None
    pair = getattr(getattr(thread, "manager", None), "_shell_channel_to_main", None)
    return getattr(pair, "to_socket", None)


class CommPump:
    """Pump comm messages on the kernel's main thread while a cell runs; use as a context manager."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.socket = _main_socket(kernel)
        self.held: list[list[Any]] = []
        self.dispatched = 0

    @classmethod
    def for_current_kernel(cls) -> CommPump | None:
        """A pump for this kernel, or None where it cannot work (no ipykernel 7, or not on the main thread)."""
        kernel = current_kernel()
        if kernel is None or threading.current_thread() is not threading.main_thread():
            return None
        pump = cls(kernel)
        return pump if pump.socket is not None else None

    def poll(self, timeout: float) -> int:
        """Wait up to ``timeout`` seconds for shell messages; dispatch comm messages, hold the rest; return how many were dispatched."""
        import zmq

        done = 0
        if not self.socket.poll(int(timeout * 1000), zmq.POLLIN):
            return 0
        while True:
            try:
                frames = self.socket.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return done
            if self._msg_type(frames) in COMM_TYPES:
                self._dispatch(frames)
                done += 1
            else:
                self.held.append(frames)

    def _msg_type(self, frames: list[Any]) -> str:
        session = self.kernel.session
        try:
            _, rest = session.feed_identities(frames, copy=False)
            return str(session.deserialize(rest, content=False, copy=False)["header"].get("msg_type", ""))
        except Exception:
            return ""

    def _dispatch(self, frames: list[Any]) -> None:
        kernel = self.kernel
        parent = kernel.get_parent("shell")
        ident = kernel._get_shell_context_var(kernel._shell_parent_ident)
        step = kernel.dispatch_shell(frames, subshell_id=None, concurrent=True)
        try:
            step.send(None)
        except StopIteration:
            self.dispatched += 1
        else:  # the handler wanted to wait on the event loop, which this cell is blocking
            step.close()
            logger.warning("nbagent: a widget message needed the kernel's event loop and was dropped")
        finally:
            kernel.set_parent(ident, parent, channel="shell")  # outputs keep going to the running cell

    def close(self) -> None:
        """Hand the held messages back to the kernel's loop, in arrival order (they run after this cell)."""
        held, self.held = self.held, []
        for frames in held:
            self.kernel.io_loop.add_callback(self.kernel.shell_main, None, frames)

    def __enter__(self) -> CommPump:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
