"""The kernel's status as the front end sees it while an ``%agent`` turn runs and while it waits for an approval (issue 22, point 2).

A fresh kernel in JupyterLab and in Notebook 7: the model asks for a shell command (irreversible, so
``Agent.approval = "ask"`` shows Approve and Decline), the test waits while the question is on screen, clicks
Approve, and the model answers.  Three records are kept from the page, in order:

- every status message on the page's kernel websocket (Playwright's frames, before the app reads them): its state
  and the type of the request it answers;
- the kernel's status after the app handled each iopub message (``@jupyterlab/services``' ``kernel.status``, read in
  its ``iopubMessage`` signal), from the agent cell's first busy to its idle;
- what the status bar (JupyterLab) or the toolbar's kernel indicator (Notebook 7) says, sampled while the question
  waits.

None may read "idle" while the turn runs.  The panel's header must say that the agent waits for the user while it does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.harness import PANEL_JS, Jupyter, JupyterServer, visible_text, wait_until, write_notebook
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.kernel]
COMMAND = "echo tidy"
FINAL = "The folder is tidy."
WAITING = "waiting for your approval"
WORKING = "working…"

# From now on, note the kernel's status after each iopub message the app handled (with the message's parent), the
# execute_request of every %agent cell sent, and (every 100 ms, while the agent cell runs) the status the page shows.
WATCH_JS = (
    """
(path) => {
  const panel = ("""
    + PANEL_JS
    + """)(path);
  const kernel = panel.sessionContext.session.kernel;
  const record = {iopub: [], sent: [], shown: [], turn: false};
  window.__nbagentStatus = record;
  kernel.anyMessage.connect((_, args) => {
    const m = args.msg;
    if (args.direction === 'send' && m.header.msg_type === 'execute_request' && /%agent\\b/.test(m.content.code || '')) {
      record.sent.push(m.header.msg_id);
    }
  });
  kernel.iopubMessage.connect((_, m) => {
    if (m.header.msg_type !== 'status') return;
    const parent = m.parent_header || {};
    record.iopub.push({state: m.content.execution_state, parent: parent.msg_type || '', parent_id: parent.msg_id || '',
                       after: kernel.status});
    if (record.sent.includes(parent.msg_id)) record.turn = m.content.execution_state === 'busy';
  });
  const shown = () => {
    const bar = document.querySelector('#jp-main-statusbar');
    const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator, .jp-KernelStatus');
    const words = [panel.sessionContext.kernelDisplayStatus];
    // the status bar's kernel item (its text, e.g. 'Python 3 (ipykernel) | Busy'), not the first '|' of the whole bar
    const item = bar ? [...bar.querySelectorAll('.jp-StatusBar-TextItem')].find((e) => /\\|\\s*\\w+$/.test(e.innerText.trim())) : null;
    if (item) words.push(item.innerText.trim().split('|').pop().trim());
    if (indicator) words.push(indicator.getAttribute('title') || indicator.innerText || '');
    return words.join(' / ');
  };
  record.timer = setInterval(() => {
    if (!record.turn) return;  // from the agent cell's busy to its idle
    const now = shown();
    const last = record.shown.length ? record.shown[record.shown.length - 1] : null;
    if (now !== last) record.shown.push(now);
  }, 100);
}
"""
)


def decode_frame(payload: str | bytes) -> dict[str, Any] | None:
    """One kernel websocket frame as a message: the v1 binary protocol (offsets, channel, header, parent, ...) or JSON text."""
    if isinstance(payload, str):
        try:
            msg = json.loads(payload)
        except ValueError:
            return None
        return msg if isinstance(msg, dict) else None
    count = int.from_bytes(payload[:8], "little")
    offsets = [int.from_bytes(payload[8 + 8 * i : 16 + 8 * i], "little") for i in range(count)]
    parts = [payload[offsets[i] : offsets[i + 1]] for i in range(count - 1)]
    if len(parts) < 5:
        return None
    try:
        return {
            "channel": parts[0].decode(),
            "header": json.loads(parts[1]),
            "parent_header": json.loads(parts[2]),
            "content": json.loads(parts[4]),
        }
    except ValueError:
        return None


class Frames:
    """Every status message and request type on the page's kernel websockets, in arrival order."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def watch(self, ws: Any) -> None:
        """Note the frames of one websocket (only kernel channels carry Jupyter messages)."""
        if "/api/kernels/" in ws.url:
            ws.on("framereceived", lambda payload: self._note("recv", payload))
            ws.on("framesent", lambda payload: self._note("send", payload))

    def _note(self, direction: str, payload: str | bytes) -> None:
        msg = decode_frame(payload)
        if msg is None:
            return
        kind = msg.get("header", {}).get("msg_type", "?")
        if direction == "send":
            self.seen.append(f"sent {kind} on {msg.get('channel', '?')}")
        elif kind == "status":
            parent = (msg.get("parent_header") or {}).get("msg_type", "")
            self.seen.append(f"status {msg['content'].get('execution_state')} for {parent or 'nothing'}")
        elif kind.endswith("_reply") or kind in ("comm_open", "comm_close"):
            self.seen.append(f"{kind} on {msg.get('channel', '?')}")


@pytest.fixture(scope="module")
def frames(lab: Jupyter, notebook7: Jupyter) -> Frames:
    """The websocket frames of both pages (from now on)."""
    seen = Frames()
    for app in (lab, notebook7):
        app.page.on("websocket", seen.watch)
    return seen


def run_turn(app: Jupyter, server: JupyterServer, fake: FakeAnthropic, frames: Frames, name: str) -> dict[str, Any]:
    """Open a fresh notebook, run one turn that asks for approval, wait while it asks, approve; what the page recorded."""
    write_notebook(server.root / name, ["%load_ext nbagent", "%agent Tidy the folder"])
    fake.script(tool_use("shell", {"command": COMMAND}, text="I will tidy the folder."), text(FINAL))
    app.open(name)
    app.run_cell(name, 0)
    app.wait_idle(name)
    app.page.evaluate(f"(path) => ({WATCH_JS})(path)", name)
    start = len(frames.seen)
    app.run_cell(name, 1)
    output = app.output(name, 1)
    approve = output.locator("button:not([disabled])", has_text="Approve").first
    approve.wait_for(state="visible", timeout=90_000)
    # The widgets' subshell is made when the first widget appears: let its reply (and its statuses) arrive.
    wait_until(lambda: any("create_subshell_reply" in f for f in frames.seen[start:]), 15, "no create_subshell_reply", 0.2)
    app.page.wait_for_timeout(1500)
    header_while_asking = visible_text(output.locator(".nbagent-header").first.locator("xpath=.."))
    shown_while_asking = list(app.page.evaluate("() => window.__nbagentStatus.shown"))
    approve.click()
    wait_until(lambda: FINAL in visible_text(output), 60, lambda: f"the turn never ended: {visible_text(output)[:300]!r}")
    app.wait_idle(name)
    record = dict(app.page.evaluate("() => { clearInterval(window.__nbagentStatus.timer); return window.__nbagentStatus; }"))
    record.update(header=header_while_asking, shown_while_asking=shown_while_asking, frames=frames.seen[start:], after=visible_text(output))
    app.shutdown_kernel(name)
    app.close(name)
    return record


def problems_in(record: dict[str, Any], where: str) -> list[str]:
    """What the record shows that a user would read as wrong: the kernel idle during the turn, no mark in the panel."""
    problems: list[str] = []
    [cell] = record["sent"] or [""]
    turn: list[dict[str, Any]] = []
    for status in record["iopub"]:
        if status["parent_id"] == cell and status["state"] == "idle":
            break
        if turn or (status["parent_id"] == cell and status["state"] == "busy"):
            turn.append(status)
    if not turn:
        problems.append(f"{where}: the agent cell's busy status never reached the page: {record['iopub']}")
    idle = [s for s in turn if s["after"] == "idle"]
    if idle:
        problems.append(
            f"{where}: the kernel reads idle while the turn runs, after status messages for "
            + ", ".join(sorted({s["parent"] or "nothing" for s in idle}))
        )
    shown = [s for s in record["shown_while_asking"] if re.search(r"\bidle\b", s, re.IGNORECASE)]
    if shown:
        problems.append(f"{where}: while the approval waits, the page shows the kernel as {shown}")
    if WAITING not in record["header"].lower():
        problems.append(f"{where}: the panel's header does not say {WAITING!r} while the approval waits: {record['header']!r}")
    for mark in (WAITING, WORKING):
        if mark in record["after"]:
            problems.append(f"{where}: the finished output still says {mark!r}")
    if problems:
        problems.append(f"{where}: websocket, in order: " + "; ".join(record["frames"]))
        problems.append(
            f"{where}: the app's status after each iopub status: "
            + "; ".join(f"{s['state']} for {s['parent']} -> {s['after']}" for s in record["iopub"])
        )
    return problems


@pytest.fixture(scope="module")
def lab_record(lab: Jupyter, lab_server: JupyterServer, fake_api: FakeAnthropic, frames: Frames) -> Iterator[dict[str, Any]]:
    """One approval turn in JupyterLab."""
    yield run_turn(lab, lab_server, fake_api, frames, "status-lab.ipynb")


@pytest.fixture(scope="module")
def notebook7_record(
    notebook7: Jupyter, notebook7_server: JupyterServer, fake_api: FakeAnthropic, frames: Frames
) -> Iterator[dict[str, Any]]:
    """One approval turn in Notebook 7."""
    yield run_turn(notebook7, notebook7_server, fake_api, frames, "status-notebook7.ipynb")


def test_jupyterlab_never_reads_idle_while_a_turn_runs_or_waits(lab_record: dict[str, Any]) -> None:
    problems = problems_in(lab_record, "JupyterLab")
    assert not problems, "\n".join(problems)


def test_notebook7_never_reads_idle_while_a_turn_runs_or_waits(notebook7_record: dict[str, Any]) -> None:
    problems = problems_in(notebook7_record, "Notebook 7")
    assert not problems, "\n".join(problems)
