"""Dollars in nbagent's own lines are never typeset as math (issue 35, item 2), while the model's Markdown keeps its math.

JupyterLab and Notebook 7 typeset every ``$…$`` pair of an HTML output with MathJax: a finished panel's cost line
('$0.10 this request, $0.10 in all') and a budget stop ('the session cost $0.10, its budget is $0.05') came out as
'0.10*thisrequest*,0.10'. Here a real kernel, the fake API and Chromium show both, in Light and Dark and in Notebook 7.
"""

from __future__ import annotations

import pytest

from tests.browser.harness import Jupyter, visible_text, wait_until, write_notebook
from tests.support.fake_anthropic import FakeAnthropic, text

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.kernel]

DIME = {
    "input_tokens": 50_000,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
    "output_tokens": 0,
}  # $0.10 on the default model
CELLS = ["%load_ext nbagent", "%config Agent.max_session_cost = 0.05", "%agent Say the area", "%agent Say more"]
REPLY = "The area is $x^2$ square metres."
COST = "this request: 50,000 tokens in · 0 out · $0.10"  # the request's tokens beside its own dollars (issue 35 item 4)
STOP = "stopped: the session cost $0.10, its budget is $0.05 (max_session_cost)"
# MathJax's typeset elements outside the model's Markdown (nbagent-text), and whether the model's own math was typeset
OUTSIDE = (
    "(el) => [...el.querySelectorAll('mjx-container')].filter((m) => !m.closest('.nbagent-text')).map((m) => m.outerHTML.slice(0, 120))"
)
MATH = "(el) => el.querySelectorAll('.nbagent-text mjx-container').length"


@pytest.mark.parametrize(("kind", "theme"), [("lab", "light"), ("lab", "dark"), ("notebook7", "")])
def test_dollars_in_nbagents_lines_stay_text_while_the_models_math_is_typeset(
    kind: str, theme: str, request: pytest.FixtureRequest, fake_api: FakeAnthropic
) -> None:
    app: Jupyter = request.getfixturevalue(kind)
    if theme:
        app.change_theme(theme)
    name = f"money/{kind}-{theme or 'default'}.ipynb"
    write_notebook(app.server.root / name, CELLS)
    fake_api.script(text(REPLY, usage=DIME))
    app.open(name)
    app.run_all(name)
    app.wait_idle(name)
    panel, stop = app.output(name, 2), app.output(name, 3)
    wait_until(lambda: panel.evaluate(MATH) > 0, 60, lambda: f"the model's $x^2$ was never typeset: {panel.inner_html()[-600:]!r}")
    wait_until(lambda: STOP in visible_text(stop), 60, lambda: f"no budget stop shown: {visible_text(stop)[-400:]!r}")
    stop.page.wait_for_timeout(1000)  # MathJax typesets each output as it is attached: give the last one its turn
    assert COST in visible_text(panel), visible_text(panel)[-400:]
    assert STOP in visible_text(stop.locator(".nbagent")), visible_text(stop)[-400:]
    assert "— stopped at its budget" in visible_text(stop.locator(".nbagent-header")), visible_text(stop)[-400:]  # issue 35 item 4
    # an outcome, not an error: how to go on, as plain output under the panel, and no red block (issue 35 item 6)
    assert "set Agent.max_session_cost to a higher amount" in visible_text(stop) and "UsageError" not in visible_text(stop)
    assert stop.locator('[data-mime-type="application/vnd.jupyter.stderr"]').count() == 0
    assert panel.evaluate(OUTSIDE) == [], "nbagent's own lines in the panel were typeset as math"
    assert stop.evaluate(OUTSIDE) == [], "the budget stop was typeset as math"
