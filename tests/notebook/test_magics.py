"""The magics in a real in-process IPython shell, talking to the fake Anthropic server through the real SDK."""

from __future__ import annotations

import base64
import logging
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from traitlets import TraitError

import nbagent
from nbagent.errors import (
    HistoryError,
    LogCorruptError,
    LogLockedError,
    LogVersionError,
    LogWriteError,
    ModelError,
    NbagentError,
    NotALogError,
)
from nbagent.notebook import kernel as nbkernel
from nbagent.notebook.magics import magics_for
from nbagent.notebook.usage import usage_errors
from nbagent.record import events as ev
from nbagent.record.log_reader import read_events
from nbagent.stores import folders as store
from tests.support.fake_anthropic import error, text, tool_use

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def run(ip: InteractiveShell, code: str, **kw):
    result = ip.run_cell(code, **kw)
    return result


def usage_error(ip: InteractiveShell, code: str) -> str:
    result = ip.run_cell(code)
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    return str(result.error_in_exec)


def logs(folder: Path) -> list[Path]:
    return [s.path for s in store.list_sessions(folder)]


def user_texts(request) -> list:
    return [m["content"] for m in request.body["messages"] if m["role"] == "user"]


def last_words(request) -> str:
    """The user's own words in a request's last message (after any notes to the model: the notebook's account)."""
    content = user_texts(request)[-1]
    return content if isinstance(content, str) else content[-1]["text"]


def test_line_magic_runs_a_turn_and_logs_beside_the_notebook(shell, fake, tmp_path, capsys):
    fake.script(text("Hello from the agent"))
    assert run(shell, "%agent say hello").success
    assert "Hello from the agent" in capsys.readouterr().out
    [log] = logs(tmp_path / ".nbagent" / "untitled")
    events = list(nbagent.read_events(log))
    user = next(e for e in events if e["type"] == ev.USER_MSG)
    assert user["content"] == "say hello" and user["meta"]["kernel"] == nbkernel.KERNEL_ID
    body = fake.requests[0].body
    notebook = {"notebook_history", "inspect_variable", "read_notebook"}
    assert {t["name"] for t in body["tools"]} == {"python", *notebook, "read_file", "write_file", "edit_file", "list_files", "shell"}
    assert "Jupyter notebook" in body["system"][0]["text"] if isinstance(body["system"], list) else body["system"]


def test_a_request_ending_in_a_question_mark_reaches_the_agent(shell, fake, capsys):
    fake.script(text("a,b columns"), text("yes"), text("ok"))
    assert run(shell, "%agent What is in data.csv?").success
    assert run(shell, "x = 1\n%agent   is x one??").success
    assert run(shell, "%agent --approval deny what's up?").success
    assert last_words(fake.requests[0]) == "What is in data.csv?"
    assert last_words(fake.requests[1]) == "is x one??"
    assert last_words(fake.requests[2]) == "what's up?"
    assert shell.user_ns["x"] == 1
    capsys.readouterr()
    # Only a bare %agent? is help, and it is real help.
    assert run(shell, "%agent?").success
    help_text = capsys.readouterr().out
    assert "--resume SESSION" in help_text and "until the agent's turn ends" in help_text
    assert len(fake.requests) == 3


def test_cell_magic_body_is_the_request(shell, fake):
    fake.script(text("done"), text("again"))
    assert run(shell, "%%agent\nLoad data.csv.\nWhat is its mean?\n").success
    assert last_words(fake.requests[0]) == "Load data.csv.\nWhat is its mean?"
    assert run(shell, "%%agent --new\nsecond session?").success
    assert len(fake.requests[1].body["messages"]) == 1  # a fresh session has no history


def test_python_tool_shares_the_user_namespace(shell, fake):
    shell.user_ns["base"] = 40
    fake.script(tool_use("python", {"code": "y = base + 2\nprint('printed')\ny"}), text("y is 42"))
    assert run(shell, "%agent compute y").success
    assert shell.user_ns["y"] == 42
    result = user_texts(fake.requests[1])[-1][0]
    assert result["type"] == "tool_result" and not result.get("is_error")
    assert result["content"] == [{"type": "text", "text": "printed\n42"}]


def test_python_tool_errors_and_images_go_back_to_the_model(shell, fake, capsys):
    shell.user_ns["PNG"] = PNG
    fake.script(
        tool_use("python", {"code": "1/0"}),
        tool_use("python", {"code": "from IPython.display import Image, display\ndisplay(Image(data=PNG))"}),
        text("saw it"),
    )
    assert run(shell, "%agent plot").success
    failed = user_texts(fake.requests[1])[-1][0]
    assert failed["is_error"] and "ZeroDivisionError" in failed["content"][0]["text"]
    image = user_texts(fake.requests[2])[-1][0]["content"][0]
    assert image["type"] == "image" and base64.b64decode(image["source"]["data"]) == PNG
    assert "Traceback" not in capsys.readouterr().err  # errors go to the model, not into the cell


def test_user_tools_from_the_namespace_are_offered(shell, fake, tmp_path):
    run(
        shell, "import nbagent\n@nbagent.tool(effect='read')\ndef add(a: int, b: int) -> int:\n    '''Add two numbers.'''\n    return a + b"
    )
    fake.script(tool_use("add", {"a": 2, "b": 3}), text("5"))
    assert run(shell, "%agent add 2 and 3").success
    assert "add" in {t["name"] for t in fake.requests[0].body["tools"]}
    assert user_texts(fake.requests[1])[-1][0]["content"] == "5"


def test_settings_through_config_magic_config_object_and_options(shell, fake):
    fake.script(text("1"), text("2"), text("3"))
    run(shell, "%config Agent.model = 'claude-from-config-magic'\n%config Agent.max_tokens = 123")
    assert run(shell, "%agent one").success
    assert fake.requests[0].body["model"] == "claude-from-config-magic" and fake.requests[0].body["max_tokens"] == 123
    assert run(shell, "%agent --model claude-per-cell two").success
    assert fake.requests[1].body["model"] == "claude-per-cell"
    run(shell, "%unload_ext nbagent")
    shell.config.Agent.model = "claude-from-config-file"
    shell.config.Agent.system_prompt = "Be brief."
    run(shell, "%load_ext nbagent")
    assert run(shell, "%agent three").success
    assert fake.requests[2].body["model"] == "claude-from-config-file"
    system = fake.requests[2].body["system"]
    assert (system if isinstance(system, str) else system[0]["text"]) == "Be brief."


def test_user_mistakes_are_usage_errors_and_lose_nothing(shell, fake, tmp_path, monkeypatch, capsys):
    assert "request is empty" in usage_error(shell, "%agent")
    assert "request is empty" in usage_error(shell, "%%agent\n  \n")
    assert "unrecognized option --bogus. The options are --new," in usage_error(shell, "%agent --bogus do it")
    assert "invalid choice" in usage_error(shell, "%agent --approval maybe do it")
    assert "not a valid session name" in usage_error(shell, "%agent --session ../x do it")
    assert "No session named 'nope'" in usage_error(shell, "%agent --resume nope")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    capsys.readouterr()
    assert run(shell, "%agent do it").success  # no key is not a mistake of the cell's: said calmly (notebook/outcomes.py)
    assert "Agent.demo = True" in capsys.readouterr().out
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    run(shell, f"%config Agent.log_dir = {str(blocker / 'logs')!r}")
    assert "Cannot create the log folder" in usage_error(shell, "%agent do it")
    run(shell, "%config Agent.log_dir = ''")
    assert fake.requests == []


def test_the_current_session_follows_the_settings(shell, fake, tmp_path):
    """A request goes to the current session only while Agent.log_dir still leads to it; a folder linked away is refused."""
    fake.script(text("one"), text("two"), text("three"))
    assert run(shell, "%agent one").success
    [first] = (tmp_path / ".nbagent" / "untitled").glob("*.jsonl")
    other = tmp_path / "elsewhere"
    run(shell, f"%config Agent.log_dir = {str(other)!r}")
    assert run(shell, "%agent two").success
    [second] = (other / "untitled").glob("*.jsonl")
    run(shell, "%config Agent.log_dir = ''")
    assert run(shell, "%agent three").success
    assert [e["type"] for e in read_events(first)].count(ev.USER_MSG) == 2
    assert [e["type"] for e in read_events(second)].count(ev.USER_MSG) == 1
    run(shell, "%unload_ext nbagent")  # the sessions close; the folder is then swapped for a link
    (other / "untitled").rename(tmp_path / "moved")
    (other / "untitled").symlink_to(tmp_path / "moved")
    run(shell, "%load_ext nbagent")
    run(shell, f"%config Agent.log_dir = {str(other)!r}")
    assert "symbolic link" in usage_error(shell, "%agent four")
    assert len(fake.requests) == 3


def test_corrupt_and_locked_logs(shell, fake, tmp_path):
    folder = tmp_path / ".nbagent" / "untitled"
    fake.script(text("first"))
    assert run(shell, "%agent --session s1 first").success
    path = folder / "s1.jsonl"
    with nbagent.Session.open(folder / "held.jsonl"):
        assert "--new" in usage_error(shell, "%agent --session held go")
    run(shell, "%unload_ext nbagent")  # closes s1
    data = bytearray(path.read_bytes())
    data[20] ^= 0x01  # damage before the last line
    path.write_bytes(bytes(data))
    run(shell, "%load_ext nbagent")
    message = usage_error(shell, "%agent --session s1 more")
    assert "damaged" in message and "--new" in message
    assert path.read_bytes() == bytes(data)
    assert len(fake.requests) == 1


def test_sessions_listing(shell, fake, capsys):
    fake.script(text("a"), text("b"), error(400, message="bad request"))
    run(shell, "%agent first question")
    run(shell, "%agent --new second question")
    assert isinstance(run(shell, "%agent follow-up").error_in_exec, UsageError)  # a 400: the turn is unfinished
    capsys.readouterr()
    run(shell, "%agent_sessions")
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "question" in line]
    assert len(lines) == 2
    assert "complete" in lines[0] and "first question" in lines[0] and lines[0].startswith(" ")
    assert "unfinished" in lines[1] and "second question" in lines[1] and lines[1].startswith("*")
    assert "\t1\t" not in out and " 2 " in lines[1]
    assert all("  yours  " in line for line in lines)  # who wrote each log


def earlier_kernel_log(folder: Path, client, fake, *turns: tuple[str, list], name: str = "old") -> Path:
    """A session recorded by another kernel (before a restart), through the real engine."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.jsonl"
    with nbagent.Session.open(path) as session:
        for request, replies in turns:
            fake.script(*replies)

            @nbagent.tool(name="python")
            def python(code: str) -> str:
                """Pretend kernel."""
                return "ran"

            nbagent.run(session, request, tools=[python], client=client, meta={"kernel": "earlier-kernel", "request": request})
    return path


def test_rerun_after_restart_replays_without_model_calls(shell, fake, client, tmp_path, capsys):
    folder = tmp_path / ".nbagent" / "untitled"
    earlier_kernel_log(folder, client, fake, ("q1", [text("answer one")]), ("q2?", [text("answer two")]))
    sent = len(fake.requests)
    assert run(shell, "%agent q1").success
    assert run(shell, "%agent q2?").success
    out = capsys.readouterr().out
    assert "answer one" in out and "answer two" in out
    assert len(fake.requests) == sent  # replayed from the log
    # Within this kernel's life, re-running a cell asks anew; the first new turn hears about the restart.
    fake.script(text("fresh"))
    assert run(shell, "%agent q1").success
    out = capsys.readouterr().out
    assert "fresh" in out
    note, *_, request = user_texts(fake.requests[-1])[-1]  # between them: the notebook's account, if any
    assert note["text"].startswith("[nbagent note: the Jupyter kernel was restarted") and request["text"] == "q1"
    # The note is a note event, not the user's words: the request is logged as typed, and shown under the note.
    *_, logged_note, logged_request = [
        e for e in nbagent.read_events(logs(folder)[0]) if e["type"] == ev.USER_MSG or e.get("kind") == "kernel_restarted"
    ]
    assert logged_note["kind"] == "kernel_restarted" and logged_note["to_model"] == note["text"] and logged_request["content"] == "q1"
    assert "note to the model: the Jupyter kernel was restarted since the previous turn" in out and "request:\n    q1" in out
    assert "[nbagent note" not in out
    fake.script(text("again"))
    run(shell, "%agent q3")
    assert last_words(fake.requests[-1]) == "q3" and "restarted" not in str(
        user_texts(fake.requests[-1])[-1]
    )  # only the first turn after a restart carries the note


def test_cells_match_recorded_turns_by_cell_id(shell, fake, client, tmp_path, capsys):
    folder = tmp_path / ".nbagent" / "untitled"
    folder.mkdir(parents=True)
    with nbagent.Session.open(folder / "old.jsonl") as session:  # two cells with the same text, as JupyterLab records them
        for cell, answer in (("cell-A", "from cell A"), ("cell-B", "from cell B")):
            fake.script(text(answer))
            nbagent.run(session, "same", client=client, meta={"kernel": "earlier", "request": "same", "cell_id": cell})
    sent = len(fake.requests)
    assert run(shell, "%agent same", cell_id="cell-B").success
    out = capsys.readouterr().out
    assert "from cell B" in out and "from cell A" not in out
    assert run(shell, "%agent same", cell_id="cell-A").success
    assert "from cell A" in capsys.readouterr().out
    assert len(fake.requests) == sent


def test_unfinished_turn_continues_exactly_once(shell, fake, tmp_path, capsys):
    folder = tmp_path / ".nbagent" / "untitled"
    folder.mkdir(parents=True)
    with nbagent.Session.open(folder / "crashed.jsonl") as session:  # what a crash before the model call leaves
        session.append(ev.USER_MSG, content="finish me", meta={"kernel": "earlier", "request": "finish me"})
    fake.script(text("finished"), text("asked anew"))
    assert run(shell, "%agent finish me").success
    assert "finished" in capsys.readouterr().out
    assert len(fake.requests) == 1 and user_texts(fake.requests[0]) == ["finish me"]
    assert run(shell, "%agent finish me").success
    assert len(fake.requests) == 2 and "asked anew" in capsys.readouterr().out


def test_restore_reruns_only_recorded_python_code(shell, fake, client, tmp_path, capsys):
    folder = tmp_path / ".nbagent" / "untitled"
    (tmp_path / "marker.txt").write_text("untouched")
    path = earlier_kernel_log(
        folder,
        client,
        fake,
        ("make z", [tool_use("python", {"code": "z = 5"}), tool_use("write_file", {"path": "marker.txt", "content": "x"}), text("ok")]),
    )
    assert "z" not in shell.user_ns
    assert run(shell, "%agent --restore").success
    assert shell.user_ns["z"] == 5
    assert "re-running 1 recorded python call" in capsys.readouterr().out
    assert (tmp_path / "marker.txt").read_text() == "untouched"
    shell.user_ns.pop("z")
    assert run(shell, "%agent --restore").success  # each turn is restored once per kernel
    assert "z" not in shell.user_ns
    run(shell, "%unload_ext nbagent")
    notes = [e for e in nbagent.read_events(path) if e["type"] == ev.NOTE and e.get("kind") == "kernel_state_restored"]
    assert [n["python_calls"] for n in notes] == [1]


def test_interrupt_is_logged_and_the_next_request_continues(shell, fake, tmp_path, capsys):
    run(shell, "import nbagent\n@nbagent.tool\ndef slow() -> str:\n    '''Takes long.'''\n    raise KeyboardInterrupt")
    fake.script(tool_use("slow", {}), text("carrying on"))
    result = run(shell, "%agent do the slow thing")
    assert result.success  # no traceback: the panel shows the interruption
    [log] = logs(tmp_path / ".nbagent" / "untitled")
    assert any(e["type"] == ev.INTERRUPTED for e in nbagent.read_events(log))
    assert run(shell, "%agent go on").success
    assert "carrying on" in capsys.readouterr().out
    settled = user_texts(fake.requests[1])[-1]
    assert settled[0]["type"] == "tool_result" and "outcome is unknown" in settled[0]["content"]


def test_headless_ask_declines_and_auto_approves(shell, fake, tmp_path):
    fake.script(tool_use("shell", {"command": "touch made-by-shell"}), text("declined"))
    assert run(shell, "%agent make a file").success
    declined = user_texts(fake.requests[1])[-1][0]
    assert declined["is_error"] and "nobody can answer" in declined["content"]
    assert not (tmp_path / "made-by-shell").exists()
    fake.script(tool_use("shell", {"command": "touch made-by-shell"}), text("made"))
    assert run(shell, "%agent --approval auto make a file").success
    assert (tmp_path / "made-by-shell").exists()


def test_demo_model_needs_no_key(shell, fake, monkeypatch, capsys):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    run(shell, "%config Agent.demo = True\n%config Agent.tools = ['list_files']")
    assert run(shell, "%agent what is here").success
    assert "not Claude" in capsys.readouterr().out
    assert fake.requests == []


def test_agent_tools_are_checked_when_set(shell, fake, caplog):
    settings = magics_for(shell).settings
    with caplog.at_level(logging.ERROR):
        run(shell, "%config Agent.tools = ['pyton', 'python']")  # %config reports a TraitError and keeps the old value
    assert "unknown names ['pyton']; choose from python, notebook_history" in caplog.text
    assert "pyton" not in settings.tools and "shell" in settings.tools
    with pytest.raises(TraitError, match=r"\['shel'\]; choose from .*list_files, shell"):
        settings.tools = ["python", "shel"]
    run(shell, "%config Agent.tools = ['python']")
    assert settings.tools == ["python"]
    fake.script(text("ok"))
    assert run(shell, "%agent hi").success
    assert [t["name"] for t in fake.requests[0].body["tools"]] == ["python"]
    run(shell, "%unload_ext nbagent")
    shell.config.Agent.tools = ["pyton"]  # a config file: refused when the extension loads
    assert isinstance(run(shell, "%load_ext nbagent").error_in_exec, TraitError)
    shell.config.Agent.tools = ["python"]
    assert run(shell, "%load_ext nbagent").success


NEW = "Start a new session with `%agent --new ...`; nothing was deleted."
# the error raised, the hint of the place it was raised  ->  the UsageError's message
ERRORS = [
    (LogLockedError("The log is in use."), "", "The log is in use. (`%agent --new ...` starts a separate session.)"),
    (LogCorruptError("s.jsonl", 3, 99, "checksum mismatch"), "", f"{LogCorruptError('s.jsonl', 3, 99, 'checksum mismatch')} {NEW}"),
    (LogVersionError("Written by a newer nbagent."), "a hint", f"Written by a newer nbagent. {NEW}"),
    (ModelError("Overloaded."), "", "Overloaded. The session is saved; run %agent again to retry."),
    (NotALogError("notes.txt", "no header"), "", str(NotALogError("notes.txt", "no header"))),
    (LogWriteError("The disk is full."), "", "The disk is full."),
    (HistoryError("No such session."), "See %agent_sessions.", "No such session. See %agent_sessions."),
    (NbagentError("Bad name."), "", "Bad name."),
]


@pytest.mark.parametrize("error, hint, message", ERRORS)
def test_one_mapping_from_nbagent_errors_to_usage_errors(error: Exception, hint: str, message: str) -> None:
    with pytest.raises(UsageError) as raised, usage_errors(hint):
        raise error
    assert str(raised.value) == message and raised.value.__cause__ is None


def test_os_errors_are_usage_errors_only_where_the_caller_says_what_failed() -> None:
    with pytest.raises(UsageError) as raised, usage_errors(oserror="Cannot write the log {a}: {reason}."):
        raise PermissionError(13, "Permission denied")
    assert str(raised.value) == "Cannot write the log {a}: Permission denied."
    with pytest.raises(PermissionError), usage_errors():
        raise PermissionError(13, "Permission denied")
    with pytest.raises(UsageError) as raised, usage_errors(hints=()):
        raise LogLockedError("The log is in use.")
    assert str(raised.value) == "The log is in use."


def test_a_line_without_options_gets_the_parsers_defaults_each_time_afresh(shell) -> None:
    """No options: the defaults parsed once and copied, equal to what the parser gives, never shared between cells."""
    from IPython.core.magic_arguments import parse_argstring

    from nbagent.notebook.usage import parse_options

    agent = magics_for(shell).agent
    first = parse_options(agent, "", ["--new"])
    assert vars(first) == vars(parse_argstring(agent, "")) and first.request == []
    first.request.append("changed by one cell")
    first.new = True
    second = parse_options(agent, "  ", ["--new"])
    assert vars(second) == vars(parse_argstring(agent, "")) and second.request == [] and not second.new
    assert parse_options(agent, "--new", ["--new"]).new  # options still go through the parser
