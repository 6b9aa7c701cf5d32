"""A project's .mcp.json: unapproved it starts nothing, approved (terminal or panel) it starts, edited it asks again; and the
notebook's Agent.mcp_servers and %agent_mcp through a real IPython shell against the fake API."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from nbagent.agent.approval import ApprovalRequest, Decision
from nbagent.cli import main as cli
from nbagent.notebook import mcp_servers
from nbagent.notebook.settings import Agent
from nbagent.record import events as ev
from nbagent.record.log_reader import read_events
from nbagent.tools.mcp import McpServers, project
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use

pytestmark = pytest.mark.mcp

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def own_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own per-user data folder (where approvals are recorded)."""
    folder = tmp_path / "data"
    monkeypatch.setenv("NBAGENT_DATA_DIR", str(folder))
    monkeypatch.setattr(mcp_servers, "_declined", set())
    return folder


def write_project(folder: Path, **env: str) -> Path:
    """A .mcp.json naming the test server (its starts and calls written into ``folder``)."""
    server = {
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_server"],
        "cwd": str(ROOT),
        "env": {"MCP_TEST_STARTS": str(folder / "starts.txt"), "MCP_TEST_CALLS": str(folder / "calls.txt"), **env},
    }
    path = folder / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": {"proj": server}}, indent=2))
    return path


class View:
    """A view whose person answers approval questions as told, and remembers them."""

    shows_questions = True  # it stands for the panel

    def __init__(self, answer: bool) -> None:
        self.answer, self.asked = answer, []

    def ask(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request)
        return Decision(self.answer, "panel", "" if self.answer else "The user declined this tool call.")


def source(folder: Path, view: Any, settings: Agent | None = None) -> McpServers | None:
    shell = type("Shell", (), {"user_ns": {"__session__": str(folder / "analysis.ipynb")}})()
    return mcp_servers.source(shell, settings or Agent(), view)


def test_an_unapproved_file_starts_nothing_and_says_so(tmp_path: Path) -> None:
    write_project(tmp_path)
    servers = source(tmp_path, None)  # nobody to ask: a headless run
    assert servers is not None and servers.configs == []
    [note] = servers.notes()
    assert "were not started" in note and "nobody can approve it here" in note and "nbagent mcp approve" in note
    assert servers.tools() == [] and not (tmp_path / "starts.txt").exists()


@pytest.mark.slow
def test_approved_in_a_terminal_it_starts_and_an_edit_asks_again(tmp_path: Path) -> None:
    path = write_project(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["mcp", "approve", str(path)], out=out, err=err) == 2  # no terminal to confirm on, no --yes
    assert "nobody can confirm" in err.getvalue()
    assert cli.main(["mcp", "approve", str(tmp_path), "--yes"], out=out, err=err) == 0
    shown = out.getvalue()
    assert "proj:" in shown and "tests.support.mcp_server" in shown and "approved:" in shown  # the command, in full
    record = json.loads((tmp_path / "data" / project.RECORD).read_text())
    assert list(record) == [project.load(path).digest]  # keyed by the file's hash
    view = View(answer=False)
    servers = source(tmp_path, view)
    assert servers is not None and [c.name for c in servers.configs] == ["proj"] and view.asked == []
    manager_servers = McpServers(servers.configs)
    try:
        assert any(t.name == "mcp__proj__add" for t in manager_servers.tools())
    finally:
        for connection in manager_servers.connections():
            connection.stop()
    path.write_text(path.read_text().replace("tests.support.mcp_server", "tests.support.mcp_server "))  # one byte more: another file
    again = source(tmp_path, view)
    assert again is not None and again.configs == [] and len(view.asked) == 1  # asked again, declined
    assert "you declined it" in again.notes()[0]
    source(tmp_path, view)
    assert len(view.asked) == 1  # a decline holds for the kernel: not asked again for the same content


def test_approved_in_the_panel_it_is_recorded_and_the_question_shows_the_commands(tmp_path: Path) -> None:
    write_project(tmp_path, TOKEN="visible-in-the-question")
    view = View(answer=True)
    servers = source(tmp_path, view)
    assert servers is not None and [c.name for c in servers.configs] == ["proj"]
    [asked] = view.asked
    assert asked.tool_name == mcp_servers.PROJECT_QUESTION and "tests.support.mcp_server" in json.dumps(asked.input)
    assert "visible-in-the-question" in json.dumps(asked.input)  # everything the file sets, shown before it runs
    assert project.approved(project.load(tmp_path / ".mcp.json"))
    assert source(tmp_path, View(answer=False)) is not None and len(view.asked) == 1  # not asked again


def test_the_users_own_server_wins_a_name_clash(tmp_path: Path) -> None:
    write_project(tmp_path)
    settings = Agent()
    settings.mcp_servers = {"proj": {"command": "mine"}}
    servers = source(tmp_path, View(answer=True), settings)
    assert servers is not None and [c.command for c in servers.configs] == ["mine"]
    assert any("Agent.mcp_servers has one of that name" in n for n in servers.notes())


def test_a_bad_setting_is_refused_when_set(tmp_path: Path) -> None:
    from traitlets import TraitError

    with pytest.raises(TraitError, match="needs a command"):
        Agent().mcp_servers = {"x": {"args": ["a"]}}


def run(ip: InteractiveShell, code: str) -> Any:
    return ip.run_cell(code)


@pytest.mark.slow
def test_agent_mcp_and_a_turn_in_a_shell(
    shell: InteractiveShell, fake: FakeAnthropic, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {
        "t": {
            "command": sys.executable,
            "args": ["-m", "tests.support.mcp_server"],
            "cwd": str(ROOT),
            "env": {"MCP_TEST_CALLS": str(tmp_path / "calls.txt")},
        }
    }
    shell.user_ns["mcp_config"] = config
    assert run(shell, "%config Agent.mcp_servers = mcp_config").success
    write_project(tmp_path)  # beside the notebook, not approved: this headless shell cannot ask
    run(shell, "%agent_mcp")
    listed = capsys.readouterr().out
    assert "t  [Agent.mcp_servers]" in listed and "not started" in listed
    fake.script(tool_use("mcp__t__echo", {"text": "from the notebook"}), text("echoed"))
    assert run(shell, "%agent echo something").success
    assert (tmp_path / "calls.txt").read_text().splitlines() == ["echo from the notebook"]
    assert not (tmp_path / "starts.txt").exists()  # the project's server never started
    [log] = list((tmp_path / ".nbagent").rglob("*.jsonl"))
    events = list(read_events(log))
    said = [e["text"] for e in events if e["type"] == ev.NOTE and e.get("kind") == "mcp"]
    assert any("were not started" in n for n in said)
    assert next(e for e in events if e["type"] == ev.TOOL_STARTED)["mcp"] == {"server": "t", "tool": "echo"}
    capsys.readouterr()
    run(shell, "%agent_mcp")
    listed = capsys.readouterr().out
    assert "state: running" in listed and "mcp__t__echo  (write)" in listed and "mcp__t__delete_row  (irreversible)" in listed
