"""PostgreSQL faults and access: a dropped connection mid-turn, a server restart, a statement timeout, a full disk, SIGKILLs mid-commit, and row-level security with two roles.

Each fault gives a clear error, loses nothing acknowledged, and the next open resumes from the
last committed event.  The full disk is real: the tables live in a tablespace on a small tmpfs
(mounted as root), filled by a session's tool results.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

import nbagent
from nbagent import history, stores
from nbagent.agent.session import Session
from nbagent.errors import LogError, LogWriteError
from nbagent.record import events as ev
from nbagent.stores.postgres_log import LOCK_CLASS
from nbagent.tools.decorator import idempotency_key
from tests.agent.test_session import add_turns
from tests.support import pg_harness
from tests.support.fake_anthropic import FakeAnthropic, text, tool_uses
from tests.support.store_fixtures import use_store

pytestmark = pytest.mark.postgres


@pytest.fixture
def cluster() -> Iterator[pg_harness.Cluster]:
    """A cluster of this test's own (restarted, or with a role's rights changed, without disturbing others)."""
    if pg_harness.missing() or not isinstance(pg_harness.shared(), pg_harness.Cluster):
        pytest.skip("needs a PostgreSQL this test may start and stop (not NBAGENT_TEST_POSTGRES)")
    started = pg_harness.Cluster()
    yield started
    started.destroy()


@pytest.fixture
def url(cluster: pg_harness.Cluster, monkeypatch: pytest.MonkeyPatch) -> str:
    db = cluster.new_database()
    monkeypatch.setenv("NBAGENT_STORE", db)
    return db


def sql(url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []


def writer_pid(url: str) -> int:
    """The backend of the connection that holds a session's writer lock."""
    found = sql(url, "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND granted", LOCK_CLASS)
    assert len(found) == 1, found
    return int(found[0][0])


def test_a_connection_dropped_mid_turn_is_a_clear_error_and_the_next_run_resumes(url: str, tmp_path: Path, fake: FakeAnthropic) -> None:
    path = tmp_path / "session.jsonl"
    runs: list[str] = []

    @nbagent.tool(effect="read")
    def lookup(name: str) -> str:
        """Look a name up."""
        runs.append(name)
        if len(runs) == 1:  # the database drops the writer's connection while the tool runs
            sql(url, "SELECT pg_terminate_backend(%s)", writer_pid(url))
        return f"{name}: found"

    fake.script(tool_uses([("lookup", {"name": "ada"})], "t"), text("done"))
    client = anthropic.Anthropic(base_url=fake.base_url, api_key="test-key", max_retries=0)
    with Session.open(path) as session, pytest.raises(LogWriteError, match="reopen it"):
        nbagent.run(session, "find ada", tools=[lookup], client=client, model="claude-test")
    committed = [e["type"] for e in stores.get_store().read(path)]
    assert committed[-1] == ev.TOOL_STARTED  # everything acknowledged before the drop is there
    fake.script(text("done"))
    with Session.open(path) as session:  # the lock died with the connection: no wait
        assert session.seq == len(committed)
        assert nbagent.run(session, None, tools=[lookup], client=client, model="claude-test") == "done"
    assert runs == ["ada", "ada"]  # a read tool whose result was not committed runs again
    assert history.verify(path, stores.get_store()).ok


def test_a_server_restart_loses_nothing_committed(url: str, tmp_path: Path, cluster: pg_harness.Cluster) -> None:
    path = tmp_path / "session.jsonl"
    with Session.open(path, fsync="turn") as session:
        add_turns(session, 30)
        # Under fsync="turn" a delta commits with synchronous_commit off (the file store does not fsync it
        # either): a server crash may lose it, as a power cut may lose it from a file. A request may not.
        session.append(ev.USER_MSG, content="durable")
        acknowledged = session.seq
        cluster.restart("immediate")  # as a crash would: no checkpoint, the WAL is replayed
        with pytest.raises(LogWriteError, match="reopen it"):
            session.append(ev.USER_MSG, content="after the restart")
    with Session.open(path) as session:
        assert session.seq == acknowledged
        session.append(ev.USER_MSG, content="after the restart")
    assert history.verify(path, stores.get_store()).ok


def test_a_statement_timeout_is_a_clear_error_and_nothing_half_written(url: str, tmp_path: Path) -> None:
    import psycopg

    path = tmp_path / "session.jsonl"
    timed = url + "?options=-c%20statement_timeout%3D300"
    with Session.open(path, store=timed) as session:
        add_turns(session, 5)
        with psycopg.connect(url) as blocker:
            blocker.execute("LOCK TABLE nbagent_sessions IN EXCLUSIVE MODE")  # held until this transaction ends
            with pytest.raises(LogWriteError, match="statement timeout"):
                session.append(ev.USER_MSG, content="blocked")
            blocker.rollback()
        acknowledged = session.seq
    with Session.open(path, store=timed) as session:
        assert session.seq == acknowledged == 6
        session.append(ev.USER_MSG, content="now it goes")
    assert [e["seq"] for e in stores.get_store(url).read(path)] == list(range(1, 8))


TABLESPACE_SIZE = "8m"


def missing_here(reason: str) -> None:
    """Skip with a one-line reason, or under CI=true fail (tests/conftest.py's rule for a missing part)."""
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"CI=true, so a postgres test may not be skipped: it {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def small_disk(cluster: pg_harness.Cluster, url: str) -> Iterator[Path]:
    """The test database's default tablespace on an 8 MB tmpfs owned by the server's OS user; unmounted after, even on failure."""
    if not cluster.as_root:
        missing_here("needs root to mount a small tmpfs for the full-disk test (run as root, as CI does)")
    folder = cluster.folder / "small"  # inside the cluster's folder, which only the server's OS user may enter
    folder.mkdir()
    owner = f"uid={cluster.folder.stat().st_uid},gid={cluster.folder.stat().st_gid}"
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TABLESPACE_SIZE},mode=0700,{owner}", "nbagent-small", str(folder)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        missing_here(f"needs to mount a tmpfs for the full-disk test: mount said {' '.join(mounted.stderr.split()) or mounted.returncode}")
    try:
        sql(url, f"CREATE TABLESPACE small LOCATION '{folder}'")
        sql(url, f'ALTER DATABASE "{url.rsplit("/", 1)[1]}" SET default_tablespace = small')  # before nbagent creates its tables
        yield folder
    finally:
        cluster.stop("immediate")  # the server holds files open there
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], check=True)


@pytest.mark.slow
def test_a_full_disk_is_a_clear_error_loses_nothing_and_the_next_run_resumes(
    small_disk: Path, url: str, tmp_path: Path, fake: FakeAnthropic
) -> None:
    name = f"{url}#{tmp_path / 'full.ipynb'}/disk"
    sql(url, "CREATE TABLE filler AS SELECT repeat('x', 1800) AS pad FROM generate_series(1, 1000)")  # about 2 MB, freed later
    runs: list[int] = []

    @nbagent.tool(effect="read")
    def dump(part: int) -> str:
        """Return one part of a big data set."""
        runs.append(part)
        return base64.b64encode(os.urandom(192 * 1024)).decode()  # 256 KB that no compression shrinks

    full = True
    fake.responder = lambda request: tool_uses([("dump", {"part": len(runs)})]) if full else text("done")
    client = anthropic.Anthropic(base_url=fake.base_url, api_key="test-key", max_retries=0)
    acknowledged: dict[int, str] = {}  # seq -> crc of every event whose append returned
    with Session.open(name) as session:
        session.subscribe(lambda event: acknowledged.__setitem__(event["seq"], event["crc"]))
        with pytest.raises(LogWriteError) as raised:
            nbagent.run(session, "dump every part", tools=[dump], client=client, model="claude-test")
        last = session.seq
    message = str(raised.value)
    assert "out of disk space" in message and "No space left on device" in message, message
    assert "Free space on the database server" in message and "reopen the session" in message, message
    assert "\n" not in message and "Traceback" not in message
    assert len(runs) >= 10  # the tool results filled the tablespace, not something else
    assert sorted(acknowledged) == list(range(1, last + 1))

    where, path = stores.locate(name)
    assert where is not None
    committed = list(where.read(path))
    assert [(e["seq"], e["crc"]) for e in committed] == sorted(acknowledged.items())  # all acknowledged, nothing partial
    assert sql(url, "SELECT count(*), max(seq) FROM nbagent_events") == [(last, last)]
    assert sql(url, "SELECT last_seq FROM nbagent_sessions") == [(last,)]
    assert history.verify(path, where).ok

    sql(url, "DROP TABLE filler")  # space is freed (the files are truncated at commit)
    sql(url, "CHECKPOINT")
    full = False
    with Session.open(name) as session:
        assert session.seq == last  # resumes from the last committed event
        assert nbagent.run(session, None, tools=[dump], client=client, model="claude-test") == "done"
        session.append(ev.USER_MSG, content="and one more")
        end = session.seq
    events = list(where.read(path))
    assert [(e["seq"], e["crc"]) for e in events[:last]] == sorted(acknowledged.items())
    assert [e["seq"] for e in events] == list(range(1, end + 1))
    assert events[-1]["type"] == ev.USER_MSG
    checked = subprocess.run([sys.executable, "-m", "nbagent", "verify", name], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_no_server_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBAGENT_STORE", "postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(LogError, match=r"cannot connect to postgresql://nobody@127.0.0.1:1/none"):
        Session.open(tmp_path / "s.jsonl")


# Each line is one write(2) of under PIPE_BUF bytes, so a SIGKILL cannot tear it: print() with several
# arguments writes each one separately when stdout is unbuffered (PYTHONUNBUFFERED, as in CI).
CHILD = """
import os, sys, nbagent
from nbagent.record import events as ev
session = nbagent.Session.open(sys.argv[1], fsync=sys.argv[2], snapshot_every=7)
os.write(1, f"OPEN {session.seq}\\n".encode())
while True:
    event = session.append(ev.USER_MSG if session.seq % 3 else ev.DELTA, **({"content": "x" * 200} if session.seq % 3 else {"index": 0, "text": "d"}))
    os.write(1, f"ACK {event['seq']}\\n".encode())
"""


def test_sigkill_mid_commit_leaves_whole_transactions_and_the_next_open_resumes(url: str, tmp_path: Path) -> None:
    path = tmp_path / "killed.jsonl"
    rng = random.Random(7)
    for round_ in range(6):
        policy = ("always", "turn", "never")[round_ % 3]
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), policy], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        assert child.stdout.readline().startswith("OPEN")
        time.sleep(rng.uniform(0.05, 0.4))
        child.kill()
        out, _ = child.communicate()
        assert re.fullmatch(r"(ACK \d+\n)*", out), out[-200:]  # whole lines only
        acks = [int(seq) for seq in re.findall(r"ACK (\d+)", out)]
        # The killed writer's lock goes with its connection, once its backend has finished the commit it was making:
        # the open waits for that, so it is read after (a writer killed before its first commit left no row: the open starts it).
        with Session.open(path) as session:
            seqs = [e["seq"] for e in stores.get_store().read(path)]
            resumed = session.seq
        assert seqs == list(range(1, len(seqs) + 1)) and resumed == seqs[-1]  # whole, in order, no gap
        if acks:
            assert seqs[-1] >= acks[-1]  # nothing acknowledged was lost
    assert history.verify(path, stores.get_store()).ok


def test_row_level_security_keeps_each_role_to_its_own_sessions(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    admin = stores.get_store(url)
    admin.list()  # creates the tables as the owner
    assert admin.enable_row_security() is True  # type: ignore[attr-defined]
    assert admin.enable_row_security() is False  # type: ignore[attr-defined]
    base = url.rsplit("/", 1)[0].split("://", 1)[1].split("@", 1)[1]
    db = url.rsplit("/", 1)[1]
    for role in ("alice", "bob"):
        sql(url, f"CREATE ROLE {role} LOGIN")
        sql(url, f"GRANT SELECT, INSERT, UPDATE ON nbagent_sessions, nbagent_events, nbagent_snapshots TO {role}")
        sql(url, f"GRANT SELECT ON _nbagent_migrations TO {role}")
        sql(url, f"GRANT USAGE ON SEQUENCE nbagent_sessions_id_seq TO {role}")
    alice, bob = (f"postgresql://{role}@{base}/{db}" for role in ("alice", "bob"))
    use_store("file", monkeypatch)
    notebook = tmp_path / "shared.ipynb"
    path = tmp_path / ".nbagent" / "shared.ipynb" / "private.jsonl"
    with Session.open(path, store=alice) as session:
        session.append(ev.USER_MSG, content="alice's secret plan")
    with Session.open(tmp_path / ".nbagent" / "shared.ipynb" / "bobs.jsonl", store=bob) as session:
        session.append(ev.USER_MSG, content="bob's notes")
    assert [s.name for s in stores.get_store(alice).list()] == ["private"]
    assert [s.name for s in stores.get_store(bob).list()] == ["bobs"]
    assert [s.owner for s in stores.get_store(bob).list()] == ["bob"]
    with pytest.raises(LogError, match="no session"):
        list(stores.get_store(bob).read(path))
    with Session.open(path, store=bob) as session:  # names are per role: bob's own "private", which tells him nothing of alice's
        assert [e["type"] for e in session.events()] == [ev.SESSION_START]
    assert sql(bob.replace("bob@", "bob@"), "SELECT count(*) FROM nbagent_events")[0][0] == 3  # bob's own lines only
    everyone = {(s.name, s.owner) for s in admin.list()}  # the tables' owner (an auditor) sees every session
    assert everyone == {("private", "alice"), ("private", "bob"), ("bobs", "bob")}
    assert [e["content"] for e in stores.get_store(alice).read(path) if e["type"] == ev.USER_MSG] == ["alice's secret plan"]
    assert f"{url}#{notebook}/private".split("#")[1] == f"{notebook}/private"


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [("--block-in", "charge"), ("--pause-after", "assistant_msg:1"), ("--pause-after", "tool_result:1")])
def test_the_crash_campaign_on_postgres_runs_keyed_effects_once(
    url: str, tmp_path: Path, fake: FakeAnthropic, kill_at: tuple[str, str]
) -> None:
    """tests/campaigns/test_crash.py's job (charge keyed, note unkeyed, lookup read) killed with SIGKILL at one point, resumed in a new process."""
    from tests.campaigns.test_crash import FINAL, PROMPT, responder
    from tests.support.crash_tools import read_effects

    log, effects = tmp_path / "session.jsonl", tmp_path / "effects.jsonl"
    fake.responder = responder()
    common = [sys.executable, "-m", "tests.support.crash_child", str(log), str(effects), fake.base_url]
    first = subprocess.Popen([*common, "--prompt", PROMPT, *kill_at], stdout=subprocess.PIPE, text=True)
    assert first.stdout is not None
    deadline = time.monotonic() + 60
    while not first.stdout.readline().startswith("READY"):
        assert time.monotonic() < deadline and first.poll() is None, "the child never reached the kill point"
    first.kill()
    first.wait()
    resumed = subprocess.run(common, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads(resumed.stdout.split(" final=", 1)[1]) == FINAL
    events = list(stores.get_store().read(log))
    key = idempotency_key(events[0]["session_id"], "toolu_charge")
    applied = [e for e in read_effects(effects) if e["tool"] == "charge" and e["kind"] == "applied"]
    assert [(e["key"], e["args"]) for e in applied] == [(key, {"order": "order-1", "amount": 500})]
    notes = [e for e in read_effects(effects) if e["tool"] == "append_note" and e["kind"] == "applied"]
    assert len(notes) == 1
    assert history.verify(log, stores.get_store()).ok


@pytest.mark.slow
def test_the_kill_loop_quick_on_postgres(url: str) -> None:
    """The reliability campaign's kill loop (40 SIGKILLs at seeded points, resumed) with every session in the database."""
    from reliability import killloop

    row = killloop.run_killloop(quick=True, seed=0, store=url)
    assert row["result"] == "pass", "\n".join(row["failures"])
    assert int(row["cases"].split()[0]) >= 40 and row["details"]["durable events checked"] > 0
    assert row["details"]["torn tails cut off and kept aside"] == 0  # a transaction is never torn
    assert row["scenario"].endswith("on PostgreSQL")
