"""The panel in a real ipykernel: widget comm messages on iopub, and approval clicks while the cell runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

import nbagent
import nbagent.stores.folders
from nbagent.record import events as ev
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use
from tests.support.kernels import TIMEOUT, Kernel, button_id, click, errors, kernel_env, stdout

pytestmark = pytest.mark.kernel


@pytest.mark.slow
def test_streamed_text_arrives_as_widget_updates_and_finish_updates_the_static_fallback(
    kernel: Kernel, server: FakeAnthropic, tmp_path: Path
) -> None:
    answer = "Here is a **long** answer. " * 200
    server.script(text(answer, chunks=2000, delay=0.0005))  # a 2,000-delta answer
    messages, reply = kernel.execute(
        f"""
        import anthropic, nbagent
        from nbagent.notebook.panel import Panel
        panel = Panel("streaming test")
        session = nbagent.Session.open({str(tmp_path / "s.jsonl")!r})
        session.subscribe(panel)
        panel.show()
        nbagent.run(session, "write a long answer", client=anthropic.Anthropic(), model="claude-test")
        panel.finish()
        session.close()
        print("updates", panel.widget_updates)
        """,
    )
    assert reply["content"]["status"] == "ok", errors(messages)
    opened = [m for m in messages if m["msg_type"] == "comm_open" and m["content"]["target_name"] == "jupyter.widget"]
    assert any(m["content"]["data"]["state"].get("_model_name") == "HTMLModel" for m in opened)
    html_values = [
        m["content"]["data"]["state"]["value"]
        for m in messages
        if m["msg_type"] == "comm_msg"
        and m["content"]["data"].get("method") == "update"
        and "value" in m["content"]["data"].get("state", {})
    ]
    streamed = [v for v in html_values if "long" in v]
    # Several partial renderings went out while streaming (not one per delta, and not only the end).
    print(f"2,000 deltas -> {len(streamed)} widget value updates on iopub")
    assert 2 <= len(streamed) < 200
    assert any(len(v) < len(max(streamed, key=len)) for v in streamed)
    display = next(m for m in messages if m["msg_type"] == "display_data")
    assert "application/vnd.jupyter.widget-view+json" in display["content"]["data"]
    assert "text/html" in display["content"]["data"] and "text/plain" in display["content"]["data"]
    update = next(m for m in messages if m["msg_type"] == "update_display_data")
    assert update["content"]["transient"]["display_id"] == display["content"]["transient"]["display_id"]
    assert "<strong>long</strong>" in update["content"]["data"]["text/html"]
    assert "write a long answer" in update["content"]["data"]["text/plain"]
    # Finished: the output is the transcript alone, and every widget of the panel is closed after it.
    assert set(update["content"]["data"]) == {"text/html", "text/plain"}
    closed = {m["content"]["comm_id"] for m in messages if m["msg_type"] == "comm_close"}
    assert {m["content"]["comm_id"] for m in opened} <= closed
    root = display["content"]["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
    [root_closed] = [i for i, m in enumerate(messages) if m["msg_type"] == "comm_close" and m["content"]["comm_id"] == root]
    assert messages.index(update) < root_closed  # the output stopped showing the widget before it went


def test_approval_button_click_is_handled_while_the_cell_runs_and_a_queued_cell_runs_after(kernel: Kernel) -> None:
    clicked: list[str] = []
    queued: list[str] = []

    def act(msg: dict[str, Any]) -> None:
        comm_id = button_id(msg, "Approve")
        if comm_id and not clicked:
            # Another cell is submitted while this one waits: it must run after, not be lost.
            queued.append(kernel.kc.execute("print('second cell ran', answer.approved)"))
            click(kernel.kc, comm_id)
            clicked.append(comm_id)

    messages, reply = kernel.execute(
        """
        from nbagent import ApprovalRequest
        from nbagent.notebook.panel import Panel
        panel = Panel("approval test")
        panel.show()
        answer = panel.ask(ApprovalRequest("toolu_1", "delete_everything", {"path": "/tmp/x"}, "irreversible", "irreversible"))
        print("decision", answer.approved, answer.by)
        """,
        on_message=act,
    )
    assert clicked, "no Approve button was opened"
    assert reply["content"]["status"] == "ok", errors(messages)
    assert "decision True panel" in stdout(messages)
    # Decided: the buttons go (their layouts say display none), not left greyed out under the decision.
    opened = [m["content"]["data"]["state"] for m in messages if button_id(m, "Approve") or button_id(m, "Decline")]
    layouts = {str(state["layout"]).removeprefix("IPY_MODEL_") for state in opened}
    hidden = {
        m["content"]["comm_id"]
        for m in messages
        if m["msg_type"] == "comm_msg" and m["content"]["data"].get("state", {}).get("display") == "none"
    }
    assert len(layouts) == 2 and layouts <= hidden, (layouts, hidden)
    # The queued cell was held during the wait and then ran, seeing the answer.
    second = kernel.kc.get_shell_msg(timeout=TIMEOUT)
    assert second["parent_header"]["msg_id"] == queued[0]
    assert second["content"]["status"] == "ok"


def test_decline_in_a_real_run_gives_the_model_an_error_result_and_the_tool_never_runs(
    kernel: Kernel, server: FakeAnthropic, tmp_path: Path
) -> None:
    server.script(tool_use("wipe", {"target": "db"}), text("Understood, I did not wipe it."))
    marker = tmp_path / "wiped"

    def act(msg: dict[str, Any]) -> None:
        comm_id = button_id(msg, "Decline")
        if comm_id:
            click(kernel.kc, comm_id)

    messages, reply = kernel.execute(
        f"""
        import anthropic, nbagent, pathlib
        from nbagent.notebook.panel import Panel

        @nbagent.tool(effect="irreversible")
        def wipe(target: str) -> str:
            \"\"\"Wipe a target.\"\"\"
            pathlib.Path({str(marker)!r}).write_text(target)
            return "wiped"

        panel = Panel("decline test")
        with nbagent.Session.open({str(tmp_path / "d.jsonl")!r}) as session:
            session.subscribe(panel)
            panel.show()
            nbagent.run(session, "wipe the db", tools=[wipe], approval=panel.ask, client=anthropic.Anthropic(), model="claude-test")
            panel.finish()
            result = [e for e in session.events() if e["type"] == "tool_result"][0]
        print("result", result.get("is_error"), result["content"])
        """,
        on_message=act,
    )
    assert reply["content"]["status"] == "ok", errors(messages)
    assert not marker.exists()
    assert "result True The user declined this tool call." in stdout(messages)
    update = next(m for m in messages if m["msg_type"] == "update_display_data")
    assert "declined by you in the panel" in update["content"]["data"]["text/plain"]


def test_interrupting_a_pending_approval_stops_the_cell_and_the_kernel_stays_usable(kernel: Kernel) -> None:
    interrupted: list[bool] = []

    def act(msg: dict[str, Any]) -> None:
        state = msg["content"].get("data", {}).get("state", {}) if msg["msg_type"] == "comm_msg" else {}
        if "waiting for approval" in str(state.get("value", "")) and not interrupted:
            kernel.km.interrupt_kernel()  # the panel is now waiting for the click
            interrupted.append(True)

    messages, reply = kernel.execute(
        """
        from nbagent import ApprovalRequest
        from nbagent.notebook.panel import Panel
        panel = Panel("interrupt test")
        panel.show()
        panel.ask(ApprovalRequest("toolu_2", "rm", {}, "irreversible", "irreversible"))
        """,
        on_message=act,
    )
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
    updates = [
        m["content"]["data"]["state"]["value"]
        for m in messages
        if m["msg_type"] == "comm_msg" and "value" in m["content"]["data"].get("state", {})
    ]
    assert any("not answered (interrupted)" in v for v in updates), [m["msg_type"] for m in messages]
    messages, reply = kernel.execute("print('still alive')")
    assert reply["content"]["status"] == "ok" and "still alive" in stdout(messages)


NOTEBOOK = ["%load_ext nbagent", "%config Agent.approval = 'auto'", "%agent first question", "%agent_replay"]


def run_all(nb: Any, folder: Path, fake: FakeAnthropic) -> Any:
    """Run All on a fresh kernel (a restart), as nbclient does, with the notebook's path set."""
    env = {**kernel_env(fake.base_url), "JPY_SESSION_NAME": str(folder / "work.ipynb")}
    NotebookClient(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute(env=env)
    return nb


@pytest.mark.slow
def test_saved_outputs_never_need_the_kernel(fake: FakeAnthropic, tmp_path: Path) -> None:
    """Every %agent output is static once its turn ends; a re-rendered one says it came from the log; a replay has a static twin."""
    fake.script(text("The **first** answer."), text("After the restart."))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in NOTEBOOK])
    run_all(nb, tmp_path, fake)
    [first] = nb.cells[2].outputs
    assert set(first.data) == {"text/html", "text/plain"} and "The <strong>first</strong> answer." in first.data["text/html"]
    assert "from the log" not in first.data["text/html"]
    static, live = nb.cells[3].outputs
    assert "application/vnd.jupyter.widget-view+json" not in static.data and "nbagent-static-" in static.data["text/html"]
    assert "application/vnd.jupyter.widget-view+json" in live.data

    nb.cells.append(nbformat.v4.new_code_cell("%agent a new question"))
    run_all(nb, tmp_path, fake)  # after the "restart": the first turn is re-rendered, the new one asks
    assert len(fake.requests) == 2
    [again] = nb.cells[2].outputs
    assert set(again.data) == {"text/html", "text/plain"} and "The <strong>first</strong> answer." in again.data["text/html"]
    assert re.search(r"from the log, recorded \d{4}-\d\d-\d\d \d\d:\d\d:\d\d; not run again", again.data["text/html"])
    [asked] = nb.cells[4].outputs
    assert "note to the model</span> the Jupyter kernel was restarted" in asked.data["text/html"]
    assert '<span class="nbagent-request">a new question</span>' in asked.data["text/html"]


def test_a_rerendered_turn_starts_where_its_session_stood(fake: FakeAnthropic, tmp_path: Path) -> None:
    """Re-rendered alone, a turn still shows the interruption note before its request and names a call an earlier turn made."""
    log = nbagent.stores.folders.log_dir_for(tmp_path / "work.ipynb") / "older.jsonl"
    log.parent.mkdir(parents=True)
    old = {"kernel": "an-earlier-kernel"}
    with nbagent.Session.open(log) as session:
        session.append(ev.USER_MSG, content="first question", meta={"request": "first question", **old})
        session.append(ev.MODEL_CALL, model="claude-test", attempt=1)
        session.append(ev.INTERRUPTED, during="model", open_calls=[])  # before any reply: the next request is marked
        session.append(ev.USER_MSG, content="second question", meta={"request": "second question", **old})
        call = {"type": "tool_use", "id": "toolu_9", "name": "shell", "input": {"command": "sleep 60"}}
        session.append(ev.ASSISTANT_MSG, content=[call], stop_reason="tool_use", usage={})
        session.append(ev.INTERRUPTED, during="tools", open_calls=["toolu_9"])
        session.append(ev.USER_MSG, content="third question", meta={"request": "third question", **old})
        session.append(ev.TOOL_RESULT, tool_use_id="toolu_9", content="interrupted", is_error=True)  # settled in this turn
        session.append(ev.ASSISTANT_MSG, content=[{"type": "text", "text": "Done."}], stop_reason="end_turn", usage={})
    cells = ["%load_ext nbagent", "%agent first question", "%agent second question", "%agent third question"]
    nb = run_all(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells]), tmp_path, fake)
    assert fake.requests == []
    first, second, third = ("".join(o.data["text/html"] for o in cell.outputs) for cell in nb.cells[1:])
    marker = "the previous request was interrupted before it was answered"
    assert marker not in first and marker in second and marker not in third
    assert second.index(marker) < second.index("second question</span>")
    assert "<b>ran a shell command</b> · error: interrupted" in third and "tool()" not in third  # the call an earlier turn made
