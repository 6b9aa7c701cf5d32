"""A page opened while an approval waits (issue 32, item 3): the pump answers its kernel info at once, shows it Busy, idles it after."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.notebook.test_pump import wipe_cell
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use
from tests.support.kernels import TIMEOUT, Kernel, Message, button_id, click, collect, errors, send, stdout

pytestmark = pytest.mark.kernel
ANSWER_WITHIN = 5.0  # seconds for a page's kernel_info_reply while the cell waits (before the pump answered it: never)


class Page:
    """A second client on the kernel's connection file, as a page opened later is: its own shell and iopub."""

    def __init__(self, kernel: Kernel) -> None:
        self.kc = kernel.km.blocking_client()
        self.kc.start_channels()
        self.iopub: list[Message] = []

    def read_iopub(self, seconds: float) -> list[Message]:
        """Every iopub message that arrives within ``seconds`` (also kept in ``self.iopub``)."""
        got: list[Message] = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                got.append(self.kc.get_iopub_msg(timeout=min(left, 0.2)))
            except queue.Empty:
                continue
        self.iopub += got
        return got

    def read_iopub_until(self, done: Any, timeout: float = TIMEOUT) -> None:
        """Read iopub until ``done(msg)`` holds for a message."""
        deadline = time.monotonic() + timeout
        while True:
            assert time.monotonic() < deadline, f"not seen in {timeout} s: {[summary(m) for m in self.iopub]}"
            try:
                msg = self.kc.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                continue
            self.iopub.append(msg)
            if done(msg):
                return

    def ask(self, msg_type: str, content: dict[str, Any]) -> str:
        """Send a shell request as a front end does on connecting; its msg_id."""
        msg = self.kc.session.msg(msg_type, content)
        self.kc.shell_channel.send(msg)
        return str(msg["header"]["msg_id"])

    def reply_to(self, msg_id: str, timeout: float) -> Message:
        """The shell reply to one request, within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no reply to {msg_id} within {timeout} s"
            try:
                reply = self.kc.get_shell_msg(timeout=left)
            except queue.Empty:
                continue
            if reply["parent_header"].get("msg_id") == msg_id:
                return dict(reply)


def summary(msg: Message) -> tuple[str, str, str]:
    """(msg_type, execution_state or "", the parent's msg_id) of an iopub message."""
    return msg["msg_type"], msg["content"].get("execution_state", ""), msg["parent_header"].get("msg_id", "")


@pytest.fixture
def page(kernel: Kernel) -> Iterator[Page]:
    """A second page on the module's kernel, its iopub already subscribed (it saw a cell of the first page finish)."""
    opened = Page(kernel)
    try:
        # Its iopub subscription reaches the kernel some time after connecting: a cell sent at once could publish
        # before it and be missed whole (CI: nothing seen in 60 s). The client's own check sees its iopub deliver first.
        opened.kc.wait_for_ready(timeout=TIMEOUT)
        wait = kernel.send("pass")
        opened.read_iopub_until(lambda m: summary(m) == ("status", "idle", wait))
        collect(kernel.kc, wait)
        yield opened
    finally:
        opened.kc.stop_channels()


def test_a_page_opened_while_an_approval_waits_gets_kernel_info_at_once_reads_busy_and_idles_after_the_cell(
    kernel: Kernel, page: Page, server: FakeAnthropic, tmp_path: Path
) -> None:
    server.script(tool_use("wipe", {"target": "db"}), text("Wiped."))
    code, marker = wipe_cell(tmp_path, "reopened")
    seen: dict[str, Any] = {}

    def while_asking(msg: Message) -> None:
        comm_id = button_id(msg, "Approve")
        if not comm_id or seen:
            return
        page.read_iopub(0.5)  # the first page's messages so far
        before = len(page.iopub)
        asked = time.monotonic()
        seen["info"] = page.ask("kernel_info_request", {})
        seen["comms"] = page.ask("comm_info_request", {"target_name": "jupyter.widget"})
        seen["info_reply"] = page.reply_to(seen["info"], ANSWER_WITHIN)
        seen["comms_reply"] = page.reply_to(seen["comms"], ANSWER_WITHIN)
        seen["answered_in"] = time.monotonic() - asked
        seen["held"] = send(page.kc, "print('after the cell')")  # a cell run from the new page waits for this one
        page.read_iopub(1.5)
        seen["while_asking"] = page.iopub[before:]
        seen["button"] = comm_id
        click(kernel.kc, comm_id)

    cell = kernel.send(code, allow_stdin=True)  # an interactive front end (a headless runner gets no buttons)
    messages, reply = collect(kernel.kc, cell, on_message=while_asking)
    assert reply["content"]["status"] == "ok", errors(messages)
    assert "approval approved panel" in stdout(messages) and marker.read_text() == "db"
    assert seen, "the approval buttons never appeared"
    print(f"kernel_info_reply and comm_info_reply {seen['answered_in'] * 1000:.0f} ms after asking, while the approval waited")

    # Answered while the approval waited, each to the page that asked.
    assert seen["info_reply"]["msg_type"] == "kernel_info_reply" and seen["info_reply"]["content"]["status"] == "ok"
    assert seen["info_reply"]["content"]["language_info"]["name"] == "python"
    assert seen["comms_reply"]["msg_type"] == "comm_info_reply" and seen["button"] in seen["comms_reply"]["content"]["comms"]
    # The page saw the running cell busy (once per request), and nothing idle, while the approval waited.
    statuses = [summary(m) for m in seen["while_asking"] if m["msg_type"] == "status"]
    assert statuses == [("status", "busy", cell)] * 2, statuses

    # After the cell's own idle: one idle for each request, then the held cell runs.
    page.read_iopub_until(lambda m: summary(m) == ("status", "idle", seen["held"]))
    after = [summary(m) for m in page.iopub[page.iopub.index(seen["while_asking"][-1]) + 1 :] if m["msg_type"] == "status"]
    assert after == [
        ("status", "idle", cell),
        ("status", "idle", seen["info"]),
        ("status", "idle", seen["comms"]),
        ("status", "busy", seen["held"]),
        ("status", "idle", seen["held"]),
    ], after
    held = [m for m in page.iopub if m["parent_header"].get("msg_id") == seen["held"] and m["msg_type"] == "stream"]
    assert "".join(m["content"]["text"] for m in held) == "after the cell\n"
    assert page.reply_to(seen["held"], TIMEOUT)["content"]["status"] == "ok"
