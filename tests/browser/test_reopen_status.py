"""A notebook reopened while an ``%agent`` approval waits reads Busy at once, not Unknown (issue 32, item 3).

In JupyterLab, an ``%agent`` cell asks to run a shell command (irreversible, so the turn waits for Approve).  The
notebook's tab is closed without saving and the notebook is opened in a new page, as a user who reloads or opens a
second tab does.  From the new page's first moment, its status bar's kernel item is sampled every 100 ms: it must
read Busy within ``BUSY_WITHIN`` seconds of first naming the kernel (before the pump answered the page's
``kernel_info_request`` it read Unknown until the cell ended), and from then on neither Unknown nor Idle while the
approval waits.  Then
the new page interrupts the kernel (the tab with the buttons is gone), so the server is left idle and shut down.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import TYPE_CHECKING, Any

import pytest

from tests.browser.harness import Jupyter, JupyterServer, wait_until, write_notebook
from tests.support.fake_anthropic import FakeAnthropic, tool_use

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.kernel]
NAME = "reopen-status.ipynb"
BUSY_WITHIN = 2.0  # seconds from the status bar's first naming the kernel ("Initializing") to its reading Busy
WATCH = 5.0  # seconds the new page's status bar is watched from then, while the approval waits

# From the page's first moment (an init script): the status bar's kernel item ("Python 3 (ipykernel) | Busy"), each
# time it changes, with the milliseconds since navigation started.
SAMPLE_JS = """
(() => {
  const samples = [];
  window.__nbagentBar = samples;
  setInterval(() => {
    const bar = document.querySelector('#jp-main-statusbar');
    const item = bar ? [...bar.querySelectorAll('.jp-StatusBar-TextItem')].find((e) => /\\|\\s*\\w+$/.test(e.innerText.trim())) : null;
    const shown = item ? item.innerText.trim().split('|').pop().trim() : '';
    const last = samples.length ? samples[samples.length - 1].shown : null;
    if (shown !== last) samples.push({ms: Math.round(performance.now()), shown});
  }, 100);
})();
"""


def named(samples: list[dict[str, Any]]) -> int | None:
    """When (ms since navigation started) the status bar first named the kernel's state, if it did."""
    return next((s["ms"] for s in samples if s["shown"]), None)


def problems_in(samples: list[dict[str, Any]]) -> tuple[list[str], int | None]:
    """What the new page's status bar showed wrong while the approval waited; and when it first read Busy (ms)."""
    busy = next((s["ms"] for s in samples if s["shown"].lower() == "busy"), None)
    start = named(samples) or 0
    if busy is None or busy - start > BUSY_WITHIN * 1000:
        return [f"the status bar did not read Busy within {BUSY_WITHIN:.0f} s of naming the kernel at {start} ms"], busy
    after = [s for s in samples if s["ms"] >= busy]
    wrong = [s for s in after if re.fullmatch(r"(?i)unknown|idle|", s["shown"])]
    return [f"after reading Busy at {busy} ms it read {s['shown'] or 'nothing'!r} at {s['ms']} ms" for s in wrong], busy


def test_a_notebook_reopened_while_an_approval_waits_reads_busy_at_once(
    lab: Jupyter, lab_server: JupyterServer, fake_api: FakeAnthropic, chromium: Browser
) -> None:
    write_notebook(lab_server.root / NAME, ["%load_ext nbagent", "%agent Tidy the folder"])
    fake_api.script(tool_use("shell", {"command": "echo tidy"}, text="I will tidy the folder."))
    lab.open(NAME)
    lab.run_cell(NAME, 0)
    lab.wait_idle(NAME)
    lab.run_cell(NAME, 1)
    lab.output(NAME, 1).locator("button:not([disabled])", has_text="Approve").first.wait_for(state="visible", timeout=90_000)
    lab.close(NAME)  # without saving: the kernel keeps waiting for the approval

    context = chromium.new_context(viewport={"width": 1280, "height": 1000})
    try:
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.add_init_script(SAMPLE_JS)
        again = Jupyter(page, lab_server)
        page.goto(lab_server.url(f"lab/tree/{urllib.parse.quote(NAME)}"))
        again.wait_app()
        bar = "() => window.__nbagentBar"
        start = wait_until(lambda: named(page.evaluate(bar)), 60, lambda: f"the status bar never named the kernel: {page.evaluate(bar)}")
        wait_until(lambda: page.evaluate("() => performance.now()") > start + WATCH * 1000, WATCH + 30, "the new page stopped")
        samples: list[dict[str, Any]] = page.evaluate(bar)
        waiting = [kernel["execution_state"] for kernel in lab_server.kernels()]  # the server's view: the turn still runs
        problems, busy = problems_in(samples)
        print(f"status bar of the reopened page (ms since navigation started): {samples}; read Busy at {busy} ms")
        # Clean up: the buttons went with the closed tab, so the new page interrupts the turn.
        again.interrupt(NAME)
        again.wait_idle(NAME)
        again.shutdown_kernel(NAME)
        again.close(NAME)
    finally:
        context.close()
    assert waiting == ["busy"], f"the approval did not wait while the page was watched: kernels {waiting}"
    assert not problems, "\n".join(problems + [f"samples: {samples}"])
