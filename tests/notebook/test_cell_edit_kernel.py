"""Issues 33 (items 9, 10) and 35 (item 3) in a real ipykernel: a proposed cell edit asks with its diff under "auto", is
refused under "deny"; an accepted ``--fix`` names the cell, is shown at it, offers to run it, and ``{Err}`` moves on.

A jupyter_client client plays the browser extension's side of the ``nbagent.cells`` comm (test_cells_kernel's
Browser); the fake Messages API scripts the model's ``propose_cell_edit`` call.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.notebook.test_cells_kernel import SETUP, Browser
from tests.support.fake_anthropic import text, tool_use
from tests.support.kernels import Kernel

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
    browse, questions = browser.answering(kernel, cells, "Approve")

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
    assert "offer_run" not in applied[0]  # only an accepted --fix offers to run the cell
    assert "now has the new source" in str(fake.requests[1].body["messages"][-1]["content"])


def test_under_deny_a_proposed_edit_is_refused_with_a_note_to_the_model(kernels: Any, fake: Any, tmp_path: Path) -> None:
    kernel = kernels()
    browser, questions = propose(kernel, fake, "deny")
    assert questions == [] and [d for d in browser.seen if d.get("type") == "apply_edit"] == []
    assert "Approval is set to 'deny', so this call was not run." in str(fake.requests[1].body["messages"][-1]["content"])


FAILING = "print(totl)"
FIXED = "totl = 3\nprint(totl)"


def test_an_accepted_fix_is_shown_at_its_cell_offers_a_run_and_err_moves_on(kernels: Any, fake: Any, tmp_path: Path) -> None:
    """Issue 35 item 3: the question names "cell 2" and its first line and shows the change once (a coloured diff, no
    JSON); the pages get the edit to show at cell c2; the applied edit offers a Run button; the panel's title is short;
    and the fixed error is not ``{Err}`` any more."""
    kernel = kernels()
    kernel.run(f"{SETUP}\n%config Agent.approval = 'ask'", "c1")
    browser = Browser(kernel)
    browser.open()
    status, _ = kernel.try_run(FAILING, "c2")
    assert status == "error"
    fake.script(tool_use("propose_cell_edit", {"cell_id": "c2", "new_source": FIXED}), text("Done."))
    cells = [
        {"id": "c1", "cell_type": "code", "source": SETUP, "execution_count": 1, "outputs_text": "", "dirty": False},
        {"id": "c2", "cell_type": "code", "source": FAILING, "execution_count": 2, "outputs_text": "NameError", "dirty": False},
    ]
    browse, questions = browser.answering(kernel, cells, "Approve")

    messages, _ = kernel.execute("%agent --fix", cell_id="ask", on_message=browse)
    [question] = questions
    assert "Change cell 2 (<code>print(totl)</code>) as shown below?" in question
    assert '<span class="nbagent-diff-add">+totl = 3</span>' in question and question.count("totl = 3") == 1
    assert "new_source" not in question and "may not be undone" not in question and "Ctrl+Z in the cell undoes" in question
    [waiting] = [d for d in browser.seen if d.get("type") == "approval_waiting"]
    assert waiting["cell_id"] == "ask" and waiting["edit"]["cell_id"] == "c2"  # shown at the cell it changes
    assert "+totl = 3" in waiting["edit"]["diff_html"] and "approval needed" not in waiting["edit"]["diff_html"]
    [applied] = [d for d in browser.seen if d.get("type") == "apply_edit"]
    assert applied["cell_id"] == "c2" and applied["offer_run"] is True  # the browser offers Run; nothing ran
    assert "cell 2 (id c2) now has the new source (it was not run)" in str(fake.requests[1].body["messages"][-1]["content"])
    shown = json.dumps([m["content"] for m in messages])
    assert re.search(r"<b>Fix the error in cell \[\d+\]</b>", shown) and "<b>Explain the error" not in shown
    status, said = kernel.try_run("%agent why {Err}")  # the error the fix fixed is not the latest any more
    assert status == "error" and "no cell has raised an error" in said and len(fake.requests) == 2
