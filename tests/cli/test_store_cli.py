"""The command line on a database store: copy both ways (verify passes on both ends), tail -f by NOTIFY, listing from the index."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path

import pytest

from nbagent.agent.session import Session
from nbagent.cli.main import main
from nbagent.record import events as ev
from tests.agent.test_session import add_turns
from tests.support.store_fixtures import database, use_store

pytestmark = pytest.mark.postgres


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def url(monkeypatch: pytest.MonkeyPatch) -> str:
    """The database; sessions opened by path stay files (NBAGENT_STORE unset)."""
    use_store("file", monkeypatch)
    return database()


def recorded(tmp_path: Path, name: str = "s1", turns: int = 20) -> tuple[Path, Path]:
    notebook = tmp_path / "analysis.ipynb"
    notebook.write_text("{}")
    path = tmp_path / ".nbagent" / "analysis.ipynb" / f"{name}.jsonl"
    with Session.open(path) as session:
        session.append(ev.USER_MSG, content=f"summarize the sales of {name}")
        add_turns(session, turns)
        session.trust_log()
    return notebook, path


def test_copy_a_file_to_the_database_and_back_keeps_every_byte_and_verifies(url: str, tmp_path: Path) -> None:
    notebook, path = recorded(tmp_path)
    code, out, err = run("copy", str(path), url)
    assert code == 0, err
    in_db = f"{url}#{notebook}/s1"
    assert f"copied 23 events from {path} to {in_db}" in out
    code, out, err = run("verify", in_db)
    assert code == 0 and ": OK: 23 valid events" in out and "signed by you" in out, out + err
    back = tmp_path / "back.jsonl"
    code, out, err = run("copy", in_db, str(back))
    assert code == 0, err
    assert back.read_bytes() == path.read_bytes()  # seq, timestamps, signatures and checksums
    code, out, err = run("verify", str(back))
    assert code == 0 and "snapshot agrees with the log" in out, out
    code, out, err = run("copy", str(path), url)  # never over an existing session
    assert code == 2 and "already holds a session" in err and err.count("\n") == 1
    code, out, _ = run("show", in_db)
    assert code == 0 and "summarize the sales of s1" in out


def test_a_copied_session_lands_in_the_notebooks_log_folder(url: str, tmp_path: Path) -> None:
    notebook, path = recorded(tmp_path, "moved")
    assert run("copy", str(path), url)[0] == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "analysis.ipynb").write_text("{}")
    code, out, err = run("copy", f"{url}#{notebook}/moved", str(elsewhere / "analysis.ipynb"))
    assert code == 0, err
    landed = elsewhere / ".nbagent" / "analysis.ipynb" / "moved.jsonl"
    assert landed.read_bytes() == path.read_bytes()


def test_verify_finds_an_altered_row(url: str, tmp_path: Path) -> None:
    import psycopg

    notebook, path = recorded(tmp_path, "altered")
    assert run("copy", str(path), url)[0] == 0
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "UPDATE nbagent_events SET line = replace(line, 'request', 'REQUEST') WHERE seq = 3 AND session = "
            "(SELECT id FROM nbagent_sessions WHERE notebook = %s AND name = 'altered')",
            (str(notebook),),
        )
    code, out, _ = run("verify", f"{url}#{notebook}/altered")
    assert code == 1 and "line 3" in out and "checksum" in out


def test_tail_follow_gets_the_events_another_writer_commits(url: str, tmp_path: Path) -> None:
    notebook, path = recorded(tmp_path, "live", turns=3)
    assert run("copy", str(path), url)[0] == 0
    in_db = f"{url}#{notebook}/live"
    result: list[tuple[int, str, str]] = []
    thread = threading.Thread(target=lambda: result.append(run("tail", "-f", in_db, "--since", "4", "--json", "--idle-exit", "2")))
    thread.start()
    time.sleep(0.3)
    with Session.open(in_db, fsync="never") as session:
        for _ in range(5):
            add_turns(session, 4, tag="live")
            time.sleep(0.02)
        last = session.seq
    thread.join(timeout=30)
    code, out, err = result[0]
    assert code == 0, err
    assert [json.loads(line)["seq"] for line in out.splitlines()] == list(range(5, last + 1))


def test_sessions_store_lists_and_filters_from_the_index(url: str, tmp_path: Path) -> None:
    db = database(f"listing-{tmp_path.name}")
    notebook, path = recorded(tmp_path, "alpha")
    _, other = recorded(tmp_path, "beta")
    assert run("copy", str(path), db)[0] == 0
    assert run("copy", str(other), db)[0] == 0
    code, out, _ = run("sessions", "--store", db)
    assert code == 0 and "alpha" in out and "beta" in out and "unfinished: model reply" in out
    code, out, _ = run("sessions", "--store", db, "--grep", "sales of BETA", "--json")
    assert [s["name"] for s in json.loads(out)] == ["beta"]
    code, out, _ = run("sessions", "--store", db, "--notebook", "analysis.ipynb", "--owner", "postgres", "--json")
    found = json.loads(out)
    assert [s["name"] for s in found] == ["alpha", "beta"] and found[0]["owner"] == "postgres" and found[0]["events"] == 23
    code, out, _ = run("sessions", "--store", db, "--owner", "nobody")
    assert code == 0 and "no sessions in" in out


@pytest.mark.slow
def test_listing_100000_sessions_answers_from_the_index(url: str, tmp_path: Path) -> None:
    import psycopg

    db = database(f"big-{tmp_path.name}")
    notebook, path = recorded(tmp_path, "needle")
    assert run("copy", str(path), db)[0] == 0
    with psycopg.connect(db, autocommit=True) as conn:
        # Index rows only, no events: a listing that read events could not show them.
        conn.execute(
            "INSERT INTO nbagent_sessions (notebook, name, session_id, title, requests, created, last_ts, last_seq, turns) "
            "SELECT '/team/nb' || (i % 500) || '.ipynb', 's' || i, md5(i::text), 'analysis ' || i, 'request ' || i, 1e9 + i, 1e9 + i, 10, 2 "
            "FROM generate_series(1, 100000) AS i"
        )
    started = time.monotonic()
    code, out, _ = run("sessions", "--store", db, "--json")
    assert code == 0 and len(json.loads(out)) == 100001
    code, out, _ = run("sessions", "--store", db, "--grep", "sales of needle", "--json")
    assert [s["name"] for s in json.loads(out)] == ["needle"]
    code, out, _ = run("sessions", "--store", db, "--notebook", "/team/nb7.ipynb", "--limit", "5", "--json")
    assert len(json.loads(out)) == 5
    assert time.monotonic() - started < 120  # a sanity bound only; the benchmark measures it


def test_database_mistakes_are_one_line_errors(url: str) -> None:
    code, out, err = run("show", f"{url}#/nowhere/analysis.ipynb/nope")
    assert code == 1 and "no session" in err and err.count("\n") == 1 and "Traceback" not in err
    code, out, err = run("sessions", "--store", "postgresql://nobody@127.0.0.1:1/none")
    assert code == 1 and "cannot connect to postgresql://nobody@127.0.0.1:1/none" in err and err.count("\n") == 1
    code, out, err = run("show", f"{url}#no-session-part")
    assert code == 1 and "#<notebook>/<session>" in err
    code, out, err = run("sessions", "--store", "mysql://x/y")
    assert code == 1 and "not a session store" in err
