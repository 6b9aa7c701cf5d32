"""The session page of nbagent.server in Chromium: the browser lists sessions, the live view follows a session another
process writes, survives a server restart without a gap or a duplicate, shows an unfinished turn after a SIGKILL, and
renders hostile payloads inertly.  A plain ``jupyter server`` (no kernel: the page works without one)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import anthropic
import pytest

import nbagent
from nbagent.record import events as ev
from nbagent.record.log_reader import read_events
from reliability.attacker import markdown_log, write_log
from reliability.payloads import MARKUP
from tests.browser.harness import ConsoleLog
from tests.support.fake_anthropic import FakeAnthropic, tool_use
from tests.support.server_harness import NbServer, start_writer, write_turns

if TYPE_CHECKING:
    from playwright.sync_api import Page

NOTEBOOK = "work/analysis.ipynb"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NbServer]:
    place = tmp_path_factory.mktemp("server-page")
    (place / "root" / "work").mkdir(parents=True)
    (place / "root" / NOTEBOOK).write_text("{}")
    nb = NbServer(place / "root", place / "home")
    nb.start()
    yield nb
    nb.stop()


def log_of(server: NbServer, session: str) -> Path:
    return server.root / "work" / ".nbagent" / "analysis.ipynb" / f"{session}.jsonl"


def last_seq(page: Page) -> int:
    return int(page.evaluate("() => Number(document.body.dataset.lastSeq || 0)"))


def wait_seq(page: Page, seq: int, timeout: float = 60.0) -> None:
    page.wait_for_function(f"() => Number(document.body.dataset.lastSeq || 0) >= {seq}", timeout=timeout * 1000)


def test_the_browser_lists_sessions_and_the_live_view_follows_one_across_a_server_restart(page: Page, server: NbServer) -> None:
    console = ConsoleLog()
    console.watch(page, "sessions")
    write_turns(log_of(server, "followed"), 11, 0)
    page.goto(server.url("nbagent/sessions"))  # the token logs in; the page and its script use the cookie from then on
    row = page.locator("tr.nbagent-session-row[data-session=followed]")
    row.wait_for()
    cells = row.locator("td").all_inner_texts()
    assert cells[:8] == [
        NOTEBOOK,
        "followed",
        "request 1: say something",
        "2",
        "3 tokens in · 4 out",
        "cost unknown",  # its replies name no model with a price
        "7 / 200k",
        "unfinished: model reply",
    ]
    assert cells[8] == "yours"
    row.locator("a.nbagent-session-link").click()
    wait_seq(page, 12)
    assert page.locator(".nbagent-connection").inner_text() == "live"

    writer = start_writer(log_of(server, "followed"), 120, 0.04)  # about 5 s of a session being written
    try:
        wait_seq(page, 40)
        server.stop()  # the server goes away mid-stream...
        page.wait_for_function("() => document.querySelector('.nbagent-connection').dataset.state === 'reconnecting'")
        time.sleep(1.0)  # ...while the writer goes on
        server.start()
        wait_seq(page, 132)
    finally:
        writer.wait(60)
    # still connected, but the session's last turn ended: the badge says so rather than "live" (issue 35 item 4)
    assert page.locator(".nbagent-connection").get_attribute("data-state") == "live"
    assert page.locator(".nbagent-connection").inner_text() == "finished"
    assert page.evaluate("() => document.body.dataset.gaps || ''") == ""
    events = list(read_events(log_of(server, "followed")))
    answers = [e["content"][0]["text"] for e in events if e["type"] == ev.ASSISTANT_MSG]
    shown = page.locator("#nbagent-transcript").inner_text()
    assert all(shown.count(answer + "\n") + shown.endswith(answer) == 1 for answer in answers)  # each answer once: no gap, no duplicate
    assert shown.count("You: request ") == len([e for e in events if e["type"] == ev.USER_MSG])
    assert not [e for e in console.entries if e["kind"] == "pageerror"], console.entries


@nbagent.tool(effect="read")
def lookup(name: str) -> str:
    """Look a name up."""
    return f"{name}: found"


def test_a_session_stopped_at_its_budget_is_shown_stopped_not_live(page: Page, server: NbServer, fake: FakeAnthropic) -> None:
    """Issue 35 item 4: a budget stop reads as one on the page: its status, its badge, never "waiting for the model"."""
    dime = {"input_tokens": 50_000, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 0}
    fake.script(*(tool_use("lookup", {"name": f"x{i}"}, usage=dime) for i in range(4)))
    client = anthropic.Anthropic(base_url=fake.base_url, api_key="test-key", max_retries=0)
    log_of(server, "budget").parent.mkdir(parents=True, exist_ok=True)
    with nbagent.Session.open(log_of(server, "budget")) as session, pytest.raises(nbagent.BudgetReached):
        nbagent.run(session, "look things up", tools=[lookup], client=client, approval="auto", max_cost=0.25)
    last = list(read_events(log_of(server, "budget")))[-1]
    assert last["type"] == ev.NOTE and last["kind"] == "budget_reached"
    page.goto(server.url("nbagent/sessions", notebook=NOTEBOOK, session="budget"))
    wait_seq(page, last["seq"])
    badge = page.locator(".nbagent-connection")
    page.wait_for_function("() => document.querySelector('.nbagent-connection').textContent !== 'connecting'")
    assert badge.inner_text() == "stopped at its budget" and badge.get_attribute("data-running") == "false"
    status = page.locator(".nbagent-status").inner_text()
    assert status.startswith("— stopped at its budget · this request: 150,000 tokens in · 0 out · $0.30; context "), status
    header = page.locator(".nbagent-live-header").inner_text()
    assert "waiting for the model" not in header and "live" not in header.split(), header
    assert "stopped: this request cost $0.30, its budget is $0.25 (max_cost)" in page.locator("#nbagent-transcript").inner_text()


def test_a_writer_killed_mid_turn_shows_the_unfinished_turn(page: Page, server: NbServer) -> None:
    log = log_of(server, "killed")
    ready = server.root.parent / "killed.ready"
    process = start_writer(log, 9, 0.01, torn=True, ready=ready)
    deadline = time.monotonic() + 30
    while not (ready.exists() and ready.read_text() == "torn"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    page.goto(server.url("nbagent/sessions", notebook=NOTEBOOK, session="killed"))
    wait_seq(page, 10)
    streamed = page.locator("#nbagent-transcript .nbagent-streaming")
    assert streamed.inner_text() == "part 9 "  # the answer being streamed when the writer died (seq 10), kept on screen
    labels = page.locator(".nbagent-labels")
    labels.filter(has_text="unfinished: model reply").wait_for()
    assert "the last line is unfinished" in labels.inner_text()


HOSTILE_EVENTS = [
    (ev.USER_MSG, {"content": "<script>window.__pwned = 'user'</script><img src=x onerror=\"window.__pwned='img'\">"}),
    (ev.MODEL_CALL, {"model": "<b onmouseover=alert(4)>", "attempt": 1}),
    (ev.DELTA, {"index": 0, "text": "<img src=x onerror=\"window.__pwned='delta'\"><script>window.__pwned='delta2'</script>"}),
    (ev.NOTE, {"kind": "x", "text": "<a href='javascript:window.__pwned=1'>note</a>"}),
]


def test_hostile_payloads_are_inert(page: Page, server: NbServer) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    sessions = []
    for i, payload in enumerate(MARKUP):
        name = f"hostile-{i}"
        markdown_log(log_of(server, name), payload.replace("alert(1)", "window.__pwned=1"))
        sessions.append(name)
    write_log(log_of(server, "hostile-events"), HOSTILE_EVENTS)
    sessions.append("hostile-events")
    for name in sessions:
        page.goto(server.url("nbagent/sessions", notebook=NOTEBOOK, session=name))
        wait_seq(page, 2)
        page.wait_for_timeout(100)
        transcript = page.locator("#nbagent-transcript")
        transcript.locator("details").evaluate_all("(all) => all.forEach((d) => { d.open = true; })")
        page.mouse.move(10, 10)
        found = page.evaluate(
            """() => {
              const root = document.getElementById('nbagent-transcript');
              const bad = [];
              for (const el of root.querySelectorAll('*')) {
                for (const a of el.attributes) {
                  if (a.name.startsWith('on') || a.name === 'style' || a.name === 'srcdoc') bad.push(el.tagName + ' ' + a.name);
                  if ((a.name === 'href' || a.name === 'src') && /^\\s*(javascript|data:text|vbscript)/i.test(a.value)) bad.push(el.tagName + ' ' + a.value);
                }
                if (['SCRIPT', 'IFRAME', 'SVG', 'FORM', 'INPUT', 'OBJECT', 'EMBED', 'MATH'].includes(el.tagName.toUpperCase())) bad.push(el.tagName);
              }
              return {bad, pwned: window.__pwned === undefined ? null : String(window.__pwned), text: root.innerText.length};
            }"""
        )
        assert found["bad"] == [] and found["pwned"] is None and found["text"] > 0, (name, found)
    assert dialogs == []
    shown = page.locator("#nbagent-transcript").inner_text()
    assert "<script>window.__pwned" in shown  # the hostile text is shown as text


def test_a_damaged_log_is_labelled_damaged_on_the_page(page: Page, server: NbServer) -> None:
    log = log_of(server, "damaged")
    write_turns(log, 10, 0)
    lines = log.read_bytes().splitlines(keepends=True)
    lines[4] = lines[4].replace(b"part", b"PART")  # a checksum that no longer matches, with valid lines after it
    log.write_bytes(b"".join(lines))
    page.goto(server.url("nbagent/sessions", notebook=NOTEBOOK, session="damaged"))
    wait_seq(page, 4)
    box = page.locator("#nbagent-problem")
    box.wait_for()
    assert box.inner_text().startswith("damaged log: ") and "line 5" in box.inner_text()
    assert last_seq(page) == 4  # shown up to the damage, nothing after it
