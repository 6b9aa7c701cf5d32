"""Issue 20, defects 7 and 8, in Chromium: a foreign session's pixel bomb and links into the Jupyter server on the session page.

A second user's process writes the session (reliability/redteam/views.py); a real ``jupyter server``
shows it; Chromium opens the page with every collapsed result expanded.  The 20,000 x 20,000 PNG
must not be decoded (a note instead), and clicking a link into the server must not reach it (one
click on ``/logout`` used to log the user out).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reliability.hostile import victim
from reliability.redteam import views
from tests.browser.harness import free_port
from tests.support.server_harness import NbServer

if TYPE_CHECKING:
    from playwright.sync_api import Page


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NbServer]:
    place = tmp_path_factory.mktemp("views-attacks")
    with victim(place):
        root = place / "root"
        (root / "work").mkdir(parents=True)
        (root / views.NOTEBOOK).write_text("{}")
        nb = NbServer(root, place / "home", port=free_port())
        image = base64.b64encode(views.bomb_png()).decode("ascii")
        views.write_foreign(log_path(nb), views.foreign_events(nb.port, image), place / "attacker-data")
        nb.start()  # with the victim's environment (its own NBAGENT_DATA_DIR)
    yield nb
    nb.stop()


def log_path(server: NbServer) -> Path:
    return server.root / "work" / ".nbagent" / "analysis.ipynb" / f"{views.SESSION}.jsonl"


def open_session(page: Page, server: NbServer) -> None:
    page.goto(server.url("nbagent/sessions", notebook=views.NOTEBOOK, session=views.SESSION))  # the token logs in (a cookie)
    page.wait_for_function("() => Number(document.body.dataset.lastSeq || 0) >= 8", timeout=60_000)
    page.locator("#nbagent-transcript details").evaluate_all("(all) => all.forEach((d) => { d.open = true; })")


def logged_in(page: Page) -> int:
    """The status of an API call with the page's cookie alone (200 while logged in, 403 once logged out)."""
    return int(page.evaluate("() => fetch('/api/status', {credentials: 'same-origin'}).then((r) => r.status)"))


def test_the_pixel_bomb_is_a_note_not_an_image(page: Page, server: NbServer) -> None:
    open_session(page, server)
    transcript = page.locator("#nbagent-transcript")
    sizes = transcript.locator("img").evaluate_all("(all) => all.map((i) => [i.naturalWidth, i.naturalHeight])")
    assert sizes == []
    assert "[image not shown: it is 20,000x20,000 pixels" in transcript.inner_text()


def test_links_into_the_jupyter_server_are_text_and_a_click_stays_logged_in(page: Page, server: NbServer) -> None:
    open_session(page, server)
    assert logged_in(page) == 200
    page_url = page.url
    for n in range(len(views.server_links(server.port))):
        page.get_by_text(f"step {n}", exact=False).first.click()
        page.wait_for_timeout(300)  # a navigation would have started by now
        assert logged_in(page) == 200, f"step {n} logged the user out"
        assert page.url == page_url, f"step {n} was a live link"
    transcript = page.locator("#nbagent-transcript")
    hrefs = transcript.locator("a").evaluate_all("(all) => all.map((a) => a.href)")
    assert hrefs == ["https://example.org/docs"]  # the ordinary link stays a link; none into the server
    text = transcript.inner_text()
    for url in views.server_links(server.port)[:4]:
        assert url in text  # shown, as text, so the user sees where it pointed
