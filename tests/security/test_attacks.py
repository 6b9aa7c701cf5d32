"""Regression tests of the security fixes, each through a real entry point, with the hostile logs written by a second user's process.

The attacker is tests/support/attacker_proc.py run as a subprocess with its own NBAGENT_DATA_DIR
(so its own secret); the victim is this process (tests/conftest.py gives it a throwaway
NBAGENT_DATA_DIR, which the CLI subprocesses inherit).  Every victim file lives under tmp_path.

* splice: a forged first line in front of the victim's signed lines, or the victim's lines moved;
* hostile files: snapshots and logs that try to make a reader allocate, recurse or traceback;
* Run All on a session another user recorded;
* linked log folders, and the folder's mode;
* the not-a-log rule (``nbagent.stores.writer.start_problem``) and everything that must obey it.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import anthropic
import pytest
from IPython.core.error import UsageError

import nbagent
from nbagent import history
from nbagent.errors import LogError, UntrustedLogError
from nbagent.record import events as ev
from nbagent.record import line_codec
from reliability.attacker import dangling_call, python_turn, write_log
from tests.security.test_security import Effects
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use

pytestmark = pytest.mark.slow  # a campaign: almost every test starts the attacker's process, many the CLI's (15 s in all)

ROOT = Path(__file__).resolve().parents[2]
ATTACKER = Path(__file__).parents[1] / "support" / "attacker_proc.py"
HOSTILE = (
    "snap-huge-len",
    "snap-negative-len",
    "snap-long-header",
    "snap-deep-json",
    "deep-json-first",
    "deep-json-middle",
    "line-17mib",
    "header-2mib",
    "passwd",
)
GOOD = ("good-alpha", "good-beta", "good-gamma")
PASSWD = b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n"


# Processes ---------------------------------------------------------------------------------------
def _env(data_dir: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    if data_dir is not None:
        env["NBAGENT_DATA_DIR"] = str(data_dir)
    return env


def attacker(tmp_path: Path, *args: Any) -> None:
    """Run the second user's process (its own data folder, hence its own secret)."""
    data = tmp_path / "attacker-data"
    assert str(data) != os.environ["NBAGENT_DATA_DIR"]
    done = subprocess.run([sys.executable, str(ATTACKER), *map(str, args)], env=_env(data), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def nbagent_cli(*args: Any, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The ``nbagent`` command as this user (the inherited NBAGENT_DATA_DIR)."""
    return subprocess.run(
        [sys.executable, "-m", "nbagent", *map(str, args)],
        env=_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` and its bytes (None for folders and links)."""
    found: dict[str, bytes | None] = {}
    for path in sorted(folder.rglob("*")):
        found[str(path.relative_to(folder))] = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    return found


# The victim's own logs -----------------------------------------------------------------------------


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """The victim's own log (mine/s.jsonl) whose last line asks for a write_note call with no result."""
    path = tmp_path / "mine" / "s.jsonl"
    dangling_call(path)
    with nbagent.Session.open(path) as session:
        assert session.trusted and session.call_trusted("toolu_1")
    return path


# 1. The splice attack --------------------------------------------------------------------------------
@pytest.mark.parametrize("first", ["unsigned", "signed"])
def test_a_forged_first_line_before_the_victims_signed_lines_runs_nothing(
    tmp_path: Path, victim: Path, fake: FakeAnthropic, client: anthropic.Anthropic, first: str
) -> None:
    crafted = {mode: tmp_path / mode / "s.jsonl" for mode in ("auto", "callable")}
    for path in crafted.values():
        attacker(tmp_path, "splice", victim, path, first)
        theirs, mine = path.read_bytes().splitlines(), victim.read_bytes().splitlines()
        assert theirs[1:] == mine[1:] and theirs[0] != mine[0]  # the signed assistant_msg is there byte for byte

    # The library does not continue a session this user did not write (issue 20 #11): nothing asked, sent or run.
    effects = Effects()
    with nbagent.Session.open(crafted["auto"]) as session:
        assert session.id == next(nbagent.read_events(victim))["session_id"] and "toolu_1" in session.state.open_calls
        assert not session.trusted and not session.call_trusted("toolu_1")
        with pytest.raises(UntrustedLogError, match="nbagent trust"):
            effects.resume(session, client, "auto")
    with nbagent.Session.open(crafted["callable"]) as session:
        assert not session.call_trusted("toolu_1")
        with pytest.raises(UntrustedLogError, match="nbagent trust"):
            effects.resume(session, client, effects.policy(True))
    assert effects.runs == [] and effects.questions == [] and fake.requests == []


def test_nbagent_trust_makes_a_spliced_log_run_its_call_exactly_once(
    tmp_path: Path, victim: Path, fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    crafted = tmp_path / "crafted" / "s.jsonl"
    attacker(tmp_path, "splice", victim, crafted, "unsigned")
    with nbagent.Session.open(crafted) as session:
        assert not session.call_trusted("toolu_1")
    done = nbagent_cli("trust", crafted, "--yes", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "write_note" in done.stdout and '"hello"' in done.stdout  # it showed what trusting lets run
    effects = Effects()
    fake.script(text("written"))
    with nbagent.Session.open(crafted) as session:
        assert session.trusted and session.call_trusted("toolu_1")
        effects.resume(session, client, "auto")
        effects.resume(session, client, "auto")
    with nbagent.Session.open(crafted) as session:
        effects.resume(session, client, "auto")
    assert effects.runs == [{"text": "hello"}] and effects.questions == [] and len(fake.requests) == 1


def test_signed_lines_moved_within_the_victims_own_logs_are_not_trusted(
    tmp_path: Path, victim: Path, fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    # Lines 2 and 3 swapped, their seqs fixed to the new places (and crcs made valid): the assistant_msg
    # line with the call is untouched, but it no longer follows the lines it was signed after.
    reordered = tmp_path / "reordered" / "s.jsonl"
    attacker(tmp_path, "resequence", victim, reordered, 2, 3)
    # The victim's other session B (user_msg, model_call), with session A's signed call line appended (seq 4 fits).
    other = tmp_path / "mine" / "b.jsonl"
    write_log(other, [[ev.USER_MSG, {"content": "please write the note"}], [ev.MODEL_CALL, {"model": "claude-test", "attempt": 1}]])
    grafted = tmp_path / "grafted" / "b.jsonl"
    attacker(tmp_path, "graft", victim, other, grafted, 4)
    effects = Effects()
    for path in (reordered, grafted):
        with nbagent.Session.open(path) as session:
            assert "toolu_1" in session.state.open_calls
            assert not session.trusted and not session.call_trusted("toolu_1"), path
            with pytest.raises(UntrustedLogError):
                effects.resume(session, client, "auto")
    assert effects.runs == [] and fake.requests == []


@pytest.mark.parametrize("first", ["unsigned", "signed"])
def test_restore_does_not_rerun_python_code_from_a_spliced_log(shell, fake: FakeAnthropic, tmp_path: Path, capsys, first: str) -> None:
    source = tmp_path / "mine" / "nb.jsonl"
    write_log(source, python_turn("make the spliced variable", "spliced_var = 42"))
    folder = tmp_path / ".nbagent" / "untitled"
    attacker(tmp_path, "splice", source, folder / "crafted.jsonl", first)
    before = (folder / "crafted.jsonl").read_bytes()
    assert shell.run_cell("%agent --resume crafted --restore").success
    out = capsys.readouterr().out
    assert "spliced_var" not in shell.user_ns
    assert "WARNING" in out and "did not re-run 1 recorded python call" in out
    assert fake.requests == [] and (folder / "crafted.jsonl").read_bytes() == before
    # The control: the victim's own copy of the same log does restore.
    (folder / "own.jsonl").write_bytes(source.read_bytes())
    assert shell.run_cell("%agent --resume own --restore").success
    assert shell.user_ns.get("spliced_var") == 42 and fake.requests == []
    shell.user_ns.pop("spliced_var", None)


def test_restore_does_not_rerun_a_tampered_line_under_the_victims_own_snapshot(shell, fake: FakeAnthropic, tmp_path: Path) -> None:
    own = tmp_path / ".nbagent" / "untitled" / "own.jsonl"
    write_log(own, python_turn("make the variable", "tampered_var = 1111"))
    assert own.with_name("own.jsonl.snapshot").exists()  # the victim's own signed snapshot, written at close
    attacker(tmp_path, "tamper", own, 3, "tampered_var = 1111", "tampered_var = 6666")
    assert shell.run_cell("%agent --resume own --restore").success
    ran = shell.user_ns.pop("tampered_var", None)
    assert ran != 6666 and fake.requests == []


# 2. Hostile files are bounded -------------------------------------------------------------------------
@pytest.fixture
def hostile_folder(tmp_path: Path) -> Path:
    """``.nbagent/untitled`` under tmp_path with three good sessions of this user's and the attacker's hostile files."""
    folder = tmp_path / ".nbagent" / "untitled"
    for name in GOOD:
        write_log(
            folder / f"{name}.jsonl",
            [
                [ev.USER_MSG, {"content": f"request of {name}"}],
                [ev.ASSISTANT_MSG, {"stop_reason": "end_turn", "usage": {}, "content": [{"type": "text", "text": "ok"}]}],
            ],
        )
    attacker(tmp_path, "hostile", folder)
    assert sorted(p.name[: -len(".jsonl")] for p in folder.glob("*.jsonl")) == sorted(GOOD + HOSTILE)
    return folder


def rows_naming(output: str, name: str) -> list[str]:
    return [line for line in output.splitlines() if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", line)]


def test_nbagent_sessions_lists_good_sessions_beside_hostile_files(tmp_path: Path, hostile_folder: Path) -> None:
    done = nbagent_cli("sessions", tmp_path, cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr and done.stderr == "", done.stderr
    for name in GOOD:
        [row] = rows_naming(done.stdout, name)
        assert "complete" in row and "yours" in row, row
    for name in HOSTILE:
        assert len(rows_naming(done.stdout, name)) == 1, (name, done.stdout)
    [row] = rows_naming(done.stdout, "passwd")
    assert "not an nbagent log" in row

    done = nbagent_cli("sessions", "--json", tmp_path, cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    listed = json.loads(done.stdout)
    assert sorted(s["name"] for s in listed) == sorted(GOOD + HOSTILE)

    summaries = {s.name: s for s in history.list_summaries(tmp_path)}
    assert sorted(summaries) == sorted(GOOD + HOSTILE)
    for name in GOOD:
        assert summaries[name].complete and summaries[name].trust == "yours" and summaries[name].turns == 1
    for name in ("deep-json-first", "header-2mib", "passwd"):  # a first line over 64 KiB is no header
        assert summaries[name].pending.startswith("not an nbagent log"), summaries[name]
    for name in ("deep-json-middle", "line-17mib"):
        assert summaries[name].pending.startswith("damaged log"), summaries[name]
    for name in ("snap-huge-len", "snap-negative-len", "snap-long-header", "snap-deep-json"):
        assert summaries[name].complete and summaries[name].trust == "other key" and summaries[name].source == "log"


def test_agent_sessions_magic_lists_good_sessions_beside_hostile_files(shell, hostile_folder: Path, capsys) -> None:
    capsys.readouterr()
    result = shell.run_cell("%agent_sessions")
    assert result.success, result.error_in_exec
    out = capsys.readouterr().out
    for name in GOOD + HOSTILE:
        assert len(rows_naming(out, name)) == 1, (name, out)
    for name in GOOD:
        [row] = rows_naming(out, name)
        assert "complete" in row and "yours" in row


def test_a_file_that_is_not_a_log_is_not_listed_as_yours(tmp_path: Path, hostile_folder: Path) -> None:
    summary = history.summarize(hostile_folder / "header-2mib.jsonl")
    assert summary.pending.startswith("not an nbagent log")
    assert summary.trust != "yours"


def test_opening_a_hostile_file_raises_only_log_errors_and_changes_no_log_byte(hostile_folder: Path) -> None:
    for name in HOSTILE:
        path = hostile_folder / f"{name}.jsonl"
        before = path.read_bytes()
        tracemalloc.start()
        try:
            with nbagent.Session.open(path, snapshot_every=0) as session:
                _ = session.state, session.trust, session.messages
                note = session.snapshot_note
        except LogError:
            note = None
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        assert path.read_bytes() == before, name
        if name.startswith("snap-"):
            assert note is not None and note.startswith("snapshot ignored"), (name, note)
        else:
            assert note is None, (name, note)  # none of these is a log that can be opened
        if name == "snap-huge-len":
            assert "lengths" in note and peak < 64 << 20, (note, peak)  # ignored, never allocated


def test_a_huge_tool_result_is_clipped_to_the_line_limit_and_reopens(
    tmp_path: Path, fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    @nbagent.tool(effect="read")
    def big() -> str:
        """Return a lot of text."""
        return "x" * (17 << 20)

    path = tmp_path / "big.jsonl"
    fake.script(tool_use("big", {}), text("that was big"))
    with nbagent.Session.open(path, fsync="never") as session:
        assert (
            nbagent.run(session, "make something big", tools=[big], client=client, model="claude-test", approval="auto") == "that was big"
        )
    [result] = [e for e in nbagent.read_events(path) if e["type"] == ev.TOOL_RESULT]
    assert isinstance(result["content"], str) and result["content"].startswith("xxx")
    assert "more characters not logged" in result["content"][-200:] and len(result["content"]) < 17 << 20
    assert max(map(len, path.read_bytes().splitlines())) < ev.MAX_LINE
    with nbagent.Session.open(path) as session:
        assert session.state.frontier == "done" and session.trusted and session.state.final_text == "that was big"


# 3. Run All on a session another user recorded ----------------------------------------------------------
FOREIGN_A = "FOREIGN REQUEST ALPHA: make a"
FOREIGN_B = "FOREIGN REQUEST BRAVO: make b"


def foreign_notebook_log(tmp_path: Path) -> Path:
    """A finished and an unfinished turn (a dangling python call) recorded by another user's kernel, in the notebook's folder."""
    path = tmp_path / ".nbagent" / "untitled" / "foreign.jsonl"
    spec = python_turn(FOREIGN_A, "foreign_a = 1", tool_use_id="toolu_a") + python_turn(
        FOREIGN_B, "foreign_b_runs = globals().get('foreign_b_runs', 0) + 1", tool_use_id="toolu_b", finished=False
    )
    attacker(tmp_path, "session", path, json.dumps(spec))
    return path


def test_run_all_on_a_foreign_session_rerenders_and_continues_nothing(shell, fake: FakeAnthropic, tmp_path: Path, capsys) -> None:
    path = foreign_notebook_log(tmp_path)
    folder = path.parent
    assert shell.run_cell('%config Agent.approval = "auto"').success
    for request in (FOREIGN_A, FOREIGN_B):
        result = shell.run_cell(f"%agent {request}")
        assert result.success, result.error_in_exec
    out = capsys.readouterr().out
    assert fake.requests == []
    assert "foreign_a" not in shell.user_ns and "foreign_b_runs" not in shell.user_ns
    assert "not continued" in out and f"nbagent trust {path}" in out
    assert "done: " + FOREIGN_A in out  # the recorded turn was shown again

    result = shell.run_cell("%agent --resume foreign more please")
    assert isinstance(result.error_in_exec, UsageError) and "nbagent trust" in str(result.error_in_exec)
    assert fake.requests == [] and "foreign_b_runs" not in shell.user_ns

    fake.script(text("a fresh answer"))
    result = shell.run_cell("%agent something nobody recorded")
    assert result.success, result.error_in_exec
    logs = sorted(folder.glob("*.jsonl"))
    assert len(logs) == 2 and path in logs
    [mine] = [p for p in logs if p != path]
    assert history.trust_of(mine).verdict == "yours"
    assert len(fake.requests) == 1
    sent = json.dumps(fake.requests[0].body)
    assert "something nobody recorded" in sent
    for foreign_text in ("FOREIGN REQUEST", "foreign_a", "foreign_b_runs"):
        assert foreign_text not in sent
    assert "foreign_b_runs" not in shell.user_ns


def test_after_nbagent_trust_run_all_continues_the_unfinished_turn_exactly_once(shell, fake: FakeAnthropic, tmp_path: Path, capsys) -> None:
    path = foreign_notebook_log(tmp_path)

    def run_all() -> None:
        assert shell.run_cell('%config Agent.approval = "auto"').success
        for request in (FOREIGN_A, FOREIGN_B):
            result = shell.run_cell(f"%agent {request}")
            assert result.success, result.error_in_exec

    def restart() -> None:  # a new kernel's magics: sessions closed (locks released), no turn claimed yet
        assert shell.run_cell("%unload_ext nbagent").success
        assert shell.run_cell("%load_ext nbagent").success

    run_all()
    assert fake.requests == [] and "foreign_b_runs" not in shell.user_ns
    restart()
    done = nbagent_cli("trust", path, "--yes", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "python" in done.stdout and "foreign_b_runs" in done.stdout
    fake.script(text("continued"))
    run_all()
    assert shell.user_ns.get("foreign_b_runs") == 1 and "foreign_a" not in shell.user_ns
    assert len(fake.requests) == 1
    restart()
    run_all()
    assert shell.user_ns.get("foreign_b_runs") == 1 and len(fake.requests) == 1
    assert len(list(path.parent.glob("*.jsonl"))) == 1
    shell.user_ns.pop("foreign_b_runs", None)


# 4. Linked log folders, and the folder's mode ------------------------------------------------------------
@pytest.mark.parametrize("linked", [".nbagent/untitled", ".nbagent"])
def test_a_linked_log_folder_is_refused(shell, fake: FakeAnthropic, tmp_path: Path, linked: str) -> None:
    victim = tmp_path / "victim"
    (victim / "untitled").mkdir(parents=True)
    (victim / "precious.txt").write_text("precious")
    (victim / "untitled" / "precious.txt").write_text("precious too")
    before = tree(victim)
    link = tmp_path / linked
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim)
    fake.script(text("hello"))
    for cell in ("%agent hello", "%agent --new hello", "%agent --session s1 hello"):
        result = shell.run_cell(cell)
        assert isinstance(result.error_in_exec, UsageError) and "symbolic link" in str(result.error_in_exec), (cell, result.error_in_exec)
    assert fake.requests == []
    assert tree(victim) == before


def test_a_fresh_agent_makes_an_owner_only_log_folder(shell, fake: FakeAnthropic, tmp_path: Path) -> None:
    fake.script(text("hello"))
    old = os.umask(0o022)
    try:
        result = shell.run_cell("%agent hello")
    finally:
        os.umask(old)
    assert result.success, result.error_in_exec
    assert stat.S_IMODE((tmp_path / ".nbagent").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / ".nbagent" / "untitled").stat().st_mode) == 0o700


# 5. The not-a-log rule ---------------------------------------------------------------------------------
def _line(event: dict[str, Any]) -> bytes:
    return line_codec.encode(event)[0]


HEADER = _line({"v": ev.SCHEMA_VERSION, "seq": 1, "ts": 1.0, "type": ev.SESSION_START, "session_id": "a" * 32, "meta": {}})
NOTE2 = _line({"v": ev.SCHEMA_VERSION, "seq": 2, "ts": 2.0, "type": ev.NOTE, "text": "hi"})


@pytest.mark.parametrize(
    ("head", "is_log"),
    [
        (b"", True),
        (HEADER, True),
        (HEADER + NOTE2, True),
        (HEADER[:10], True),  # torn inside its first line
        (HEADER[:-1], True),
        (b"root:x:0:0:root:/root:/bin/bash\n", False),
        (b"root:x:0:0:root:/root:/bin/bash", False),
        (bytes(range(256)) * 4, False),
        (b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 100, False),
        (b'{"v":2,"seq":1,"ts":' + b"1" * (2 << 20), False),  # a "header" longer than a header can be
        (HEADER[:20] + b"garbage\n" + NOTE2, True),  # a damaged first line, valid lines after: a damaged log
        (NOTE2, False),  # a valid record, but not a session_start
        (_line({"v": 2, "seq": 2, "ts": 1.0, "type": ev.SESSION_START, "session_id": "a", "meta": {}}), False),
        (b"{}\n", False),
        (b"\n", False),
    ],
    ids=[
        "empty",
        "header",
        "two-lines",
        "torn-10",
        "torn-no-newline",
        "passwd",
        "passwd-no-newline",
        "binary",
        "elf",
        "long-first-line",
        "damaged-first-line",
        "note-first",
        "start-not-seq-1",
        "empty-object",
        "blank-line",
    ],
)
def test_start_problem_is_the_not_a_log_rule(head: bytes, is_log: bool) -> None:
    from nbagent.record.log_reader import start_problem

    assert (start_problem(head) == "") is is_log, start_problem(head)


@pytest.mark.parametrize("content", [PASSWD, bytes(range(256)) * 16, PASSWD.rstrip(b"\n")], ids=["passwd", "binary", "passwd-torn"])
def test_session_open_refuses_a_file_that_is_not_a_log(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "data" / "notes.jsonl"
    path.parent.mkdir()
    path.write_bytes(content)
    with pytest.raises(LogError) as raised:
        nbagent.Session.open(path)
    assert type(raised.value).__name__ == "NotALogError"
    assert path.read_bytes() == content and sorted(p.name for p in path.parent.iterdir()) == ["notes.jsonl"]


@pytest.mark.parametrize("name", ["notes.jsonl", "passwd"])
def test_agent_resume_refuses_a_path_outside_the_folder(shell, fake: FakeAnthropic, tmp_path: Path, name: str) -> None:
    outside = tmp_path / "outside" / name
    outside.parent.mkdir()
    outside.write_bytes(PASSWD)
    fake.script(text("hi"))
    result = shell.run_cell(f"%agent --resume {outside} hi")
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    assert fake.requests == []
    assert outside.read_bytes() == PASSWD and sorted(p.name for p in outside.parent.iterdir()) == [name]


@pytest.mark.parametrize("command", ["show", "export", "verify", "snapshot", "trust"])
def test_cli_refuses_a_file_that_is_not_a_log(tmp_path: Path, command: str) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    path = folder / "notes.jsonl"
    path.write_bytes(PASSWD)
    extra = {"export": ["-o", folder / "out.md"], "trust": ["--yes"]}.get(command, [])
    done = nbagent_cli(command, path, *extra, cwd=folder)
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1 and "not an nbagent session log" in done.stderr, done.stderr
    assert path.read_bytes() == PASSWD and sorted(p.name for p in folder.iterdir()) == ["notes.jsonl"]
