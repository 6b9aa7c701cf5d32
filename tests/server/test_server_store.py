"""The server extension on a PostgreSQL store: a real ``jupyter server`` with ``NBAGENT_STORE`` set, and a real cluster.

Listing from the index (the events of an unfinished turn read for its ``open_turn``, as a file's are), events
as the store reads them, a stream that follows another process's appends through LISTEN/NOTIFY (no polling) and
resumes with Last-Event-ID, read-only (no advisory lock, no secret), bad input, and the database going away and
coming back.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nbagent.history import json_row, store_summaries, summarize
from nbagent.server.open_turn import open_turn
from nbagent.stores import get_store, locate
from tests.support import pg_harness
from tests.support.server_harness import NbServer, session_api, write_turns

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
pytest.importorskip("jupyter_server", reason="jupyter_server is not installed (pip install 'nbagent[server]')")
pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'nbagent[postgres]')")
ELSEWHERE = "/elsewhere/team/other.ipynb"  # a notebook on another node: not under the server's root


@pytest.fixture(scope="module")
def cluster() -> Iterator[pg_harness.Cluster]:
    """A cluster of this module's own (the database-down test stops and starts it)."""
    if pg_harness.missing():
        pytest.skip(pg_harness.missing() or "")
    found = pg_harness.Cluster()
    yield found
    found.destroy()


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("server-store")


@pytest.fixture(scope="module")
def url(cluster: pg_harness.Cluster) -> str:
    return cluster.new_database()


def name(url: str, notebook: str, session: str) -> str:
    """A database session's full name."""
    return f"{url}#{notebook}/{session}"


@pytest.fixture(scope="module")
def server(place: Path, url: str) -> Iterator[NbServer]:
    root = place / "root"
    root.mkdir()
    for notebook in ("team.ipynb", "files.ipynb"):
        (root / notebook).write_text("{}")
    write_turns(name(url, str(root / "team.ipynb"), "s1"), 14, 0)  # type: ignore[arg-type]  # a session URL, as Session.open takes it
    write_turns(name(url, ELSEWHERE, "s2"), 8, 0)  # type: ignore[arg-type]
    write_turns(root / ".nbagent/files.ipynb/f1.jsonl", 6, 0)  # a log file beside its notebook, served as before
    (place / "server-data").mkdir()
    args = ["--NbagentServer.heartbeat=0.3", "--NbagentServer.linger=0.5"]
    env = {"NBAGENT_STORE": url, "NBAGENT_DATA_DIR": str(place / "server-data")}  # the store setting's default
    nb = NbServer(root, place / "home", args=args, env=env)
    nb.start()
    yield nb
    nb.stop()


def rows(server: NbServer, path: str = "") -> list[dict[str, Any]]:
    reply = server.get("nbagent/api/sessions?" + urllib.parse.urlencode({"path": path}))
    assert reply.status == 200, reply.body
    return list(reply.body["sessions"])


def stored_events(url: str, notebook: str, session: str) -> list[dict[str, Any]]:
    store, path = locate(name(url, notebook, session))
    assert store is not None
    return list(store.read(path))


def sql(url: str, query: str) -> list[tuple[Any, ...]]:
    """Run one statement as the database's superuser; its rows if it returns any."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query)
        return list(cursor.fetchall()) if cursor.description else []


def start_writer(place: Path, session_url: str, events: int, interval: float) -> subprocess.Popen[bytes]:
    """Another process appending through nbagent.Session.open(url), as a kernel on another node does; waits for its first event."""
    ready = place / f"ready-{time.monotonic_ns()}"
    code = "import sys; from pathlib import Path; from tests.support.server_harness import write_turns; "
    code += "write_turns(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), ready=Path(sys.argv[4]))"
    process = subprocess.Popen(
        [sys.executable, "-c", code, session_url, str(events), str(interval), str(ready)], cwd=Path(__file__).resolve().parents[2]
    )
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert process.poll() is None and time.monotonic() < deadline, "the writer did not start"
        time.sleep(0.02)
    return process


def tail_of(server: NbServer, session_url: str) -> dict[str, Any]:
    return next(t for t in server.get("nbagent/api/tails").body["tails"] if t["log"] == session_url)


def test_the_listing_comes_from_the_index_with_the_cli_shape(server: NbServer, url: str, tmp_path: Path) -> None:
    team = str(server.root / "team.ipynb")
    everything = rows(server)
    assert sorted((r["notebook"], r["name"], r.get("store")) for r in everything) == sorted(
        [
            (ELSEWHERE, "s2", url),
            ("files.ipynb", "f1", None),  # log files are listed as before (relative to the root, no store)
            (team, "s1", url),
        ]
    )
    row = next(r for r in everything if r["name"] == "s1")
    (expected,) = [json_row(s) for s in store_summaries(get_store(url)) if s.name == "s1"]  # `nbagent sessions --store URL --json`
    assert set(row) == set(expected) | {"store", "links", "open_turn"}
    store, path = locate(name(url, team, "s1"))
    as_file = tmp_path / "s1.jsonl"
    as_file.write_bytes(store.read_bytes(path))  # type: ignore[union-attr]  # the same bytes as a log file
    assert (
        row["open_turn"] == open_turn(summarize(as_file), as_file) == {"seq": 14, "cell_id": None, "request": "request 13: say something"}
    )
    assert {k: row[k] for k in expected if k != "trust"} == {k: v for k, v in expected.items() if k != "trust"}
    assert expected["trust"] == row["trust"] == "unchecked"  # the index cannot vouch: the stream's notice is checked
    assert row["path"] == name(url, team, "s1") and row["turns"] == 3
    assert row["links"]["events"] == f"/nbagent/api/sessions/{urllib.parse.quote(team, safe='')}/s1/events"  # one segment
    assert [r["name"] for r in rows(server, "team.ipynb")] == ["s1"]  # a notebook relative to the root
    assert [r["name"] for r in rows(server, ELSEWHERE)] == ["s2"]  # a notebook as stored
    assert [r["name"] for r in rows(server, "/elsewhere")] == ["s2"]  # a folder as stored

    # The index, never the events: a session whose event rows are gone is listed from its index row all the same.
    write_turns(name(url, ELSEWHERE, "indexed"), 5, 0)  # type: ignore[arg-type]
    sql(url, "DELETE FROM nbagent_events WHERE session = (SELECT id FROM nbagent_sessions WHERE name = 'indexed')")
    indexed = next(r for r in rows(server, ELSEWHERE) if r["name"] == "indexed")
    assert indexed["events"] == 6 and indexed["title"] == "request 1: say something"


def test_events_match_what_the_store_reads(server: NbServer, url: str, tmp_path: Path) -> None:
    team = str(server.root / "team.ipynb")
    logged = stored_events(url, team, "s1")
    reply = server.get(session_api(team, "s1") + "/events")
    assert reply.status == 200, reply.body
    assert reply.body["events"] == logged and [e["seq"] for e in logged] == list(range(1, 16))
    body = reply.body
    assert (body["last_seq"], body["trust"], body["problem"], body["damaged"], body["torn"]) == (15, "other key", "", False, False)
    store, path = locate(name(url, team, "s1"))
    as_file = tmp_path / "s1.jsonl"
    as_file.write_bytes(store.read_bytes(path))  # type: ignore[union-attr]  # the same bytes as a log file
    assert body["status"] == summarize(as_file).status == "unfinished: model reply"  # labelled as the file would be
    later = server.get(session_api(team, "s1") + "/events?since=9&limit=3").body
    assert [e["seq"] for e in later["events"]] == [10, 11, 12] and later["more"] is True
    assert server.get(session_api(ELSEWHERE, "s2") + "/events").body["events"] == stored_events(url, ELSEWHERE, "s2")
    relative = server.get(session_api("team.ipynb", "s1") + "/events")  # a path under the root with no log file there
    assert relative.status == 200 and relative.body["events"] == logged
    assert [e["seq"] for e in server.get(session_api("files.ipynb", "f1") + "/events").body["events"]] == list(range(1, 8))


def test_the_stream_follows_another_process_without_polling(server: NbServer, url: str, place: Path) -> None:
    live = name(url, ELSEWHERE, "live")
    process = start_writer(place, live, 120, 0.01)
    try:
        stream = server.stream(ELSEWHERE, "live", since=0)
        assert stream.status == 200 and stream.response.getheader("Content-Type", "").startswith("text/event-stream")
        records = stream.records(121)
    finally:
        process.wait(60)
    assert [r["seq"] for r in records] == list(range(1, 122))  # no gap, no duplicate
    assert [r["event"] for r in records] == stored_events(url, ELSEWHERE, "live")
    assert "answer at seq" in next(r for r in records if r["type"] == "assistant_msg")["html"]
    try:
        # Idle: the tail waits on the LISTEN socket; it does not read the table again and again.
        reads = tail_of(server, live)["reads"]
        heartbeats = 0
        for message in stream.messages(heartbeats=True):
            heartbeats += message.event == "heartbeat"
            if heartbeats == 6:  # about 1.8 s of quiet
                break
        assert tail_of(server, live)["reads"] == reads
        # One more commit wakes it at once (NOTIFY), and is read once.
        write_turns(live, 1, 0)  # type: ignore[arg-type]
        assert [r["seq"] for r in stream.records(122)] == [122]
        assert tail_of(server, live)["reads"] <= reads + 3
    finally:
        stream.close()


@pytest.mark.parametrize("how", ["Last-Event-ID", "since"])
def test_a_client_that_reconnects_at_n_gets_exactly_the_events_after_n(server: NbServer, url: str, place: Path, how: str) -> None:
    session = f"resume-{how.lower()}"
    process = start_writer(place, name(url, ELSEWHERE, session), 240, 0.01)
    try:
        first = server.stream(ELSEWHERE, session, since=0)
        before = first.records(30)
        first.close()
        time.sleep(0.3)  # the writer goes on meanwhile
        if how == "Last-Event-ID":
            second = server.stream(ELSEWHERE, session, since=0, last_event_id="30")
        else:
            second = server.stream(ELSEWHERE, session, since=30)
        after = second.records(241)
        second.close()
    finally:
        process.wait(60)
    assert [r["seq"] for r in before] == list(range(1, 31))
    assert [r["seq"] for r in after] == list(range(31, 242))
    assert [r["event"] for r in before + after] == stored_events(url, ELSEWHERE, session)


def test_the_server_only_reads(server: NbServer, url: str, place: Path) -> None:
    team = str(server.root / "team.ipynb")
    stream = server.stream(team, "s1", since=0)
    try:
        assert len(stream.records(15)) == 15
        assert sql(url, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") == [(0,)]  # the writer's lock is never taken
        write_turns(name(url, team, "s1"), 2, 0)  # type: ignore[arg-type]  # so a writer opens the session at once
        assert [r["seq"] for r in stream.records(17)] == [16, 17]
    finally:
        stream.close()
    assert list((place / "server-data").iterdir()) == []  # no signing secret was made


@pytest.mark.parametrize(("session", "altered"), [("bad", "PART"), ("nonascii", "p\u00e4rt")])  # issue 20: a non-ASCII row was a 500
def test_a_damaged_row_is_labelled_and_read_up_to_the_damage(server: NbServer, url: str, session: str, altered: str) -> None:
    write_turns(name(url, ELSEWHERE, session), 9, 0)  # type: ignore[arg-type]
    sql(
        url,
        f"UPDATE nbagent_events SET line = replace(line, 'part', '{altered}') WHERE seq = 5 "
        f"AND session = (SELECT id FROM nbagent_sessions WHERE name = '{session}')",
    )
    reply = server.get(session_api(ELSEWHERE, session) + "/events")
    assert reply.status == 200, reply.body
    assert [e["seq"] for e in reply.body["events"]] == [1, 2, 3, 4]
    assert "line 5" in reply.body["problem"] and reply.body["damaged"] is True and reply.body["torn"] is False
    stream = server.stream(ELSEWHERE, session, since=0)
    try:
        notice = next(stream.messages())
        assert notice.event == "session" and "line 5" in notice.json()["problem"] and notice.json()["last_seq"] == 4
        assert notice.json()["damaged"] is True
        assert [int(m.id or 0) for m in stream.events(4)] == [1, 2, 3, 4]
    finally:
        stream.close()


BAD = {
    "an unknown session": (ELSEWHERE, "nope", "/events", 404, "no session 'nope'"),
    "an unknown notebook": ("/nowhere/x.ipynb", "s2", "/events", 404, "no session 's2'"),
    "a bad session name": (ELSEWHERE, "no name", "/events", 400, "not a valid session name"),
    "since not a number": (ELSEWHERE, "s2", "/events?since=abc", 400, "since must be a whole number"),
    "since after the last event": (ELSEWHERE, "s2", "/events?since=99", 400, "after the session's last event (9)"),
    "a stream after the last event": (ELSEWHERE, "s2", "/stream?since=99", 400, "after the session's last event"),
    "a stream with a huge Last-Event-ID": (ELSEWHERE, "s2", "/stream?since=" + "1" * 30, 400, "since must be a whole number"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_a_4xx_json_error_and_one_log_line(server: NbServer, case: str) -> None:
    notebook, session, rest, status, words = BAD[case]
    before = len(server.log_tail(100_000).splitlines())
    reply = server.get(session_api(notebook, session) + rest)
    assert reply.status == status, reply.body
    assert reply.headers["content-type"].startswith("application/json") and words in reply.body["message"], reply.body
    deadline = time.monotonic() + 5
    while not any(f" {status} GET" in line for line in server.log_tail(100_000).splitlines()[before:]):
        assert time.monotonic() < deadline, "the refusal was not logged"
        time.sleep(0.05)
    time.sleep(0.2)
    new = server.log_tail(100_000).splitlines()[before:]
    assert len([line for line in new if str(status) in line]) == 1 and not any("Traceback" in line for line in new), new


def test_the_database_down_is_a_503_and_the_stream_resumes_when_it_is_back(
    server: NbServer, url: str, cluster: pg_harness.Cluster, place: Path
) -> None:
    session = name(url, ELSEWHERE, "outage")
    write_turns(session, 5, 0)  # type: ignore[arg-type]
    stream = server.stream(ELSEWHERE, "outage", since=0)
    notices: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []

    def read() -> None:
        try:
            for message in stream.messages():
                if message.event == "problem":
                    notices.append(message.json())
                elif message.event == "message":
                    records.append(message.json())
                    if records[-1]["seq"] >= 12:
                        return
        except OSError:
            pass

    reader = threading.Thread(target=read)
    reader.start()
    before = len(server.log_tail(100_000).splitlines())
    cluster.stop()
    try:
        for path in ["nbagent/api/sessions", session_api(ELSEWHERE, "s2") + "/events", session_api(ELSEWHERE, "s2") + "/stream"]:
            reply = server.get(path)
            assert reply.status == 503 and reply.headers["content-type"].startswith("application/json"), (path, reply.body)
            assert "cannot connect to " + url.rsplit("/", 1)[0] in reply.body["message"] and "try again later" in reply.body["message"]
        assert server.get(session_api("files.ipynb", "f1") + "/events").status == 200  # the log files are still served
        deadline = time.monotonic() + 10
        while not notices:  # the open stream says the database cannot be read, and stays open
            assert time.monotonic() < deadline, "the stream did not report the outage"
            time.sleep(0.05)
    finally:
        cluster.start()
    assert "cannot be read now" in notices[0]["problem"] and notices[0]["damaged"] is False  # not damage: the page says so
    write_turns(session, 6, 0)  # type: ignore[arg-type]  # written after the restart: the stream reconnects and goes on
    reader.join(30)
    stream.close()
    assert [r["seq"] for r in records] == list(range(1, 13))  # no gap, no duplicate across the outage
    assert [r["event"] for r in records] == stored_events(url, ELSEWHERE, "outage")
    assert rows(server, ELSEWHERE)  # answered again
    new = server.log_tail(100_000).splitlines()[before:]
    assert not any("Traceback" in line for line in new), new
    refused = [line for line in new if "nbagent: cannot connect to" in line and "cannot be served now" in line]
    assert len(refused) == 3, new  # one line per refused request
    # and one from this stream's tail when it lost the database (a tail an earlier test left open may say so too)
    lost = [line for line in new if f"nbagent: following {session}: cannot connect to" in line]
    assert len(lost) == 1, new
    assert json.dumps(new).count("Traceback") == 0


def test_a_tail_closes_its_connections_when_it_ends(server: NbServer, url: str) -> None:
    def server_connections() -> int:
        query = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        return int(sql(url, query)[0][0])

    deadline = time.monotonic() + 15
    while server_connections():  # what earlier tests left lingers 0.5 s
        assert time.monotonic() < deadline, "connections were left open"
        time.sleep(0.1)
    stream = server.stream(ELSEWHERE, "s2", since=0)
    try:
        assert len(stream.records(9)) == 9
        # The watch: one connection listening, one reading. A backend whose client has just gone (the request's own
        # lookup) still shows in pg_stat_activity until it exits, later on a loaded machine.
        deadline = time.monotonic() + 15
        while (count := server_connections()) != 2:
            assert time.monotonic() < deadline, f"{count} connections, not the watch's 2"
            time.sleep(0.1)
    finally:
        stream.close()
    deadline = time.monotonic() + 15
    while server_connections():  # closed when the tail stops, linger (0.5 s) after its last client
        assert time.monotonic() < deadline, "the watch's connections were not closed"
        time.sleep(0.1)


def test_the_store_setting_defaults_to_nbagent_store(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    from nbagent.errors import NbagentError
    from nbagent.server.server_config import NbagentServer

    monkeypatch.setenv("NBAGENT_STORE", url)
    assert NbagentServer().store == url and NbagentServer().database() is get_store(url)
    monkeypatch.delenv("NBAGENT_STORE")
    assert NbagentServer().store == "" and NbagentServer().database() is None  # files only
    with pytest.raises(NbagentError, match="must be a postgresql:// URL"):
        NbagentServer(store="mysql://nope").database()


def _turns(session: Any, last: str) -> None:
    """A finished turn, then a second one left as ``last`` says: ``runs`` (a reply streaming), ``stopped`` or ``ended``."""
    session.append("user_msg", content="first", meta={"cell_id": "c-1", "request": "first"})
    session.append("assistant_msg", message_id="m1", model="fake", content=[{"type": "text", "text": "done"}], stop_reason="end_turn")
    session.append("user_msg", content=[{"type": "text", "text": "a note\n\nsecond"}], meta={"cell_id": "c-2", "request": "second"})
    session.append("model_call", model="fake", attempt=1)
    if last == "runs":
        session.append("delta", index=0, text="half an ans")
    elif last == "stopped":
        session.append("interrupted", during="model")
    else:
        session.append("assistant_msg", message_id="m2", model="fake", content=[{"type": "text", "text": "ok"}], stop_reason="end_turn")


def test_a_running_turn_of_a_database_session_is_listed_as_a_file_s_is(server: NbServer, url: str) -> None:
    """``open_turn`` of a database session: the same as the same events in a log file get, while its kernel holds it open."""
    from contextlib import ExitStack

    from nbagent import Session

    stored, files = str(server.root / "db-live.ipynb"), server.root / "file-live.ipynb"
    (server.root / "db-live.ipynb").write_text("{}")
    files.write_text("{}")
    with ExitStack() as held:  # open, as a kernel holds its session: the index says no more than "open, or not closed cleanly"
        for last in ("runs", "stopped", "ended"):
            _turns(held.enter_context(Session.open(name(url, stored, last))), last)  # type: ignore[arg-type]
            _turns(held.enter_context(Session.open(server.root / ".nbagent/file-live.ipynb" / f"{last}.jsonl")), last)
        from_db = {r["name"]: r for r in rows(server, "db-live.ipynb")}
        from_files = {r["name"]: r for r in rows(server, "file-live.ipynb")}
    assert {n: r["open_turn"] for n, r in from_files.items()} == {
        "runs": {"seq": 4, "cell_id": "c-2", "request": "second"},
        "stopped": None,
        "ended": None,
    }
    assert {n: r["open_turn"] for n, r in from_db.items()} == {n: r["open_turn"] for n, r in from_files.items()}
    assert from_db["runs"]["store"] == url
