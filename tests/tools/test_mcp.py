"""MCP servers as tools, end to end: a real MCP server (tests/support/mcp_server.py, the mcp SDK) in a child process over stdio and
over streamable HTTP on 127.0.0.1, called through real turns of the loop against the fake Messages API."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

import nbagent
from nbagent.agent.approval import ApprovalRequest, Decision
from nbagent.errors import UntrustedLogError
from nbagent.record import events as ev
from nbagent.tools.mcp import Manager, McpServers
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use

pytestmark = [pytest.mark.mcp, pytest.mark.slow]  # each test starts a Python MCP server (~1-2 s)

MODEL = "claude-test"
ROOT = Path(__file__).resolve().parents[2]


class Server:
    """A test server's settings and what it wrote: each start, each call that has a side effect."""

    def __init__(self, folder: Path, **env: str) -> None:
        self.calls, self.starts = folder / "calls.txt", folder / "starts.txt"
        self.env = {"MCP_TEST_CALLS": str(self.calls), "MCP_TEST_STARTS": str(self.starts), **env}

    def config(self, **extra: Any) -> dict[str, Any]:
        return {"command": sys.executable, "args": ["-m", "tests.support.mcp_server"], "cwd": str(ROOT), "env": self.env, **extra}

    def lines(self, which: str) -> list[str]:
        path = self.calls if which == "calls" else self.starts
        return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def manager() -> Iterator[Manager]:
    """A manager of the test's own (the process's shared one would keep servers past the test)."""
    own = Manager()
    yield own
    own.close()


@pytest.fixture
def server(tmp_path: Path) -> Server:
    return Server(tmp_path)


@pytest.fixture
def session(tmp_path: Path) -> Iterator[nbagent.Session]:
    with nbagent.Session.open(tmp_path / "session.jsonl") as opened:
        yield opened


def go(session: nbagent.Session, client: anthropic.Anthropic, servers: McpServers, prompt: str | None = "go", **kw: Any) -> str:
    return nbagent.run(session, prompt, client=client, model=MODEL, mcp_servers=servers, **kw)


def of_type(session: nbagent.Session, kind: str) -> list[dict[str, Any]]:
    return [e for e in session.events() if e["type"] == kind]


def notes(session: nbagent.Session) -> list[str]:
    return [e["text"] for e in of_type(session, ev.NOTE) if e.get("kind") == "mcp"]


def tool_names(request: Any) -> list[str]:
    return [t["name"] for t in request.body.get("tools", [])]


def test_tools_are_listed_and_called_through_a_turn(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, manager: Manager, server: Server
) -> None:
    fake.script(
        tool_use("mcp__t__add", {"a": 2, "b": 3}, id="toolu_1"), tool_use("mcp__t__picture", {}, id="toolu_2"), text("5, and a pixel")
    )
    assert go(session, client, McpServers({"t": server.config()}, manager=manager)) == "5, and a pixel"
    offered = {t["name"]: t for t in fake.requests[0].body["tools"]}
    assert {"mcp__t__add", "mcp__t__echo", "mcp__t__delete_row", "mcp__t__picture"} <= set(offered)
    assert offered["mcp__t__add"]["input_schema"]["properties"]["a"]["type"] == "integer"  # the server's own schema
    started = of_type(session, ev.TOOL_STARTED)
    assert started[0]["mcp"] == {"server": "t", "tool": "add"} and started[0]["effect"] == "write"  # a hint never makes a read
    results = of_type(session, ev.TOOL_RESULT)
    assert results[0]["content"] == "5" and not results[0].get("is_error")
    picture = results[1]["content"]
    assert picture[0] == {"type": "text", "text": "a grey pixel"} and picture[1]["type"] == "image"
    sent = fake.requests[1].body["messages"][-1]["content"]
    assert sent[0]["type"] == "tool_result" and sent[0]["content"] == "5"  # what the model saw is what was logged
    assert fake.requests[2].body["messages"][-1]["content"][0]["content"][1]["type"] == "image"
    assert server.lines("starts") and len(server.lines("starts")) == 1  # once, for both calls


def test_the_server_starts_once_per_process_and_env_reaches_it(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, manager: Manager, server: Server
) -> None:
    server.env["GREETING"] = "hello from env"
    servers = {"t": server.config()}
    fake.script(tool_use("mcp__t__environment", {"name": "GREETING"}), text("ok"), tool_use("mcp__t__add", {"a": 1, "b": 1}), text("ok"))
    go(session, client, McpServers(servers, manager=manager))
    go(session, client, McpServers(servers, manager=manager), "again")  # a new run (a new cell) of the same process
    assert of_type(session, ev.TOOL_RESULT)[0]["content"] == "hello from env"
    assert len(server.lines("starts")) == 1


def test_an_irreversible_tool_asks_with_the_servers_claims(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, manager: Manager, server: Server
) -> None:
    asked: list[ApprovalRequest] = []

    def decline(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return Decision(False, "test", "no")

    fake.script(tool_use("mcp__t__delete_row", {"row": 7}), text("not deleted"), tool_use("mcp__t__echo", {"text": "hi"}), text("ok"))
    go(session, client, McpServers({"t": server.config()}, manager=manager), approval=decline)
    assert [r.reason for r in asked] == ["irreversible"] and asked[0].effect == "irreversible"
    assert "destructive" in asked[0].claims and "Delete a row" in asked[0].claims
    question = [e for e in of_type(session, ev.APPROVAL) if e["decision"] == "pending"][0]["question"]
    assert "The server says: tool 'delete_row'" in question  # the claims are in the logged question too, as the server's
    assert server.lines("calls") == []  # declined: never called
    go(session, client, McpServers({"t": server.config()}, manager=manager), "echo", approval=decline)  # a write does not ask
    assert len(asked) == 1 and server.lines("calls") == ["echo hi"]


def test_the_users_settings_override_an_effect(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, manager: Manager, server: Server
) -> None:
    fake.script(tool_use("mcp__t__delete_row", {"row": 1}), text("done"))
    go(session, client, McpServers({"t": server.config(effects={"delete_row": "write"})}, manager=manager), approval="deny")
    assert server.lines("calls") == ["delete_row 1"] and of_type(session, ev.TOOL_STARTED)[0]["effect"] == "write"


def test_a_server_killed_mid_call_gives_an_unknown_outcome_not_repeated(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, manager: Manager, server: Server
) -> None:
    servers = McpServers({"t": server.config()}, manager=manager)
    fake.script(
        tool_use("mcp__t__slow", {"seconds": 60}, id="toolu_slow"),
        text("it was cut off"),
        tool_use("mcp__t__add", {"a": 1, "b": 2}),
        text("3"),
    )

    def kill_when_called() -> None:
        deadline = time.monotonic() + 30
        while not server.lines("calls") and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(int(server.lines("starts")[-1].split()[1]), signal.SIGKILL)

    killer = threading.Thread(target=kill_when_called)
    killer.start()
    go(session, client, servers)
    killer.join()
    result = of_type(session, ev.TOOL_RESULT)[0]
    assert result["is_error"] and "outcome is unknown" in result["content"] and "not repeated" in result["content"]
    assert "stopped during the call" in result["content"]  # the dead server is noticed, not waited out (no timeout)
    assert any("stopped during the call" in n for n in notes(session))
    assert server.lines("calls") == ["slow 60.0"]  # once
    go(session, client, servers, "add")  # the next turn restarts it once, and the slow call is not run again
    assert of_type(session, ev.TOOL_RESULT)[-1]["content"] == "3"
    assert len(server.lines("starts")) == 2 and server.lines("calls") == ["slow 60.0"]
    assert any("was restarted once" in n for n in notes(session))


def test_a_call_interrupted_by_a_crash_is_not_repeated_unasked(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, manager: Manager, server: Server
) -> None:
    # The log as a process SIGKILLed during the call leaves it: tool_started durable, no result.
    session.append(ev.USER_MSG, content="echo it")
    session.append(ev.MODEL_CALL, model=MODEL, attempt=1)
    call = {"type": "tool_use", "id": "toolu_crash", "name": "mcp__t__echo", "input": {"text": "once"}}
    session.append(ev.ASSISTANT_MSG, message_id="m", model=MODEL, content=[call], stop_reason="tool_use", usage={})
    session.append(
        ev.TOOL_STARTED, tool_use_id="toolu_crash", name="mcp__t__echo", effect="write", attempt=1, mcp={"server": "t", "tool": "echo"}
    )
    fake.script(text("understood"))
    go(session, client, McpServers({"t": server.config()}, manager=manager), None, approval="deny")
    result = of_type(session, ev.TOOL_RESULT)[0]
    assert result["is_error"] and "interrupted" in result["content"]
    assert server.lines("calls") == []  # the server was started (its tools offered) but the call was not repeated


def test_a_server_that_does_not_start_is_a_note_and_the_turn_goes_on(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, manager: Manager, server: Server, tmp_path: Path
) -> None:
    broken = Server(tmp_path, MCP_TEST_FAIL_START="1").config()
    hangs = {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"], "startup_timeout": 1}
    servers = {"broken": broken, "missing": {"command": str(tmp_path / "no-such-server")}, "hangs": hangs, "t": server.config()}
    fake.script(tool_use("mcp__broken__add", {"a": 1, "b": 1}), text("that tool is not there"))
    assert go(session, client, McpServers(servers, manager=manager)) == "that tool is not there"
    said = notes(session)
    assert any("'broken' is not available" in n and "told not to start" in n for n in said)  # its stderr's last line
    assert any("'missing' is not available" in n for n in said)
    assert any("'hangs' is not available" in n and "did not start within 1 s" in n for n in said)
    assert all("\n" not in n for n in said)  # one line each
    names = tool_names(fake.requests[0])
    assert "mcp__t__add" in names and not any(n.startswith(("mcp__broken", "mcp__missing", "mcp__hangs")) for n in names)
    result = of_type(session, ev.TOOL_RESULT)[0]
    assert result["is_error"] and "not available" in result["content"]


def test_tools_that_go_away_mid_turn_change_the_request_and_are_logged(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, manager: Manager, server: Server
) -> None:
    # die kills the server: restarted once, then after a second death it is failed and its tools leave the request.
    fake.script(tool_use("mcp__t__die", {}), tool_use("mcp__t__die", {}), text("gone"))
    go(session, client, McpServers({"t": server.config()}, manager=manager))
    assert "mcp__t__add" in tool_names(fake.requests[0]) and "mcp__t__add" in tool_names(fake.requests[1])
    assert not any(n.startswith("mcp__t__") for n in tool_names(fake.requests[2]))
    contexts = of_type(session, ev.CONTEXT)
    assert len(contexts) == 2 and contexts[0]["prefix"] != contexts[1]["prefix"]  # the rule for a changed request start
    assert contexts[1]["seq"] > of_type(session, ev.USER_MSG)[0]["seq"]  # logged mid-turn, before the request it describes
    assert any("died again after a restart" in n for n in notes(session))


def test_a_log_this_user_did_not_write_starts_no_server(
    fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path, manager: Manager, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NBAGENT_DATA_DIR", str(tmp_path / "someone-else"))
    with nbagent.Session.open(tmp_path / "theirs.jsonl") as theirs:
        theirs.append(ev.USER_MSG, content="call the server")
    monkeypatch.setenv("NBAGENT_DATA_DIR", str(tmp_path / "me"))
    with nbagent.Session.open(tmp_path / "theirs.jsonl") as mine, pytest.raises(UntrustedLogError):
        go(mine, client, McpServers({"t": server.config()}, manager=manager), None)
    assert server.lines("starts") == [] and fake.requests == []


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def http_server(server: Server) -> Iterator[str]:
    """The test server over streamable HTTP on 127.0.0.1 (a free port), its URL."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.mcp_server", "http", str(port)],
        cwd=ROOT,
        env={**os.environ, **server.env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        else:
            pytest.fail("the HTTP MCP server did not listen within 30 s")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


def test_a_server_over_streamable_http(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, manager: Manager, http_server: str, server: Server
) -> None:
    config = {"type": "http", "url": http_server, "headers": {"X-Team": "data"}}
    fake.script(tool_use("mcp__remote__echo", {"text": "over http"}), text("echoed"))
    assert go(session, client, McpServers({"remote": config}, manager=manager)) == "echoed"
    assert of_type(session, ev.TOOL_RESULT)[0]["content"] == "over http"
    assert of_type(session, ev.TOOL_STARTED)[0]["mcp"] == {"server": "remote", "tool": "echo"}
    assert server.lines("calls") == ["echo over http"]


def test_the_log_line_is_plain_json_with_server_and_tool(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, manager: Manager, server: Server
) -> None:
    fake.script(tool_use("mcp__t__add", {"a": 1, "b": 1}), text("2"))
    go(session, client, McpServers({"t": server.config()}, manager=manager))
    lines = [json.loads(line) for line in session.path.read_text().splitlines()]
    started = [line for line in lines if line["type"] == ev.TOOL_STARTED]
    assert started[0]["mcp"] == {"server": "t", "tool": "add"}
    session.close()
    with nbagent.Session.open(session.path) as again:  # it reads back
        assert again.state.frontier == "done"


def test_the_overhead_benchmark_runs_on_tiny_sizes() -> None:
    from benchmarks.mcp_overhead import report

    table = report(calls=3, rounds=1)
    assert "| direct" in table and "McpTool.invoke" in table and "Client.call_tool" in table


def test_a_call_past_its_timeout_is_an_error_of_unknown_outcome(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, manager: Manager, server: Server
) -> None:
    fake.script(tool_use("mcp__t__slow", {"seconds": 30}), text("too slow"))
    assert go(session, client, McpServers({"t": server.config(timeout=1)}, manager=manager)) == "too slow"
    result = of_type(session, ev.TOOL_RESULT)[0]
    assert result["is_error"] and "did not answer within 1 s" in result["content"] and "outcome is unknown" in result["content"]
    assert any("did not answer within 1 s" in n for n in notes(session))


def test_a_read_only_claim_does_not_repeat_a_call_cut_off_by_a_crash(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, manager: Manager, server: Server
) -> None:
    # lookup says readOnlyHint; the log is what a SIGKILL during the call leaves (recorded as a read, as before issue 33).
    session.append(ev.USER_MSG, content="look it up")
    session.append(ev.MODEL_CALL, model=MODEL, attempt=1)
    call = {"type": "tool_use", "id": "toolu_ro", "name": "mcp__t__lookup", "input": {"key": "k"}}
    session.append(ev.ASSISTANT_MSG, message_id="m", model=MODEL, content=[call], stop_reason="tool_use", usage={})
    session.append(
        ev.TOOL_STARTED, tool_use_id="toolu_ro", name="mcp__t__lookup", effect="read", attempt=1, mcp={"server": "t", "tool": "lookup"}
    )
    fake.script(text("understood"))
    go(session, client, McpServers({"t": server.config()}, manager=manager), None, approval="deny")
    result = of_type(session, ev.TOOL_RESULT)[0]
    assert result["is_error"] and "interrupted" in result["content"]
    assert server.lines("calls") == []  # its outcome is unknown: the server's claim does not make it safe to repeat


def test_a_servers_stderr_note_never_logs_a_value_taken_from_the_environment(
    fake: FakeAnthropic,
    client: anthropic.Anthropic,
    session: nbagent.Session,
    manager: Manager,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "plainword-Qv81xw-nokeyshape"  # no credential shape: only its registration can redact it
    monkeypatch.setenv("NBAGENT_TEST_MCP_TOKEN", secret)
    config = Server(tmp_path, MCP_TEST_FAIL_START="1", MCP_TEST_STDERR="token ${NBAGENT_TEST_MCP_TOKEN}").config()
    fake.script(text("no tools"))
    go(session, client, McpServers({"leaky": config}, manager=manager))
    [said] = [n for n in notes(session) if "'leaky' is not available" in n]
    assert "told not to start (token [REDACTED])" in said
    assert secret not in session.path.read_text()


def test_a_huge_description_and_schema_are_cut_with_a_note(
    fake: FakeAnthropic, client: anthropic.Anthropic, session: nbagent.Session, manager: Manager, tmp_path: Path
) -> None:
    config = Server(tmp_path, MCP_TEST_HUGE=str(2_100_000)).config()
    fake.script(tool_use("mcp__t__huge", {"text": "still callable"}), text("ok"))
    go(session, client, McpServers({"t": config}, manager=manager))
    sent = {t["name"]: t for t in fake.requests[0].body["tools"]}["mcp__t__huge"]
    assert len(sent["description"]) < 10_000  # nbagent's limit is 8,000 characters, and a line about the schema
    assert "more characters not shown" in sent["description"] and "cut to its argument names" in sent["description"]
    assert len(json.dumps(sent["input_schema"])) <= 32_000 and list(sent["input_schema"]["properties"]) == ["text"]
    assert len(json.dumps(fake.requests[0].body)) < 200_000  # was over 4 MB: both went into every request
    assert of_type(session, ev.TOOL_RESULT)[0]["content"] == "still callable"
    [said] = [n for n in notes(session) if "'huge'" in n]
    assert "description (2,100,000 characters) was cut" in said and "input schema" in said


def test_a_servers_stderr_is_kept_bounded_while_it_is_read() -> None:
    from benchmarks.mcp_stderr import measure

    floor, loud = measure(0), measure(64)
    assert loud["says_why"]  # the last line still reaches the note
    assert float(loud["peak_mib"]) - float(floor["peak_mib"]) < 24  # type: ignore[arg-type]  # was about 2 x 64 MiB: read whole
