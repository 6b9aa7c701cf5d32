"""The server's session page as a user of a real JupyterLab server meets it (issue 22, point 7).

The page follows the user's JupyterLab theme (read through the server's settings API) and, without one, the system's
colour scheme; it separates turns, keeps the live end in view while a turn streams (unless the reader scrolled up),
and its header follows the session.  ``%agent_sessions`` in a kernel of that server prints a whole, clickable link
to the page.  Screenshots of the page in Light and Dark go to tests/browser/artifacts/.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from nbagent.record import events as ev
from nbagent.record.log_reader import read_events
from tests.browser.harness import ARTIFACTS, Jupyter, JupyterServer, contrast, visible_text, wait_until, write_notebook
from tests.support.fake_anthropic import FakeAnthropic, text
from tests.support.server_harness import start_writer, write_turns

if TYPE_CHECKING:
    from playwright.sync_api import Page

NOTEBOOK = "pages/analysis.ipynb"
THEMES = "lab/api/settings/@jupyterlab/apputils-extension:themes"
MIN_CONTRAST = 4.5
AT_END = "() => { const p = document.scrollingElement; return p.scrollHeight - p.scrollTop - p.clientHeight <= 24; }"
BACKGROUND = "() => getComputedStyle(document.body).backgroundColor"


@pytest.fixture(scope="module")
def server(lab_server: JupyterServer) -> Iterator[JupyterServer]:
    """The real JupyterLab server (its settings API, its kernels), with one notebook whose sessions the page shows."""
    (lab_server.root / NOTEBOOK).parent.mkdir(parents=True, exist_ok=True)
    (lab_server.root / NOTEBOOK).write_text("{}")
    yield lab_server
    set_theme(lab_server, {})


def set_theme(server: JupyterServer, values: dict[str, Any]) -> None:
    """The user's theme setting, as JupyterLab's Settings > Theme saves it (the settings API's PUT)."""
    server.api("PUT", THEMES, {"raw": json.dumps(values)})


def log_of(server: JupyterServer, session: str) -> Path:
    return server.root / "pages" / ".nbagent" / "analysis.ipynb" / f"{session}.jsonl"


def open_session(page: Page, server: JupyterServer, session: str, seq: int) -> None:
    page.goto(server.url("nbagent/sessions", notebook=NOTEBOOK, session=session))
    page.wait_for_function("() => document.documentElement.dataset.themeFrom !== undefined")
    page.wait_for_function(f"() => Number(document.body.dataset.lastSeq || 0) >= {seq}", timeout=60_000)


def luminance(css: str) -> float:
    """The relative luminance of an ``rgb(...)`` colour."""
    channels = [float(v) / 255 for v in re.findall(r"[\d.]+", css)[:3]]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def low_contrast(page: Page) -> list[dict[str, Any]]:
    """Every visible text of the page below MIN_CONTRAST (the header, the session's header and its transcript)."""
    records = contrast([page.locator("header.nbagent-page"), page.locator("#nbagent-main")])
    assert records, "no text measured on the page"
    return [r for r in records if not r["excluded"] and r["ratio"] < MIN_CONTRAST]


def screenshot(page: Page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"server-page-{name}.png"
    page.screenshot(path=str(path), full_page=False)
    print(f"screenshot: {path}")
    return path


# The theme ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("theme", ["dark", "light"])
def test_the_page_follows_the_jupyterlab_theme_setting(page: Page, server: JupyterServer, theme: str) -> None:
    write_turns(log_of(server, f"themed-{theme}"), 18, 0)  # three finished turns
    set_theme(server, {"theme": f"JupyterLab {theme.title()}"})
    page.emulate_media(color_scheme="light" if theme == "dark" else "dark")  # the setting wins over the system's scheme
    open_session(page, server, f"themed-{theme}", 18)
    assert page.evaluate("() => document.documentElement.dataset.themeFrom") == "jupyterlab"
    background = luminance(page.evaluate(BACKGROUND))
    assert background < 0.05 if theme == "dark" else background > 0.9, page.evaluate(BACKGROUND)
    assert low_contrast(page) == []
    screenshot(page, theme)
    page.goto(server.url("nbagent/sessions") + "&path=pages")  # the session browser too
    page.locator("tr.nbagent-session-row").first.wait_for()
    page.wait_for_function("() => document.documentElement.dataset.themeFrom === 'jupyterlab'")
    assert low_contrast(page) == []
    screenshot(page, f"list-{theme}")


@pytest.mark.parametrize("scheme", ["dark", "light"])
def test_without_a_jupyterlab_setting_the_system_colour_scheme_decides(page: Page, server: JupyterServer, scheme: str) -> None:
    write_turns(log_of(server, "unthemed"), 6, 0)
    set_theme(server, {})
    page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
    open_session(page, server, "unthemed", 6)
    assert page.evaluate("() => document.documentElement.dataset.themeFrom") == "system"
    background = luminance(page.evaluate(BACKGROUND))
    assert background < 0.05 if scheme == "dark" else background > 0.9, page.evaluate(BACKGROUND)
    assert low_contrast(page) == []


def test_the_adaptive_theme_follows_the_system_with_the_preferred_themes(page: Page, server: JupyterServer) -> None:
    write_turns(log_of(server, "adaptive"), 6, 0)
    set_theme(server, {"theme": "JupyterLab Light", "adaptive-theme": True})
    page.emulate_media(color_scheme="dark")
    open_session(page, server, "adaptive", 6)
    assert page.evaluate("() => document.documentElement.dataset.theme") == "dark"
    page.emulate_media(color_scheme="light")
    page.wait_for_function("() => document.documentElement.dataset.theme === 'light'")
    assert luminance(page.evaluate(BACKGROUND)) > 0.9
    set_theme(server, {})


# A session being written ---------------------------------------------------------------------------------------------
def test_a_streaming_session_opens_at_its_end_stays_there_and_its_header_follows(page: Page, server: JupyterServer) -> None:
    log = log_of(server, "streaming")
    write_turns(log, 60, 0)  # ten finished turns: more than a screen
    page.set_viewport_size({"width": 1000, "height": 500})
    open_session(page, server, "streaming", 60)
    page.wait_for_function(AT_END, timeout=5_000)  # opened at the end, not at turn 1
    assert page.evaluate("() => document.scrollingElement.scrollTop") > 0
    assert page.locator(".nbagent-labels").inner_text().count("unfinished") == 0

    writer = start_writer(log, 48, 0.15)  # eight more turns, each streamed in three deltas
    try:
        for seq in (66, 75, 84):
            page.wait_for_function(f"() => Number(document.body.dataset.lastSeq || 0) >= {seq}", timeout=60_000)
            page.wait_for_function(AT_END, timeout=3_000)  # the live end stays in view while the turn streams
        page.mouse.move(500, 300)
        page.mouse.wheel(0, -100_000)  # the reader scrolls up: the page stays where they are
        page.wait_for_function("() => document.scrollingElement.scrollTop === 0")
        held = int(page.evaluate("() => Number(document.body.dataset.lastSeq)"))
        page.wait_for_function(f"() => Number(document.body.dataset.lastSeq || 0) >= {held + 4}", timeout=60_000)
        page.wait_for_timeout(200)
        assert page.evaluate("() => document.scrollingElement.scrollTop") == 0
        jump = page.locator("button.nbagent-jump")
        assert jump.is_visible()
        mid_turn = page.locator(".nbagent-labels").inner_text()
    finally:
        writer.wait(60)
    jump.click()  # back to the live end: it is followed again
    page.wait_for_function(AT_END, timeout=3_000)
    page.wait_for_function("() => Number(document.body.dataset.lastSeq || 0) >= 108", timeout=60_000)
    page.wait_for_function(AT_END, timeout=3_000)

    events = list(read_events(log))
    requests = [e["content"] for e in events if e["type"] == ev.USER_MSG]
    turns = page.locator("#nbagent-transcript section.nbagent-turn")
    assert turns.count() == len(requests) == 18  # one section per turn, each under its own heading
    assert [h.strip() for h in page.locator(".nbagent-turn-heading").all_inner_texts()] == [f"Turn {n}" for n in range(1, 19)]
    assert [turns.nth(i).locator(".nbagent-request").inner_text() for i in (0, 17)] == [requests[0], requests[-1]]
    assert page.locator(".nbagent-title").inner_text() == requests[-1]  # the header names the latest request...
    assert page.title() == f"{requests[-1]} - nbagent"
    labels = page.locator(".nbagent-labels").inner_text()
    assert "18 turns" in labels and "unfinished" not in labels, labels  # ...and no "unfinished" once the turn ended
    assert "when opened" not in labels
    assert "done" in page.locator(".nbagent-status").inner_text()
    print(f"labels in the middle of a turn: {mid_turn!r}; after: {labels!r}")


# %agent_sessions in a kernel of the real server ----------------------------------------------------------------------
def test_agent_sessions_prints_a_link_to_the_real_servers_page(lab: Jupyter, server: JupyterServer, fake_api: FakeAnthropic) -> None:
    path = "pages/linked.ipynb"
    write_notebook(server.root / path, ["%load_ext nbagent", "%agent Say hello to the harbour", "%agent_sessions"])
    fake_api.script(text("Hello, harbour."))
    lab.open(path)
    lab.run_all(path)
    lab.wait_idle(path)
    output = lab.output(path, 2)
    shown = visible_text(output)
    assert "<server>" not in shown, shown
    link = output.locator(f'a[href^="{server.base}/nbagent/sessions?notebook="]')
    wait_until(lambda: link.count() == 1, 10, lambda: f"no clickable link to {server.base}/nbagent/sessions in: {shown}")
    href = link.get_attribute("href") or ""
    assert "notebook=pages%2Flinked.ipynb&session=" in href and "token" not in href, href
    viewer = lab.page.context.new_page()  # the link, opened as a click would, with JupyterLab's login cookie
    try:
        viewer.goto(href)
        viewer.locator(".nbagent-title", has_text="Say hello to the harbour").wait_for(timeout=30_000)
        viewer.locator("#nbagent-transcript", has_text="Hello, harbour.").wait_for(timeout=30_000)
    finally:
        viewer.close()
        lab.close(path)
