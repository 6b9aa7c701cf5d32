"""The running MCP servers of this process: one background thread with its own event loop, one connection per server.

A server starts when a run first needs its tools, runs once per process (a kernel), is stopped when the process
exits, and is restarted once if it dies. Every wait is bounded (the server's ``startup_timeout`` and ``timeout``):
a server that does not start or answer is an error with a reason, never a hang. Needs the ``mcp`` SDK
(``pip install 'nbagent[mcp]'``).

A stdio server's stderr goes to a pipe that a thread drains as it comes, keeping only its last ``STDERR_TAIL`` bytes
(the last line is said, redacted, when the server fails). The values the configuration took from the environment into
its ``env`` or ``headers`` are registered for redaction when it starts.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Coroutine
from typing import Any, ClassVar, Literal

from ...errors import NbagentError
from ...record import redact
from .config import ServerConfig

State = Literal["not started", "starting", "running", "dead", "failed", "stopped"]
STOP_WAIT = 5.0  # seconds each server gets to stop at exit
GRACE = 5.0  # seconds past a call's own timeout before nbagent stops waiting for the SDK to give up
STDERR_TAIL = 8192  # bytes of a stdio server's stderr kept (its last ones)
STDERR_WAIT = 1.0  # seconds a failed server's stderr gets to reach its end before its last line is read


class McpUnavailable(NbagentError):
    """The ``mcp`` SDK is not installed."""


class CallFailed(NbagentError):
    """A call that got no result: ``unknown`` says whether it may have reached the server (so may have had its effect)."""

    def __init__(self, message: str, *, unknown: bool) -> None:
        super().__init__(message)
        self.unknown = unknown


class StderrTail:
    """A pipe for a child's stderr, drained by a thread that keeps only the last ``limit`` bytes."""

    def __init__(self, limit: int = STDERR_TAIL) -> None:
        self.limit = limit
        self._kept = bytearray()
        self._lock = threading.Lock()
        read, write = os.pipe()
        self.writer = os.fdopen(write, "w", encoding="utf-8", errors="replace")  # the child's stderr (a copy of it)
        self._thread = threading.Thread(target=self._drain, args=(read,), name="nbagent-mcp-stderr", daemon=True)
        self._thread.start()

    def _drain(self, fd: int) -> None:
        try:
            while chunk := os.read(fd, 1 << 16):
                with self._lock:
                    self._kept += chunk
                    if len(self._kept) > 2 * self.limit:  # trimmed now and then: amortised, at most 2 * limit + a read kept
                        del self._kept[: -self.limit]
        except OSError:
            pass
        finally:
            os.close(fd)

    def close(self) -> None:
        """Close this process's copy of the write end (the thread ends once the child's copies are closed too)."""
        with contextlib.suppress(OSError):
            self.writer.close()

    def last_line(self, wait: float = 0.0) -> str:
        """The last non-empty line written (``wait``: seconds to let the pipe reach its end first)."""
        if wait:
            self._thread.join(wait)
        with self._lock:
            text = bytes(self._kept[-self.limit :]).decode("utf-8", errors="replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[-1] if lines else ""


def require_sdk() -> None:
    """Raise McpUnavailable with what to install when the ``mcp`` SDK is missing."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise McpUnavailable("MCP servers need the mcp SDK: pip install 'nbagent[mcp]' (Python 3.10 or later).") from None


class Connection:
    """One server: its state, its listed tools, and the task that holds its session open."""

    def __init__(self, config: ServerConfig, manager: Manager) -> None:
        self.config = config
        self.manager = manager
        self.state: State = "not started"
        self.error = ""
        self.tools: list[Any] = []  # the mcp_types.Tool values the server listed
        self.starts = 0
        self.last_death = ""  # why it last died (said when it is restarted)
        self.generation = 0  # bumped each time the tool list may have changed (start, death, list_changed)
        self._client: Any = None
        self._stop: asyncio.Event | None = None
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._done: concurrent.futures.Future[None] | None = None
        self._lock = threading.Lock()
        self._stderr: StderrTail | None = None  # a stdio server's stderr, this start's

    def ensure(self, wait: bool = True) -> concurrent.futures.Future[None] | None:
        """Start the server if it never ran (or once more after it died); with ``wait``, until it is ready or failed."""
        with self._lock:
            if self.state == "dead" and self.starts >= 2:
                self.state = "failed"
                self.error = f"it died again after a restart ({self.error}); not restarted (restart the kernel to try again)"
                self.generation += 1
            if self.state in ("not started", "dead"):
                for value in self.config.secrets:  # taken from the environment into env or headers: never logged
                    redact.register(value)
                self.state, self.starts = "starting", self.starts + 1
                self._ready = concurrent.futures.Future()
                self._done = self.manager.submit(self._hold(self._ready))
            ready = self._ready if self.state == "starting" else None
        if ready is not None and wait:
            try:
                ready.result(timeout=self.config.startup_timeout)
            except concurrent.futures.TimeoutError:
                self._give_up()
        return ready

    def _give_up(self) -> None:
        """A start that took longer than ``startup_timeout``: failed, and its task cancelled (a stdio process ends with it)."""
        with self._lock:
            if self.state != "starting":
                return
            self.state = "failed"
            self.error = self._reason(TimeoutError(), started=False)
            self.generation += 1
            if self._done is not None:
                self._done.cancel()

    async def _hold(self, ready: concurrent.futures.Future[None]) -> None:
        """The task that owns the session: open it, list the tools, wait for stop; the session is closed in this task."""
        from mcp import Client

        stop = self._stop = asyncio.Event()  # this run's: a restarted server's run has its own
        client: Any = None
        try:
            async with contextlib.AsyncExitStack() as stack:
                transport = await self._transport(stack)

                async def on_message(message: Any) -> None:
                    if getattr(message, "method", None) == "notifications/tools/list_changed":
                        asyncio.get_running_loop().create_task(self._relist())

                client = Client(transport, message_handler=on_message, read_timeout_seconds=self.config.timeout)
                await stack.enter_async_context(client)  # bounded by ensure(): a start that takes too long is cancelled
                self._client = client
                tools = await self._list(client)
                if self.state == "failed":
                    return  # ensure() gave up on this start meanwhile
                self.tools, self.state, self.error = tools, "running", ""
                self.generation += 1
                ready.set_result(None)
                await stop.wait()
        except BaseException as exc:  # a server that cannot start or that died: said in the state, never raised
            if self._stop is stop:  # an earlier run closing late says nothing about the one after it
                self._fail(exc, ready)
            if not isinstance(exc, Exception):
                raise
        finally:
            if self._client is client:
                self._client = None
            if not ready.done():
                ready.set_result(None)

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        if self.config.transport == "http":
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            http = await stack.enter_async_context(create_mcp_http_client(headers=dict(self.config.headers)))
            return streamable_http_client(self.config.url, http_client=http)
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(
            command=self.config.command, args=list(self.config.args), env=dict(self.config.env), cwd=self.config.cwd
        )
        stderr = self._stderr = StderrTail()
        stack.callback(stderr.close)  # closed as the session ends, so the drain sees the end once the child is gone
        return stdio_client(params, errlog=stderr.writer)

    async def _list(self, client: Any) -> list[Any]:
        tools: list[Any] = []
        cursor = None
        for _ in range(100):  # a server that pages forever is cut off
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def _relist(self) -> None:
        import anyio

        client = self._client
        if client is None:
            return
        with contextlib.suppress(Exception):
            with anyio.fail_after(self.config.startup_timeout):
                self.tools = await self._list(client)
            self.generation += 1

    def _fail(self, exc: BaseException, ready: concurrent.futures.Future[None]) -> None:
        was_running = self.state == "running"
        if self.state == "failed":
            pass  # given up on already (ensure's timeout): that reason stands
        elif isinstance(exc, asyncio.CancelledError) or (self._stop is not None and self._stop.is_set()):
            self.state = "stopped"
        else:
            self.state = "dead" if was_running else "failed"
            self.error = self._reason(exc, started=was_running)
            if was_running:
                self.last_death = self.error
        self.tools = []
        self.generation += 1
        if not ready.done():
            ready.set_result(None)

    def _reason(self, exc: BaseException, *, started: bool) -> str:
        """Why the server stopped or never started, in a line (redacted): the exception, and the last line it printed on stderr."""
        if isinstance(exc, TimeoutError):
            text = f"it did not start within {self.config.startup_timeout:g} s"
        else:
            inner = exc
            while getattr(inner, "exceptions", None):  # an exception group: its first
                inner = inner.exceptions[0]  # type: ignore[attr-defined]
            text = f"{type(inner).__name__}: {inner}".strip().rstrip(":")
        stderr = self._stderr
        last = stderr.last_line(0.0 if isinstance(exc, TimeoutError) else STDERR_WAIT) if stderr is not None else ""
        last = redact.text(last)[:300]  # redacted whole, then cut: a secret is never cut in half before it is found
        return redact.text(f"{text}{f' (its stderr: {last})' if last else ''}")

    def died(self, why: str) -> None:
        """The session broke during a call: the server is dead (restarted once on next use)."""
        if self.state == "running":
            self.state, self.error, self.last_death = "dead", why, why
            self.tools = []
            self.generation += 1
            stop = self._stop
            if stop is not None:
                self.manager.loop.call_soon_threadsafe(stop.set)

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """Call a tool and return its CallToolResult; CallFailed when no result came (``unknown``: it may have run)."""
        client = self._client
        if self.state != "running" or client is None:
            raise CallFailed(f"MCP server {self.config.name!r} is not running ({self.error or self.state}).", unknown=False)
        timeout = self.config.timeout
        future = self.manager.submit(client.call_tool(tool, arguments, read_timeout_seconds=timeout))
        try:
            return future.result(timeout=timeout + GRACE)
        except BaseException as exc:
            future.cancel()
            if not isinstance(exc, Exception):
                raise  # an interrupt: the loop logs it; the call's outcome is unknown on resume
            if isinstance(exc, (TimeoutError, concurrent.futures.TimeoutError)) or "timed out" in str(exc).lower():
                raise CallFailed(f"MCP server {self.config.name!r} did not answer within {timeout:g} s", unknown=True) from None
            if "connection closed" in str(exc).lower() or isinstance(exc, (OSError, EOFError)):
                self.died(f"the connection closed during a call ({exc})")
                raise CallFailed(f"MCP server {self.config.name!r} stopped during the call ({exc})", unknown=True) from None
            raise CallFailed(f"MCP server {self.config.name!r} refused the call: {type(exc).__name__}: {exc}", unknown=False) from None

    def stop(self) -> None:
        """Close the session (a stdio server's process ends with it)."""
        stop, done = self._stop, self._done
        if stop is not None:
            self.manager.loop.call_soon_threadsafe(stop.set)
        if done is not None:
            with contextlib.suppress(Exception):
                done.result(timeout=STOP_WAIT)
        self.state = "stopped" if self.state in ("running", "starting", "dead") else self.state


class Manager:
    """The process's MCP servers, by configuration fingerprint, on one background event loop."""

    _shared: ClassVar[Manager | None] = None
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        require_sdk()
        self.loop = asyncio.new_event_loop()
        self.connections: dict[str, Connection] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self.loop.run_forever, name="nbagent-mcp", daemon=True)
        self._thread.start()

    @classmethod
    def shared(cls) -> Manager:
        """This process's manager (made when first needed; its servers stop when the process exits)."""
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = Manager()
                atexit.register(cls._shared.close)
            return cls._shared

    def connection(self, config: ServerConfig) -> Connection:
        """The connection for this configuration (one per process), not started yet if new."""
        with self._lock:
            found = self.connections.get(config.key())
            if found is None:
                found = self.connections[config.key()] = Connection(config, self)
            return found

    def submit(self, coroutine: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        """Run a coroutine on the manager's loop."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def close(self) -> None:
        """Stop every server, then the loop."""
        for connection in list(self.connections.values()):
            connection.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=STOP_WAIT)
