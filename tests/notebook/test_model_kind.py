"""The demo model and Claude never share a session (nbagent/notebook/model_kind.py): the rules as tables, then the magic."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.error import UsageError

import nbagent
from nbagent.notebook.model_kind import DEMO_NAME, Candidate, kind_of, pick, refusal, rule, switch_line, wanted
from nbagent.record import events as ev
from nbagent.stores import folders as store
from tests.support.fake_anthropic import text


@pytest.mark.parametrize(
    "models, kind",
    [
        ([], ""),
        (["", ""], ""),
        ([DEMO_NAME], "demo"),
        ([DEMO_NAME, DEMO_NAME], "demo"),
        (["claude-sonnet-4-5"], "real"),
        (["bedrock:claude-sonnet-4-5"], "real"),
        ([DEMO_NAME, "claude-sonnet-4-5"], "real"),  # a session an older nbagent let both write: Claude's
    ],
)
def test_kind_of(models: list[str], kind: str) -> None:
    assert kind_of(models) == kind


@pytest.mark.parametrize(
    "recorded, asked, named, verdict",
    [
        ("", "demo", False, "continue"),  # nothing answered yet: either may start it
        ("", "real", True, "continue"),
        ("demo", "demo", False, "continue"),
        ("real", "real", True, "continue"),
        ("demo", "real", False, "switch"),
        ("real", "demo", False, "switch"),
        ("demo", "real", True, "refuse"),  # --session, --resume, --fork, --rewind named it
        ("real", "demo", True, "refuse"),
    ],
)
def test_rule(recorded: str, asked: str, named: bool, verdict: str) -> None:
    assert rule(recorded, asked, named=named) == verdict  # type: ignore[arg-type]


def test_pick_takes_the_latest_of_the_kind_asked_that_is_yours() -> None:
    a, b, c, d = (Path(f"/n/{x}.jsonl") for x in "abcd")
    listed = [Candidate(a, "real", True), Candidate(b, "demo", True), Candidate(c, "real", False), Candidate(d, "demo", True)]
    assert pick(listed, "real", leaving=d) == a  # c is another user's: never continued
    assert pick(listed, "demo", leaving=d) == b  # not the session it leaves
    assert pick(listed, "demo", leaving=a) == d
    assert pick([Candidate(a, "", True)], "real", leaving=b) is None  # nothing answered in it: a new session instead
    assert pick([], "demo", leaving=a) is None


def test_the_words() -> None:
    assert wanted(True) == "demo" and wanted(False) == "real"
    line = switch_line("s1", "s2", "real", new=True)
    assert line.startswith("nbagent: s1 was written by the offline demo model, so this request to Claude goes to a new session, s2")
    assert "`%config Agent.demo = True` goes back to s1" in line
    back = switch_line("s2", "s1", "demo", new=False)
    assert "s2 was written by Claude" in back and "goes to s1, the latest session the offline demo model wrote" in back
    assert "`%config Agent.demo = False` goes back to s2" in back
    said = refusal("s1", "demo", "real")
    assert said.startswith("s1 was written by the offline demo model, so Claude does not continue it") and "%agent --new" in said


def sessions(tmp_path: Path) -> list[Path]:
    return [s.path for s in store.list_sessions(tmp_path / ".nbagent" / "untitled")]


def replies(path: Path) -> list[str]:
    return [str(e.get("model")) for e in nbagent.read_events(path) if e["type"] == ev.ASSISTANT_MSG]


def test_a_change_between_the_demo_and_claude_goes_to_another_session(shell, fake, tmp_path, capsys) -> None:
    shell.run_cell("%config Agent.demo = True\n%config Agent.tools = ['list_files']")
    assert shell.run_cell("%agent what is here").success
    [demo] = sessions(tmp_path)
    capsys.readouterr()

    shell.run_cell("%config Agent.demo = False")
    fake.script(text("Claude's answer"))
    assert shell.run_cell("%agent and now, Claude?").success
    out = capsys.readouterr().out
    [request] = fake.requests
    assert "offline demo model" not in str(request.body["messages"])  # Claude never reads the demo's replies
    assert [m["role"] for m in request.body["messages"]] == ["user"]
    real = next(p for p in sessions(tmp_path) if p != demo)
    assert (
        f"nbagent: {demo.stem} was written by the offline demo model, so this request to Claude goes to a new session, {real.stem}" in out
    )
    assert set(replies(demo)) == {DEMO_NAME} and replies(real) and DEMO_NAME not in replies(real)

    # Back to the demo: its own session goes on (Claude's is left as it is); then back to Claude's.
    shell.run_cell("%config Agent.demo = True")
    assert shell.run_cell("%agent list them again").success
    out = capsys.readouterr().out
    assert f"goes to {demo.stem}, the latest session the offline demo model wrote" in out
    assert len(sessions(tmp_path)) == 2 and set(replies(demo)) == {DEMO_NAME} and DEMO_NAME not in replies(real)
    shell.run_cell("%config Agent.demo = False")
    fake.script(text("again"))
    assert shell.run_cell("%agent once more").success
    assert f"goes to {real.stem}, the latest session Claude wrote" in capsys.readouterr().out
    assert [m["role"] for m in fake.requests[-1].body["messages"]] == ["user", "assistant", "user"]  # Claude's own turn only


def test_a_named_session_of_the_other_kind_is_refused(shell, fake, tmp_path) -> None:
    shell.run_cell("%config Agent.demo = True\n%config Agent.tools = ['list_files']")
    assert shell.run_cell("%agent what is here").success
    [demo] = sessions(tmp_path)
    shell.run_cell("%config Agent.demo = False")
    result = shell.run_cell(f"%agent --session {demo.stem} go on, Claude")
    assert isinstance(result.error_in_exec, UsageError)
    assert str(result.error_in_exec).startswith(f"{demo.stem} was written by the offline demo model, so Claude does not continue it")
    assert fake.requests == [] and sessions(tmp_path) == [demo]
