"""Issue 33 items 9 and 10 in a real ipykernel: a proposed cell edit asks with its diff under "auto", is refused under "deny".

A jupyter_client client plays the browser extension's side of the ``nbagent.cells`` comm (test_cells_kernel's
Browser); the fake Messages API scripts the model's ``propose_cell_edit`` call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.notebook import test_kernel
from tests.notebook.test_cells_kernel import SETUP, Browser
from tests.support.fake_anthropic import text, tool_use
from tests.support.kernels import Kernel, Message, button_id, click

kernels = test_kernel.kernels  # the fixture: kernels on the fake API (JPY_SESSION_NAME = tmp_path/work.ipynb)
pytestmark = [pytest.mark.kernel, pytest.mark.slow]

OLD = "access = 'user'\nprint(access)"
TROJAN = 'access = "user\u202e \u2066# admin\u2069 \u2066"\nprint(access)'  # reads as a comment in the raw text


def propose(kernel: Kernel, fake: Any, mode: str) -> tuple[Browser, list[str]]:
    """Run ``%agent`` under ``Agent.approval = mode`` with the model proposing TROJAN for cell c1; the diffs shown."""
    kernel.run(f"{SETUP}\n%config Agent.approval = {mode!r}", "setup")
    browser = Browser(kernel)
    browser.open()
    fake.script(tool_use("propose_cell_edit", {"cell_id": "c1", "new_source": TROJAN}), text("Done."))
    cells = [{"id": "c1", "cell_type": "code", "source": OLD, "execution_count": 1, "outputs_text": "", "dirty": False}]
    questions: list[str] = []

    def browse(msg: Message) -> None:
        data = browser.note(msg)
        if data is not None and data.get("type") == "read_request":
            browser.send({"v": 1, "type": "notebook", "id": data["id"], "path": "work.ipynb", "cells": cells})
        elif data is not None and data.get("type") == "apply_edit":
            browser.send({"v": 1, "type": "edit_result", "id": data["id"], "ok": data["old_source"] == cells[0]["source"]})
        state = msg["content"].get("data", {}).get("state", {}) if msg["msg_type"] == "comm_open" else {}
        if "nbagent-diff" in str(state.get("value", "")):
            questions.append(state["value"])
        button = button_id(msg, "Approve")
        if button is not None:
            click(kernel.kc, button)

    kernel.execute("%agent tidy cell c1", cell_id="ask", on_message=browse)
    return browser, questions


def test_under_auto_a_proposed_edit_is_asked_with_its_diff_hidden_characters_marked(kernels: Any, fake: Any, tmp_path: Path) -> None:
    kernel = kernels()
    browser, questions = propose(kernel, fake, "auto")
    [question] = questions  # asked, with the diff: "auto" does not apply an edit unasked
    assert "-access = &#x27;user&#x27;" in question and "+access = &quot;user" in question
    assert not any(c in question for c in "\u202e\u2066\u2069")  # the Trojan-Source characters are never shown raw
    assert 'title="U+202E RIGHT-TO-LEFT OVERRIDE">\\u202e</span>' in question and "hidden characters" in question
    applied = [d for d in browser.seen if d.get("type") == "apply_edit"]
    assert [(d["cell_id"], d["new_source"]) for d in applied] == [("c1", TROJAN)]  # applied once the user approved
    assert "now has the new source" in str(fake.requests[1].body["messages"][-1]["content"])


def test_under_deny_a_proposed_edit_is_refused_with_a_note_to_the_model(kernels: Any, fake: Any, tmp_path: Path) -> None:
    kernel = kernels()
    browser, questions = propose(kernel, fake, "deny")
    assert questions == [] and [d for d in browser.seen if d.get("type") == "apply_edit"] == []
    assert "Approval is set to 'deny', so this call was not run." in str(fake.requests[1].body["messages"][-1]["content"])
