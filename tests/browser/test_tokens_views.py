"""One truth about tokens as a user sees it (issue 22, point 5): one session's figures, in the same words, in the
live panel's finished header, ``%agent_sessions`` and the server's session list, in a real JupyterLab.

(tests/render/test_tokens_agree.py checks every view, the replay and exports included, against the fold's definition;
this checks what reaches the screen.)
"""

from __future__ import annotations

import re

import pytest

from tests.browser.harness import Jupyter, visible_text, wait_until, write_notebook
from tests.support.fake_anthropic import FakeAnthropic, text

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.kernel]

NOTEBOOK = "tokens/views.ipynb"
CELLS = ["%load_ext nbagent", "%agent Say hello", "%agent Say it again", "%agent_sessions"]
# input (cache reads and writes included), what came from the cache, output: render/parts.tokens_line's words
FIGURES = re.compile(r"[\d,]+ tokens in(?: \([\d,]+ from cache\))? · [\d,]+ out")


def figures(where: str, shown: str) -> str:
    found = FIGURES.findall(shown)
    assert found, f"{where} shows no token figures in the common words: {shown[:500]!r}"
    return found[-1]


def test_one_session_has_the_same_token_figures_in_the_panel_the_listing_and_the_server_page(lab: Jupyter, fake_api: FakeAnthropic) -> None:
    write_notebook(lab.server.root / NOTEBOOK, CELLS)
    fake_api.script(text("Hello."), text("Hello again."))
    lab.open(NOTEBOOK)
    lab.run_all(NOTEBOOK)
    listing = lab.output(NOTEBOOK, 3)
    wait_until(lambda: "tokens in" in visible_text(listing), 120, lambda: f"%agent_sessions never listed: {visible_text(listing)!r}")
    lab.wait_idle(NOTEBOOK)
    panel = figures("the second turn's panel", visible_text(lab.output(NOTEBOOK, 2)))
    listed = figures("%agent_sessions", visible_text(listing))

    page = lab.page.context.new_page()
    try:
        page.goto(lab.server.url("nbagent/sessions", notebook=NOTEBOOK))
        page.wait_for_selector("table td", timeout=60_000)
        served = figures("the server's session list", page.inner_text("body"))
    finally:
        page.close()
    assert panel == listed == served, {"panel": panel, "%agent_sessions": listed, "server page": served}
    assert not panel.startswith("0 tokens in")  # replies read from the cache still count as input
    # the second turn's panel says its own request's figures first, then the session's, each labelled (issue 35 item 4)
    second = visible_text(lab.output(NOTEBOOK, 2))
    assert f"session: {panel} · " in second and second.index("this request: ") < second.index("session: "), second[:400]
