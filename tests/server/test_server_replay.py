"""The server's reading of a long log, in process: bounded chunks, a catch-up shared in bounded pages, a page of events read up to its end."""

from __future__ import annotations

import asyncio
import tracemalloc
from pathlib import Path

import pytest

from nbagent.server.catchup import Replay
from nbagent.server.paging import last_line_seq, read_page
from nbagent.server.source import CHUNK, FileSource
from nbagent.server.tail import Client
from reliability.redteam.server import write_long_log

pytestmark = [pytest.mark.slow]

EVENTS, PAGES = 20_000, 2  # the catch-up's window, in pages of about CHUNK bytes of log


def long_log(path: Path, events: int, size: int = 200) -> Path:
    """A log of ``events`` events: a session's first line, then model calls each streaming 49 deltas of ``size`` characters."""
    return write_long_log(path, events, size)


def test_a_file_source_reads_a_bounded_chunk_at_a_time_and_goes_on_where_it_stopped(tmp_path: Path) -> None:
    log = long_log(tmp_path / "s.jsonl", 20_000)  # about 6 MiB
    source, seqs, reads = FileSource(log), list[int](), 0
    while True:
        batch = source.read(seqs[-1] if seqs else 0)
        reads += 1
        assert len(batch.events) * 200 < 2 * CHUNK and not batch.torn
        seqs += [e["seq"] for e in batch.events]
        if not batch.more:
            break
    assert seqs == list(range(1, 20_001)) and reads >= log.stat().st_size // CHUNK


def test_a_page_of_events_reads_the_log_only_up_to_the_page(tmp_path: Path) -> None:
    log = long_log(tmp_path / "s.jsonl", 20_000)
    page = read_page(log, 0, 1)
    assert [e["seq"] for e in page.events] == [1] and page.more and page.last_seq == 20_000 == last_line_seq(log)
    assert page.trust and page.status.startswith("unfinished")
    later = read_page(log, 19_990, 5)
    assert [e["seq"] for e in later.events] == list(range(19_991, 19_996)) and later.more
    end = read_page(log, 19_998, 5)
    assert [e["seq"] for e in end.events] == [19_999, 20_000] and not end.more and end.last_seq == 20_000


def test_a_catch_up_is_shared_held_in_bounded_pages_and_drops_a_reader_that_does_not_read(tmp_path: Path) -> None:
    log = long_log(tmp_path / "s.jsonl", EVENTS, size=400)  # about 9 MiB of log, 20 MiB of frames rendered
    assert log.stat().st_size > 4 * PAGES * CHUNK

    async def run() -> tuple[list[int], list[int], Client, int, int]:
        replay = Replay(lambda: FileSource(log), window=PAGES)
        idle, fast, late = Client(10), Client(10), Client(10)
        idle_reading = replay.join(idle, 0, EVENTS)
        fast_reading = replay.join(fast, 0, EVENTS)
        got: list[int] = []
        got += [f.seq for f in await replay.take(idle_reading)]  # the idle client takes one page, then never reads again
        most_pages = 0
        late_got: list[int] = []
        while frames := await replay.take(fast_reading):
            got += [f.seq for f in frames]
            most_pages = max(most_pages, len(replay.pages))
            if len(got) > 3000 and not late_got and replay.can_join(0):
                late_reading = replay.join(late, 0, EVENTS)  # joins while page 0 is still kept: shares the pages
                late_got += [f.seq for f in await replay.take(late_reading)]
        return got, late_got, idle, most_pages, replay.made

    tracemalloc.start()
    try:
        got, late_got, idle, most_pages, made = asyncio.run(run())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sorted(set(got)) == list(range(1, EVENTS + 1))  # the idle client's first page and all of the fast one's
    assert late_got and late_got[0] == 1
    assert idle.dropped  # it fell a window of pages behind: dropped, the fast reader never waited
    assert most_pages <= PAGES and made >= 4 * PAGES
    assert peak < 12 * CHUNK, f"the catch-up held {peak / 2**20:.0f} MiB"  # the whole log rendered at once is over 20 MiB
