"""Opening a database session: one round trip for the lock and its reads, the stored snapshot's messages read only when needed."""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest

from nbagent.agent.session import Session
from nbagent.errors import LogLockedError
from nbagent.record import events as ev
from nbagent.state import fold
from nbagent.stores import get_store
from nbagent.stores.postgres_log import LOCK_CLASS, SNAPSHOT_HEAD
from tests.support.store_fixtures import database

pytestmark = pytest.mark.postgres


def _build(url: str, path: Path, turns: int = 40) -> list[object]:
    """A closed session whose stored snapshot's messages line is longer than what opening reads; its messages folded from the log."""
    with Session.open(path, store=url, fsync="never") as session:
        for n in range(turns):
            session.append(ev.USER_MSG, content=f"request {n}: " + "tell me about the totals " * 80)
            session.append(ev.ASSISTANT_MSG, content=[{"type": "text", "text": f"answer {n} " * 200}], stop_reason="end_turn", usage={})
    return list(fold.fold(list(get_store(url).read(path))).messages)


def _snapshot_size(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.execute("SELECT max(length(data)) FROM nbagent_snapshots").fetchone()[0])


def test_a_stored_snapshot_s_messages_are_read_when_first_needed(tmp_path: Path) -> None:
    url = database("open-lazy")
    path = tmp_path / "s.jsonl"
    expected = _build(url, path)
    assert _snapshot_size(url) > 2 * SNAPSHOT_HEAD  # so the messages line is read after opening, not with the header
    with Session.open(path, store=url) as session:
        assert session.state.frontier is not None
        assert list(session.state.messages) == expected
        assert session.snapshot_note == ""  # the snapshot was used, not replayed around


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ("UPDATE nbagent_snapshots SET seq = seq + 1000", "replaced since it was opened"),
        ("UPDATE nbagent_snapshots SET data = overlay(data placing '\\x2a2a2a'::bytea from length(data) - 100)", "fails its checksum"),
    ],
)
def test_a_snapshot_changed_after_opening_is_not_used_for_messages(tmp_path: Path, change: str, why: str) -> None:
    url = database("open-changed")
    path = tmp_path / "s.jsonl"
    expected = _build(url, path)
    with Session.open(path, store=url) as session:
        assert session.state.frontier is not None  # the header and the state line came with opening
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(change)  # every session of this database: only this one has a snapshot
        assert list(session.state.messages) == expected  # folded from the log instead
        assert why in session.snapshot_note


def test_opening_a_new_session_and_reopening_it_find_the_same_row(tmp_path: Path) -> None:
    url = database("open-new")
    path = tmp_path / "fresh.jsonl"
    with Session.open(path, store=url) as session:
        first = session.append(ev.USER_MSG, content="hello")
    with Session.open(path, store=url) as session:
        assert session.seq == first["seq"]
        assert [e["type"] for e in get_store(url).read(path)] == [ev.SESSION_START, ev.USER_MSG]


def _hold_lock(url: str, path: Path) -> psycopg.Connection:
    """Another connection holding the session's advisory lock (a killed writer's backend still finishing its commit)."""
    conn = psycopg.connect(url, autocommit=True)
    row = conn.execute("SELECT id FROM nbagent_sessions WHERE name = %s", (path.stem,)).fetchone()
    assert row is not None
    assert conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_CLASS, row[0])).fetchone() == (True,)
    return conn


def test_opening_waits_briefly_for_a_lock_that_is_released(tmp_path: Path) -> None:
    url = database("open-wait")
    path = tmp_path / "s.jsonl"
    with Session.open(path, store=url) as session:
        first = session.append(ev.USER_MSG, content="hello")
    holder = _hold_lock(url, path)
    busy = threading.Thread(target=_busy_then_close, args=(holder, 0.5))  # closing the connection releases its lock
    busy.start()
    try:
        with Session.open(path, store=url) as session:
            assert session.seq == first["seq"]
    finally:
        busy.join()


def _busy_then_close(conn: psycopg.Connection, seconds: float) -> None:
    """The holder's backend busy for ``seconds`` (like one finishing a killed writer's commit), then gone."""
    with conn:
        conn.execute("SELECT pg_sleep(%s)", (seconds,))


def test_opening_a_session_locked_throughout_still_says_so(tmp_path: Path) -> None:
    url = database("open-locked")
    path = tmp_path / "s.jsonl"
    with Session.open(path, store=url) as session:
        session.append(ev.USER_MSG, content="hello")
    with _hold_lock(url, path), pytest.raises(LogLockedError, match="is open for writing in another process or session"):
        Session.open(path, store=url)


def test_opening_a_session_whose_lock_stays_busy_says_so_after_a_bounded_wait(tmp_path: Path) -> None:
    url = database("open-busy")
    path = tmp_path / "s.jsonl"
    with Session.open(path, store=url) as session:
        session.append(ev.USER_MSG, content="hello")
    busy = threading.Thread(target=_busy_then_close, args=(_hold_lock(url, path), 6))
    busy.start()
    try:
        with pytest.raises(LogLockedError, match="is open for writing in another process or session"):
            Session.open(path, store=url)
    finally:
        busy.join()
