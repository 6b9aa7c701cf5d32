"""One shared tail per followed session: the log is read once per change, whatever the number of clients.

The tail reads its :class:`~.source.EventSource` in a worker thread, a bounded chunk at a time,
renders each new event once (:mod:`.present`), keeps the last ``buffer`` frames for clients that
reconnect, and hands each read's frames to every client's bounded queue.  A client that still has a
full queue from earlier reads when new frames come (it reads slower than the session writes) is
dropped; it reconnects with its Last-Event-ID and catches up, while the others never wait for it.
A burst (one read of many events) never drops a client that keeps up.  A client older than the kept
frames catches up through a shared :class:`~.replay.Replay`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .catchup import Reading, Replay
from .present import Frame, Presenter
from .source import Batch, EventSource, FileSource, StoreSource

log = logging.getLogger("nbagent.server")
BATCH_BYTES = 1 << 20  # a client's write joins frames up to this size (one bigger frame goes alone): its copy stays small
KEPT_BYTES = 64 << 20  # the recent frames a tail keeps take at most this much memory (besides their count)


class Client:
    """One stream client: the frames waiting for it (at most ``limit``), and whether it fell too far behind."""

    def __init__(self, limit: int, on_drop: Callable[[], None] = lambda: None) -> None:
        self.queue: deque[Frame] = deque()
        self.limit = limit
        self.dropped = False
        self.closed = False
        self.on_drop = on_drop
        self._ready = asyncio.Event()

    def offer(self, frames: Sequence[Frame]) -> None:
        """Queue one read's frames, or drop the client if ``limit`` frames of earlier reads still wait (it fell behind).

        So a client holds at most ``limit`` frames plus one bounded read, and a burst alone drops nobody.
        """
        if self.dropped or self.closed or not frames:
            return
        if len(self.queue) >= self.limit:
            self.drop()
            return
        self.queue.extend(frames)
        self._ready.set()

    def drop(self) -> None:
        """Drop the client (it fell too far behind): its connection is closed, and it reconnects with its Last-Event-ID."""
        if self.dropped or self.closed:
            return
        self.dropped = True
        self.queue.clear()
        self._ready.set()
        self.on_drop()

    def close(self) -> None:
        """The connection went away."""
        self.closed = True
        self.queue.clear()
        self._ready.set()

    async def next(self, timeout: float, most: int = 256) -> list[Frame]:
        """Up to ``most`` queued frames (and about 1 MiB), waiting ``timeout`` seconds at most for one ([] then, or when dropped or closed)."""
        if not self.queue and not (self.dropped or self.closed):
            self._ready.clear()
            try:
                await asyncio.wait_for(self._ready.wait(), timeout)
            except asyncio.TimeoutError:
                return []
        taken: list[Frame] = []
        size = 0
        while self.queue and len(taken) < most and (not taken or size + len(self.queue[0].data) <= BATCH_BYTES):
            taken.append(self.queue.popleft())
            size += len(taken[-1].data)
        return taken


class Tail:
    """The shared follower of one session."""

    def __init__(
        self, source: EventSource, *, buffer: int = 5000, path: Path | None = None, open_source: Callable[[], EventSource]
    ) -> None:
        self.source = source
        self.open_source = open_source  # a fresh source, for a catch-up read that must not move the tail's position
        self.path = path
        self.presenter = Presenter()
        self.recent: deque[Frame] = deque()
        self.buffer = buffer
        self.kept_bytes = 0
        self.last_seq = 0
        self.problem = ""
        self.damaged = False  # the problem is damage in the log (else a failure to read it now)
        self.torn = False
        self.trust = ""
        self.clients: set[Client] = set()
        self.replays: list[Replay] = []  # the catch-ups from the log's start under way
        self.ready = asyncio.Event()  # the tail has read to the log's end (as it was then)
        self.events_read = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start following (on the running event loop)."""
        self._task = asyncio.ensure_future(self._run())

    def stop(self) -> None:
        """Stop following; every client is closed, and so is the source (a database watch's connections)."""
        if self._task is not None:
            self._task.cancel()
        for client in list(self.clients):
            client.close()
        self.source.close()

    def _read(self) -> tuple[Batch, list[Frame]]:
        batch = self.source.read(self.last_seq)
        frames = [self.presenter.frame(e) for e in batch.events]
        if not self.trust:
            self.trust = self.source.trust()
        return batch, frames

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                batch, frames = await loop.run_in_executor(None, self._read)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a failing read is reported, and tried again on the next change
                batch, frames = Batch(problem=f"could not read the log: {type(exc).__name__}: {exc}"), []
                log.warning("nbagent: %s: %s", self.path, batch.problem)
            self.publish(frames)
            self.events_read += len(frames)
            self.problem, self.damaged, self.torn = batch.problem, batch.damaged, batch.torn
            if batch.more and not batch.problem:
                continue  # a bounded read: the rest at once, one chunk at a time
            self.ready.set()
            self._wake.clear()
            waiter = asyncio.ensure_future(self.source.wait(60.0))
            woken = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait({waiter, woken}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
                woken.cancel()

    def publish(self, frames: list[Frame]) -> None:
        """Hand new frames to every client (on the event loop)."""
        for frame in frames:
            self.recent.append(frame)
            self.kept_bytes += len(frame.data)
            while len(self.recent) > self.buffer or (self.kept_bytes > KEPT_BYTES and len(self.recent) > 1):
                self.kept_bytes -= len(self.recent.popleft().data)
            self.last_seq = frame.seq
        for client in list(self.clients):
            client.offer(frames)

    async def refresh(self) -> None:
        """Read now (a client asks for more than the tail has seen) and wait for that read."""
        self.ready.clear()
        self._wake.set()
        await self.ready.wait()

    def subscribe(self, client: Client) -> int:
        """Add a client; every frame after the returned seq goes to its queue."""
        self.clients.add(client)
        return self.last_seq

    def unsubscribe(self, client: Client) -> None:
        """Remove a client."""
        client.close()
        self.clients.discard(client)

    def backlog(self, since: int, until: int) -> list[Frame] | None:
        """The frames with ``since < seq <= until`` from memory, or None if some of them are no longer kept."""
        if since >= until:
            return []
        if not self.recent or self.recent[0].seq > since + 1:
            return None
        return [f for f in self.recent if since < f.seq <= until]

    def catch_up(self, client: Client, since: int, until: int) -> tuple[Replay, Reading]:
        """A place for ``client`` in a replay from the log's start (one under way if it still has what the client needs)."""
        replay = next((r for r in self.replays if r.can_join(since)), None)
        if replay is None:
            replay = Replay(self.open_source)
            self.replays.append(replay)
        return replay, replay.join(client, since, until)

    def caught_up(self, replay: Replay, reading: Reading) -> None:
        """A client's catch-up ended (or it left): a replay without readers is let go."""
        replay.leave(reading)
        if not replay.readings and replay in self.replays:
            self.replays.remove(replay)


class Tails:
    """The server's tails, one per log file or database session, kept ``linger`` seconds after their last client.

    A log file's tail is keyed by its path, a database session's by its name (``<store url>#<notebook>/<session>``).
    """

    def __init__(self, *, poll: float, buffer: int, linger: float) -> None:
        self.poll, self.buffer, self.linger = poll, buffer, linger
        self.tails: dict[Path | str, Tail] = {}
        self._timers: dict[Path | str, asyncio.TimerHandle] = {}

    def get(self, path: Path, store: Any = None) -> Tail:
        """The tail of a log (of a session of ``store``, a database store, if given), started if it is not running."""
        key = self.key(path, store)
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        tail = self.tails.get(key)
        if tail is None:
            if store is None:
                source: EventSource = FileSource(path, poll=self.poll)
                tail = Tail(source, buffer=self.buffer, path=path, open_source=lambda: FileSource(path, poll=self.poll))
            else:
                source = StoreSource(store, path)
                tail = Tail(source, buffer=self.buffer, path=path, open_source=lambda: StoreSource(store, path, listen=False))
            self.tails[key] = tail
            tail.start()
        return tail

    @staticmethod
    def key(path: Path, store: Any = None) -> Path | str:
        """A log file's path, or a database session's name."""
        return path if store is None else str(store.where(path))

    def release(self, path: Path, client: Client, store: Any = None) -> None:
        """A client left; the tail stops ``linger`` seconds after its last one."""
        key = self.key(path, store)
        tail = self.tails.get(key)
        if tail is None:
            return
        tail.unsubscribe(client)
        if not tail.clients and key not in self._timers:
            self._timers[key] = asyncio.get_running_loop().call_later(self.linger, self._expire, key)

    def _expire(self, path: Path | str) -> None:
        self._timers.pop(path, None)
        tail = self.tails.get(path)
        if tail is not None and not tail.clients:
            tail.stop()
            del self.tails[path]

    def stop(self) -> None:
        """Stop every tail (the server is shutting down)."""
        for timer in self._timers.values():
            timer.cancel()
        for tail in self.tails.values():
            tail.stop()
        self.tails.clear()
