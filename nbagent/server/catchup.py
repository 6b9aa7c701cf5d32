"""A catch-up from the start of a log, shared by the clients that need it: rendered once, in bounded pages, held until all took them.

A stream client whose ``Last-Event-ID`` is older than what its tail keeps needs frames rendered
from the session's first event (tool names and notes come from earlier events).  One
:class:`Replay` reads the log with a source of its own, a page (about :data:`~.source.CHUNK`
bytes of log) at a time, and renders each page once for every client reading it.  A page is
kept until every reader has taken it (the last ``window // 2`` a while longer, for clients that
join late), and at most ``window`` pages are kept: a reader that falls ``window`` pages behind
the fastest one (it does not read) is dropped, so the others never wait for it and memory stays
bounded whatever the length of the log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from .present import Frame, Presenter
from .source import EventSource

if TYPE_CHECKING:
    from .tail import Client

WINDOW = 8  # pages a replay keeps at most (about 2 MiB of rendered frames each)


class Reading:
    """One client's place in a replay: the next page it takes, and the seqs it wants."""

    def __init__(self, client: Client, since: int, until: int) -> None:
        self.client, self.since, self.until = client, since, until
        self.page = 0
        self.done = False


class Replay:
    """The shared catch-up read of one log from its first event (see the module's docstring)."""

    def __init__(self, open_source: Callable[[], EventSource], window: int = WINDOW) -> None:
        self.open_source, self.window = open_source, window
        self.source: EventSource | None = None
        self.presenter = Presenter()
        self.pages: dict[int, list[Frame]] = {}  # page number -> its frames, for pages some reader has not taken yet
        self.made = 0  # pages rendered so far
        self.last_seq = 0  # the last seq rendered
        self.finished = False  # the log's end (or a problem) was reached
        self.readings: list[Reading] = []
        self.dropped = 0  # readers dropped for falling too far behind
        self._lock = asyncio.Lock()

    def can_join(self, since: int) -> bool:
        """Whether a client wanting the frames after ``since`` can still get them all here (else it needs a replay of its own)."""
        return not self.finished and (self.made == 0 or 0 in self.pages or since >= self._first_kept_seq())

    def _first_kept_seq(self) -> int:
        kept = min(self.pages, default=self.made)
        frames = self.pages.get(kept)
        return frames[0].seq - 1 if frames else self.last_seq

    def join(self, client: Client, since: int, until: int) -> Reading:
        """Start reading for a client: it gets the frames with ``since < seq <= until``."""
        reading = Reading(client, since, until)
        reading.page = min(self.pages, default=self.made)
        self.readings.append(reading)
        return reading

    def leave(self, reading: Reading) -> None:
        """A reader is done (or gone): pages no one needs any more are let go; the last one out closes the source."""
        if reading in self.readings:
            self.readings.remove(reading)
        self._trim()
        if not self.readings and self.source is not None:
            self.source.close()
            self.source = None

    async def take(self, reading: Reading) -> list[Frame]:
        """The reader's next frames ([] once it has them all, or it was dropped)."""
        while not (reading.done or reading.client.dropped or reading.client.closed):
            if reading.page < self.made:
                frames = self.pages[reading.page]
                reading.page += 1
                self._trim()
                if frames and frames[-1].seq >= reading.until:
                    reading.done = True
                wanted = [f for f in frames if reading.since < f.seq <= reading.until]
                if wanted:
                    return wanted
                continue
            if self.finished:
                reading.done = True
                break
            async with self._lock:
                if reading.page >= self.made and not self.finished:
                    self._drop_laggards()
                    await self._make()
        return []

    def _drop_laggards(self) -> None:
        """Before a new page: drop the readers ``window`` pages behind (they do not read); the others go on."""
        for other in list(self.readings):
            if self.made - other.page >= self.window:
                self.dropped += 1
                other.client.drop()
                self.readings.remove(other)
        self._trim()

    def _trim(self) -> None:
        """Let go of the pages no reader needs that are not among the last ``window // 2`` (kept for readers that join late)."""
        oldest = min([self.made - self.window // 2, *(r.page for r in self.readings)])
        for page in [p for p in self.pages if p < oldest]:
            del self.pages[page]

    async def _make(self) -> None:
        """Read and render the next page (in a worker thread)."""

        def render() -> tuple[list[Frame], bool]:
            if self.source is None:
                self.source = self.open_source()
            batch = self.source.read(self.last_seq)
            frames = [self.presenter.frame(e) for e in batch.events]
            return frames, not batch.more or bool(batch.problem)

        frames, finished = await asyncio.get_running_loop().run_in_executor(None, render)
        self.pages[self.made] = frames
        self.made += 1
        if frames:
            self.last_seq = frames[-1].seq
        self.finished = finished
        self._trim()
