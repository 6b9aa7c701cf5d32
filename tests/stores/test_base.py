"""The store seam: the same session semantics on the file store and on PostgreSQL, and what only the database adds.

Runs on both stores: appending and reading back, subscribers with no gap and no duplicate while
another thread appends, the one-writer lock (same message), reading since N and following.
PostgreSQL only: unique keys (exactly-once dispatch against a buggy client), the line format
read back byte for byte, schema migrations and a newer schema refused, NOTIFY-driven follow.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from nbagent import stores
from nbagent.agent.session import Session
from nbagent.errors import LogLockedError, LogVersionError, LogWriteError
from nbagent.record import events as ev
from nbagent.state.fold import fold
from nbagent.stores import migrations
from tests.agent.test_session import Recorder, add_turns
from tests.support.store_fixtures import STORES, database, use_store

pytestmark = []


@pytest.fixture(params=STORES)
def kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The store under test, selected through NBAGENT_STORE."""
    use_store(request.param, monkeypatch)
    return str(request.param)


def read_back(path: Path) -> list[ev.Event]:
    """Every event of the session at ``path`` from whichever store NBAGENT_STORE names (without the lock)."""
    return list(stores.get_store().read(path))


def test_append_read_back_and_fold_agree(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    with Session.open(path, fsync="turn") as session:
        add_turns(session, 30)  # after the session_start: seq 31
        written = session.state
    assert [e["seq"] for e in read_back(path)] == list(range(1, 32))
    assert fold(read_back(path)) == written
    assert [e["seq"] for e in stores.get_store().read(path, since=26)] == [27, 28, 29, 30, 31]
    with Session.open(path) as session:  # reopened from the snapshot plus nothing
        assert session.seq == 31 and session.state == written and session.trusted
        assert [e["seq"] for e in session.events(since=29)] == [30, 31]


def test_subscribers_joining_while_another_thread_appends_see_no_gap_and_no_duplicate(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    with Session.open(path, fsync="never") as session:
        add_turns(session, 20)
        done = threading.Event()

        def writer() -> None:
            for _ in range(30):
                add_turns(session, 5, tag="w")
                time.sleep(0.001)  # let subscribers join between appends too
            done.set()

        thread = threading.Thread(target=writer)
        thread.start()
        recorders: list[Recorder] = []
        while len(recorders) < 20:
            recorder = Recorder()
            session.subscribe(recorder, since=max(0, session.seq - 7))
            recorders.append(recorder)
            if done.is_set():
                break
        thread.join()
        last = session.seq
    assert recorders
    for recorder in recorders:
        first = recorder.seqs[0]
        assert recorder.seqs == list(range(first, last + 1)), "a gap or a duplicate"
    assert fold(read_back(path)).seq == last


def test_a_second_writer_is_refused_at_once_with_the_same_message(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    with Session.open(path) as session:
        started = time.monotonic()
        with pytest.raises(LogLockedError) as refused:
            Session.open(path)
        assert time.monotonic() - started < 2
        assert (
            str(refused.value)
            == f"{session.where} is open for writing in another process or session (a second kernel on this notebook?). Close that session or stop that kernel, or open a new session here."
        )
    with Session.open(path) as again:  # released on close
        assert again.seq == 1


def test_follow_catches_up_then_gets_each_new_event_once(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    with Session.open(path, fsync="never") as session:
        add_turns(session, 12)
    seen: list[int] = []
    store = stores.get_store()

    def follower() -> None:
        for event in store.follow(path, since=5, idle_timeout=1.5):
            seen.append(event["seq"])

    thread = threading.Thread(target=follower)
    thread.start()
    with Session.open(path, fsync="never") as session:
        for _ in range(4):
            add_turns(session, 5, tag="live")
            time.sleep(0.05)
        last = session.seq
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert seen == list(range(6, last + 1))


def test_the_store_lists_its_sessions_and_filters_by_text(kind: str, tmp_path: Path) -> None:
    for name, request in (("one", "plot the sales"), ("two", "clean the survey data")):
        with Session.open(tmp_path / f"{name}.jsonl") as session:
            session.append(ev.USER_MSG, content=request)
    store = stores.get_store() if kind == "postgres" else stores.FileStore(tmp_path)
    assert [(s.name, s.title, s.events) for s in store.list(notebook=str(tmp_path))] == [
        ("one", "plot the sales", 2),
        ("two", "clean the survey data", 2),
    ]
    assert [s.name for s in store.list(notebook=str(tmp_path), text="SURVEY")] == ["two"]


def test_the_store_lists_the_sessions_of_the_notebooks_under_a_folder(kind: str, tmp_path: Path) -> None:
    for folder in ("a_b", "axb", "a_b/deep", "a_bc"):  # '_' is a LIKE wildcard: it must match only itself
        with Session.open(tmp_path / folder / ".nbagent/nb.ipynb" / f"{folder.replace('/', '-')}.jsonl") as session:
            session.append(ev.USER_MSG, content=f"in {folder}")
    store = stores.get_store() if kind == "postgres" else stores.FileStore(tmp_path)
    assert sorted(s.name for s in store.list(under=str(tmp_path / "a_b"))) == ["a_b", "a_b-deep"]
    assert sorted(s.name for s in store.list(under=str(tmp_path / "a_b") + "/")) == ["a_b", "a_b-deep"]
    assert len(store.list(under=str(tmp_path))) == 4


# PostgreSQL only --------------------------------------------------------------------------------------
@pytest.fixture
def pg(monkeypatch: pytest.MonkeyPatch) -> str:
    """The database URL, with NBAGENT_STORE pointing at it."""
    return use_store("postgres", monkeypatch)


def rows(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


@pytest.mark.postgres
def test_the_rows_are_the_file_byte_for_byte(pg: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "session.jsonl"
    with Session.open(path, fsync="never") as session:
        add_turns(session, 40)
        size = session._log.size  # noqa: SLF001 - the virtual file's length
    data = stores.get_store().read_bytes(path)  # type: ignore[attr-defined]
    assert len(data) == size and data.count(b"\n") == 41
    monkeypatch.delenv("NBAGENT_STORE")
    file_path = tmp_path / "copy.jsonl"
    file_path.write_bytes(data)
    with Session.open(file_path) as reopened:  # the same bytes are a valid log, signed by this user
        assert reopened.seq == 41 and reopened.trusted
    owner = rows(
        pg,
        "SELECT DISTINCT e.role, e.signer FROM nbagent_events e JOIN nbagent_sessions s ON s.id = e.session WHERE s.name = 'session' AND s.notebook = %s",
        str(tmp_path),
    )
    assert len(owner) == 1 and owner[0][0] == "postgres" and len(owner[0][1]) == 8


@pytest.mark.postgres
def test_unique_keys_make_dispatch_exactly_once_whatever_the_client_does(pg: str, tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    with Session.open(path) as session:
        content = [{"type": "tool_use", "id": "toolu_1", "name": "charge", "input": {}}]
        session.append(ev.USER_MSG, content="pay")
        session.append(ev.ASSISTANT_MSG, content=content, stop_reason="tool_use", usage={})
        session.append(ev.TOOL_STARTED, tool_use_id="toolu_1", name="charge", effect="write", attempt=1)
        with pytest.raises(LogWriteError, match="attempt 1 was already started"):  # a buggy client starts it again
            session.append(ev.TOOL_STARTED, tool_use_id="toolu_1", name="charge", effect="write", attempt=1)
        session.append(ev.TOOL_STARTED, tool_use_id="toolu_1", name="charge", effect="write", attempt=2)  # a numbered retry is fine
        session.append(ev.TOOL_RESULT, tool_use_id="toolu_1", content="ok")
        with pytest.raises(LogWriteError, match="already has its result"):
            session.append(ev.TOOL_RESULT, tool_use_id="toolu_1", content="twice")
        session.append(ev.USER_MSG, content="thanks")  # the session goes on after a refusal
        assert session.seq == 7
    events = read_back(path)
    assert [e["type"] for e in events].count(ev.TOOL_STARTED) == 2 and [e["type"] for e in events].count(ev.TOOL_RESULT) == 1
    # A racing client that goes around the lock is refused by the primary key: (session, seq) never interleaves.
    import psycopg

    with pytest.raises(psycopg.errors.UniqueViolation):
        rows(
            pg,
            "INSERT INTO nbagent_events (session, seq, start_at, ts, type, line) SELECT session, seq, start_at + 1, ts, type, line FROM nbagent_events WHERE seq = 7 LIMIT 1",
        )


@pytest.mark.postgres
def test_a_crashed_writer_releases_its_lock_with_its_connection(pg: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "session.jsonl"
    code = f"import sys, nbagent; s = nbagent.Session.open({str(path)!r}); print('open', flush=True); sys.stdin.read()"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "open"
        with pytest.raises(LogLockedError, match="a second kernel on this notebook"):
            Session.open(path)
        child.kill()
        child.wait()
        deadline = time.monotonic() + 10
        while True:
            try:
                with Session.open(path) as session:
                    assert session.seq == 1
                break
            except LogLockedError:
                assert time.monotonic() < deadline, "the lock outlived the killed writer"
                time.sleep(0.05)
    finally:
        child.kill()


@pytest.mark.postgres
def test_migrations_are_named_applied_once_and_a_newer_schema_is_refused(tmp_path: Path) -> None:
    url = database(f"migrations-{tmp_path.name}")
    store = stores.get_store(url)
    assert store.list() == []
    names = [r[0] for r in rows(url, "SELECT name FROM _nbagent_migrations ORDER BY name")]
    assert names == [m.__name__ for m in migrations.MIGRATIONS] == ["m001_sessions_and_events", "m002_snapshots", "m003_private_channels"]
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        assert migrations.migrate(conn) == []  # applied once
        conn.execute("INSERT INTO _nbagent_migrations (name) VALUES ('m099_from_the_future')")
    fresh = stores.postgres.PostgresStore(url)  # type: ignore[attr-defined]
    with pytest.raises(LogVersionError, match=r"m099_from_the_future.*Upgrade nbagent"):
        fresh.list()


@pytest.mark.postgres
def test_a_session_url_names_the_same_session_as_its_path(pg: str, tmp_path: Path) -> None:
    notebook = tmp_path / "analysis.ipynb"
    path = tmp_path / ".nbagent" / "analysis.ipynb" / "morning.jsonl"
    with Session.open(path) as session:
        session.append(ev.USER_MSG, content="hello")
    url = f"{pg}#{notebook}/morning"
    assert stores.session_url(stores.get_store(), path) == url
    with Session.open(url, store="") as session:
        assert session.seq == 2 and session.where == url
    assert not path.exists()  # nothing was written beside the notebook


@pytest.mark.postgres
def test_sync_commit_follows_the_fsync_policy(pg: str, tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    with Session.open(path, fsync="turn") as session:
        log = session._log  # noqa: SLF001
        session.append(ev.DELTA, index=0, text="x")  # not durable: committed with synchronous_commit off
        assert log._unsynced  # type: ignore[attr-defined]  # noqa: SLF001
        session.append(ev.USER_MSG, content="durable")  # committed with it on
        log.sync()
        assert not log._unsynced  # type: ignore[attr-defined]  # noqa: SLF001


@pytest.mark.postgres
def test_a_watch_reads_after_a_seq_and_wakes_on_each_commit(pg: str, tmp_path: Path) -> None:
    import asyncio

    path = tmp_path / "session.jsonl"
    with Session.open(path) as session:
        add_turns(session, 4)
    watch = stores.get_store().watch(path)  # type: ignore[attr-defined]
    try:
        assert [e["seq"] for e in watch.read(2)] == [3, 4, 5]
        assert watch.wait_blocking(0.2) is False  # nothing new: it times out
        with Session.open(path) as session:
            session.append(ev.USER_MSG, content="more")
        started = time.monotonic()
        asyncio.run(watch.wait(10))
        assert time.monotonic() - started < 5  # woken by the NOTIFY, not the timeout
        assert [e["seq"] for e in watch.read(5)] == [6]
    finally:
        watch.close()


@pytest.mark.postgres
def test_the_notebook_writes_to_the_store_agent_store_names(shell: Any, fake: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.notebook.test_magics import run
    from tests.support.fake_anthropic import text

    use_store("file", monkeypatch)
    url = database()
    fake.script(text("Hello from the database"), text("again"))
    shell.run_cell(f"%config Agent.store = {url!r}")
    assert run(shell, "%agent --session teamwork say hello").success
    assert run(shell, "%agent --session teamwork and again").success  # the same session, continued
    assert not (tmp_path / ".nbagent" / "untitled" / "teamwork.jsonl").exists()  # nothing beside the notebook
    path = tmp_path / ".nbagent" / "untitled" / "teamwork.jsonl"
    events = list(stores.get_store(url).read(path))
    assert [e["content"] for e in events if e["type"] == ev.USER_MSG] == ["say hello", "and again"]
