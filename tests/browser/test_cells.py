"""The agent's work as notebook cells (issue 24), through nbagent's extension in a real JupyterLab and Notebook 7.

A turn with two python calls, then "Insert as cells": two code cells below the ``%agent`` cell, with the outputs
recorded at the time and metadata naming the session and the call; pressing it again inserts nothing; Restart Kernel
and Run All executes them (the variables are back) with no model request. ``Agent.cells = "code+summary"`` inserts as
the turn ends. ``read_notebook`` sees a cell edited and not saved. A proposed edit shows its diff; Approve changes
the cell, Undo restores it; Decline leaves it. A foreign session's button inserts nothing. The kernel side is nbagent/notebook/agent_cells.py (docs/cells.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from reliability.attacker import cloned_notebook_log
from tests.browser.harness import PANEL_JS, Jupyter, visible_text, wait_until, write_notebook
from tests.security.test_security import as_another_user
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use

MIME_TYPE = "application/vnd.nbagent.cells+json"

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.kernel, pytest.mark.usefixtures("extension_installed")]

FIRST = "a = 6\nprint('a is', a)"
SECOND = "b = a * 7\nprint('b is', b)"
CHECK = "print('check', a, b)"

# The notebook's cells as the model holds them: type, source, nbagent metadata, outputs' text.
CELLS_JS = f"""
(path) => {{
  const panel = ({PANEL_JS})(path);
  return panel.content.model.sharedModel.cells.map((cell) => {{
    const json = cell.toJSON();
    const outputs = (json.outputs || []).map((o) => o.text ? [].concat(o.text).join('') : JSON.stringify(o.data || o.ename || ''));
    return {{id: cell.id, type: cell.cell_type, source: cell.getSource(), nbagent: cell.getMetadata('nbagent') || null,
             outputs: outputs.join('')}};
  }});
}}
"""


def cells(jupyter: Jupyter, path: str) -> list[dict[str, Any]]:
    """The notebook's cells as its model holds them now."""
    return list(jupyter.page.evaluate(CELLS_JS, path))


def connected(jupyter: Jupyter, path: str, timeout: float = 60) -> None:
    """Wait until the notebook's extension has the nbagent.cells comm open and the kernel said hello."""
    state = f"(path) => ({PANEL_JS})(path).node.dataset.nbagentCells"
    wait_until(
        lambda: jupyter.page.evaluate(state, path) == "ready",
        timeout,
        lambda: f"the extension never connected to the kernel: data-nbagent-cells={jupyter.page.evaluate(state, path)!r}",
    )


def start(jupyter: Jupyter, name: str, sources: list[str], setup: int) -> str:
    """Write and open a notebook, run its first ``setup`` cells one by one, and wait for the comm."""
    if sources:
        write_notebook(jupyter.server.root / name, sources)
    jupyter.open(name)
    for index in range(setup):
        jupyter.run_cell(name, index)
        jupyter.wait_idle(name)
    connected(jupyter, name)
    return name


def test_insert_twice_then_restart_and_run_all(app: Jupyter, fake_api: FakeAnthropic) -> None:
    """Two python calls become two code cells; a second press inserts nothing; Run All after a restart runs them."""
    name = start(app, f"insert-{app.kind}.ipynb", ["%load_ext nbagent", "%agent Work out b", CHECK], setup=1)
    fake_api.script(tool_use("python", {"code": FIRST}), tool_use("python", {"code": SECOND}), text("b is 42."))
    app.run_cell(name, 1)
    app.wait_idle(name)
    output = app.output(name, 1)
    button = output.locator("button.nbagent-cells-insert")
    button.wait_for(state="visible", timeout=60_000)

    button.click()
    wait_until(lambda: len(cells(app, name)) == 5, 60, lambda: f"no cells inserted; the cell says {visible_text(output)[-300:]!r}")
    now = cells(app, name)
    assert [c["source"] for c in now] == ["%load_ext nbagent", "%agent Work out b", FIRST, SECOND, CHECK]
    assert [c["type"] for c in now[2:4]] == ["code", "code"]
    assert "a is 6" in now[2]["outputs"] and "b is 42" in now[3]["outputs"]
    records = [c["nbagent"] for c in now[2:4]]
    assert all(r and r["turn"] == 1 and r["session"] for r in records), records
    assert records[0]["tool_use_id"] != records[1]["tool_use_id"]
    note = output.locator(".nbagent-cells-note")
    wait_until(lambda: "inserted 2 cells" in visible_text(note), 30, lambda: f"the button says {visible_text(note)!r}")

    button.click()
    wait_until(lambda: "already in the notebook" in visible_text(note), 60, lambda: f"the button says {visible_text(note)!r}")
    assert len(cells(app, name)) == 5

    app.save(name)
    asked = len(fake_api.requests)
    app.restart_run_all(name)
    app.wait_run_all(name)
    connected(app, name)
    wait_until(
        lambda: "check 6 42" in visible_text(app.output(name, 4)),
        60,
        lambda: f"the inserted cells did not bring a and b back: {visible_text(app.output(name, 4))!r}",
    )
    assert len(fake_api.requests) == asked, "Run All after a restart asked the model again"
    assert len(cells(app, name)) == 5, "Run All inserted cells again"
    app.shutdown_kernel(name)
    app.close(name)


def test_code_and_summary_inserted_as_the_turn_ends(app: Jupyter, fake_api: FakeAnthropic) -> None:
    """``Agent.cells = "code+summary"``: the call's cell and a markdown cell with the answer, with no click."""
    sources = ["%load_ext nbagent", '%config Agent.cells = "code+summary"', "%agent Work out a"]
    name = start(app, f"summary-{app.kind}.ipynb", sources, setup=2)
    fake_api.script(tool_use("python", {"code": FIRST}), text("a is **6**."))
    app.run_cell(name, 2)
    app.wait_idle(name)
    wait_until(lambda: len(cells(app, name)) >= 5, 60, lambda: f"not inserted as the turn ended: {cells(app, name)}")
    now = cells(app, name)
    assert [c["type"] for c in now[3:5]] == ["code", "markdown"], now
    assert now[3]["source"] == FIRST and "a is 6" in now[3]["outputs"]
    assert "6" in now[4]["source"]
    app.shutdown_kernel(name)
    app.close(name)


def test_read_notebook_sees_an_unsaved_edit(app: Jupyter, fake_api: FakeAnthropic) -> None:
    """The read_notebook tool reads the cells as the browser has them: an edit that was never saved is in its result."""
    name = start(app, f"read-{app.kind}.ipynb", ["%load_ext nbagent", "%agent What is in the notebook?", "x = 1"], setup=1)
    marker = "unsaved_edit_7f3 = 99"
    app.page.evaluate(f"([path, source]) => ({PANEL_JS})(path).content.model.sharedModel.cells[2].setSource(source)", [name, marker])
    fake_api.script(tool_use("read_notebook", {}), text("Read it."))
    asked = len(fake_api.requests)
    app.run_cell(name, 1)
    app.wait_idle(name)
    wait_until(lambda: len(fake_api.requests) >= asked + 2, 60, "the turn did not send the tool result back")
    result = json.dumps(fake_api.requests[-1].body)
    assert marker in result, "read_notebook did not see the unsaved edit"
    app.shutdown_kernel(name)
    app.close(name)


@pytest.mark.parametrize("choice", ["Approve", "Decline"])
def test_proposed_edit(app: Jupyter, fake_api: FakeAnthropic, choice: str) -> None:
    """A proposed edit's diff is shown; Approve changes the cell and Undo restores it; Decline leaves it."""
    name = f"edit-{choice.lower()}-{app.kind}.ipynb"
    write_notebook(app.server.root / name, ["%load_ext nbagent", '%config Agent.approval = "ask"', "%agent Fix the typo", "print(totl)"])
    cell_id = nbformat.read(app.server.root / name, as_version=4).cells[3].id
    start(app, name, [], setup=2)
    fake_api.script(tool_use("propose_cell_edit", {"cell_id": cell_id, "new_source": "print(total)"}), text("Done."))
    app.run_cell(name, 2)
    output = app.output(name, 2)
    button = output.locator("button:not([disabled])", has_text=choice).first
    button.wait_for(state="visible", timeout=90_000)
    shown = visible_text(output)
    assert "print(totl)" in shown and "print(total)" in shown, f"the diff does not show both lines: {shown[-500:]!r}"
    button.click()
    app.wait_idle(name)
    source = lambda: cells(app, name)[3]["source"]  # noqa: E731
    if choice == "Decline":
        assert source() == "print(totl)"
    else:
        wait_until(lambda: source() == "print(total)", 30, lambda: f"Approve did not change the cell: {source()!r}")
        app.page.evaluate(f"(path) => ({PANEL_JS})(path).content.model.sharedModel.cells[3].undo()", name)
        assert source() == "print(totl)", "Undo did not restore the cell"
    app.shutdown_kernel(name)
    app.close(name)


def test_a_foreign_session_inserts_nothing(app: Jupyter, tmp_path: Path) -> None:
    """A button for a session this user did not write (a cloned notebook's log), even one the user's own code draws,
    inserts nothing: the kernel refuses the request and the button says why."""
    name = f"foreign-{app.kind}.ipynb"
    with as_another_user(tmp_path):
        cloned_notebook_log(app.server.root / ".nbagent" / name / "cloned.jsonl", "pwned_by_clone = 1")
    forged = {"v": 1, "session": "cloned", "turn": 1, "calls": [{"tool_use_id": "toolu_1", "label": "ran python"}]}
    draw = f"from IPython.display import display\ndisplay({{{MIME_TYPE!r}: {forged!r}}}, raw=True)"
    start(app, name, ["%load_ext nbagent", draw], setup=1)
    app.run_cell(name, 1)
    app.wait_idle(name)
    output = app.output(name, 1)
    output.locator("button.nbagent-cells-insert").click(timeout=60_000)
    note = output.locator(".nbagent-cells-note")
    wait_until(lambda: "not written by you" in visible_text(note), 60, lambda: f"the button says {visible_text(note)!r}")
    assert len(cells(app, name)) == 2, "a foreign session's call was inserted"
    app.shutdown_kernel(name)
    app.close(name)
