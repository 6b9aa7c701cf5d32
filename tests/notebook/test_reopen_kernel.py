"""Issue 32, items 1 and 3, in a real ipykernel: a turn that finished while no page showed it is written into its cell
by the page that asks (``catch_up`` -> ``transcripts``), with no model call; without the extension, ``%agent_sessions``
and the next panel say it went unseen. The browser tests (tests/browser/test_reopen_finished.py) drive the extension.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.notebook.test_pages_kernel import Page, client
from tests.support.fake_anthropic import text
from tests.support.kernels import run_cell, stdout, wait_for

pytestmark = [pytest.mark.kernel, pytest.mark.slow]

REQUEST = "%agent say hello"
ANSWER = "Hello from the model, written while nobody watched."
HELLO = {"v": 1, "type": "hello", "extension": "0.1.0", "path": "work.ipynb"}


def catch_up(page: Page, source: str = REQUEST, markers: list[dict[str, Any]] | None = None, cell: str = "agent-cell") -> dict[str, Any]:
    page.send({"v": 1, "type": "catch_up", "id": "q1", "cells": [{"id": cell, "source": source, "markers": markers or []}]})
    return page.wait("transcripts")


def final_metadata(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The metadata of the panel's last update (its final static transcript)."""
    [last] = [m for m in messages if m["msg_type"] == "update_display_data"][-1:]
    return last["content"]["metadata"]


def test_a_turn_that_finished_with_no_page_is_written_by_the_page_that_asks(kernels, fake, tmp_path: Path) -> None:
    kernel = kernels()
    kernel.run("%load_ext nbagent", "setup")
    fake.script(text(ANSWER))
    messages, reply = run_cell(kernel.kc, REQUEST, cell_id="agent-cell")  # no page has the comm: nobody sees it
    assert reply["content"]["status"] == "ok" and len(fake.requests) == 1
    marker = final_metadata(messages)["nbagent"]["final"]
    assert marker["session"] and marker["from"] < marker["to"]

    b = Page(client(kernel))  # the notebook reopened: a new page, a new client id
    b.kc.shell_channel.send(b.kc.session.msg("comm_open", {"comm_id": b.comm_id, "target_name": "nbagent.cells", "data": {**HELLO}}))
    b.wait("hello")
    answer = catch_up(b)
    assert answer["id"] == "q1" and answer["write"] is True
    [cell] = answer["cells"]
    assert (cell["id"], cell["session"], cell["from"], cell["to"]) == ("agent-cell", marker["session"], marker["from"], marker["to"])
    [transcript] = cell["outputs"]  # no python ran: no "Insert as cells" button
    assert transcript["output_type"] == "display_data" and transcript["metadata"] == {"nbagent": {"final": marker}}
    assert ANSWER in transcript["data"]["text/html"] and ANSWER in transcript["data"]["text/plain"]
    assert "written into this cell when a page of the notebook asked" in transcript["data"]["text/html"]
    assert "<script" not in transcript["data"]["text/html"].lower()
    assert len(fake.requests) == 1  # no model call

    # The cell edited since, or another cell id: nothing to write.
    assert catch_up(b, "%agent say hello again")["cells"] == []
    assert catch_up(b, cell="other-cell")["cells"] == []

    # Without the extension's acknowledgement, %agent_sessions from another client says the turn went unseen.
    said = stdout(run_cell(b.kc, "%agent_sessions", cell_id="list")[0])
    assert "ended (done) while no page showed it" in said and f"`%agent_replay {marker['session']}` shows it" in said
    assert "would send its request to the model again" in said
    said_to_a = stdout(run_cell(kernel.kc, "%agent_sessions", cell_id="list")[0])
    assert "while no page showed it" not in said_to_a  # the page that ran it saw it
    assert catch_up(b, markers=[marker])["cells"] == []  # the cell shows it now: nothing to write, and it was seen
    assert "while no page showed it" not in stdout(run_cell(b.kc, "%agent_sessions", cell_id="list")[0])
    assert len(fake.requests) == 1


def test_one_page_writes_and_the_others_show_it_read_only_while_the_writer_is_open(kernels, fake) -> None:
    kernel = kernels()
    kernel.run("%load_ext nbagent", "setup")
    fake.script(text(ANSWER))
    run_cell(kernel.kc, REQUEST, cell_id="agent-cell")
    b, c = Page(client(kernel)), Page(client(kernel))
    for page in (b, c):
        page.kc.shell_channel.send(
            page.kc.session.msg("comm_open", {"comm_id": page.comm_id, "target_name": "nbagent.cells", "data": HELLO})
        )
        page.wait("hello")
    assert catch_up(b)["write"] is True
    shown = catch_up(c)
    assert shown["write"] is False and shown["cells"][0]["outputs"]  # page C shows it, read-only
    b.send({"v": 1, "type": "transcripts_written", "id": "q1", "written": ["agent-cell"], "skipped": []})
    assert catch_up(c)["write"] is False  # B wrote it into the notebook: C shows it read-only while B is open
    b.kc.shell_channel.send(b.kc.session.msg("comm_close", {"comm_id": b.comm_id, "data": {}}))
    # B closed (its model with it): C's own model lacks it, C writes it. The close comes on B's channel and the ask on
    # C's, so the kernel may see the ask first: ask until it has seen the close.
    wait_for(lambda: catch_up(c)["write"] is True, timeout=30)
    said = stdout(run_cell(b.kc, "%agent_sessions", cell_id="list")[0])
    assert "while no page showed it" not in said  # a page wrote it


def test_the_next_panel_of_the_session_says_a_turn_went_unseen(kernels, fake) -> None:
    kernel = kernels()
    kernel.run("%load_ext nbagent", "setup")
    fake.script(text(ANSWER), text("Second answer."), text("Third answer."))
    run_cell(kernel.kc, REQUEST, cell_id="agent-cell")
    b = client(kernel)  # another front end without the extension (VS Code, Colab): no comm at all
    messages, reply = run_cell(b, "%agent and now?", cell_id="next-cell")
    assert reply["content"]["status"] == "ok"
    header = [m["content"]["data"]["text/html"] for m in messages if m["msg_type"] == "update_display_data"][-1]
    assert "ended (done) while no page showed it" in header and "%agent_replay" in header
    messages, _ = run_cell(b, "%agent once more", cell_id="third-cell")  # said once
    header = [m["content"]["data"]["text/html"] for m in messages if m["msg_type"] == "update_display_data"][-1]
    assert "while no page showed it" not in header
    assert len(fake.requests) == 3
