"""The session API of a real ``jupyter server`` (nbagent.server): listing, events, labels, auth, bad input, read-only.

One server for the module, started with a ``log_dir`` setting and an empty per-user data folder of its own
(so it must never create a signing secret, and logs written by the tests read as another key's).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nbagent import Session
from nbagent.record.log_reader import read_events
from tests.support.server_harness import NbServer, session_api, write_turns

pytestmark = [pytest.mark.slow]
pytest.importorskip("jupyter_server", reason="jupyter_server is not installed (pip install 'nbagent[server]')")


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("server-api")


@pytest.fixture(scope="module")
def server(place: Path) -> Iterator[NbServer]:
    root, outside, log_dir = place / "root", place / "outside", place / "logdir"
    for folder in (root / "proj" / "deep", outside, log_dir):
        folder.mkdir(parents=True)
    for notebook in ("proj/a.ipynb", "proj/deep/b.ipynb", "c.ipynb", "damaged.ipynb"):
        (root / notebook).write_text("{}")
    write_turns(root / "proj/.nbagent/a.ipynb/s1.jsonl", 14, 0)
    write_turns(root / "proj/deep/.nbagent/b.ipynb/s2.jsonl", 8, 0)
    write_turns(log_dir / "c.ipynb" / "kept-elsewhere.jsonl", 6, 0)  # under the log_dir setting
    write_turns(outside / "secret.jsonl", 6, 0)
    damaged = root / ".nbagent/damaged.ipynb/bad.jsonl"
    write_turns(damaged, 10, 0)
    lines = damaged.read_bytes().splitlines(keepends=True)
    lines[4] = lines[4].replace(b"part", b"PART")  # a checksum that no longer matches, with valid lines after it
    damaged.write_bytes(b"".join(lines))
    (place / "server-data").mkdir()
    nb = NbServer(
        root,
        place / "home",
        args=[f"--NbagentServer.log_dir={log_dir}"],
        env={"NBAGENT_DATA_DIR": str(place / "server-data")},
    )
    nb.start()
    yield nb
    nb.stop()


def names(reply: Any) -> list[tuple[str, str]]:
    return [(row["notebook"], row["name"]) for row in reply.body["sessions"]]


def test_listing_has_the_cli_json_shape_for_notebooks_below_a_folder(server: NbServer, place: Path) -> None:
    reply = server.get("nbagent/api/sessions?path=")
    assert reply.status == 200 and reply.headers["content-type"].startswith("application/json")
    assert sorted(names(reply)) == [
        ("c.ipynb", "kept-elsewhere"),
        ("damaged.ipynb", "bad"),
        ("proj/a.ipynb", "s1"),
        ("proj/deep/b.ipynb", "s2"),
    ]
    row = next(r for r in reply.body["sessions"] if r["name"] == "s1")
    from nbagent.history import json_row, summarize

    expected = json_row(summarize(place / "root/proj/.nbagent/a.ipynb/s1.jsonl"))
    assert set(row) == set(expected) | {"links", "open_turn"}
    assert {k: row[k] for k in ("title", "turns", "events", "tokens", "status", "session_id")} == {
        k: expected[k] for k in ("title", "turns", "events", "tokens", "status", "session_id")
    }
    assert row["path"] == "proj/.nbagent/a.ipynb/s1.jsonl"  # relative to the root: no server path leaks
    assert row["trust"] == "other key"  # signed with the tests' key, not the server user's (who has none)
    assert row["links"]["events"] == "/nbagent/api/sessions/proj%2Fa.ipynb/s1/events"
    assert names(server.get("nbagent/api/sessions?path=proj")) == [("proj/a.ipynb", "s1"), ("proj/deep/b.ipynb", "s2")]
    assert names(server.get("nbagent/api/sessions?path=proj/deep/b.ipynb")) == [("proj/deep/b.ipynb", "s2")]
    elsewhere = next(r for r in reply.body["sessions"] if r["name"] == "kept-elsewhere")
    assert elsewhere["path"] == "log_dir:c.ipynb/kept-elsewhere.jsonl"
    assert row["open_turn"] == {"seq": 14, "cell_id": None, "request": "request 13: say something"}  # 14 events: a third turn begun
    assert elsewhere["open_turn"] is None  # 6 events: one turn, finished


def test_events_match_the_log_and_are_labelled(server: NbServer, place: Path) -> None:
    log = place / "root/proj/.nbagent/a.ipynb/s1.jsonl"
    logged = list(read_events(log))
    reply = server.get(session_api("proj/a.ipynb", "s1") + "/events")
    assert reply.status == 200
    assert reply.body["events"] == logged
    body = reply.body
    assert (body["last_seq"], body["trust"], body["problem"], body["damaged"], body["torn"]) == (len(logged), "other key", "", False, False)
    later = server.get(session_api("proj/a.ipynb", "s1") + "/events?since=9&limit=3").body
    assert [e["seq"] for e in later["events"]] == [10, 11, 12] and later["more"] is True
    assert server.get(session_api("proj/a.ipynb", "s1") + f"/events?since={len(logged)}").body["events"] == []
    elsewhere = server.get(session_api("c.ipynb", "kept-elsewhere") + "/events").body
    assert elsewhere["events"] == list(read_events(place / "logdir/c.ipynb/kept-elsewhere.jsonl"))
    absolute = server.get(session_api(str(place / "root/proj/a.ipynb"), "s1") + "/events?since=13")
    assert absolute.status == 200 and [e["seq"] for e in absolute.body["events"]] == [14, 15]  # a kernel's absolute path inside the root


def test_a_damaged_log_is_labelled_and_read_up_to_the_damage(server: NbServer) -> None:
    reply = server.get(session_api("damaged.ipynb", "bad") + "/events")
    assert reply.status == 200
    assert [e["seq"] for e in reply.body["events"]] == [1, 2, 3, 4]
    assert "line 5" in reply.body["problem"] and reply.body["damaged"] is True and "damaged" in reply.body["status"]
    row = next(r for r in server.get("nbagent/api/sessions?path=damaged.ipynb").body["sessions"])
    assert row["status"].startswith("unfinished: damaged log (line 5")
    stream = server.stream("damaged.ipynb", "bad", since=0)
    try:
        messages = stream.messages()
        notice = next(messages)
        assert notice.event == "session" and "line 5" in notice.json()["problem"] and notice.json()["damaged"] is True
        assert [int(m.id or 0) for m in stream.events(4)] == [1, 2, 3, 4]
    finally:
        stream.close()


BAD = {
    "since below zero": ("proj/a.ipynb", "s1", "/events?since=-1", 400, "since must be a whole number"),
    "since not a number": ("proj/a.ipynb", "s1", "/events?since=abc", 400, "since must be a whole number"),
    "a huge since": ("proj/a.ipynb", "s1", "/events?since=" + "9" * 400, 400, "since must be a whole number"),
    "since after the last event": ("proj/a.ipynb", "s1", "/events?since=99", 400, "after the session's last event (15)"),
    "limit zero": ("proj/a.ipynb", "s1", "/events?limit=0", 400, "limit must be from 1"),
    "unknown session": ("proj/a.ipynb", "nope", "/events", 404, "no session 'nope'"),
    "a bad session name": ("proj/a.ipynb", "..", "/events", 400, "not a valid session name"),
    "a session name with a slash": ("proj/a.ipynb", "a/b", "/events", 400, "not a valid session name"),
    "a path with ..": ("proj/../../outside/x.ipynb", "secret", "/events", 400, "contains '..'"),
    "not a notebook": ("proj/a.txt", "s1", "/events", 400, "is not a notebook path"),
    "a hidden path": (".nbagent/x.ipynb", "s1", "/events", 404, "hidden"),
    "an absolute path outside the root": ("/etc/passwd.ipynb", "s1", "/events", 404, "no session"),
    "through a linked folder": ("linked/x.ipynb", "secret", "/events", 403, "outside the server's root"),
    "a linked log folder": ("linkedlogs.ipynb", "secret", "/events", 403, "symbolic link"),
    "a stream with a huge Last-Event-ID": ("proj/a.ipynb", "s1", "/stream?since=" + "1" * 30, 400, "since must be a whole number"),
    "a stream after the last event": ("proj/a.ipynb", "s1", "/stream?since=1000", 400, "after the session's last event"),
}


@pytest.fixture(scope="module")
def links(server: NbServer, place: Path) -> None:
    root = place / "root"
    os.symlink(place / "outside", root / "linked")  # a folder link leading out of the root
    (root / ".nbagent").mkdir(exist_ok=True)
    os.symlink(place / "outside", root / ".nbagent" / "linkedlogs.ipynb")  # a log folder link
    (place / "outside" / "x.ipynb").write_text("{}")
    shutil.copy(place / "outside/secret.jsonl", place / "outside/secret2.jsonl")


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_a_4xx_json_error_and_one_log_line(server: NbServer, links: None, case: str) -> None:
    notebook, session, rest, status, words = BAD[case]
    before = len(server.log_tail(10_000).splitlines())
    reply = server.get(session_api(notebook, session) + rest)
    assert reply.status == status, reply.body
    assert reply.headers["content-type"].startswith("application/json")
    assert words in reply.body["message"], reply.body
    assert "secret" not in json.dumps(reply.body).replace("'secret'", "")  # nothing read outside the root
    deadline = time.monotonic() + 5
    while not any(f" {status} GET" in line for line in server.log_tail(10_000).splitlines()[before:]):
        assert time.monotonic() < deadline, "the refusal was not logged"
        time.sleep(0.05)
    time.sleep(0.2)  # anything else it logs comes with it
    new = server.log_tail(10_000).splitlines()[before:]
    assert len([line for line in new if str(status) in line]) == 1 and not any("Traceback" in line for line in new), new


def test_listing_refuses_paths_outside_the_root(server: NbServer, links: None) -> None:
    for path, status in [("../outside", 400), ("linked", 403), ("/etc", 404), ("proj/a.txt", 404), ("nothere", 404)]:
        reply = server.get(f"nbagent/api/sessions?path={path}")
        assert reply.status == status, (path, reply.body)
        assert isinstance(reply.body.get("message"), str)
    everything = server.get("nbagent/api/sessions?path=").body["sessions"]
    assert not any("secret" in row["name"] for row in everything)  # the links are not followed


def test_everything_needs_authentication(server: NbServer) -> None:
    for path in [
        "nbagent/api/sessions",
        session_api("proj/a.ipynb", "s1") + "/events",
        session_api("proj/a.ipynb", "s1") + "/stream",
        "nbagent/api/tails",
    ]:
        for token in (None, "wrong-token"):
            reply = server.get(path, token=token)
            assert reply.status == 403, (path, token, reply.status)
            assert reply.headers["content-type"].startswith("application/json")
    page = server.get("nbagent/sessions", token=None)
    assert page.status == 302 and "/login" in page.headers["location"]  # the page sends people to Jupyter's login
    assert server.get("nbagent/sessions").status == 200


def test_the_server_only_reads(server: NbServer, place: Path) -> None:
    copied = place / "root/proj/.nbagent/a.ipynb/copied.jsonl"
    source = place / "root/proj/.nbagent/a.ipynb/s1.jsonl"
    torn = source.read_bytes() + b'{"v":3,"seq":16,"ts":1.0,"type":"del'  # a torn tail the writer would cut off
    copied.write_bytes(torn)
    assert server.get(session_api("proj/a.ipynb", "copied") + "/events").body["torn"] is True
    stream = server.stream("proj/a.ipynb", "copied", since=0)
    try:
        assert len(stream.events(15)) == 15
    finally:
        stream.close()
    server.get("nbagent/api/sessions?path=")
    assert copied.read_bytes() == torn  # no repair
    assert sorted(p.name for p in copied.parent.iterdir() if p.name.startswith("copied")) == ["copied.jsonl"]  # no lock, no .torn file
    assert list((place / "server-data").iterdir()) == []  # no signing secret was made


def test_a_log_written_by_this_user_reads_as_theirs(tmp_path: Path) -> None:
    """Without a server: the labels the API uses come from the history module (create=False)."""
    from nbagent.history import summarize

    with Session.open(tmp_path / "mine.jsonl") as session:
        session.append("user_msg", content="hi")
    assert summarize(tmp_path / "mine.jsonl").trust == "yours"


def test_a_running_turn_is_listed_with_its_cell_and_request(server: NbServer, place: Path) -> None:
    """``open_turn``: what a notebook page needs to show a running turn live under its cell (docs/server.md)."""
    folder = place / "root/running/.nbagent/live.ipynb"
    (place / "root/running/live.ipynb").parent.mkdir(parents=True, exist_ok=True)
    (place / "root/running/live.ipynb").write_text("{}")
    with Session.open(folder / "runs.jsonl") as session:
        session.append("user_msg", content="first", meta={"cell_id": "c-1", "request": "first"})
        session.append("assistant_msg", message_id="m1", model="fake", content=[{"type": "text", "text": "done"}], stop_reason="end_turn")
        session.append("user_msg", content=[{"type": "text", "text": "a note\n\nsecond"}], meta={"cell_id": "c-2", "request": "second"})
        session.append("model_call", model="fake", attempt=1)
        session.append("delta", index=0, text="half an ans")
    with Session.open(folder / "stopped.jsonl") as session:
        session.append("user_msg", content="stopped", meta={"cell_id": "c-3"})
        session.append("interrupted", during="model")
    with Session.open(folder / "ended.jsonl") as session:
        session.append("user_msg", content="ended", meta={"cell_id": "c-4"})
        session.append("assistant_msg", message_id="m2", model="fake", content=[{"type": "text", "text": "ok"}], stop_reason="end_turn")
    rows = {row["name"]: row for row in server.get("nbagent/api/sessions?path=running/live.ipynb").body["sessions"]}
    assert rows["runs"]["open_turn"] == {"seq": 4, "cell_id": "c-2", "request": "second"}
    assert rows["runs"]["status"] == "unfinished: model reply"
    assert rows["stopped"]["open_turn"] is None and rows["stopped"]["status"].startswith("unfinished: interrupted")
    assert rows["ended"]["open_turn"] is None and rows["ended"]["status"] == "complete"
    with Session.open(folder / "runs.jsonl") as session:  # the turn ends: the next listing has no open turn
        session.append(
            "assistant_msg", message_id="m3", model="fake", content=[{"type": "text", "text": "half an answer"}], stop_reason="end_turn"
        )
    after = {row["name"]: row for row in server.get("nbagent/api/sessions?path=running").body["sessions"]}
    assert after["runs"]["open_turn"] is None and after["runs"]["status"] == "complete"
