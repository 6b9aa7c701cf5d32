"""A waiting approval on every JupyterLab page of the kernel (issue 32, item 3), through nbagent's extension.

Page A runs an ``%agent`` cell whose turn asks approval for a shell command. Page B (a second page of the same
browser, on a workspace of its own) opens the same notebook: the question shows under the cell, as an overlay that
is no part of the notebook; Approve there runs the command, page A's own buttons are disabled and say "approved",
the turn ends, the log holds one decision. Then page A is closed mid-question without saving, the notebook is
opened again in a new page, the question is there, and Approve there finishes the turn. The kernel side is
nbagent/notebook/cells_comm.py; the page's is labextension/src/approvals.ts (docs/cells.md, "Every page").
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

import nbagent
from nbagent.record import events as ev
from tests.browser.harness import PANEL_JS, STATE_JS, Jupyter, JupyterServer, visible_text, wait_until, write_notebook
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.kernel, pytest.mark.usefixtures("extension_installed")]
FINAL = "The folder is tidy."
OVERLAY = ".nbagent-overlay"


def another_page(lab: Jupyter, workspace: str) -> Jupyter:
    """A second JupyterLab page in the same browser, on a workspace of its own (so the two pages share no layout)."""
    page = lab.page.context.new_page()
    page.set_default_timeout(30_000)
    app = Jupyter(page, lab.server)
    page.goto(lab.server.url(f"lab/workspaces/{workspace}", reset=""))
    app.wait_app()
    return app


def open_while_busy(app: Jupyter, path: str, timeout: float = 90) -> None:
    """Open a notebook whose kernel is running a cell, and wait until the extension's comm to it is ready.

    Not :meth:`Jupyter.open`: that waits for an idle kernel, and this one is busy with the turn.
    """
    app.page.evaluate("(path) => window.jupyterapp.commands.execute('docmanager:open', {path, factory: 'Notebook'})", path)
    state = f"(path) => {{ const p = ({PANEL_JS})(path); return p ? p.node.dataset.nbagentCells || '' : 'not open'; }}"
    wait_until(
        lambda: app.page.evaluate(state, path) == "ready",
        timeout,
        lambda: f"{path}: the extension's comm is {app.page.evaluate(state, path)!r}; the notebook: {app.state(path)}",
    )


def decisions(server: JupyterServer, name: str) -> list[ev.Event]:
    """The approval decisions (not the pending questions) in the notebook's session logs."""
    found = []
    for path in sorted((server.root / ".nbagent" / name).glob("*.jsonl")):
        found += [e for e in nbagent.read_events(path) if e["type"] == ev.APPROVAL and e.get("decision") != "pending"]
    return found


def answered(server: JupyterServer, name: str) -> bool:
    """Whether the notebook's session logged the model's final answer."""
    for path in (server.root / ".nbagent" / name).glob("*.jsonl"):
        if any(e["type"] == ev.ASSISTANT_MSG and FINAL in str(e.get("content")) for e in nbagent.read_events(path)):
            return True
    return False


def start_turn(app: Jupyter, fake: FakeAnthropic, name: str, command: str, setup: str = "") -> None:
    """Write and open a notebook, load nbagent, and run the ``%agent`` cell until its question is on screen."""
    write_notebook(app.server.root / name, [f"%load_ext nbagent\n%config Agent.tools = ['shell']{setup}", "%agent Tidy the folder"])
    fake.script(tool_use("shell", {"command": command}, text="I will tidy the folder."), text(FINAL))
    app.open(name)
    app.run_cell(name, 0)
    app.wait_idle(name)
    app.run_cell(name, 1)
    app.output(name, 1).locator("button:not([disabled])", has_text="Approve").first.wait_for(state="visible", timeout=90_000)


@pytest.fixture
def page_b(lab: Jupyter) -> Iterator[Jupyter]:
    """A second page, closed after the test."""
    app = another_page(lab, "page-b")
    yield app
    app.page.close()


def test_a_second_page_shows_the_question_and_its_answer_decides(lab: Jupyter, page_b: Jupyter, fake_api: FakeAnthropic) -> None:
    name = "reopen-two-pages.ipynb"
    start_turn(lab, fake_api, name, "echo tidy >> tidied.txt")
    assert lab.page.locator(OVERLAY).count() == 0  # page A asks in its own live panel, not twice

    open_while_busy(page_b, name)
    cell = page_b.cell(name, 1)
    overlay = cell.locator(OVERLAY)
    overlay.wait_for(state="visible", timeout=60_000)
    assert "echo tidy" in visible_text(overlay) and "waiting for your approval" in visible_text(overlay)
    assert page_b.page.evaluate(f"(path) => ({STATE_JS})(path).dirty", name) is False  # not written to the notebook
    overlay.locator("button.nbagent-overlay-approve").click()

    approve_a = lab.output(name, 1).locator("button", has_text="Approve").first
    wait_until(lambda: FINAL in visible_text(lab.output(name, 1)), 90, lambda: f"page A: {visible_text(lab.output(name, 1))[-400:]!r}")
    assert "approved" in visible_text(lab.output(name, 1))
    assert approve_a.count() == 0 or approve_a.is_disabled()  # the finished panel is the transcript: no live button
    wait_until(lambda: "approved" in visible_text(overlay.locator(".nbagent-overlay-note")), 30, lambda: visible_text(overlay))
    assert overlay.locator("button.nbagent-overlay-approve").is_disabled()
    outputs = f"(path) => ({PANEL_JS})(path).content.model.sharedModel.cells[1].toJSON().outputs"
    assert page_b.page.evaluate(outputs, name) == []  # the overlay is in the page, never in the notebook
    lab.wait_idle(name)
    assert [(e["decision"], e.get("by")) for e in decisions(lab.server, name)] == [("approved", "panel")]
    assert (lab.server.root / "tidied.txt").read_text() == "tidy\n"  # run once
    lab.shutdown_kernel(name)
    lab.close(name)


def test_a_reopened_page_shows_the_question_and_approve_there_finishes_the_turn(lab: Jupyter, fake_api: FakeAnthropic) -> None:
    name = "reopen-closed-page.ipynb"
    first = another_page(lab, "page-a")
    start_turn(first, fake_api, name, "echo again >> again.txt")
    first.page.close()  # closed mid-question, without saving: the kernel goes on waiting

    again = another_page(lab, "page-again")
    try:
        open_while_busy(again, name)
        overlay = again.cell(name, 1).locator(OVERLAY)
        overlay.wait_for(state="visible", timeout=60_000)
        assert "echo again" in visible_text(overlay)
        overlay.locator("button.nbagent-overlay-approve").click()
        wait_until(lambda: answered(lab.server, name), 90, "the turn never ended after Approve on the reopened page")
        wait_until(lambda: "approved" in visible_text(overlay.locator(".nbagent-overlay-note")), 30, lambda: visible_text(overlay))
        assert [(e["decision"], e.get("by")) for e in decisions(lab.server, name)] == [("approved", "panel")]
        assert (Path(lab.server.root) / "again.txt").read_text() == "again\n"
        again.shutdown_kernel(name)
    finally:
        again.page.close()


def test_a_live_panel_says_the_kernel_stopped_instead_of_working(lab: Jupyter, fake_api: FakeAnthropic) -> None:
    """Item 5: the kernel dies mid-question (SIGKILL, as the OOM killer does); the live panel's activity line goes and
    a notice under the cell says what to do. (Shutting the kernel down politely ends the turn itself, as "interrupted".)"""
    name = "reopen-kernel-gone.ipynb"
    pid_file = lab.server.root / "kernel-gone.pid"
    start_turn(lab, fake_api, name, "echo never >> never.txt", f"\nimport os; open({str(pid_file)!r}, 'w').write(str(os.getpid()))")
    output = lab.output(name, 1)
    assert "waiting for your approval" in visible_text(output)
    os.kill(int(pid_file.read_text()), signal.SIGKILL)  # the server restarts it: the page reads autorestarting
    cell = lab.cell(name, 1)
    notice = cell.locator(".nbagent-gone")
    notice.wait_for(state="visible", timeout=60_000)
    assert visible_text(notice) == "interrupted: the kernel stopped; run this cell to continue exactly once"
    shown = visible_text(output)
    assert "waiting for your approval" not in shown and "working…" not in shown, shown[-300:]
    assert not (lab.server.root / "never.txt").exists()
    lab.shutdown_kernel(name)
    lab.close(name)
