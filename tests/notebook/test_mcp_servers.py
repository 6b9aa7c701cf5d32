"""MCP servers in a real kernel: started once by %agent_mcp start, stopped when the kernel shuts down, and gone when it
is SIGKILLed (a stdio server ends when its stdin closes)."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_anthropic import FakeAnthropic, text, tool_use
from tests.support.kernels import Kernel, button_id, click, errors, kernel_env, wait_for

pytestmark = [pytest.mark.mcp, pytest.mark.kernel, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) is not running
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def start_server(kernel: Kernel, folder: Path) -> int:
    """Configure the test server in the kernel, start it with %agent_mcp start, and return its process id."""
    starts = folder / "starts.txt"
    config = {
        "t": {
            "command": sys.executable,
            "args": ["-m", "tests.support.mcp_server"],
            "cwd": str(ROOT),
            "env": {"MCP_TEST_STARTS": str(starts)},
        }
    }
    kernel.run("%load_ext nbagent")
    kernel.run(f"%config Agent.mcp_servers = {json.dumps(config)}")
    shown = kernel.run("%agent_mcp start", timeout=120)
    assert "state: running" in shown and "mcp__t__add  (write)" in shown, shown
    again = kernel.run("%agent_mcp start", timeout=120)  # once per kernel: not started again
    assert "state: running" in again
    [line] = starts.read_text().splitlines()
    return int(line.split()[1])


def test_a_kernel_shutdown_stops_its_servers(tmp_path: Path) -> None:
    kernel = Kernel(tmp_path, kernel_env())
    try:
        pid = start_server(kernel, tmp_path)
        assert alive(pid)
        kernel.kc.stop_channels()
        kernel.km.shutdown_kernel(now=False)  # a shutdown request, as Jupyter sends it
        kernel.closed = True
        wait_for(lambda: not alive(pid), 60)
    finally:
        kernel.shutdown()


def test_a_killed_kernel_leaves_no_server_behind(tmp_path: Path) -> None:
    kernel = Kernel(tmp_path, kernel_env())
    pid = start_server(kernel, tmp_path)
    kernel.kill()
    wait_for(lambda: not alive(pid), 60)


def test_a_project_file_approved_in_the_panel_starts_its_server(server: FakeAnthropic, tmp_path: Path) -> None:
    calls = tmp_path / "calls.txt"
    entry = {"command": sys.executable, "args": ["-m", "tests.support.mcp_server"], "cwd": str(ROOT), "env": {"MCP_TEST_CALLS": str(calls)}}
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"proj": entry}}))
    server.script(tool_use("mcp__proj__echo", {"text": "approved"}), text("done"))
    questions: list[str] = []
    drawn: list[str] = []  # every HTML widget the panel adds, in order

    def act(msg: dict[str, Any]) -> None:
        state = msg["content"].get("data", {}).get("state", {}) if msg["msg_type"] == "comm_open" else {}
        if isinstance(state.get("value"), str):
            drawn.append(state["value"])
        if "Start the MCP servers" in str(state.get("value", "")):
            questions.append(state["value"])
        approve = button_id(msg, "Approve")
        if approve and questions:
            click(kernel.kc, approve)

    with Kernel(tmp_path, kernel_env(server.base_url, NBAGENT_DATA_DIR=str(tmp_path / "data"))) as kernel:
        kernel.run("%load_ext nbagent")
        messages, reply = kernel.execute("%agent echo it", on_message=act, timeout=180)
        assert reply["content"]["status"] == "ok", errors(messages)
    assert questions and "tests.support.mcp_server" in questions[0] and ".mcp.json" in questions[0]  # the commands, before they run
    # Drawn under the request's "You:" line it belongs to, never above it; nbagent's words are not labelled as the file's.
    you = next(i for i, value in enumerate(drawn) if "<b>You:</b>" in value)
    assert you < drawn.index(questions[0]), [v[:80] for v in drawn]
    assert "it says" not in questions[0] and '<div class="nbagent-approval-about">This .mcp.json beside the notebook' in questions[0]
    assert calls.read_text().splitlines() == ["echo approved"]
    assert (tmp_path / "data" / "mcp-approved.json").exists()


def project_notes(folder: Path) -> list[str]:
    """The mcp notes logged by the sessions of the notebook in ``folder``."""
    from nbagent.record import events as ev
    from nbagent.record.log_reader import read_events

    return [
        e["text"]
        for log in (folder / ".nbagent").rglob("*.jsonl")
        for e in read_events(log)
        if e["type"] == ev.NOTE and e.get("kind") == "mcp"
    ]


def answering(kernel_box: list[Kernel], answer: str, seen: list[str]) -> Any:
    """An on_message that keeps each widget's text in ``seen`` and clicks ``answer`` (Approve or Decline) on each question."""

    def act(msg: dict[str, Any]) -> None:
        state = msg["content"].get("data", {}).get("state", {}) if msg["msg_type"] == "comm_open" else {}
        if isinstance(state.get("value"), str):
            seen.append(state["value"])
        button = button_id(msg, answer)
        if button:
            click(kernel_box[0].kc, button)

    return act


def test_an_approval_holds_for_its_folder_only(server: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nbagent.cli import main as cli
    from tests.tools.test_mcp_project import SCRIPT, relative_project

    data = tmp_path / "data"
    monkeypatch.setenv("NBAGENT_DATA_DIR", str(data))
    public, clone, elsewhere = tmp_path / "public", tmp_path / "clone", tmp_path / "elsewhere"
    relative_project(public)  # {"command": python, "args": ["server.py"]}, as a public project writes it
    assert cli.main(["mcp", "approve", str(public), "--yes"], out=io.StringIO(), err=io.StringIO()) == 0
    relative_project(clone, SCRIPT.replace("ran.txt", "attacker-ran.txt"))  # the same .mcp.json beside their server.py
    assert (clone / ".mcp.json").read_bytes() == (public / ".mcp.json").read_bytes()
    elsewhere.mkdir()

    server.script(text("headless"), text("declined"))
    env = kernel_env(server.base_url, NBAGENT_DATA_DIR=str(data), JPY_SESSION_NAME=str(clone / "analysis.ipynb"))
    box: list[Kernel] = []
    seen: list[str] = []
    with Kernel(clone, env) as kernel:
        box.append(kernel)
        kernel.run("%load_ext nbagent")
        messages, reply = kernel.execute("%agent hi", allow_stdin=False, timeout=180)  # nbclient, papermill
        assert reply["content"]["status"] == "ok", errors(messages)
        messages, reply = kernel.execute("%agent hi", on_message=answering(box, "Decline", seen), timeout=180)
        assert reply["content"]["status"] == "ok", errors(messages)
    assert not (clone / "attacker-ran.txt").exists()  # their server.py never ran
    assert any("Start the MCP servers" in v and "clone" in v for v in seen)  # asked again, in its own folder
    said = project_notes(clone)
    assert any("nobody can answer here" in n for n in said) and any("you declined it" in n for n in said)

    # The approved folder: nothing headless; with a person there it starts unasked, in its own folder, and its tools ask.
    server.script(text("headless"), tool_use("mcp__proj__echo", {"text": "asked first"}), text("done"))
    env = kernel_env(server.base_url, NBAGENT_DATA_DIR=str(data), JPY_SESSION_NAME=str(public / "analysis.ipynb"))
    box.clear()
    seen.clear()
    with Kernel(elsewhere, env) as kernel:  # the kernel runs in another folder: a relative server.py is the project's
        box.append(kernel)
        kernel.run("%load_ext nbagent")
        messages, reply = kernel.execute("%agent hi", allow_stdin=False, timeout=180)
        assert reply["content"]["status"] == "ok", errors(messages)
        assert not (public / "ran.txt").exists()
        messages, reply = kernel.execute("%agent echo it", on_message=answering(box, "Approve", seen), timeout=180)
        assert reply["content"]["status"] == "ok", errors(messages)
    assert not any("Start the MCP servers" in v for v in seen)  # approved for this folder: not asked again
    # a project's tool asks, whatever it claims: its claims labelled as the server's, nbagent's verdict apart from them
    asked = next(v for v in seen if "the server says</span>" in v and "tool &#x27;echo&#x27;" in v)
    assert "it says" not in asked and '<div class="nbagent-approval-about">This server comes from a project' in asked
    assert (public / "ran.txt").read_text().splitlines() == [str(public.resolve())]
    assert any("put it in your own Agent.mcp_servers" in n for n in project_notes(public))
