"""The database writer's append: the index row follows every event (last_ts every durable one), the one-writer check holds, the log kept in memory is bounded."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from nbagent import stores
from nbagent.agent.session import Session
from nbagent.errors import LogWriteError
from nbagent.record import events as ev
from tests.support.store_fixtures import database

pytestmark = pytest.mark.postgres

BOUND = 8 << 20  # the most of its log a writer keeps in memory (docs/postgres.md)
INDEX = "SELECT session_id, signer, title, requests, created, last_ts, last_seq, size, turns FROM nbagent_sessions WHERE name = %s"


def _index(url: str, name: str) -> tuple[object, ...]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(INDEX, (name,)).fetchone()
    assert row is not None
    return tuple(row)


def test_the_index_row_follows_every_event(tmp_path: Path) -> None:
    url = database("append-index")
    path = tmp_path / "s1.jsonl"
    with Session.open(path, store=url, fsync="turn") as session:
        first = session.state
        session.append(ev.USER_MSG, content="  sum   the totals  ")
        session.append(ev.MODEL_CALL, model="m", attempt=1)
        session.append(ev.DELTA, index=0, text="piece")
        session.append(ev.ASSISTANT_MSG, content=[{"type": "text", "text": "done"}], stop_reason="end_turn", usage={})
        request = session.append(ev.USER_MSG, content=[{"type": "text", "text": "and"}, {"type": "text", "text": "the means"}])
        session.append(ev.DELTA, index=0, text="more")  # a non-durable event last: last_ts stays (its update is HOT)
        size = session._log.size  # noqa: SLF001 - the log's length
    lines = stores.get_store(url).read_bytes(path)  # type: ignore[attr-defined]
    start = json.loads(lines.split(b"\n", 1)[0])
    session_id, signer, title, requests, created, last_ts, last_seq, stored_size, turns = _index(url, "s1")
    assert (session_id, signer, created) == (first.session_id, start["sig"].split(":")[0], start["ts"])
    assert title == "sum the totals" and requests == "  sum   the totals  \nand the means\n"
    assert (last_ts, last_seq, stored_size, turns) == (request["ts"], 7, size, 2)
    assert len(lines) == size


def test_an_event_out_of_order_in_the_index_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    url = database("append-writer")
    path = tmp_path / "s1.jsonl"
    with Session.open(path, store=url) as session:
        session.append(ev.USER_MSG, content="one")
        with psycopg.connect(url, autocommit=True) as conn:  # a writer that went around the lock moved the index on
            conn.execute("UPDATE nbagent_sessions SET last_seq = last_seq + 1 WHERE name = 's1'")
        with pytest.raises(LogWriteError, match=r"refused event 3: the database's last event is not 2"):
            session.append(ev.USER_MSG, content="two")
        with pytest.raises(LogWriteError, match="refused a write because an earlier one failed"):
            session.append(ev.USER_MSG, content="three")
    assert [e["seq"] for e in stores.get_store(url).read(path)] == [1, 2]


def test_the_writer_keeps_a_bounded_tail_of_the_log_in_memory(tmp_path: Path) -> None:
    url = database("append-cache")
    path = tmp_path / "s1.jsonl"
    text = "x" * 60_000
    with Session.open(path, store=url, fsync="never", snapshot_every=0) as session:
        log = session._log  # noqa: SLF001 - what the writer holds
        while log.size < 3 * BOUND:
            session.append(ev.USER_MSG, content=text)
            assert len(log._cache) <= 2 * BOUND  # type: ignore[attr-defined]  # noqa: SLF001
        whole = stores.get_store(url).read_bytes(path)  # type: ignore[attr-defined]
        assert log.read(0, log.size) == whole  # what fell out of memory is read from the table
        assert log.read(1000, 5000) == whole[1000:5000] and log.read(log.size - 100) == whole[-100:]
    with Session.open(path, store=url, snapshot_every=0) as session:  # reopened without a snapshot: the whole log is checked
        assert session.seq == whole.count(b"\n")
        assert len(session._log._cache) <= 2 * BOUND  # type: ignore[attr-defined]  # noqa: SLF001
