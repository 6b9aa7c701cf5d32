"""Issue 24 in a real ipykernel: a jupyter_client client plays the browser extension's side of the ``nbagent.cells`` comm.

It sends comm_open and comm_msg exactly as the frontend does (docs/cells.md, "Comm protocol v1") and reads the
kernel's messages from iopub. The browser tests (tests/browser/) drive the real extension.
"""

from __future__ import annotations

import os
import queue
import time
import uuid
from pathlib import Path
from typing import Any

import nbformat
import pytest

import nbagent
from nbagent.notebook.agent_cells import KIND
from nbagent.notebook.insert import MIME
from nbagent.record import events as ev
from reliability.attacker import cloned_notebook_log
from tests.security.test_security import as_another_user
from tests.support.fake_anthropic import text, tool_use
from tests.support.kernels import Kernel, Message, button_id, click, wait_for

pytestmark = [pytest.mark.kernel, pytest.mark.slow]

TARGET = "nbagent.cells"
SETUP = "%load_ext nbagent\n%config Agent.tools = ['python', 'read_notebook', 'propose_cell_edit']"
HELLO = {"v": 1, "type": "hello", "extension": "0.1.0"}


class Browser:
    """The extension's side of the comm, over a kernel's jupyter_client channels."""

    def __init__(self, kernel: Kernel) -> None:
        self.kc = kernel.kc
        self.comm_id = uuid.uuid4().hex
        self.seen: list[dict[str, Any]] = []  # every comm message from the kernel, in order

    def open(self, data: dict[str, Any] | None = None) -> dict[str, Any]:
        """Open the comm with the hello message (as the extension does when the kernel is ready); the kernel's hello."""
        content = {"comm_id": self.comm_id, "target_name": TARGET, "data": HELLO if data is None else data}
        self.kc.shell_channel.send(self.kc.session.msg("comm_open", content))
        return self.wait("hello")

    def send(self, data: dict[str, Any]) -> None:
        self.kc.shell_channel.send(self.kc.session.msg("comm_msg", {"comm_id": self.comm_id, "data": data}))

    def note(self, msg: Message) -> dict[str, Any] | None:
        """The data of a comm message from the kernel on this comm (remembered), else None."""
        if msg["msg_type"] == "comm_msg" and msg["content"].get("comm_id") == self.comm_id:
            data = msg["content"]["data"]
            self.seen.append(data)
            return data
        return None

    def wait(self, kind: str, timeout: float = 30) -> dict[str, Any]:
        """The next message of type ``kind`` from the kernel (one already seen first)."""
        for data in self.seen:
            if data.get("type") == kind:
                self.seen.remove(data)
                return data
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_iopub_msg(timeout=0.5)
            except queue.Empty:
                continue
            data = self.note(msg)
            if data is not None and data.get("type") == kind:
                self.seen.remove(data)
                return data
        raise AssertionError(f"no {kind} message from the kernel; saw {[d.get('type') for d in self.seen]}")

    def answering(self, kernel: Kernel, cells: list[dict[str, Any]], choice: str) -> tuple[Any, list[str]]:
        """An ``on_message`` that plays a page holding ``cells`` (reads, edits checked against their source) and presses
        ``choice`` on every question; and the list it fills with each question's diff as shown."""
        questions: list[str] = []

        def browse(msg: Message) -> None:
            data = self.note(msg)
            if data is not None and data.get("type") == "read_request":
                self.send({"v": 1, "type": "notebook", "id": data["id"], "path": "work.ipynb", "cells": cells})
            elif data is not None and data.get("type") == "apply_edit":
                [target] = [c for c in cells if c["id"] == data["cell_id"]]
                self.send({"v": 1, "type": "edit_result", "id": data["id"], "ok": data["old_source"] == target["source"]})
            state = msg["content"].get("data", {}).get("state", {}) if msg["msg_type"] == "comm_open" else {}
            if 'class="nbagent-code nbagent-diff"' in str(state.get("value", "")):  # a question's diff (the header's style names it too)
                questions.append(state["value"])
            button = button_id(msg, choice)
            if button is not None:
                click(kernel.kc, button)

        return browse, questions


def log_events(tmp_path: Path) -> list[ev.Event]:
    [path] = sorted((tmp_path / ".nbagent" / "work.ipynb").glob("*.jsonl"))
    return list(nbagent.read_events(path))


def two_calls(fake: Any) -> None:
    fake.script(
        tool_use("python", {"code": "a = 21\nprint('a is', a)"}),
        tool_use("python", {"code": "1/0"}),
        tool_use("python", {"code": "b = a * 2\nb"}),
        text("b is 42."),
    )


def button_of(messages: list[Message]) -> dict[str, Any]:
    [bundle] = [m["content"]["data"] for m in messages if m["msg_type"] == "display_data" and MIME in m["content"]["data"]]
    return bundle


def test_insert_as_cells_over_the_comm_and_the_log_records_it(kernels, fake, tmp_path: Path) -> None:
    kernel = kernels()
    kernel.run(SETUP, "setup")
    browser = Browser(kernel)
    assert browser.open() == {"v": 1, "type": "hello", "nbagent": nbagent.__version__}
    two_calls(fake)
    messages, _ = kernel.execute("%agent make a and b", cell_id="agent-cell")
    bundle = button_of(messages)
    offer = bundle[MIME]
    session = offer["session"]
    assert offer["turn"] == 1 and [c["label"] for c in offer["calls"]] == ["ran python", "ran python"]  # 1/0 raised: no cell
    assert "%agent_cells" in bundle["text/plain"]

    browser.send({"v": 1, "type": "insert_request", "id": "r1", "session": session, "turn": 1})
    insert = browser.wait("insert")
    assert insert["id"] == "r1"  # the browser matches its click by the request's id
    assert insert["anchor_cell_id"] == "agent-cell" and insert["session"] == session
    first, second = insert["cells"]
    assert first["source"] == "a = 21\nprint('a is', a)" and first["outputs"] == [
        {"output_type": "stream", "name": "stdout", "text": "a is 21\n"}
    ]
    assert second["outputs"][0]["text"] == "42\n" and second["metadata"]["nbagent"]["turn"] == 1
    assert first["metadata"]["nbagent"] == {"session": session, "tool_use_id": first["tool_use_id"], "turn": 1}
    cell = nbformat.v4.new_code_cell(first["source"], outputs=[nbformat.from_dict(o) for o in first["outputs"]], metadata=first["metadata"])
    nbformat.validate(nbformat.v4.new_notebook(cells=[cell]))  # what the browser inserts is a valid nbformat 4 cell

    placed = [
        {"tool_use_id": first["tool_use_id"], "cell_id": "new-1", "index": 1},
        {"tool_use_id": second["tool_use_id"], "cell_id": "new-2", "index": 2},
    ]
    browser.send({"v": 1, "type": "inserted", "id": insert["id"], "session": session, "cells": placed, "skipped": []})
    wait_for(lambda: any(e.get("kind") == KIND for e in log_events(tmp_path)))
    [note] = [e for e in log_events(tmp_path) if e.get("kind") == KIND]
    assert note["turn"] == 1 and note["anchor"] == "agent-cell" and note["cells"] == placed and note["skipped"] == []

    # Pressed again: the kernel sends the same cells; the browser skips those already there and says so.
    browser.send({"v": 1, "type": "insert_request", "id": "r2", "session": session, "turn": 1, "tool_use_id": second["tool_use_id"]})
    again = browser.wait("insert")
    assert [c["tool_use_id"] for c in again["cells"]] == [second["tool_use_id"]]
    # A reply naming a cell never sent, an unknown message, a wrong shape: an error back, the kernel unharmed.
    browser.send(
        {
            "v": 1,
            "type": "inserted",
            "id": again["id"],
            "session": session,
            "cells": [{"tool_use_id": "toolu_evil", "cell_id": "x", "index": 0}],
            "skipped": [],
        }
    )
    assert "not sent" in browser.wait("error")["error"]
    browser.send({"v": 1, "type": "run_code", "code": "open('pwned', 'w')"})
    assert "unknown message type" in browser.wait("error")["error"]
    browser.send({"v": 1, "type": "insert_request", "id": "r3", "session": "../../etc", "turn": 1})
    assert browser.wait("error")["id"] == "r3"
    # Pressed once more with every cell already there: the browser skips them all, and the log gets no "inserted 0 cells".
    browser.send({"v": 1, "type": "insert_request", "id": "r4", "session": session, "turn": 1})
    last = browser.wait("insert")
    skipped = [c["tool_use_id"] for c in last["cells"]]
    browser.send({"v": 1, "type": "inserted", "id": last["id"], "session": session, "cells": [], "skipped": skipped})
    browser.send({"v": 1, "type": "run_code", "code": ""})  # its error comes back once the reply above was handled
    assert "unknown message type" in browser.wait("error")["error"]
    assert not (tmp_path / "pwned").exists() and "ok" in kernel.run("print('ok')")
    assert len([e for e in log_events(tmp_path) if e.get("kind") == KIND]) == 1


def test_code_mode_inserts_as_the_turn_ends_with_the_summary(kernels, fake, tmp_path: Path) -> None:
    kernel = kernels()
    kernel.run(SETUP + "\n%config Agent.cells = 'code+summary'", "setup")
    browser = Browser(kernel)
    browser.open()
    two_calls(fake)
    messages, _ = kernel.execute("%agent make a and b", cell_id="agent-cell", on_message=browser.note)
    insert = browser.wait("insert")
    assert [c["cell_type"] for c in insert["cells"]] == ["code", "code", "markdown"] and insert["cells"][2]["source"] == "b is 42."
    assert button_of(messages)[MIME]["turn"] == 1
    kernel.shutdown()

    # Restart and Run All: the %agent cell is re-rendered with no model call and inserts nothing again; the inserted
    # cells run as ordinary cells, so the variables are back without --restore and without a tool re-run.
    from nbclient import NotebookClient

    made = [nbformat.from_dict({**c, "execution_count": None}) for c in insert["cells"] if c["cell_type"] == "code"]
    for cell in made:
        del cell["tool_use_id"]
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(SETUP + "\n%config Agent.cells = 'code+summary'"),
        nbformat.v4.new_code_cell("%agent make a and b"),
        *made,
        nbformat.v4.new_code_cell("print('b =', b)"),
    ]
    requests = len(fake.requests)
    env = {
        **os.environ,
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "JPY_SESSION_NAME": str(tmp_path / "work.ipynb"),
    }
    NotebookClient(
        nb, timeout=120, kernel_name="python3", shutdown_kernel="immediate", resources={"metadata": {"path": str(tmp_path)}}
    ).execute(env=env)
    assert len(fake.requests) == requests  # no model call
    assert "b = 42" in "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    assert "cells can't be inserted" not in "".join(o.get("text", "") for o in nb.cells[1].outputs)  # a re-rendered turn never inserts


def test_without_the_extension_the_button_says_so_and_agent_cells_fills_the_next_cell(kernels, fake, tmp_path: Path) -> None:
    kernel = kernels()
    kernel.run(SETUP + "\n%config Agent.cells = 'code'", "setup")
    two_calls(fake)
    messages, _ = kernel.execute("%agent make a and b", cell_id="agent-cell")
    assert "can't be inserted in this front end" in button_of(messages)["text/plain"]
    assert "cells can't be inserted in this front end" in "".join(
        m["content"].get("text", "") for m in messages if m["msg_type"] == "stream"
    )
    _, reply = kernel.execute("%agent_cells", cell_id="next")
    [payload] = reply["content"]["payload"]
    assert payload["source"] == "set_next_input" and payload["text"] == "a = 21\nprint('a is', a)\n\nb = a * 2\nb"

    # --resume shows the earlier turn first: the button and the code are the new turn's.
    name = button_of(messages)[MIME]["session"]
    fake.script(tool_use("python", {"code": "c = 1"}), text("c is 1."))
    messages, _ = kernel.execute(f"%agent --resume {name} make c", cell_id="again")
    assert button_of(messages)[MIME]["turn"] == 2


def test_read_notebook_reads_the_browser_s_unsaved_cells_while_the_cell_runs(kernels, fake, tmp_path: Path) -> None:
    kernel = kernels()
    kernel.run(SETUP, "setup")
    browser = Browser(kernel)
    browser.open()
    fake.script(tool_use("read_notebook", {}), text("Seen."))
    cells = [{"id": "c1", "cell_type": "code", "source": "x = 'unsaved edit'", "execution_count": None, "outputs_text": "", "dirty": True}]

    def answer(msg: Message) -> None:
        data = browser.note(msg)
        if data is not None and data.get("type") == "read_request":
            browser.send({"v": 1, "type": "notebook", "id": data["id"], "path": "work.ipynb", "cells": cells})

    kernel.execute("%agent what is in the notebook?", cell_id="ask", on_message=answer)
    result = str(fake.requests[1].body["messages"][-1]["content"])
    assert "as it is in the browser now" in result and "x = 'unsaved edit'" in result and "id c1" in result


def test_read_notebook_without_the_extension_reads_the_saved_file_and_says_so(kernels, fake, tmp_path: Path) -> None:
    kernel = kernels()
    kernel.run(SETUP, "setup")
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("saved = 1")]), tmp_path / "work.ipynb")
    fake.script(tool_use("read_notebook", {}), text("Seen."))
    kernel.run("%agent what is in the notebook?", "ask")
    result = str(fake.requests[1].body["messages"][-1]["content"])
    assert "as last saved" in result and "saved = 1" in result
    assert "propose_cell_edit" not in {t["name"] for t in fake.requests[0].body["tools"]}  # offered only with the extension


@pytest.mark.parametrize("choice", ["Approve", "Decline"])
def test_a_proposed_edit_shows_its_diff_and_is_applied_only_when_approved(kernels, fake, tmp_path: Path, choice: str) -> None:
    kernel = kernels()
    kernel.run(SETUP, "setup")
    browser = Browser(kernel)
    browser.open()
    fake.script(tool_use("propose_cell_edit", {"cell_id": "c1", "new_source": "x = 2\ny = x + 1"}), text("Done."))
    cells = [{"id": "c1", "cell_type": "code", "source": "x = 1\ny = x + 1", "execution_count": 1, "outputs_text": "", "dirty": False}]
    browse, questions = browser.answering(kernel, cells, choice)

    status, _ = kernel.try_run("x = undefined_name", "c1")
    assert status == "error"
    kernel.execute("%agent --fix", cell_id="ask", on_message=browse)  # with the extension, --fix proposes its fix as an edit
    assert "propose_cell_edit" in str(fake.requests[0].body["messages"][-1]["content"])
    [question] = questions
    assert "-x = 1" in question and "+x = 2" in question and "y = x + 1" in question
    applied = [d for d in browser.seen if d.get("type") == "apply_edit"]
    result = str(fake.requests[1].body["messages"][-1]["content"])
    if choice == "Approve":
        assert [(d["cell_id"], d["old_source"], d["new_source"]) for d in applied] == [("c1", "x = 1\ny = x + 1", "x = 2\ny = x + 1")]
        assert "now has the new source" in result
    else:
        assert applied == [] and "declined" in result


def test_a_foreign_session_never_inserts_a_cell(kernels, fake, tmp_path: Path) -> None:
    folder = tmp_path / ".nbagent" / "work.ipynb"
    with as_another_user(tmp_path):  # a cloned notebook's log: a finished turn with a python call
        cloned_notebook_log(folder / "cloned.jsonl", "open('pwned', 'w').write('x')")
    kernel = kernels()
    kernel.run(SETUP, "setup")
    browser = Browser(kernel)
    browser.open()
    browser.send({"v": 1, "type": "insert_request", "id": "evil", "session": "cloned", "turn": 1})
    refused = browser.wait("error")
    assert refused["id"] == "evil" and "not written by you" in refused["error"]
    assert [d for d in browser.seen if d.get("type") == "insert"] == []
    status, shown = kernel.try_run("%agent_cells", "copy")
    assert status == "error" and "not written by you" in shown and not (tmp_path / "pwned").exists()


def test_nbclient_runs_a_notebook_with_the_button_and_agent_cells(fake, tmp_path: Path) -> None:
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(SETUP),
        nbformat.v4.new_code_cell("%agent make a and b"),
        nbformat.v4.new_code_cell("%agent_cells"),
    ]
    env = {
        **os.environ,
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "JPY_SESSION_NAME": str(tmp_path / "run.ipynb"),
    }
    two_calls(fake)
    NotebookClient(
        nb, timeout=120, kernel_name="python3", shutdown_kernel="immediate", resources={"metadata": {"path": str(tmp_path)}}
    ).execute(env=env)
    shown = [o for o in nb.cells[1].outputs if o.get("output_type") == "display_data" and MIME in o.get("data", {})]
    assert len(shown) == 1 and "%agent_cells" in shown[0]["data"]["text/plain"]
    assert "python call(s) of turn 1 is in the next cell" in "".join(o.get("text", "") for o in nb.cells[2].outputs)
    nbformat.validate(nb)


def test_the_benchmark_runs_at_a_tiny_size() -> None:
    from benchmarks import cells

    found = cells.measure(counts=(1, 2), runs=1)
    assert found["hello"] > 0 and set(found["insert"]) == {1, 2} and found["chars"][2] > found["chars"][1]
    assert "2 python call(s)" in cells.report(found)
