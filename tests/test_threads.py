"""nbagent.threads: work started on another thread keeps the context of the code that started it.

The kernel test is the failure it prevents, through a real ipykernel: a widget updated from a background thread (as the
replay's follower and the panel's timer do) must not inherit a subshell JupyterLab later deletes, or the next click on
that widget is dropped (the CI failure of tests/browser/test_replay_turns.py: "Unknown subshell_id" in the kernel log).
"""

from __future__ import annotations

import contextvars
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from nbagent import threads
from nbagent.agent.deltas import DeltaWriter
from nbagent.agent.session import Session
from tests.support.kernels import Kernel, Message, button_id, click

CELL = contextvars.ContextVar[str]("cell")


def test_a_thread_and_a_timer_run_in_the_context_they_were_made_in() -> None:
    def made_in_cell_1() -> list[Any]:
        CELL.set("cell 1")
        seen: list[Any] = []
        worker = threads.thread(lambda: seen.append(CELL.get(None)), name="worker")
        timer = threads.timer(0.01, lambda: seen.append(CELL.get(None)))
        plain = threading.Thread(target=lambda: seen.append(CELL.get(None)))
        CELL.set("cell 2")  # the copy was taken when each was made
        for started in (worker, timer, plain):
            started.start()
            started.join(10)
        return seen

    assert contextvars.copy_context().run(made_in_cell_1) == ["cell 1", "cell 1", None]


def test_deltas_a_stalled_stream_leaves_are_written_in_the_context_of_the_code_that_streamed(tmp_path: Path) -> None:
    seen: list[Any] = []
    session = Session.open(tmp_path / "s.jsonl")
    session.subscribe(lambda event: seen.append((event["type"], CELL.get(None))))

    def stream() -> DeltaWriter:
        CELL.set("the %agent cell")
        writer = DeltaWriter(session, interval=0.05)
        writer({"index": 0, "text": "stalled here "})  # then the stream stalls: the flusher thread writes it
        return writer

    writer = contextvars.copy_context().run(stream)
    deadline = time.monotonic() + 10
    while not any(kind == "delta" for kind, _ in seen) and time.monotonic() < deadline:
        time.sleep(0.01)
    writer.close(complete=True)
    session.close()
    assert ("delta", "the %agent cell") in seen, seen


CELL_CODE = """
import threading, ipywidgets
from IPython.display import display
from nbagent import threads
clicks = []
button = ipywidgets.Button(description="Show")
button.on_click(lambda _: clicks.append(1))
relabel_now = threading.Event()
def relabel():
    relabel_now.wait(30)
    button.description = "Show it"
threads.thread(relabel, name="relabel").start()
display(button)
"""


def subshell_request(kernel: Kernel, kind: str, content: dict[str, Any]) -> Message:
    """Send a subshell request on the control channel, as JupyterLab does; its reply."""
    kc = kernel.kc
    msg = kc.session.msg(kind, content)
    kc.control_channel.send(msg)
    while True:
        reply: Message = kc.get_control_msg(timeout=30)
        if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            return reply


@pytest.mark.kernel
@pytest.mark.slow
def test_a_click_on_a_widget_a_thread_updated_is_not_lost_once_a_widget_subshell_is_deleted(tmp_path: Path) -> None:
    with Kernel(tmp_path) as kernel:
        messages, _ = kernel.execute(CELL_CODE)
        first_cell = messages[0]["parent_header"]["msg_id"]
        button = next(filter(None, (button_id(m, "Show") for m in messages)))

        # Another request runs on a subshell (JupyterLab sends widget messages on one) while the thread waits ...
        subshell = subshell_request(kernel, "create_subshell_request", {})["content"]["subshell_id"]
        on_subshell = kernel.kc.session.msg("execute_request", {"code": "relabel_now.set()", "silent": False})
        on_subshell["header"]["subshell_id"] = subshell
        kernel.kc.shell_channel.send(on_subshell)
        # ... then the thread relabels the button: the update belongs to the cell that started the thread.
        deadline = time.monotonic() + 30
        relabelled = None
        while relabelled is None:
            assert time.monotonic() < deadline, "the thread never relabelled the button"
            msg = kernel.kc.get_iopub_msg(timeout=30)
            if msg["msg_type"] == "comm_msg" and msg["content"]["data"].get("state", {}).get("description") == "Show it":
                relabelled = msg
        assert relabelled["parent_header"]["msg_id"] == first_cell, "the thread's update was sent as part of the subshell's request"

        # JupyterLab deletes a subshell once its widgets are gone; a click on the button still arrives.
        assert subshell_request(kernel, "delete_subshell_request", {"subshell_id": subshell})["content"]["status"] == "ok"
        click(kernel.kc, button)
        assert kernel.run("print(len(clicks))").strip() == "1", "the click was dropped (routed to the deleted subshell)"
