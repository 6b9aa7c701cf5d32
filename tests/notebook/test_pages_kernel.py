"""Issue 32, item 3, in a real ipykernel: two pages on one kernel (two jupyter_client clients, each with its own comm).

A turn asks approval for a shell command; both pages are told the question waits, a page opened meanwhile is told
after its hello, page B answers, every page is told how it ended (and page A's widget buttons are disabled), a late
answer from page A changes nothing, the log holds one decision and the command ran once. The browser tests
(tests/browser/test_reopen_approval.py) drive the real extension.
"""

from __future__ import annotations

import queue
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent.record import events as ev
from tests.support.fake_anthropic import text, tool_use
from tests.support.kernels import TIMEOUT, Kernel, Message, send

pytestmark = [pytest.mark.kernel, pytest.mark.slow]

TARGET = "nbagent.cells"
HELLO = {"v": 1, "type": "hello", "extension": "0.1.0"}
COMMAND = "echo ran >> ran.txt"


class Page:
    """One notebook page: its own client of the kernel (its own session id) and its own nbagent.cells comm."""

    def __init__(self, kc: Any) -> None:
        self.kc = kc
        self.comm_id = uuid.uuid4().hex
        self.seen: list[dict[str, Any]] = []  # comm messages on this page's comm, not yet waited for
        self.messages: list[Message] = []  # every iopub message this page read

    def open(self) -> dict[str, Any]:
        """Open the comm saying hello, as the extension does; the kernel's hello."""
        content = {"comm_id": self.comm_id, "target_name": TARGET, "data": HELLO}
        self.kc.shell_channel.send(self.kc.session.msg("comm_open", content))
        return self.wait("hello")

    def send(self, data: dict[str, Any]) -> None:
        self.kc.shell_channel.send(self.kc.session.msg("comm_msg", {"comm_id": self.comm_id, "data": data}))

    def wait(self, kind: str, timeout: float = 60) -> dict[str, Any]:
        """The next message of type ``kind`` on this page's comm."""
        deadline = time.monotonic() + timeout
        while True:
            for data in self.seen:
                if data.get("type") == kind:
                    self.seen.remove(data)
                    return data
            assert time.monotonic() < deadline, f"no {kind} on this page; it saw {[d.get('type') for d in self.seen]}"
            try:
                msg = self.kc.get_iopub_msg(timeout=0.5)
            except queue.Empty:
                continue
            self.messages.append(msg)
            if msg["msg_type"] == "comm_msg" and msg["content"].get("comm_id") == self.comm_id:
                self.seen.append(msg["content"]["data"])

    def drain(self, quiet: float = 1.0) -> list[dict[str, Any]]:
        """Read this page's iopub until nothing came for ``quiet`` seconds; the comm messages it holds then."""
        while True:
            try:
                msg = self.kc.get_iopub_msg(timeout=quiet)
            except queue.Empty:
                return self.seen
            self.messages.append(msg)
            if msg["msg_type"] == "comm_msg" and msg["content"].get("comm_id") == self.comm_id:
                self.seen.append(msg["content"]["data"])


def client(kernel: Kernel) -> Any:
    """Another page's client of the kernel (jupyter_client gives it a session id of its own)."""
    kc = kernel.km.blocking_client()
    kc.start_channels()
    kc.wait_for_ready(timeout=TIMEOUT)
    return kc


def log_events(tmp_path: Path) -> list[ev.Event]:
    [path] = sorted((tmp_path / ".nbagent" / "work.ipynb").glob("*.jsonl"))
    return list(nbagent.read_events(path))


def reply_of(kc: Any, msg_id: str) -> Message:
    deadline = time.monotonic() + TIMEOUT
    while True:
        reply = kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply


def button_updates(messages: list[Message]) -> dict[str, list[dict[str, Any]]]:
    """Each Approve / Decline widget's comm id -> the state updates it got."""
    buttons = {
        m["content"]["comm_id"]: m["content"]["data"]["state"]["description"]
        for m in messages
        if m["msg_type"] == "comm_open" and m["content"]["data"].get("state", {}).get("_model_name") == "ButtonModel"
    }
    found: dict[str, list[dict[str, Any]]] = {description: [] for description in buttons.values()}
    for m in messages:
        data = m["content"].get("data", {}) if m["msg_type"] == "comm_msg" else {}
        if m["content"].get("comm_id") in buttons and data.get("method") == "update":
            found[buttons[m["content"]["comm_id"]]].append(data["state"])
    return found


def test_a_question_waits_on_every_page_and_the_first_answer_from_any_page_decides(kernels, fake, tmp_path: Path) -> None:
    kernel = kernels()
    kernel.run("%load_ext nbagent\n%config Agent.tools = ['shell']", "setup")
    a, b = Page(kernel.kc), Page(client(kernel))
    assert a.kc.session.session != b.kc.session.session  # two pages: two client ids
    assert a.open()["nbagent"] == nbagent.__version__ and b.open()["nbagent"] == nbagent.__version__
    fake.script(tool_use("shell", {"command": COMMAND}, text="I will run it."), text("Done."))

    cell = send(a.kc, "%agent run the command", "agent-cell", allow_stdin=True)  # page A runs the cell
    asked_a, asked_b = a.wait("approval_waiting"), b.wait("approval_waiting")
    assert asked_a == asked_b and asked_a["cell_id"] == "agent-cell" and asked_a["session"]
    assert "echo ran" in asked_a["question_html"] and "nbagent-approval" in asked_a["question_html"]
    late = Page(client(kernel))  # a page opened (a reopened notebook, a second tab) while the question waits
    late.open()
    assert late.wait("approval_waiting") == asked_a

    answer = {"v": 1, "type": "approval_answer", "session": asked_a["session"], "tool_use_id": asked_a["tool_use_id"]}
    b.send({**answer, "id": "b1", "approved": True})
    decided = {
        "v": 1,
        "type": "approval_decided",
        "session": asked_a["session"],
        "tool_use_id": asked_a["tool_use_id"],
        "decision": "approved",
        "by": "panel",
    }
    assert a.wait("approval_decided") == b.wait("approval_decided") == late.wait("approval_decided") == decided
    a.send({**answer, "id": "a1", "approved": False})  # too late: it changes nothing, page A is told the decision
    assert a.wait("approval_decided") == decided
    assert reply_of(a.kc, cell)["content"]["status"] == "ok"
    b.send({**answer, "id": "b2", "approved": False})  # after the turn: still the decision
    assert b.wait("approval_decided") == decided

    events = log_events(tmp_path)
    decisions = [e for e in events if e["type"] == ev.APPROVAL and e.get("decision") != "pending"]
    assert [(e["decision"], e.get("by")) for e in decisions] == [("approved", "panel")]
    assert [e for e in events if e["type"] == ev.TOOL_RESULT and e["tool_use_id"] == asked_a["tool_use_id"]] != []
    assert (tmp_path / "ran.txt").read_text() == "ran\n"  # the command ran once
    assert len(fake.requests) == 2
    # Page A's own widget buttons were disabled by the kernel: the update reaches every page showing them.
    updates = button_updates(a.messages)
    assert {"disabled": True} in updates["Approve"] and {"disabled": True} in updates["Decline"], updates


def test_a_page_closing_its_comm_leaves_the_other_page_served(kernels, fake, tmp_path: Path) -> None:
    kernel = kernels()
    kernel.run("%load_ext nbagent\n%config Agent.tools = ['shell']", "setup")
    a, b = Page(kernel.kc), Page(client(kernel))
    a.open()
    b.open()
    b.kc.shell_channel.send(b.kc.session.msg("comm_close", {"comm_id": b.comm_id, "data": {}}))
    # Two clients' messages reach the kernel in no set order; b's next request is handled after its close.
    assert b.comm_id not in reply_of(b.kc, b.kc.comm_info(TARGET))["content"]["comms"]
    a.send({"v": 1, "type": "approval_answer", "id": "x", "session": "s", "tool_use_id": "t", "approved": True})
    refused = a.wait("error")
    assert refused["id"] == "x" and "no approval of this session and call is waiting" in refused["error"]
    fake.script(tool_use("shell", {"command": COMMAND}), text("Done."))
    cell = send(a.kc, "%agent run the command", "agent-cell", allow_stdin=True)
    asked = a.wait("approval_waiting")
    a.send(
        {"v": 1, "type": "approval_answer", "id": "a1", "session": asked["session"], "tool_use_id": asked["tool_use_id"], "approved": False}
    )
    assert a.wait("approval_decided")["decision"] == "declined"
    assert reply_of(a.kc, cell)["content"]["status"] == "ok"
    assert not (tmp_path / "ran.txt").exists()
    assert b.drain() == []  # the closed page's comm got nothing
