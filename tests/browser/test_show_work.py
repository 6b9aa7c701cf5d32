"""Show the work (issue 22, point 1): the plot the agent's python call made is on screen without a click.

A real JupyterLab (Light, then Dark) and Notebook 7 in Chromium, the kernel talking to the fake API: one ``%agent``
turn whose python call draws a bar chart (with Pillow, displayed as IPython does a figure) and prints a small table,
then an answer with a right-aligned number column and a code block.  Checked while the turn runs (the live panel)
and after it (the static transcript): the plot and the printed output are visible with no row opened, the code is
collapsed, the row says "ran python · 1 plot", the number column is right-aligned and the answer's code highlighted.
Screenshots of the panel in both themes go to tests/browser/artifacts/ and their paths are printed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.browser.harness import ARTIFACTS, Jupyter, visible_text, wait_until, write_notebook
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.kernel]

PLOT_CODE = """\
import io
from IPython.display import Image, display
from PIL import Image as Canvas, ImageDraw

totals = {"Jan": 3, "Feb": 5, "Mar": 4, "Apr": 7, "May": 6, "Jun": 9}
chart = Canvas.new("RGB", (320, 200), "white")
draw = ImageDraw.Draw(chart)
for i, value in enumerate(totals.values()):
    draw.rectangle([20 + i * 48, 190 - value * 18, 52 + i * 48, 190], fill=(31, 119, 180))
png = io.BytesIO()
chart.save(png, "PNG")
display(Image(png.getvalue()))
print("month  total")
for month, value in totals.items():
    print(f"{month:5}  {value:5}")
"""
FINAL = "The totals rise towards June."
ANSWER = f"""\
Here are the monthly totals:

| Month | Total |
|:------|------:|
| Jan   |     3 |
| Jun   |     9 |

```python
best = max(totals, key=totals.get)
```

{FINAL}
"""
CELLS = ["%load_ext nbagent", "%agent Plot the monthly totals"]
AGENT_CELL = 1
PLOT = "img[src^='data:image/png']"

# Watches the cell's output while the turn runs: whether the plot was ever visible (not inside a closed row) before
# the answer's last words were there, i.e. in the live panel, without any click.
LIVE_WATCH_JS = """
([el, last]) => {
  const record = {plotVisibleLive: false, rowLive: ''};
  const check = () => {
    if (el.innerText.includes(last)) return;
    for (const img of el.querySelectorAll("img[src^='data:image/png']")) {
      const box = img.getBoundingClientRect();
      if (img.checkVisibility() && box.width > 0 && box.height > 0 && !img.closest('details:not([open])')) {
        record.plotVisibleLive = true;
        const row = img.closest('.nbagent-result');
        record.rowLive = row ? row.innerText : '';
      }
    }
  };
  new MutationObserver(check).observe(el, {subtree: true, childList: true, characterData: true, attributes: true});
  window.__nbagentShowWork = record;
}
"""

# What the finished output shows without a click: the plot, the row, the printed table, whether the code is hidden,
# the alignment of the number column, and whether the answer's code block is highlighted.
SHOWN_JS = """
(el) => {
  const img = [...el.querySelectorAll("img[src^='data:image/png']")].find((i) => i.checkVisibility());
  const box = img ? img.getBoundingClientRect() : null;
  const cells = [...el.querySelectorAll('td')].filter((td) => td.checkVisibility());
  const number = cells.find((td) => td.innerText.trim() === '9');
  return {
    plotVisible: !!img && box.width > 0 && box.height > 0 && !img.closest('details:not([open])'),
    openDetails: el.querySelectorAll('details[open]').length,
    text: el.innerText,
    numberAlign: number ? getComputedStyle(number).textAlign : null,
    highlighted: [...el.querySelectorAll('.nbagent-text pre.nbagent-code span[class^="pg-"]')].some((s) => s.checkVisibility()),
  };
}
"""


def run_turn(jupyter: Jupyter, fake_api: FakeAnthropic, notebook: str) -> dict[str, Any]:
    """Open a notebook of one ``%agent`` turn and Run All; what the live panel showed, and the finished output."""
    write_notebook(jupyter.server.root / notebook, CELLS)
    # The answer streams slowly: the live panel is on screen for a few seconds after the plot arrives.
    fake_api.script(tool_use("python", {"code": PLOT_CODE}), text(ANSWER, chunks=30, delay=0.15))
    jupyter.open(notebook)
    output = jupyter.output(notebook, AGENT_CELL)
    output.evaluate(f"(el) => ({LIVE_WATCH_JS})([el, {json.dumps(FINAL)}])")
    jupyter.run_all(notebook)
    wait_until(
        lambda: FINAL in visible_text(output), 120, lambda: f"the turn never finished; the cell shows: {visible_text(output)[:300]!r}"
    )
    jupyter.wait_idle(notebook)
    return {"live": jupyter.page.evaluate("() => window.__nbagentShowWork"), "shown": output.evaluate(SHOWN_JS)}


def problems_in(where: str, ran: dict[str, Any]) -> list[str]:
    """What a user would see wrong in ``ran`` (see :func:`run_turn`)."""
    live, shown, problems = ran["live"], ran["shown"], []
    if not live["plotVisibleLive"]:
        problems.append(f"{where}: the plot was not visible in the live panel without a click while the turn ran")
    elif "ran python · 1 plot" not in live["rowLive"]:
        problems.append(f"{where}: the live row of the plot does not say 'ran python · 1 plot': {live['rowLive'][:200]!r}")
    if not shown["plotVisible"]:
        problems.append(f"{where}: the finished output does not show the plot without a click")
    if shown["openDetails"]:
        problems.append(f"{where}: {shown['openDetails']} row(s) are open although nobody clicked")
    for words in ("ran python · 1 plot", "Jun        9", FINAL):
        if words not in shown["text"]:
            problems.append(f"{where}: {words!r} is not on screen without a click; it shows: {shown['text'][:400]!r}")
    if "ImageDraw.Draw(chart)" in shown["text"]:
        problems.append(f"{where}: the python code is shown open; it should stay collapsed in its row")
    if shown["numberAlign"] != "right":
        problems.append(f"{where}: the right-aligned Total column is aligned {shown['numberAlign']!r}")
    if not shown["highlighted"]:
        problems.append(f"{where}: the code block of the answer is not highlighted")
    return problems


def screenshot(jupyter: Jupyter, notebook: str, name: str) -> str:
    """A screenshot of the agent cell (the request and its panel) in tests/browser/artifacts/; its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    target = ARTIFACTS / f"show-work-{name}.png"
    jupyter.cell(notebook, AGENT_CELL).screenshot(path=str(target))
    print(f"screenshot: {target}")
    return str(target)


def test_the_plot_is_shown_without_a_click_in_jupyterlab_light_and_dark(lab: Jupyter, fake_api: FakeAnthropic) -> None:
    notebook = "show_work.ipynb"
    problems = problems_in("JupyterLab Light", run_turn(lab, fake_api, notebook))
    screenshot(lab, notebook, "lab-light")
    lab.change_theme("dark")
    try:
        lab.activate(notebook)
        dark = lab.output(notebook, AGENT_CELL).evaluate(SHOWN_JS)
        if not dark["plotVisible"]:
            problems.append("JupyterLab Dark: the plot is not shown without a click")
        screenshot(lab, notebook, "lab-dark")
    finally:
        lab.change_theme("light")
    assert not problems, "\n".join(problems)


def test_the_plot_is_shown_without_a_click_in_notebook_7(notebook7: Jupyter, fake_api: FakeAnthropic) -> None:
    notebook = "show_work_nb7.ipynb"
    problems = problems_in("Notebook 7", run_turn(notebook7, fake_api, notebook))
    screenshot(notebook7, notebook, "notebook7-light")
    assert not problems, "\n".join(problems)
