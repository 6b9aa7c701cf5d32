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

A page opened while the cell waits (a reopened notebook, a second tab) asks
``kernel_info_request`` and ``comm_info_request`` before it can work, so those
are answered at once too, after a ``status: busy`` whose parent is the running
cell (so the page's status bar reads Busy, not Unknown).  Their ``status: idle``
is sent only after the cell's own idle: an idle during the wait would show a
front end that does not filter these request types (VS Code) an idle kernel.

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
INFO_TYPES = frozenset({"kernel_info_request", "comm_info_request"})  # a new page's first questions: answered at once
INTERNALS = (  # the kernel's attributes the pump uses; a kernel without one of them gets the text prompt
    "dispatch_shell",
    "get_parent",
    "set_parent",
    "_get_shell_context_var",
    "_shell_parent_ident",
    "shell_main",
    "shell_channel_thread",
    "io_loop",
    "session",
    "_publish_status",
    "_main_asyncio_lock",
)
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


def at_once(msg_type: str) -> bool:
    """Whether the pump handles a shell message during the cell (comms, a new page's info requests) instead of holding it."""
    return msg_type in COMM_TYPES or msg_type in INFO_TYPES


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
    for name in INTERNALS:
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
        self.answered: list[dict[str, Any]] = []  # headers of the info requests answered: each gets its idle after the cell
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
            header = self._header(frames)
            msg_type = str(header.get("msg_type", ""))
            if not at_once(msg_type):
                self.held.append(frames)
                continue
            try:
                if msg_type in INFO_TYPES:
                    self.kernel._publish_status("busy", "shell")  # parent: the running cell, so every page shows Busy
                self._dispatch(frames)
            except Exception:
                self.held += arrived[i:]  # not handled: the kernel's own loop handles it and the rest, in order, after this cell
                raise
            except BaseException:
                self.held += arrived[i + 1 :]  # interrupted while handling this one: keep the rest
                raise
            if msg_type in INFO_TYPES:
                self.answered.append(header)

    def _header(self, frames: list[Any]) -> dict[str, Any]:
        session = self.kernel.session
        try:
            _, rest = session.feed_identities(frames, copy=False)
            return dict(session.deserialize(rest, content=False, copy=False)["header"])
        except Exception:
            return {}

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
        """Schedule the answered requests' idles, then hand the held messages back in arrival order (all after this cell)."""
        answered, self.answered = self.answered, []
        if answered:
            self.kernel.io_loop.add_callback(self._idle_after_cell, answered)
        held, self.held = self.held, []
        for frames in held:
            self.kernel.io_loop.add_callback(self.kernel.shell_main, None, frames)

    async def _idle_after_cell(self, answered: list[dict[str, Any]]) -> None:
        """Once the cell let go of the main shell (its own idle is out), one idle for each request answered during it."""
        async with self.kernel._main_asyncio_lock:
            for header in answered:
                self.kernel._publish_status("idle", "shell", parent={"header": header})

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
