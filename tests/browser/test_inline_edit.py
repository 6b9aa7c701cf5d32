"""A proposed cell edit shown at the cell it changes, and the Run button after an accepted ``--fix`` (issue 35 item 3).

A cell fails; ``%agent --fix`` runs and the model proposes a fix of that cell. The failing cell itself shows the
change, a coloured diff with its invisible characters marked, with Accept / Reject; the ``%agent`` cell's panel asks
the same question, naming "cell 2" and its first line. Accept there applies the edit and the log holds one
``approval`` decision; the view goes; a "Run cell" button at the cell runs it, through JupyterLab's run command,
only when clicked. Reject leaves the cell as it was. The page's side is labextension/src/inline.ts and runcell.ts;
the kernel's nbagent/notebook/cell_edit.py (docs/cells.md, "Proposed edits").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import nbformat
import pytest

from tests.browser.harness import PANEL_JS, Jupyter, visible_text, wait_until, write_notebook
from tests.browser.test_cells import cells, start
from tests.browser.test_reopen_approval import decisions
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.kernel, pytest.mark.usefixtures("extension_installed")]

FAILING = "print(totl)"
FIXED = "total = 3  # fixed\u200b\nprint(total)"  # a zero-width space the user must see
INLINE = ".nbagent-inline-edit"
OFFER = ".nbagent-run-offer"
# The computed background of the inline diff's first added and first removed line.
BANDS_JS = """
(node) => ['.nbagent-diff-add', '.nbagent-diff-del'].map(
  (s) => getComputedStyle(node.querySelector(s)).backgroundColor)
"""


@pytest.fixture
def clean(fake_api: FakeAnthropic) -> Iterator[list[tuple[Jupyter, str]]]:
    """The notebooks a test opens: their kernels shut down and the unused replies dropped even when it fails (a turn left
    waiting would otherwise take the next test's scripted replies)."""
    opened: list[tuple[Jupyter, str]] = []
    yield opened
    fake_api.clear_script()
    for app, name in opened:
        app.shutdown_kernel(name)
        app.close(name)


def propose_fix(app: Jupyter, fake: FakeAnthropic, name: str, opened: list[tuple[Jupyter, str]]) -> Any:
    """Open a notebook whose cell 2 fails, run it, run ``%agent --fix`` with the model proposing FIXED: the inline view."""
    opened.append((app, name))
    write_notebook(app.server.root / name, ["%load_ext nbagent\n%config Agent.approval = 'ask'", FAILING, "%agent --fix"])
    target = nbformat.read(app.server.root / name, as_version=4).cells[1].id
    start(app, name, [], setup=1)
    app.run_cell(name, 1)
    app.wait_idle(name)
    assert "NameError" in visible_text(app.output(name, 1))
    fake.script(tool_use("propose_cell_edit", {"cell_id": target, "new_source": FIXED}), text("Fixed: total is defined now."))
    app.run_cell(name, 2)
    inline = app.cell(name, 1).locator(INLINE)
    inline.wait_for(state="visible", timeout=90_000)
    return inline


def test_accept_at_the_cell_applies_the_fix_and_run_cell_runs_it_only_when_clicked(
    app: Jupyter, fake_api: FakeAnthropic, clean: list[tuple[Jupyter, str]]
) -> None:
    name = f"inline-accept-{app.kind}.ipynb"
    inline = propose_fix(app, fake_api, name, clean)
    shown = visible_text(inline)
    assert "-print(totl)" in shown and "+print(total)" in shown and "+total = 3" in shown and "\u200b" not in shown
    assert inline.locator(".nbagent-hidden", has_text="\\u200b").count() == 1  # the invisible character, shown and marked
    add, remove = app.page.locator(INLINE).first.evaluate(BANDS_JS)
    assert add != remove and "0, 0, 0, 0" not in add + remove, (add, remove)  # coloured: green added, red removed
    assert inline.is_visible() and inline.evaluate(
        "(n) => { const r = n.getBoundingClientRect(); return r.top < innerHeight && r.bottom > 0; }"
    )
    panel = visible_text(app.output(name, 2))
    assert "Change cell 2 (print(totl)) as shown below?" in panel and "new_source" not in panel and "may not be undone" not in panel
    title = visible_text(app.output(name, 2).locator(".nbagent-header b").first)
    assert title == "Fix the error in cell [2]", title  # the panel's title: short, not the instruction sent (shown under "You:")
    assert app.page.locator(".nbagent-overlay").count() == 0  # the page that runs the cell asks in its panel, not twice

    inline.locator("button.nbagent-inline-accept").click()
    wait_until(lambda: cells(app, name)[1]["source"] == FIXED, 60, lambda: f"Accept did not change the cell: {cells(app, name)[1]}")
    app.wait_idle(name)
    assert app.cell(name, 1).locator(INLINE).count() == 0  # decided: the view went
    assert [(e["decision"], e.get("by")) for e in decisions(app.server, name)] == [("approved", "panel")]
    assert "approved" in visible_text(app.output(name, 2)) and "Fixed: total is defined now." in visible_text(app.output(name, 2))

    offer = app.cell(name, 1).locator(OFFER)
    offer.wait_for(state="visible", timeout=30_000)
    app.page.wait_for_timeout(1000)
    assert "NameError" in visible_text(app.output(name, 1)), "the fixed cell ran before its Run button was clicked"
    offer.locator("button.nbagent-run-cell").click()
    wait_until(
        lambda: visible_text(app.output(name, 1)).strip() == "3",
        60,
        lambda: f"Run cell did not run it: {visible_text(app.output(name, 1))!r}",
    )
    assert app.cell(name, 1).locator(OFFER).count() == 0
    dirty = f"(path) => ({PANEL_JS})(path).content.model.sharedModel.cells[1].toJSON().metadata"
    assert "nbagent" not in app.page.evaluate(dirty, name)  # the views are in the page, never in the notebook


def test_reject_at_the_cell_leaves_it_unchanged(lab: Jupyter, fake_api: FakeAnthropic, clean: list[tuple[Jupyter, str]]) -> None:
    name = "inline-reject.ipynb"
    inline = propose_fix(lab, fake_api, name, clean)
    inline.locator("button.nbagent-inline-reject").click()
    lab.wait_idle(name)
    assert cells(lab, name)[1]["source"] == FAILING
    assert lab.cell(name, 1).locator(INLINE).count() == 0 and lab.cell(name, 1).locator(OFFER).count() == 0
    assert [(e["decision"], e.get("by")) for e in decisions(lab.server, name)] == [("declined", "panel")]
    assert "declined" in visible_text(lab.output(name, 2))
