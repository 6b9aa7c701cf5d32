"""A turn that finished while its page was closed is written into its cell by the reopened page (issue 32, item 1).

Page A runs an ``%agent`` cell whose answer streams slowly and is closed mid-stream without saving; the kernel finishes
the turn. A new page opens the notebook: the extension's ``catch_up`` gets the transcript (``transcripts``), the page
writes it into the cell, the notebook is unsaved, and the fake API got no new request. Saved, closed and reopened,
nothing is written again. A cell edited on disk meanwhile gets nothing. The kernel side is
nbagent/notebook/reopen_comm.py; the page's labextension/src/transcripts.ts (docs/cells.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.browser.harness import PANEL_JS, Jupyter, JupyterServer, visible_text, wait_until, write_notebook
from tests.browser.test_reopen_approval import another_page
from tests.support.fake_anthropic import FakeAnthropic, text

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.kernel, pytest.mark.usefixtures("extension_installed")]
ANSWER = "The transcript came back although nobody watched the stream finish."
ANSWERS = f'(path) => ({PANEL_JS})(path).node.dataset.nbagentTranscripts || ""'
OUTPUTS = f"(path) => ({PANEL_JS})(path).content.model.sharedModel.cells[1].toJSON().outputs"


def complete(server: JupyterServer, name: str) -> bool:
    """Whether the server's sessions API says the notebook's session is complete (its turn ended)."""
    rows = server.api("GET", f"nbagent/api/sessions?path={name}")["sessions"]
    return bool(rows) and all(row["status"] == "complete" for row in rows)


def close_mid_stream(lab: Jupyter, fake: FakeAnthropic, name: str, workspace: str) -> int:
    """Run the notebook's ``%agent`` cell on a page of its own, close that page mid-stream, wait for the turn's end; the request count."""
    write_notebook(lab.server.root / name, ["%load_ext nbagent", "%agent Tell me something, slowly"])
    fake.script(text(ANSWER, chunks=12, delay=0.4))
    first = another_page(lab, workspace)
    first.open(name)
    first.run_cell(name, 0)
    first.wait_idle(name)
    first.save(name)  # the kernel's language_info on disk: a page that opens it later has nothing of its own to save
    first.run_cell(name, 1)
    wait_until(lambda: "The transcript" in visible_text(first.output(name, 1)), 60, "the answer never began to stream")
    first.page.close()  # mid-stream, without saving: the kernel goes on with the turn
    wait_until(lambda: complete(lab.server, name), 60, lambda: f"the turn never completed: {lab.server.log_tail()}")
    return len(fake.requests)


def answers(app: Jupyter, name: str, count: int) -> str:
    """The page's answers to its catch_up, once it has had ``count`` (what the last one did)."""
    wait_until(lambda: app.page.evaluate(ANSWERS, name).startswith(f"{count}:"), 60, lambda: app.page.evaluate(ANSWERS, name))
    return str(app.page.evaluate(ANSWERS, name))


def saved_outputs(server: JupyterServer, name: str) -> list[dict[str, Any]]:
    return list(json.loads((server.root / name).read_text())["cells"][1]["outputs"])


def test_a_turn_that_finished_while_the_page_was_closed_is_written_into_its_cell(lab: Jupyter, fake_api: FakeAnthropic) -> None:
    name = "reopen-finished.ipynb"
    requests = close_mid_stream(lab, fake_api, name, "finished-a")
    assert saved_outputs(lab.server, name) == []  # closing the page saved nothing

    again = another_page(lab, "finished-b")
    try:
        again.open(name)
        assert answers(again, name, 1) == "1: written 1"
        output = again.output(name, 1)
        wait_until(lambda: ANSWER in visible_text(output), 30, lambda: visible_text(output)[-300:])
        assert "written into this cell when a page of the notebook asked for it" in visible_text(output)
        assert again.state(name)["dirty"] is True  # the next save keeps it
        [written] = again.page.evaluate(OUTPUTS, name)
        assert written["output_type"] == "display_data" and written["metadata"]["nbagent"]["final"]["session"]
        assert len(fake_api.requests) == requests  # no model call
        again.save(name)
        assert ANSWER in json.dumps(saved_outputs(lab.server, name))
        again.page.evaluate(f"(path) => ({PANEL_JS})(path).close()", name)
    finally:
        again.page.close()

    third = another_page(lab, "finished-c")  # saved, closed and reopened: the cell shows it, nothing is written again
    try:
        third.open(name)
        assert answers(third, name, 1).endswith(" 0")  # nothing to write or show: the cell has it
        assert third.state(name)["dirty"] is False and len(third.page.evaluate(OUTPUTS, name)) == 1
        assert len(fake_api.requests) == requests
        third.shutdown_kernel(name)
    finally:
        third.page.close()


def test_a_cell_edited_on_disk_meanwhile_gets_nothing(lab: Jupyter, fake_api: FakeAnthropic) -> None:
    name = "reopen-edited.ipynb"
    requests = close_mid_stream(lab, fake_api, name, "edited-a")
    path = Path(lab.server.root / name)
    notebook = nbformat.read(path, as_version=4)
    notebook.cells[1].source = "%agent Tell me something else"
    nbformat.write(notebook, path)

    again = another_page(lab, "edited-b")
    try:
        again.open(name)
        assert answers(again, name, 1) == "1: written 0"
        assert again.page.evaluate(OUTPUTS, name) == [] and again.state(name)["dirty"] is False
        assert len(fake_api.requests) == requests
        again.shutdown_kernel(name)
    finally:
        again.page.close()
