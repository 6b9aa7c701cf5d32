"""The events API's pages: seeking a line of a log file by bisection, and a database session paged by its rows, labelled a piece at a time."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from nbagent import stores
from nbagent.agent.session import Session
from nbagent.history.summary import from_state
from nbagent.record import trust
from nbagent.record.log_reader import read_events, scan, whole_lines
from nbagent.server import labels, paging, source
from nbagent.state import fold
from nbagent.stores import Listed, snapshot
from tests.agent.test_session import add_turns
from tests.support import pg_harness
from tests.support.store_fixtures import database


def make_log(path: Path, events: int, *, snapshot_every: int = 0) -> None:
    with Session.open(path, fsync="never", snapshot_every=snapshot_every) as session:
        add_turns(session, events - 1)


def old_labels(data: bytes, upto: int) -> tuple[str, str]:
    """The labels as the server computed them before (the whole prefix in memory, the whole fold)."""
    lines = [line for _pos, line in whole_lines(data)][:upto]
    prefix = b"".join(line + b"\n" for line in lines)
    summary = from_state(Listed("", ""), fold.fold(scan(prefix, path="x").events))
    return trust.check_log(prefix, user=trust.user_signer_or_none()).verdict, summary.status


def test_seek_finds_a_line_at_or_just_before_every_seq(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    make_log(path, 3000)
    data = path.read_bytes()
    starts = {n: pos for n, (pos, _line) in enumerate(whole_lines(data), start=1)}
    monkeypatch.setattr(labels, "PROBE", 2048)  # many bisection steps on a small log
    for seq in (1, 2, 17, 1000, 2999, 3000, 3001):
        offset, found = labels.seek(path, seq)
        assert found <= seq and starts[found] == offset
        assert offset >= starts[min(seq, 3000)] - 4 * 2048  # near the line, not the log's start
    assert labels.seek(path, 1) == (0, 1)


def test_a_snapshot_of_another_log_is_not_taken_for_a_line_start(tmp_path: Path) -> None:
    path, other = tmp_path / "s.jsonl", tmp_path / "o.jsonl"
    make_log(path, 400)
    make_log(other, 900, snapshot_every=100)
    assert snapshot.path_for(other).exists()
    os.replace(snapshot.path_for(other), snapshot.path_for(path))  # a stale snapshot beside the log: its offset is no line start here
    offset, found = labels.seek(path, 399)
    starts = {n: pos for n, (pos, _line) in enumerate(whole_lines(path.read_bytes()), start=1)}
    assert starts[found] == offset
    assert [e["seq"] for e in paging.read_page(path, 390, 5).events] == [391, 392, 393, 394, 395]


@pytest.mark.parametrize(("since", "limit"), [(0, 10), (1234, 50), (2950, 100), (2999, 5)])
def test_a_page_has_the_events_and_labels_of_a_whole_read(tmp_path: Path, since: int, limit: int) -> None:
    path = tmp_path / "s.jsonl"
    make_log(path, 3000)
    events = [e for e in read_events(path) if e["seq"] > since]
    page = paging.read_page(path, since, limit)
    assert page.events == events[:limit] and page.more == (len(events) > limit) and page.last_seq == 3000
    end = page.events[-1]["seq"]
    assert (page.trust, page.status) == old_labels(path.read_bytes(), end)


def test_a_page_deep_in_a_log_reads_from_near_its_first_event(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    make_log(path, 6000)
    size = path.stat().st_size
    sources: list[source.FileSource] = []

    class Recorded(source.FileSource):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            sources.append(self)

    monkeypatch.setattr(paging, "FileSource", Recorded)
    page = paging.read_page(path, 5990, 5)
    assert [e["seq"] for e in page.events] == [5991, 5992, 5993, 5994, 5995] and page.more
    (used,) = sources
    assert used.start[0] > size * 0.9 and used.start[1] <= 5991  # the page's own reads start near it, not at line 1


@pytest.mark.postgres
def test_a_database_session_is_paged_by_its_rows(tmp_path: Path) -> None:
    if pg_harness.missing():
        pytest.skip(pg_harness.missing() or "")
    store = stores.get_store(database("paging"))
    path = tmp_path / ".nbagent" / "n.ipynb" / "s.jsonl"
    with Session.open(path, store=store, fsync="never", snapshot_every=0) as session:
        add_turns(session, 2499)
    data = store.read_bytes(path)  # type: ignore[attr-defined]
    everything = list(store.read(path))
    for since, limit in ((0, 10), (1000, 100), (2490, 50), (2500, 10)):
        page = paging.read_stored_page(store, path, store.where(path), since, limit)  # type: ignore[attr-defined]
        wanted = [e for e in everything if e["seq"] > since]
        assert page.events == wanted[:limit] and page.more == (len(wanted) > limit) and page.last_seq == 2500
        end = page.events[-1]["seq"] if page.events else 2500
        assert (page.trust, page.status) == old_labels(data, end)
    assert b"".join(store.pieces(path)) == data  # type: ignore[attr-defined]
    assert b"".join(store.pieces(path, 10)) == b"".join(line + b"\n" for _pos, line in list(whole_lines(data))[:10])  # type: ignore[attr-defined]
