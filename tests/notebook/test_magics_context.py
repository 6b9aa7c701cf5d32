"""The context window and thinking in the notebook: the Agent settings, ``%agent --compact``, and what the views show.

A real in-process IPython shell with nbagent loaded, the real SDK, the fake Messages API on 127.0.0.1.
"""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import nbformat
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from traitlets import TraitError

import nbagent
from nbagent.cli import export
from nbagent.cli.main import main
from nbagent.notebook.magics import magics_for
from nbagent.notebook.settings import Agent, context_settings, thinking_setting, thinking_value
from nbagent.record import events as ev
from nbagent.render import html
from nbagent.render.timeline import Timeline
from nbagent.state.context import SUMMARY_INSTRUCTIONS, SUMMARY_PREFIX, ContextSettings
from nbagent.stores import folders as store
from tests.support.fake_anthropic import FakeAnthropic, Reply, error, text
from tests.support.fake_context import signature

SECRET = "sk-ant-api03-" + "Z" * 93 + "AA"


def run(ip: InteractiveShell, code: str) -> Any:
    return ip.run_cell(code)


def usage_error(ip: InteractiveShell, code: str) -> str:
    result = ip.run_cell(code)
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    return str(result.error_in_exec)


def the_log(folder: Path) -> Path:
    [stored] = store.list_sessions(folder / ".nbagent" / "untitled")
    return stored.path


# Settings ------------------------------------------------------------------------------------------
SETTINGS = [
    # trait, value, the value it takes, or the words of its error
    ("compact", "local", "local", None),
    ("compact", "sometimes", None, "expected any of ['auto', 'server', 'local', 'off']"),
    ("compact_trigger", 150_000, 150_000, None),
    ("compact_trigger", -1, None, "Agent.compact_trigger must be 0 or more, not -1 (0 means: a margin under the window)"),
    ("context_window", 1_000_000, 1_000_000, None),
    ("context_window", 999, None, "Agent.context_window is in tokens and must be at least 1,000, not 999"),
    ("tool_result_budget", 0, 0, None),
    ("tool_result_budget", -5, None, "Agent.tool_result_budget must be 0 or more, not -5 (0 means: no clipping)"),
    ("clear_tool_results", 3, 3, None),
    ("clear_tool_results", -2, None, "Agent.clear_tool_results must be 0 or more"),
    ("thinking", "adaptive", "adaptive", None),
    ("thinking", " OFF ", "off", None),
    ("thinking", 4096, 4096, None),
    ("thinking", "2048", 2048, None),
    ("thinking", 1023, None, "Agent.thinking must be 'off', 'adaptive' or a token budget of at least 1024 (e.g. 4096), not 1023"),
    ("thinking", "on", None, "not 'on'"),
    ("thinking", True, None, "not True"),
    ("thinking", "-4096", None, "not '-4096'"),
]


@pytest.mark.parametrize(("name", "value", "taken", "error"), SETTINGS)
def test_each_setting_is_checked_when_it_is_set(name: str, value: Any, taken: Any, error: str | None) -> None:
    agent = Agent()
    if error is None:
        setattr(agent, name, value)
        assert getattr(agent, name) == taken
    else:
        before = getattr(agent, name)
        with pytest.raises(TraitError, match=error.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")):
            setattr(agent, name, value)
        assert getattr(agent, name) == before


def test_the_settings_become_the_runs_context_settings_and_thinking() -> None:
    agent = Agent()
    assert context_settings(agent) == ContextSettings()  # the defaults are the engine's
    assert thinking_setting(agent) is None
    agent.compact, agent.compact_trigger, agent.context_window = "local", 50_000, 100_000
    agent.tool_result_budget, agent.clear_tool_results, agent.thinking = 0, 4, "3000"
    assert context_settings(agent) == ContextSettings(
        compact="local", window=100_000, trigger=50_000, result_budget=None, keep_tool_results=4
    )
    assert thinking_setting(agent) == 3000
    agent.compact_trigger = 100_000
    with pytest.raises(TraitError, match=r"compact_trigger \(100,000\) must be below Agent.context_window \(100,000\)"):
        context_settings(agent)
    agent.thinking, agent.max_tokens = 8192, 8192
    with pytest.raises(TraitError, match=r"Agent.thinking \(8,192 tokens\) must be below Agent.max_tokens \(8,192\)"):
        thinking_setting(agent)
    assert thinking_value("Adaptive") == "adaptive"


def test_config_reports_a_bad_setting_and_keeps_the_old_value(shell: InteractiveShell, caplog: pytest.LogCaptureFixture) -> None:
    settings = magics_for(shell).settings
    with caplog.at_level(logging.ERROR):
        run(shell, "%config Agent.thinking = 'lots'")
    assert "Agent.thinking must be 'off', 'adaptive' or a token budget" in caplog.text and settings.thinking == "off"
    run(shell, "%config Agent.thinking = 2048")
    assert settings.thinking == 2048


def test_settings_that_do_not_fit_together_are_a_usage_error(shell: InteractiveShell, fake: FakeAnthropic) -> None:
    run(shell, "%config Agent.context_window = 10000\n%config Agent.compact_trigger = 20000")
    message = usage_error(shell, "%agent hello")
    assert "Agent.compact_trigger (20,000) must be below Agent.context_window (10,000)" in message
    assert "%config Agent.<name>" in message and fake.requests == []


def test_the_settings_reach_the_request(shell: InteractiveShell, fake: FakeAnthropic, tmp_path: Path) -> None:
    fake.script(text("ok"))
    run(shell, "%config Agent.thinking = 2048\n%config Agent.tool_result_budget = 1234\n%config Agent.context_window = 100000")
    run(shell, "%config Agent.clear_tool_results = 2\n%config Agent.compact = 'local'")
    assert run(shell, "%agent hi").success
    body = fake.requests[0].body
    # The default model takes no budget: adaptive, with a note; its thinking blocks are bound, so unbound ones are dropped;
    # it omits thinking text unless asked, so summarized display is asked (thinking_display.py).
    assert body["thinking"] == {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}, "display": "summarized"}
    events = list(nbagent.read_events(the_log(tmp_path)))
    assert [e["text"] for e in events if e["type"] == ev.NOTE and e.get("kind") == "thinking"] == [
        "claude-sonnet-5-5 does not take a thinking budget: the budget of 2048 tokens runs as adaptive thinking "
        "(the model decides how much to think)."
    ]
    [context] = [e for e in events if e["type"] == ev.CONTEXT]
    assert context["result_budget"] == 1234 and context["window"] == 100_000 and context["keep_tool_results"] == 2
    assert context["compact"] == "local" and "context_management" not in body  # local: the API is not asked to compact


# %agent --compact ------------------------------------------------------------------------------------
def test_compact_summarises_the_session_now_through_the_real_magic(
    shell: InteractiveShell, fake: FakeAnthropic, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.script(text("The mean of data.csv is 2.0."), text("Hi again."))
    assert run(shell, "%agent what is the mean of data.csv?").success
    assert run(shell, "%agent and hello").success
    capsys.readouterr()
    fake.script(text("SUMMARY: the user asked for the mean of data.csv (2.0)."))
    assert run(shell, "%agent --compact").success
    out = capsys.readouterr().out
    summary_request = fake.requests[2].body
    assert SUMMARY_INSTRUCTIONS in json.dumps(summary_request["messages"]) and "mean of data.csv" in json.dumps(summary_request["messages"])
    events = list(nbagent.read_events(the_log(tmp_path)))
    started = next(e for e in events if e["type"] == ev.COMPACTION_STARTED)
    compaction = next(e for e in events if e["type"] == ev.COMPACTION)
    assert started["reason"] == "request" and compaction["final"] and compaction["summary"].startswith("SUMMARY:")
    assert "compacting the context: summarising all but the latest" in out  # the terminal view of the magic
    assert f"compaction: {compaction['messages']} earlier message" in out and "SUMMARY: the user asked" in out
    # The next request starts from the summary; every view still has the whole history.
    fake.script(text("Still 2.0."))
    assert run(shell, "%agent remind me?").success
    first = fake.requests[3].body["messages"][0]
    assert first["role"] == "user" and first["content"][0]["text"] == SUMMARY_PREFIX + compaction["summary"]
    events = list(nbagent.read_events(the_log(tmp_path)))
    page = html.transcript_html(events)
    assert "what is the mean of data.csv?" in page and "SUMMARY: the user asked" in page
    assert "compacting the context" not in page  # the finished compaction's entry replaced the in-progress line
    code, shown, err = cli("show", str(the_log(tmp_path)))
    assert code == 0 and "what is the mean of data.csv?" in shown and "compaction: " in shown


def test_compact_mistakes_are_usage_errors(shell: InteractiveShell, fake: FakeAnthropic, tmp_path: Path) -> None:
    assert "no session to compact yet" in usage_error(shell, "%agent --compact")
    assert not (tmp_path / ".nbagent").exists() or store.list_sessions(tmp_path / ".nbagent" / "untitled") == []
    for line in ("%agent --compact summarise please", "%agent --compact --new", "%agent --compact --restore"):
        assert "--compact changes a session and takes no request" in usage_error(shell, line)
    assert fake.requests == []


def test_compact_with_nothing_to_compact_says_so_and_calls_no_model(
    shell: InteractiveShell, fake: FakeAnthropic, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / ".nbagent" / "untitled"
    folder.mkdir(parents=True)
    with nbagent.Session.open(folder / "one.jsonl") as session:
        session.append(ev.USER_MSG, content="a request nobody answered")
    assert run(shell, "%agent --compact --session one").success
    assert "nothing to compact in one" in capsys.readouterr().out and fake.requests == []


def test_the_help_says_which_path_compact_takes(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    run(shell, "%agent?")
    assert "--compact" in capsys.readouterr().out
    doc = " ".join(str(magics_for(shell).agent.__doc__).split())
    assert "the local path" in doc and "logged as a compaction event" in doc


# Thinking, end to end: verbatim in the log, never shown or exported --------------------------------
def test_a_secret_in_thinking_stays_in_the_log_and_out_of_every_view(
    shell: InteractiveShell, fake: FakeAnthropic, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    thought = f"The user's key is {SECRET}; do not repeat it."
    fake.script(Reply([{"type": "thinking", "thinking": thought, "signature": signature(thought)}, {"type": "text", "text": "Done."}]))
    run(shell, "%config Agent.thinking = 2048")
    assert run(shell, "%agent look at the environment").success
    live = capsys.readouterr().out
    log = the_log(tmp_path)
    assert SECRET in log.read_text()  # the API needs the block back as it was: the log keeps it verbatim
    events = list(nbagent.read_events(log))
    outputs = [live, html.transcript_html(events), export.to_markdown(events), nbformat.writes(export.to_notebook(events))]
    timeline = Timeline(events, source=str(log))
    outputs += [*timeline.static(), *(timeline.transcript_at(i) for i in range(len(events)))]
    outputs += [cli("show", str(log), "--full")[1], cli("tail", str(log))[1]]
    for output in outputs:
        assert SECRET not in output and "ZZZZZZZZZZ" not in output
    assert "[thinking (" in live and "Thinking <span" in outputs[1]
    assert "not exported" in outputs[2] and "do not repeat it" not in outputs[2]  # exports leave thinking out (docs/security.md)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


# %agent --drop-thinking --------------------------------------------------------------------------------
def test_drop_thinking_through_the_real_magic_gets_a_refused_session_going(
    shell: InteractiveShell, fake: FakeAnthropic, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refusal = error(400, message="messages.1.content.0: a block the API refuses")
    fake.script(text("first answer"), refusal)  # it names no compaction: not a fallback, the run ends with it (context.refuses_compaction)
    assert run(shell, "%agent hello").success
    refused = usage_error(shell, "%agent and then?")  # the 400: shown with the ways out, not "run %agent again to retry"
    assert "does not send the same request again" in refused and "drop-thinking" in refused and "to retry" not in refused
    sent = len(fake.requests)
    assert "does not send the same request again" in usage_error(shell, "%agent --resume " + the_log(tmp_path).stem)
    assert len(fake.requests) == sent  # nothing sent
    assert run(shell, "%agent --drop-thinking").success
    assert "left out of its later requests" in capsys.readouterr().out
    fake.script(text("going again"))
    assert run(shell, "%agent --resume " + the_log(tmp_path).stem).success
    assert len(fake.requests) == sent + 1
    for line in ("%agent --drop-thinking now please", "%agent --drop-thinking --new", "%agent --compact --drop-thinking"):
        assert "--drop-thinking" in usage_error(shell, line)
