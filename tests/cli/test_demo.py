"""`nbagent demo`, the main job, as a real process: offline (labelled, not Claude) and with "Claude" (the fake server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import nbagent
from nbagent import history
from nbagent.cli.demo import prepare, where
from tests.support.fake_anthropic import FakeAnthropic, error, text, tool_use

NBAGENT = Path(sys.executable).with_name("nbagent")


def run_demo(folder: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(NBAGENT), "demo", "--folder", str(folder), *extra], capture_output=True, text=True, timeout=300, env=env, cwd=folder.parent
    )


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}


def the_log(folder: Path) -> Path:
    (log,) = (folder / ".nbagent" / "demo.ipynb").glob("*.jsonl")
    return log


def check_what_is_on_disk(folder: Path) -> list[dict[str, object]]:
    log = the_log(folder)
    assert history.verify(log).ok
    summary = history.summarize(log)
    assert summary.complete and summary.turns == 2
    events = list(nbagent.read_events(log))
    # The keyed write ran twice (once before the SIGKILL, once on resume, with the same key) ...
    started = [e for e in events if e["type"] == "tool_started" and e["name"] == "append_note"]
    assert [e["attempt"] for e in started] == [1, 2] and started[0]["idempotency_key"] == started[1]["idempotency_key"]
    # ... and its side effect happened exactly once.
    notes = (folder / "notes.txt").read_text().splitlines()
    assert len(notes) == 1 and notes[0].endswith(f"[key {started[0]['idempotency_key']}]")
    assert (folder / "demo-transcript.ipynb").exists() and (folder / "demo-transcript.md").exists()
    return events


@pytest.mark.slow  # python -m nbagent demo in a subprocess
def test_demo_offline_is_labelled_and_leaves_a_sound_log(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    done = run_demo(folder, clean_env())
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    # where it writes, said first (before the first turn, and before anything was written: see the test below)
    said = f"Writing to {folder.absolute()}{os.sep} (a new folder; --folder DIR writes elsewhere)"
    assert said in out.split("\n== 1.")[0], out[:600]
    assert "it is NOT Claude" in out and "Claude (" not in out
    assert "[offline demo model, not Claude]" in out  # the streamed replies carry the label too
    assert "child process exit: killed by SIGKILL" in out
    assert "Resume: 1 model call(s), 1 tool run(s)" in out
    assert "Resume of the finished session: 0 model calls, 0 tool runs" in out
    assert "verify:   OK" in out and "1 line(s) from 1 keyed call(s) of this session: each took effect exactly once" in out
    events = check_what_is_on_disk(folder)
    assert {e["model"] for e in events if e["type"] == "assistant_msg"} == {nbagent.DemoModel.name}
    assert "not Claude" in (folder / "demo-transcript.md").read_text()

    # --fresh clears the previous demo's sessions and notes (and only the demo's files).
    (folder / "mine.txt").write_text("kept")
    prepare(folder, fresh=True)
    assert not (folder / ".nbagent").exists() and not (folder / "notes.txt").exists()
    assert (folder / "mine.txt").read_text() == "kept" and (folder / "data.csv").exists()


def test_demo_says_where_it_writes_and_what_kind_of_folder_that_is(tmp_path: Path) -> None:
    """Issue 35 item 6: the demo names the folder it writes to (absolute) before it writes anything there."""
    new = tmp_path / "demo"
    assert where(new).startswith(f"Writing to {new.absolute()}{os.sep} (a new folder; --folder DIR writes elsewhere)")
    assert not new.exists()  # saying it writes nothing
    new.mkdir()
    assert "(an empty folder;" in where(new)
    prepare(new, fresh=False)
    assert "(an earlier demo's folder: this run adds a session;" in where(new)


def test_demo_refuses_a_folder_it_did_not_make(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from nbagent.cli.main import main

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "thesis.tex").write_text("precious")
    assert main(["demo", "--folder", str(folder), "--fresh"]) == 2
    said = capsys.readouterr()
    assert said.err.count("\n") == 1 and "already holds files that the demo did not make" in said.err
    assert said.out == ""  # refused before it said it would write there
    assert [p.name for p in folder.iterdir()] == ["thesis.tex"]


@pytest.mark.slow
def test_demo_talks_to_claude_when_a_key_is_set(tmp_path: Path, fake: FakeAnthropic) -> None:
    fake.script(
        tool_use("list_files", {"path": "."}, text="Let me look."),
        text("There are two files: README.txt and data.csv."),
        tool_use("append_note", {"text": "Claude was here."}),  # the child process: killed inside this tool
        text("Done: the note is in notes.txt."),  # the resume
    )
    env = clean_env() | {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake.base_url}
    folder = tmp_path / "demo"
    done = run_demo(folder, env, "--model", "claude-test")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Model: Claude (claude-test) through the Anthropic API" in done.stdout
    assert "offline" not in done.stdout.split("\n", 2)[1]
    assert "There are two files" in done.stdout and "Done: the note is in notes.txt." in done.stdout
    assert len(fake.requests) == 4  # the finished session's replay asked nothing
    assert {r.body["model"] for r in fake.requests} == {"claude-test"}
    assert all("test-key" in (r.headers.get("x-api-key", "") + r.headers.get("authorization", "")) for r in fake.requests)
    tools = [t["name"] for t in fake.requests[0].body["tools"]]
    assert tools == ["list_files", "append_note"]
    assert "idempotency_key" not in json.dumps(fake.requests[0].body["tools"])
    check_what_is_on_disk(folder)
    assert (folder / "notes.txt").read_text().startswith("Claude was here. [key nbagent-")


@pytest.mark.parametrize("argv", [["demo", "--help"], ["--help"]])
def test_help_mentions_the_demo(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from nbagent.cli.main import main

    assert main(argv) == 0
    assert "demo" in capsys.readouterr().out


@pytest.mark.slow
def test_demo_with_a_rejected_key_is_a_one_line_error(tmp_path: Path, fake: FakeAnthropic) -> None:
    fake.script(error(401))
    env = clean_env() | {"ANTHROPIC_API_KEY": "wrong-key", "ANTHROPIC_BASE_URL": fake.base_url}
    done = run_demo(tmp_path / "demo", env)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "authentication_error" in done.stderr and "Check ANTHROPIC_API_KEY" in done.stderr


@pytest.mark.slow
def test_demo_keeps_its_session_in_a_file_when_nbagent_store_names_a_database(tmp_path: Path) -> None:
    """NBAGENT_STORE set (to a database nobody answers on): the demo still writes, crashes, resumes and reads a log file."""
    env = clean_env() | {"NBAGENT_STORE": "postgresql://nobody@127.0.0.1:9/no_such_db?connect_timeout=2"}
    folder = tmp_path / "demo"
    done = run_demo(folder, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "NBAGENT_STORE is set, but the demo keeps its session in the log file above" in done.stdout
    assert "child process exit: killed by SIGKILL" in done.stdout and "Resume: 1 model call(s), 1 tool run(s)" in done.stdout
    assert "verify:   OK" in done.stdout and "cannot connect" not in done.stdout + done.stderr
    check_what_is_on_disk(folder)  # the crash child, the resume and the replay all used the same file
