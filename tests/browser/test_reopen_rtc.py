"""With real-time collaboration, a turn that finished while no page was open is still written once, by one page (issue 32, item 7).

jupyter-collaboration keeps one shared document per notebook on the server: every page edits it, and the server
saves it. Page A runs an ``%agent`` cell whose answer streams slowly and is closed mid-stream; the kernel finishes the
turn. Two pages then open the notebook together: both ask the kernel to catch up, exactly one writes the transcript
into the shared cell (``collaborative: true`` in their ``hello``; nbagent/notebook/reopen.py's one-writer rule), both
show it once, and the fake API got no new request. The plain case (no collaboration) is test_reopen_finished.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator

import pytest

from tests.browser.harness import PANEL_JS, Jupyter, visible_text, wait_until, write_notebook
from tests.browser.test_reopen_approval import another_page
from tests.browser.test_reopen_finished import ANSWER, ANSWERS, OUTPUTS, complete, saved_outputs
from tests.support.fake_anthropic import FakeAnthropic, text

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.kernel, pytest.mark.usefixtures("extension_installed")]
COLLABORATIVE = f"(path) => ({PANEL_JS})(path).context.model.collaborative === true"


@pytest.fixture(scope="module", autouse=True)
def _collaboration_installed() -> None:
    """These tests need jupyter-collaboration (the test extra installs it): skip here without it, fail under CI."""
    if importlib.util.find_spec("jupyter_collaboration") is None:
        reason = "jupyter-collaboration is not installed (pip install -e '.[test]')"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"CI=true: {reason}", pytrace=False)
        pytest.skip(reason)


@pytest.fixture
def pages(lab_rtc: Jupyter) -> Iterator[list[Jupyter]]:
    """Pages of the collaborative server opened by the test, closed after it."""
    opened: list[Jupyter] = []
    yield opened
    for app in opened:
        app.page.close()


def page(lab_rtc: Jupyter, pages: list[Jupyter], workspace: str) -> Jupyter:
    """Another page of the collaborative server, on a workspace of its own."""
    app = another_page(lab_rtc, workspace)
    pages.append(app)
    return app


def shows_once(app: Jupyter, name: str) -> bool:
    """Whether the page's cell holds the transcript exactly once (one output, the answer shown one time)."""
    outputs = app.page.evaluate(OUTPUTS, name)
    return len(outputs) == 1 and visible_text(app.output(name, 1)).count(ANSWER) == 1


def test_two_collaborative_pages_write_a_finished_turn_once(lab_rtc: Jupyter, pages: list[Jupyter], fake_api: FakeAnthropic) -> None:
    name = "reopen-rtc.ipynb"
    write_notebook(lab_rtc.server.root / name, ["%load_ext nbagent", "%agent Tell me something, slowly"])
    fake_api.script(text(ANSWER, chunks=12, delay=0.4))
    first = page(lab_rtc, pages, "rtc-a")
    first.open(name)
    assert first.page.evaluate(COLLABORATIVE, name) is True  # the document really is the server's shared one
    first.run_cell(name, 0)
    first.wait_idle(name)
    first.run_cell(name, 1)
    wait_until(lambda: "The transcript" in visible_text(first.output(name, 1)), 60, "the answer never began to stream")
    first.page.close()  # mid-stream: the kernel goes on with the turn, no page writes its outputs
    pages.remove(first)
    wait_until(lambda: complete(lab_rtc.server, name), 60, lambda: f"the turn never completed: {lab_rtc.server.log_tail()}")
    requests = len(fake_api.requests)

    second, third = page(lab_rtc, pages, "rtc-b"), page(lab_rtc, pages, "rtc-c")
    for app in (second, third):
        app.page.evaluate("(path) => window.jupyterapp.commands.execute('docmanager:open', {path, factory: 'Notebook'})", name)
    for app in (second, third):
        wait_until(lambda app=app: app.page.evaluate(ANSWERS, name).startswith("1:"), 90, lambda app=app: app.page.evaluate(ANSWERS, name))
    said = sorted(str(app.page.evaluate(ANSWERS, name)) for app in (second, third))
    assert said == ["1: shown 0", "1: written 1"]  # one writer; the other page shows nothing of its own: the document has it
    for app in (second, third):
        wait_until(lambda app=app: shows_once(app, name), 30, lambda app=app: visible_text(app.output(name, 1))[-400:])
    [written] = second.page.evaluate(OUTPUTS, name)
    assert written["output_type"] == "display_data" and written["metadata"]["nbagent"]["final"]["session"]
    assert "written into this cell when a page of the notebook asked for it" in visible_text(second.output(name, 1))
    assert len(fake_api.requests) == requests  # no model call

    second.save(name)
    [saved] = saved_outputs(lab_rtc.server, name)
    assert ANSWER in json.dumps(saved) and saved["metadata"]["nbagent"]["final"] == written["metadata"]["nbagent"]["final"]
    second.shutdown_kernel(name)
