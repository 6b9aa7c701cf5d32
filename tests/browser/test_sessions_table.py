"""``%agent_sessions`` in JupyterLab (issue 35, item 5): an HTML table, one row per session, whose cells wrap within the
output rather than a 230-character line of text; titles escaped and money never typeset; forks under titles of their own.
"""

from __future__ import annotations

import pytest

from tests.browser.harness import Jupyter, visible_text, wait_until, write_notebook
from tests.support.fake_anthropic import FakeAnthropic, text

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.kernel]

NOTEBOOK = "sessions-table.ipynb"
ASK = "Compare <b>north</b> & south: $5 and $6 a unit, which sells more?"
CELLS = ["%load_ext nbagent", f"%agent {ASK}", "%agent And by month?", "%agent --fork 1 And by week?", "%agent_sessions"]


def test_agent_sessions_is_a_table_that_fits_the_notebook(lab: Jupyter, fake_api: FakeAnthropic) -> None:
    write_notebook(lab.server.root / NOTEBOOK, CELLS)
    fake_api.script(text("North."), text("March."), text("Week 2."))
    lab.open(NOTEBOOK)
    lab.run_all(NOTEBOOK)
    lab.wait_idle(NOTEBOOK)
    output = lab.output(NOTEBOOK, 4)
    rows = output.locator(".nbagent-sessions tbody tr")
    wait_until(lambda: rows.count() == 2, 60, lambda: f"%agent_sessions shows no table of two sessions: {visible_text(output)[:600]!r}")

    cells = [[" ".join(visible_text(td).split()) for td in row.locator("td").all()] for row in rows.all()]
    titles = [row[1] for row in cells]
    assert titles == [ASK, f"{ASK} (fork after turn 1)"], titles  # escaped, whole, and the fork's own title
    assert [row[0][:2] for row in cells] == ["20", "* "]  # the current session starred
    assert output.locator(".nbagent-sessions b:has-text('north')").count() == 0  # the request's markup is text
    assert output.locator("mjx-container, .MathJax").count() == 0  # "$5 and $6" is money, not math
    fits = output.evaluate(
        """(el) => {
          const box = el.querySelector('.nbagent-sessions'), table = box.querySelector('table');
          const heights = [...table.querySelectorAll('th')].map((th) => th.getBoundingClientRect().height);
          const dates = [...table.querySelectorAll('tbody tr')].map((tr) => tr.children[2].innerText);
          return {table: table.scrollWidth, room: box.clientWidth, header: Math.max(...heights) <= 2 * Math.min(...heights), dates, widths: [...table.querySelectorAll('th')].map((th) => Math.round(th.getBoundingClientRect().width))};
        }"""
    )
    assert fits["table"] <= fits["room"] + 1 and fits["header"], f"the table does not fit the output: {fits}"
    assert all(len(date.split()) == 2 and len(date.split()[0]) == 10 for date in fits["dates"]), fits  # never "2026-12-" / "05"
    printed = visible_text(output)
    assert "in the browser" in printed.lower()  # where the live view is, still said below the table

    shots = lab.shoot_themes(output, "sessions-table")
    assert shots[0].read_bytes() != shots[1].read_bytes(), "the dark theme drew the output as the light one did"
