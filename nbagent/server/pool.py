"""nbagent's own threads for the blocking file and database work of its handlers, bounded, with a bounded wait for one.

The event loop's default executor is shared with Jupyter (its own handlers run file work
there too): a read that never returns would pin one of its few threads, and enough of
them would stall Jupyter's routes as well as nbagent's. Here at most ``workers`` reads run
at once, in threads of their own; a request that finds every one busy for ``wait``
seconds is answered 503 instead of queueing without end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from .paths import Refused

T = TypeVar("T")


class Busy(Refused):
    """Every nbagent reader thread is busy: answered 503 (try again later)."""


class Pool:
    """At most ``workers`` blocking calls at once on threads of their own; a caller waits at most ``wait`` seconds for one."""

    def __init__(self, workers: int, wait: float) -> None:
        self.workers, self.wait = workers, wait
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="nbagent-read")
        self._slots = asyncio.Semaphore(workers)
        self.busy = 0  # calls running now (a slot is freed when its call returns, not when its caller gives up)
        self.refused = 0  # requests answered 503 because no thread freed up in time

    async def run(self, work: Callable[[], T]) -> T:
        """``work()`` on one of the pool's threads; raises :class:`Busy` if none is free within :attr:`wait` seconds."""
        try:
            await asyncio.wait_for(self._slots.acquire(), self.wait)
        except TimeoutError:
            self.refused += 1
            raise Busy(
                503,
                f"the server's {self.workers} nbagent reader threads are all busy (a slow disk or a file that does not answer); "
                "try again shortly",
            ) from None
        loop = asyncio.get_running_loop()
        self.busy += 1

        def done(_future: object) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed (the server is stopping)
                loop.call_soon_threadsafe(self._release)

        future = self._executor.submit(work)
        future.add_done_callback(done)
        return await asyncio.wrap_future(future)

    def _release(self) -> None:
        self.busy -= 1
        self._slots.release()

    def close(self) -> None:
        """Stop taking work (threads still running finish on their own)."""
        self._executor.shutdown(wait=False, cancel_futures=True)
