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

Those are private internals, so the pump is used only on the ipykernel versions
it was written for (``SUPPORTED_IPYKERNEL``, also pinned in pyproject.toml's
``test`` extra) and only while ``NBAGENT_COMM_PUMP`` is not ``0``.  Elsewhere, or
when it fails, the panel asks on stdin instead, after one warning per kernel.
"""

from __future__ import annotations

import inspect
import logging
import os
import threading
from typing import Any

logger = logging.getLogger("nbagent")

COMM_TYPES = frozenset({"comm_msg", "comm_open", "comm_close"})
SUPPORTED_IPYKERNEL = ">=7.4,<8"  # 7.3 lacks dispatch_shell(concurrent=); 8 may move the internals again
SWITCH = "NBAGENT_COMM_PUMP"  # "0" turns the pump off: approvals are asked on stdin
FALLBACK = "so approvals are asked as a y/N text prompt"

_warned: set[int] = set()  # id() of each kernel that got the fallback warning
_broken: set[int] = set()  # id() of each kernel on which a pump failed: later approvals go straight to text


def pump_supported(version: str) -> bool:
    """Whether an ipykernel version is one the pump was written for (``SUPPORTED_IPYKERNEL``)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        parsed = Version(version)
    except InvalidVersion:
        return False
    return SpecifierSet(SUPPORTED_IPYKERNEL).contains(parsed, prereleases=True)


def pump_switched_off() -> bool:
    """Whether the user turned the pump off (``NBAGENT_COMM_PUMP=0``, ``false``, ``no`` or ``off``)."""
    return os.environ.get(SWITCH, "").strip().lower() in ("0", "false", "no", "off")


def ipykernel_version() -> str:
    """The installed ipykernel's version, or "" without ipykernel."""
    try:
        from ipykernel import __version__
    except ImportError:
        return ""
    return str(__version__)


def warn_once(kernel: Any, text: str) -> None:
    """Log ``text`` as one warning line, only the first time for this kernel."""
    if id(kernel) not in _warned:
        _warned.add(id(kernel))
        logger.warning("nbagent: %s", text)


def current_kernel() -> Any | None:
    """The ipykernel running this code, or None (terminal IPython, plain Python)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return getattr(shell, "kernel", None) if shell is not None else None


def _main_socket(kernel: Any) -> Any:
    """The main shell's inproc socket, after checking every internal the pump touches."""
    for name in ("_get_shell_context_var", "_shell_parent_ident", "shell_main", "io_loop", "session"):
        if not hasattr(kernel, name):
            raise AttributeError(f"the kernel has no {name}")
    if "concurrent" not in inspect.signature(kernel.dispatch_shell).parameters:
        raise TypeError("dispatch_shell() takes no concurrent argument")
    thread = kernel.shell_channel_thread
    if thread is None:
        raise AttributeError("the kernel has no shell channel thread")
    return thread.manager._shell_channel_to_main.to_socket


class CommPump:
    """Pump comm messages on the kernel's main thread while a cell runs; use as a context manager."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.socket = _main_socket(kernel)
        self.held: list[list[Any]] = []
        self.failed = False

    @classmethod
    def for_current_kernel(cls) -> CommPump | None:
        """A pump for this kernel, or None where it is off or cannot work (warned once per kernel)."""
        kernel = current_kernel()
        if kernel is None or threading.current_thread() is not threading.main_thread():
            return None
        if pump_switched_off():
            warn_once(kernel, f"approval buttons are off ({SWITCH}={os.environ[SWITCH].strip()}), {FALLBACK}; unset {SWITCH} for buttons.")
            return None
        if id(kernel) in _broken:
            return None
        version = ipykernel_version()
        if not pump_supported(version):
            warn_once(
                kernel,
                f"approval buttons need ipykernel{SUPPORTED_IPYKERNEL} (this kernel has {version or 'none'}), {FALLBACK}; "
                f"install ipykernel{SUPPORTED_IPYKERNEL} for buttons, or %config Agent.approval = 'auto'.",
            )
            return None
        try:
            return cls(kernel)
        except Exception as exc:
            _broken.add(id(kernel))
            warn_once(kernel, _failed(exc))
            return None

    def poll(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for shell messages, dispatch comm messages and hold the rest; False once the pump failed."""
        if self.failed:
            return False
        try:
            self._poll(timeout)
        except Exception as exc:
            self.failed = True
            _broken.add(id(self.kernel))
            warn_once(self.kernel, _failed(exc))
        return not self.failed

    def _poll(self, timeout: float) -> None:
        import zmq

        if not self.socket.poll(int(timeout * 1000), zmq.POLLIN):
            return
        arrived: list[list[Any]] = []
        while True:  # read until empty: zmq wakes the kernel's own reader again only after a read found nothing
            try:
                arrived.append(self.socket.recv_multipart(zmq.NOBLOCK, copy=False))
            except zmq.Again:
                break
        for i, frames in enumerate(arrived):
            if self._msg_type(frames) not in COMM_TYPES:
                self.held.append(frames)
                continue
            try:
                self._dispatch(frames)
            except Exception:
                self.held += arrived[i:]  # not handled: the kernel's own loop handles it and the rest, in order, after this cell
                raise
            except BaseException:
                self.held += arrived[i + 1 :]  # interrupted while handling this one: keep the rest
                raise

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
        try:
            step = kernel.dispatch_shell(frames, subshell_id=None, concurrent=True)
            try:
                step.send(None)
            except StopIteration:
                pass
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


def _failed(exc: BaseException) -> str:
    """The warning for a pump that broke on this kernel."""
    detail = " ".join(str(exc).split())  # one line, whatever the message
    return (
        f"approval buttons failed on ipykernel {ipykernel_version()} ({type(exc).__name__}: {detail}), {FALLBACK}; "
        f"set {SWITCH}=0 to skip them, or %config Agent.approval = 'auto'."
    )
