"""Issue 35 item 4 in a real ipykernel: a re-run turn whose code "Insert as cells" put into the notebook does not suggest
``%agent --restore`` (the inserted cells make its variables); a turn whose code is not in cells still does."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from nbagent.notebook import restart
from nbagent.notebook.agent_cells import KIND
from tests.notebook.test_cells_kernel import SETUP, Browser, button_of, log_events
from tests.support.fake_anthropic import text, tool_use
from tests.support.kernels import Kernel, wait_for

pytestmark = [pytest.mark.kernel, pytest.mark.slow]


def shown_html(kernel: Kernel, code: str, cell_id: str) -> str:
    """The HTML a cell displayed (the panel's header says what became of the variables), entities decoded."""
    messages, reply = kernel.execute(code, cell_id=cell_id)
    assert reply["content"]["status"] == "ok"
    kinds = ("display_data", "update_display_data")
    return html.unescape("".join(m["content"]["data"].get("text/html", "") for m in messages if m["msg_type"] in kinds))


def test_a_rerun_turn_whose_code_was_inserted_as_cells_does_not_suggest_restore(kernels, fake, tmp_path: Path) -> None:
    fake.script(
        tool_use("python", {"code": "a = 21"}),
        text("a is 21."),
        tool_use("python", {"code": "b = 2"}),
        text("b is 2."),
    )
    kernel = kernels()
    kernel.run(SETUP, "setup")
    browser = Browser(kernel)
    browser.open()
    messages, _ = kernel.execute("%agent make a", cell_id="a-cell")
    session = button_of(messages)["application/vnd.nbagent.cells+json"]["session"]
    kernel.run("%agent make b", cell_id="b-cell")  # its code stays in the transcript only
    browser.send({"v": 1, "type": "insert_request", "id": "r1", "session": session, "turn": 1})
    insert = browser.wait("insert")
    placed = [{"tool_use_id": c["tool_use_id"], "cell_id": f"new-{i}", "index": i + 1} for i, c in enumerate(insert["cells"])]
    browser.send({"v": 1, "type": "inserted", "id": insert["id"], "session": session, "cells": placed, "skipped": []})
    wait_for(lambda: any(e.get("kind") == KIND for e in log_events(tmp_path)))
    kernel.shutdown()

    again = kernels()  # a restart: Run All re-renders both turns with no model call
    again.run(SETUP, "setup")
    inserted, kept = shown_html(again, "%agent make a", "a-cell"), shown_html(again, "%agent make b", "b-cell")
    assert restart.VARIABLES_IN_CELLS in inserted and "--restore" not in inserted
    assert restart.VARIABLES_GONE in kept  # its code is nowhere else: --restore is how to get b back
    assert len(fake.requests) == 4
