"""A running turn shows live, read-only, on a page opened while it runs (issue 32, item 2).

Page A runs an ``%agent`` cell whose answer streams slowly. Page B (a second page of the same browser, on a workspace
of its own) opens the same notebook meanwhile: the kernel is busy with the turn and reads no comm message, so B's
extension asks the server's nbagent API for the notebook's running turn (``open_turn``) and shows it under the cell,
fed by the session's event stream: the streamed text grows, there is no button, B's notebook stays unsaved-free (the
overlay is no part of its model). When the turn ends the overlay goes and the transcript shows (read-only: page A,
which ran it, is still open): the cell, sampled on every change of its DOM, is never empty in between. The fake API
got one request. The page's side is labextension/src/live.ts, the server's nbagent/server/open_turn.py
(docs/notebook.md, "Reopening a notebook, a second tab").
"""

from __future__ import annotations

import pytest

from tests.browser.harness import PANEL_JS, Jupyter, visible_text, wait_until, write_notebook
from tests.browser.test_reopen_approval import another_page
from tests.support.fake_anthropic import FakeAnthropic, text

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.kernel, pytest.mark.usefixtures("extension_installed")]
ANSWER = " ".join(f"Word{n}" for n in range(1, 61)) + " and that is the whole answer."
LIVE = ".nbagent-live-overlay"
NOTE = "live, read-only: this turn runs in the kernel; its transcript is written here when it ends"
OUTPUTS = f"(path) => ({PANEL_JS})(path).content.model.sharedModel.cells[1].toJSON().outputs"
DIRTY = f"(path) => ({PANEL_JS})(path).context.model.dirty"
# What cell 1 shows below its code, sampled on each change of its DOM (a MutationObserver, not a timer): the live
# view, the transcript (in its outputs, or an overlay), or nothing. A sample is kept when it differs from the last.
WATCH_CELL = f"""(path) => {{
  const cell = ({PANEL_JS})(path).content.widgets[1];
  const text = selector => Array.from(cell.node.querySelectorAll(selector)).map(n => n.textContent).join('').trim();
  const sample = () => {{
    if (cell.node.querySelector('{LIVE}')) return 'live';
    return text('.jp-OutputArea') || text('.nbagent-transcript-overlay') ? 'transcript' : 'empty';
  }};
  const samples = (window.nbagentCellSamples = [sample()]);
  new MutationObserver(() => {{
    const now = sample();
    if (now !== samples[samples.length - 1]) samples.push(now);
  }}).observe(cell.node, {{ subtree: true, childList: true, characterData: true }});
}}"""


def open_busy(app: Jupyter, path: str) -> None:
    """Open a notebook whose kernel is running the turn, and wait until its cells are on the page (not for an idle kernel)."""
    app.page.evaluate("(path) => window.jupyterapp.commands.execute('docmanager:open', {path, factory: 'Notebook'})", path)
    ready = f"(path) => {{ const p = ({PANEL_JS})(path); return Boolean(p && p.context.isReady && p.content.widgets.length > 1); }}"
    app.page.wait_for_function(ready, arg=path, timeout=90_000)


def test_a_page_opened_while_a_turn_runs_shows_it_live_then_its_transcript(lab: Jupyter, fake_api: FakeAnthropic) -> None:
    name = "reopen-live.ipynb"
    write_notebook(lab.server.root / name, ["%load_ext nbagent", "%agent Tell me something, slowly"])
    fake_api.script(text(ANSWER, chunks=50, delay=0.5))
    lab.open(name)
    lab.run_cell(name, 0)
    lab.wait_idle(name)
    lab.save(name)
    requests = len(fake_api.requests)
    lab.run_cell(name, 1)
    wait_until(lambda: "Word1" in visible_text(lab.output(name, 1)), 60, "the answer never began to stream on page A")

    page_b = another_page(lab, "live-b")
    try:
        open_busy(page_b, name)
        overlay = page_b.cell(name, 1).locator(LIVE)
        overlay.wait_for(state="visible", timeout=60_000)
        assert NOTE in visible_text(overlay)
        stream = overlay.locator(".nbagent-live-stream")
        wait_until(lambda: stream.count() == 1 and "Word" in visible_text(stream), 30, lambda: visible_text(overlay))
        first = visible_text(stream)
        assert "whole answer" not in first, "the turn ended before page B showed it live: the test's stream is too fast"
        wait_until(lambda: len(visible_text(stream)) > len(first), 30, f"the streamed text did not grow: {first!r}")
        assert overlay.locator("button").count() == 0  # read-only
        assert page_b.page.evaluate(OUTPUTS, name) == []  # not in B's model ...
        assert page_b.page.evaluate(DIRTY, name) is False  # ... so B's notebook is not changed by it
        assert page_b.page.locator(".nbagent-overlay").count() == 0  # no question, no transcript yet
        page_b.page.evaluate(WATCH_CELL, name)

        wait_until(lambda: overlay.count() == 0, 90, lambda: f"the live view stayed: {visible_text(overlay)[-300:]!r}")
        shown = page_b.cell(name, 1)
        wait_until(lambda: "whole answer" in visible_text(shown), 60, lambda: f"no transcript on page B: {visible_text(shown)[-300:]!r}")
        assert shown.locator(LIVE).count() == 0
        samples = page_b.page.evaluate("window.nbagentCellSamples")
        assert samples == ["live", "transcript"], samples  # the live view stays until the transcript is in its place
        assert len(fake_api.requests) == requests + 1  # one model call: page B only watched
        page_b.page.evaluate(f"(path) => {{ const p = ({PANEL_JS})(path); p.context.model.dirty = false; p.close(); }}", name)
    finally:
        page_b.page.close()
    lab.wait_idle(name)
    lab.shutdown_kernel(name)
    lab.close(name)
