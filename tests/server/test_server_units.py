"""The server extension's parts without a server: request numbers, paths and links, the presenter, the shared tail."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("jupyter_server", reason="jupyter_server is not installed (pip install 'nbagent[server]')")

from nbagent import Session  # noqa: E402
from nbagent.record import events as ev  # noqa: E402
from nbagent.record.log_reader import read_events  # noqa: E402
from nbagent.render.page_links import kernel_page_url, notebook_api_path, page_url  # noqa: E402
from nbagent.server.handlers import MAX_SEQ, parse_seq  # noqa: E402
from nbagent.server.open_turn import last_request, runs  # noqa: E402
from nbagent.server.paths import Refused, Roots, split_api_path  # noqa: E402
from nbagent.server.present import Frame, Presenter  # noqa: E402
from nbagent.server.source import FileSource  # noqa: E402
from nbagent.server.tail import Client, Tails  # noqa: E402
from nbagent.stores import Listed  # noqa: E402
from reliability.attacker import markdown_log  # noqa: E402
from reliability.payloads import DANGEROUS, MARKDOWN, SAFE_IMAGE, cleaned, start_tags  # noqa: E402

SEQS = {
    "": 0,
    "0": 0,
    "17": 17,
    " 17 ": 17,
    str(MAX_SEQ): MAX_SEQ,
    str(MAX_SEQ + 1): None,
    "-1": None,
    "1.5": None,
    "1e3": None,
    "abc": None,
    "9" * 400: None,
    "١٢": None,  # other digits than ASCII
}


@pytest.mark.parametrize("value", list(SEQS))
def test_seq_numbers_from_requests(value: str) -> None:
    expected = SEQS[value]
    if expected is None:
        with pytest.raises(Refused) as refused:
            parse_seq(value, "since")
        assert refused.value.status == 400 and "since must be a whole number" in refused.value.message
    else:
        assert parse_seq(value, "since") == expected


PATHS = {
    "": [],
    "/": [],
    "a/b.ipynb": ["a", "b.ipynb"],
    "/a//./b/": ["a", "b"],
    "a/../b": None,
    "..": None,
    "a\0b": None,
    "x" * 5000: None,
}


@pytest.mark.parametrize("path", list(PATHS))
def test_api_paths(path: str) -> None:
    if PATHS[path] is None:
        with pytest.raises(Refused):
            split_api_path(path)
    else:
        assert split_api_path(path) == PATHS[path]


@pytest.fixture
def roots(tmp_path: Path) -> Roots:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "sub" / "n.ipynb").write_text("{}")
    with Session.open(root / "sub/.nbagent/n.ipynb/s.jsonl") as session:
        session.append("user_msg", content="hi")
    with Session.open(outside / "x.jsonl") as session:
        session.append("user_msg", content="not yours to read")
    os.symlink(outside, root / "link")
    (root / "evil.ipynb").write_text("{}")
    (root / ".nbagent").mkdir()
    os.symlink(outside, root / ".nbagent" / "evil.ipynb")
    os.symlink(outside / "x.jsonl", root / "sub/.nbagent/n.ipynb/linked.jsonl")
    os.mkfifo(root / "sub/.nbagent/n.ipynb/fifo.jsonl")
    return Roots(root, tmp_path / "logdir")


LOGS = {
    ("sub/n.ipynb", "s"): "sub/.nbagent/n.ipynb/s.jsonl",
    ("/sub/n.ipynb", "s"): "sub/.nbagent/n.ipynb/s.jsonl",
    ("sub/n.ipynb", "nope"): 404,
    ("sub/n.ipynb", "../s"): 400,
    ("sub/n.ipynb", "linked"): 403,  # a log that is a link
    ("sub/n.ipynb", "fifo"): 403,  # not a regular file (opening it would block)
    ("link/x.ipynb", "x"): 403,  # a folder link out of the root
    ("evil.ipynb", "x"): 403,  # a log folder that is a link
    ("sub/n.txt", "s"): 400,
    ("sub/../../outside/x.ipynb", "x"): 400,
}


@pytest.mark.parametrize("case", list(LOGS))
def test_finding_a_sessions_log(roots: Roots, case: tuple[str, str]) -> None:
    expected = LOGS[case]
    if isinstance(expected, int):
        with pytest.raises(Refused) as refused:
            roots.log_file(*case)
        assert refused.value.status == expected
        assert str(roots.root.parent / "outside") not in refused.value.message
    else:
        assert roots.api_path(roots.log_file(*case)) == expected


def test_listing_follows_no_link(roots: Roots) -> None:
    assert [(nb, roots.api_path(p)) for nb, p in roots.logs_under("")] == [("sub/n.ipynb", "sub/.nbagent/n.ipynb/s.jsonl")]
    assert roots.logs_under("sub/n.ipynb") == roots.logs_under("sub")
    with pytest.raises(Refused) as refused:
        roots.logs_under("link")
    assert refused.value.status == 403


def test_page_links() -> None:
    assert page_url("a/b c.ipynb", "s1") == "/nbagent/sessions?notebook=a%2Fb%20c.ipynb&session=s1"
    assert page_url(base_url="/user/x") == "/user/x/nbagent/sessions"
    assert page_url(folder="proj", base_url="/hub/") == "/hub/nbagent/sessions?path=proj"
    assert notebook_api_path({"JPY_SESSION_NAME": "proj/a.ipynb"}) == "proj/a.ipynb"
    assert notebook_api_path({"JPY_SESSION_NAME": "/abs/a.ipynb"}) == ""
    assert kernel_page_url("/home/ana/a.ipynb", "s", {}) == "/nbagent/sessions?notebook=%2Fhome%2Fana%2Fa.ipynb&session=s"
    assert (
        kernel_page_url("a.ipynb", "s", {"JUPYTERHUB_SERVICE_PREFIX": "/user/ana/"})
        == "/user/ana/nbagent/sessions?notebook=a.ipynb&session=s"
    )


@pytest.mark.parametrize("payload", MARKDOWN)
def test_hostile_events_render_inert(tmp_path: Path, payload: str) -> None:
    markdown_log(tmp_path / "h.jsonl", payload)
    presenter = Presenter()
    records = [presenter.record(e) for e in read_events(tmp_path / "h.jsonl")]
    for record in records:
        json.dumps(record).encode("ascii")  # one line of ASCII JSON per SSE message
        for tag, attrs in start_tags(record["html"]):
            assert tag not in ("script", "iframe", "svg", "math", "form", "input", "object", "embed", "style"), tag
            for name, value in attrs:
                assert not name.startswith("on") and name not in ("style", "id", "name", "srcdoc"), (tag, name, value)
                if name in ("href", "src"):
                    url = cleaned(value)
                    assert not url.startswith(DANGEROUS) or SAFE_IMAGE.fullmatch(url), (tag, name, value)


def test_the_presenter_follows_streams_like_the_panel() -> None:
    presenter = Presenter()
    events = [
        ev.make(1, ev.SESSION_START, {"session_id": "x", "meta": {}}),
        ev.make(2, ev.USER_MSG, {"content": "hello"}),
        ev.make(3, ev.MODEL_CALL, {"model": "m", "attempt": 1}),
        ev.make(4, ev.DELTA, {"index": 0, "text": "par"}),
        ev.make(5, ev.DELTA, {"index": 0, "text": "tial"}),
        ev.make(6, ev.MODEL_CALL, {"model": "m", "attempt": 2}),  # the stream was cut off: what streamed stays
        ev.make(7, ev.DELTA, {"index": 0, "text": "again"}),
    ]
    records = [presenter.record(e) for e in events]
    assert [r["text"] for r in records] == [None, None, None, "par", "tial", None, "again"]
    assert [r["stream"] for r in records] == [None, None, "end", None, None, "end", None]
    assert "partial" in records[5]["html"] and "hello" in records[1]["html"]
    assert records[6]["status"] == "streaming (attempt 2)"


def test_the_session_page_says_a_budget_stop_not_waiting_for_the_model() -> None:
    presenter = Presenter()
    stop = {"kind": "budget_reached", "reached": "max_session_cost", "text": "stopped: the session cost $0.10, its budget is $0.05"}
    events = [
        ev.make(1, ev.SESSION_START, {"session_id": "x", "meta": {}}),
        ev.make(2, ev.USER_MSG, {"content": "more"}),
        ev.make(3, ev.NOTE, stop),
    ]
    last = [presenter.record(e) for e in events][-1]
    assert last["status"] == "stopped at its budget" and last["session"]["status"] == "unfinished: stopped at its budget"
    assert last["session"]["standing"] == "stopped at its budget"  # the page's badge: not "live" (issue 35 item 4)
    waiting = Presenter()
    assert [waiting.record(e) for e in events[:2]][-1]["session"]["standing"] == ""  # a request waiting for the model: live
    assert "$0.10" in last["html"]


def test_a_client_too_far_behind_is_dropped_once() -> None:
    async def run() -> tuple[bool, int, list[int]]:
        drops: list[int] = []
        client = Client(3, on_drop=lambda: drops.append(1))
        for seq in range(1, 7):  # one event a read, none taken: the fourth read finds three waiting
            client.offer([Frame(seq, b"")])
        return client.dropped, len(drops), [f.seq for f in await client.next(0.01)]

    assert asyncio.run(run()) == (True, 1, [])


def test_a_burst_drops_no_client_that_keeps_up() -> None:
    async def run() -> tuple[list[int], bool, list[int], bool]:
        client = Client(3)
        client.offer([Frame(seq, b"") for seq in range(1, 11)])  # one read of ten events: more than the limit
        taken = [f.seq for f in await client.next(0.01)]
        client.offer([Frame(11, b"")])
        after = [f.seq for f in await client.next(0.01)]
        kept_up = not client.dropped
        client.offer([Frame(seq, b"") for seq in range(12, 16)])  # four wait, not taken ...
        client.offer([Frame(16, b"")])  # ... when the next read comes: behind
        return taken, kept_up, after, client.dropped

    assert asyncio.run(run()) == (list(range(1, 11)), True, [11], True)


def test_a_file_source_reads_only_what_was_appended(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Session.open(path) as session:
        session.append("user_msg", content="one")
        source = FileSource(path)
        first = source.read(0)
        assert [e["seq"] for e in first.events] == [1, 2]
        session.append("user_msg", content="two")
        reader = source._reader
        assert reader is not None
        offset = reader.offset
        assert [e["seq"] for e in source.read(2).events] == [3] and reader is source._reader and reader.offset > offset
        assert [e["seq"] for e in source.read(1).events] == [2, 3]  # any other starting point reads afresh
    with open(path, "ab") as handle:
        handle.write(b'{"v":3,"seq":4,"ty')
    torn = FileSource(path).read(0)
    assert [e["seq"] for e in torn.events] == [1, 2, 3] and torn.torn and not torn.problem


def test_one_tail_reads_each_event_once_for_fifty_clients(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Session.open(path) as session:
        session.append("user_msg", content="start")

    async def run() -> tuple[list[list[int]], int, int]:
        tails = Tails(poll=0.005, buffer=100, linger=0.0)
        tail = tails.get(path)
        await tail.ready.wait()
        clients = [Client(1000) for _ in range(50)]
        for client in clients:
            tail.subscribe(client)

        def write() -> None:
            with Session.open(path) as session:
                for i in range(30):
                    session.append("user_msg", content=f"event {i}")
                    time.sleep(0.002)

        writer = threading.Thread(target=write)
        writer.start()
        got: list[list[int]] = [[] for _ in clients]
        deadline = time.monotonic() + 20
        while any(len(g) < 30 for g in got) and time.monotonic() < deadline:
            for i, client in enumerate(clients):
                got[i] += [f.seq for f in await client.next(0.01)]
        writer.join()
        reads = tail.source.reads  # type: ignore[attr-defined]
        for client in clients:
            tails.release(path, client)
        await asyncio.sleep(0.05)
        assert path not in tails.tails  # stopped after its last client (linger 0)
        return got, reads, tail.events_read

    got, reads, events_read = asyncio.run(run())
    assert all(g == list(range(3, 33)) for g in got)
    assert events_read == 32 and reads <= 32  # a read per change at most, whatever the number of clients


def test_agent_sessions_says_where_the_live_view_is(shell, capsys) -> None:  # type: ignore[no-untyped-def]
    with Session.open(Path.cwd() / ".nbagent" / "untitled" / "s1.jsonl") as session:
        session.append("user_msg", content="hi")
    capsys.readouterr()
    shell.run_cell("%agent_sessions")
    out = capsys.readouterr().out
    assert "s1" in out and "nbagent/sessions" in out


def test_a_client_behind_the_kept_events_catches_up_from_the_log(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Session.open(path) as session:
        for i in range(19):
            session.append("user_msg", content=f"request {i}")

    async def run() -> tuple[list[int] | None, list[Frame], list[Frame]]:
        tails = Tails(poll=0.005, buffer=5, linger=0.0)
        tail = tails.get(path)
        await tail.ready.wait()
        kept = tail.backlog(15, 20)
        assert tail.backlog(3, 20) is None  # seq 4 is no longer kept
        replay, reading = tail.catch_up(Client(10), 3, 20)  # a replay from the log's first event, shared
        caught = []
        while frames := await replay.take(reading):
            caught += frames
        tail.caught_up(replay, reading)
        assert not tail.replays
        tail.stop()
        return [f.seq for f in kept] if kept is not None else None, caught, list(tail.recent)

    kept, caught, recent = asyncio.run(run())
    assert kept == [16, 17, 18, 19, 20]
    assert [f.seq for f in caught] == list(range(4, 21))
    assert caught[-5:] == recent  # the same bytes as the tail sent live: rendered from the first event either way


PENDING = {  # a summary's words -> whether its last turn may be running (open_turn.runs)
    "model reply": True,
    "1 tool call": True,
    "model reply (last model call failed)": True,
    "no request yet": False,
    "interrupted (model reply pending)": False,
    "stopped at its budget": False,
    "damaged log (line 5, byte 9): run nbagent verify": False,
}


@pytest.mark.parametrize("pending", list(PENDING))
def test_which_unfinished_sessions_may_be_running(pending: str) -> None:
    assert runs(Listed("s", "s.jsonl", turns=2, pending=pending)) is PENDING[pending]
    assert runs(Listed("s", "s.jsonl", turns=2, complete=True)) is False


REQUESTS = {
    "the request the kernel noted": ({"content": "note\n\nask", "meta": {"cell_id": "c", "request": "ask"}}, ("c", "ask")),
    "no meta: the content's text": (
        {"content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]},
        (None, "ab"),
    ),
    "an empty cell id": ({"content": "x", "meta": {"cell_id": ""}}, (None, "x")),
    "a cell id that is not text": ({"content": "x", "meta": {"cell_id": 7}}, (None, "x")),
    "hostile content": ({"content": [{"type": "text", "text": 3}, "text"]}, (None, "")),
}


@pytest.mark.parametrize("case", list(REQUESTS))
def test_the_open_turns_request_and_cell(case: str) -> None:
    fields, (cell, request) = REQUESTS[case]
    events = [
        {"seq": 1, "type": "session_start"},
        {"seq": 2, "type": "user_msg", "content": "old"},
        {"seq": 3, "type": "user_msg", **fields},
    ]
    events.append({"seq": 4, "type": "delta", "text": "x"})
    assert last_request(events) == {"seq": 3, "cell_id": cell, "request": request}
    assert last_request(events[:1]) is None
