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
from nbagent.state.approval_rule import Here
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
    """A view whose person answers approval questions as told, and remembers them (``person``: a front end that lets one answer)."""

    shows_questions = True  # it stands for the panel

    def __init__(self, answer: bool, *, person: bool = True) -> None:
        self.answer, self.asked, self.person = answer, [], person

    def here(self) -> Here:
        return Here(kernel=True, frontend_stdin=self.person)  # nbclient and papermill send allow_stdin=False

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
    assert "were not started" in note and "nobody can answer here" in note and "nbagent mcp approve" in note
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
    found = project.load(path)
    assert list(record) == [found.key] and record[found.key]["sha256"] == found.digest  # keyed by content and folder
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


SCRIPT = f"""import os, sys
sys.path.insert(0, {str(ROOT)!r})
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ran.txt"), "a") as f:
    f.write(os.getcwd() + "\\n")
from tests.support.mcp_server import main
main([])
"""


def relative_project(folder: Path, script: str = SCRIPT) -> Path:
    """A .mcp.json naming ``server.py`` by a relative path (as a public project writes it), and that script."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "server.py").write_text(script)
    path = folder / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": {"proj": {"command": sys.executable, "args": ["server.py"]}}}))
    return path


def test_the_same_bytes_in_another_folder_ask_again_and_start_nothing_unasked(tmp_path: Path) -> None:
    approved_file = relative_project(tmp_path / "public")
    assert cli.main(["mcp", "approve", str(approved_file), "--yes"], out=io.StringIO(), err=io.StringIO()) == 0
    theirs = relative_project(tmp_path / "clone", SCRIPT.replace("ran.txt", "attacker-ran.txt"))
    assert theirs.read_bytes() == approved_file.read_bytes()  # byte for byte
    for view, settings in ((None, Agent()), (View(True, person=False), Agent()), (View(True), Agent(approval="deny"))):
        servers = source(tmp_path / "clone", view, settings)  # nobody to ask, a headless run, "deny"
        assert servers is not None and servers.configs == [] and "were not started" in servers.notes()[0]
    view = View(answer=False)
    servers = source(tmp_path / "clone", view)
    assert servers is not None and servers.configs == [] and len(view.asked) == 1  # asked again, in the panel
    assert "clone" in view.asked[0].about and "does not cover" in view.asked[0].about  # nbagent's words, not a server's claims
    assert view.asked[0].claims == ""
    assert not (tmp_path / "clone" / "attacker-ran.txt").exists()


def test_a_changed_script_in_an_approved_folder_asks_again(tmp_path: Path) -> None:
    path = relative_project(tmp_path / "p")
    out = io.StringIO()
    assert cli.main(["mcp", "approve", str(path), "--yes"], out=out, err=io.StringIO()) == 0
    assert "server.py (" in out.getvalue() and "does not cover" in out.getvalue()  # what the approval covers, and not
    assert project.approved(project.load(path))
    (tmp_path / "p" / "server.py").write_text(SCRIPT + "# changed\n")
    view = View(answer=False)
    again = source(tmp_path / "p", view)
    assert again is not None and again.configs == [] and len(view.asked) == 1


def test_an_approval_kept_by_content_only_asks_again_once(tmp_path: Path) -> None:
    path = write_project(tmp_path)
    found = project.load(path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / project.RECORD).write_text(json.dumps({found.digest: {"path": str(path), "approved": "2025-01-01"}}))
    view = View(answer=True)
    assert source(tmp_path, view) is not None and len(view.asked) == 1  # the old record does not count
    assert source(tmp_path, view) is not None and len(view.asked) == 1  # approved now: not asked again


def test_an_approved_file_starts_nothing_where_nobody_could_be_asked(tmp_path: Path) -> None:
    write_project(tmp_path)
    assert source(tmp_path, View(answer=True)) is not None  # approved in the panel
    for view, settings in ((View(True, person=False), Agent()), (View(True), Agent(approval="deny"))):
        servers = source(tmp_path, view, settings)
        assert servers is not None and servers.configs == []
        assert "put it in your own Agent.mcp_servers" in servers.notes()[0]
    assert source(tmp_path, View(answer=False)).configs  # type: ignore[union-attr]  # where a person could be asked, it runs


@pytest.mark.slow
def test_a_project_server_runs_in_its_folder_and_its_tools_ask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    relative_project(tmp_path / "p")
    monkeypatch.chdir(tmp_path)  # the kernel's folder is not the project's
    servers = source(tmp_path / "p", View(answer=True))
    assert servers is not None and [c.cwd for c in servers.configs] == [str((tmp_path / "p").resolve())]
    try:
        tools = {t.name: t for t in servers.tools()}
        assert (tmp_path / "p" / "ran.txt").read_text().splitlines() == [str((tmp_path / "p").resolve())]
        assert tools["mcp__proj__add"].effect == "irreversible" and tools["mcp__proj__echo"].effect == "irreversible"
        assert "not used: each call asks" in tools["mcp__proj__add"].about and "project" not in tools["mcp__proj__add"].claims
    finally:
        for connection in servers.connections():
            connection.stop()


@pytest.mark.parametrize(
    ("command", "args", "expected"),
    [
        ("python", ["server.py"], ["server.py"]),
        ("python", ["-u", "src/run.py", "--db", "data.db"], ["src/run.py"]),  # a data file is not a script
        ("./start.sh", [], ["start.sh"]),  # the command itself, by a path
        ("python", ["../outside.py"], []),  # outside the project's folder
        ("python", ["-m", "pkg.server"], []),  # a module: not named as a file
        ("python", ["missing.py"], []),
        ("python", ["link.py"], []),  # a link out of the folder
    ],
)
def test_the_files_an_approval_covers(tmp_path: Path, command: str, args: list[str], expected: list[str]) -> None:
    folder = tmp_path / "p"
    (folder / "src").mkdir(parents=True)
    for name in ("server.py", "src/run.py", "data.db", "start.sh"):
        (folder / name).write_text("x")
    (tmp_path / "outside.py").write_text("x")
    (folder / "link.py").symlink_to(tmp_path / "outside.py")
    (folder / ".mcp.json").write_text(json.dumps({"mcpServers": {"s": {"command": command, "args": args}}}))
    found = project.load(folder / ".mcp.json")
    assert [name for name, _ in found.files] == expected


def test_the_question_waits_until_the_request_is_logged(tmp_path: Path) -> None:
    """With ``ready`` (the notebook's run of a new request), the panel asks only once the request is logged: under its "You:" line."""
    write_project(tmp_path)
    logged = [False]
    view = View(answer=False)
    shell = type("Shell", (), {"user_ns": {"__session__": str(tmp_path / "analysis.ipynb")}})()
    servers = mcp_servers.source(shell, Agent(), view, ready=lambda: logged[0])
    assert isinstance(servers, mcp_servers.AfterRequest) and view.asked == []
    assert servers.tools() == [] and view.asked == []  # the loop's first look, before the request is logged: not asked yet
    logged[0] = True
    assert servers.tools() == [] and len(view.asked) == 1  # now asked (and declined here): nothing starts
    assert servers.tools() == [] and len(view.asked) == 1  # once
    [note] = servers.notes()
    assert "you declined it" in note and not (tmp_path / "starts.txt").exists()
