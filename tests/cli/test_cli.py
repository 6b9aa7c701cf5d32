"""The `nbagent` command on logs from real runs: in-process through main(argv) and, for a few, as a real subprocess."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import pytest

import nbagent
from nbagent.cli.main import main
from nbagent.stores import snapshot
from tests.history.test_history import _rechecksum, flip_bit, line_offsets, notebook_session, record_session
from tests.support.fake_anthropic import FakeAnthropic

NBAGENT = Path(sys.executable).with_name("nbagent")


def cli(*argv: str) -> tuple[int, str, str]:
    """Run the command in-process; return exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def workspace(tmp_path: Path, client: anthropic.Anthropic, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with one notebook and one recorded session beside it; the current folder."""
    notebook_session(tmp_path, client, fake)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def the_log(folder: Path) -> Path:
    (log,) = (folder / ".nbagent" / "analysis.ipynb").glob("*.jsonl")
    return log


def test_sessions_lists_the_notebook_sessions(workspace: Path) -> None:
    code, out, err = cli("sessions")
    assert code == 0 and not err
    header, row = out.splitlines()
    assert header.split() == ["SESSION", "TITLE", "CREATED", "LAST", "ACTIVITY", "TURNS", "TOKENS", "COST", "CONTEXT", "TRUST", "STATUS"]
    assert row.startswith(the_log(workspace).stem) and "Compute 1+1 and read data.csv" in row
    assert row.split()[-1] == "complete" and " 2 " in row
    assert cli("sessions", "analysis.ipynb")[1] == out


def test_sessions_json(workspace: Path) -> None:
    code, out, _ = cli("sessions", str(workspace), "--json")
    (entry,) = json.loads(out)
    assert code == 0
    assert entry["name"] == the_log(workspace).stem and entry["turns"] == 2 and entry["status"] == "complete"
    assert entry["notebook"] == str(workspace / "analysis.ipynb") and entry["tokens"] == sum(entry["usage"].values())
    assert entry["created"] <= entry["last_ts"]


def test_sessions_grep(workspace: Path) -> None:
    code, out, _ = cli("sessions", "--grep", "revenue")
    assert code == 0 and "tool result: contents of data.csv: Quarterly Revenue was 42" in out
    assert "reply:" in out
    assert cli("sessions", "--grep", "zebra")[1] == "no session mentions 'zebra'\n"
    found = json.loads(cli("sessions", "--grep", "GOODBYE", "--json")[1])
    assert [m["where"] for m in found] == ["reply"]


def test_show_prints_the_transcript(workspace: Path) -> None:
    code, out, _ = cli("show", the_log(workspace).stem)
    assert code == 0
    assert "Compute 1+1 and read data.csv" in out and '-> read_file({"path": "data.csv"})' in out
    assert "Goodbye!" in out and "ran python · 1 plot · 1 line of output" in out


def test_tail_since_n(workspace: Path) -> None:
    log = the_log(workspace)
    total = len(list(nbagent.read_events(log)))
    code, out, _ = cli("tail", str(log), "--since", str(total - 2), "--json")
    assert code == 0 and [json.loads(line)["seq"] for line in out.splitlines()] == [total - 1, total]
    assert "Goodbye!" in cli("tail", str(log))[1]


def test_export_both_formats(workspace: Path) -> None:
    import nbformat

    code, out, _ = cli("export", "analysis.ipynb", "-o", "out.ipynb")
    assert code == 0 and out == "wrote out.ipynb\n"
    nbformat.validate(nbformat.read("out.ipynb", as_version=4))
    assert cli("export", "analysis.ipynb", "-o", "notes.txt", "--format", "md")[0] == 0
    assert "## Request" in Path("notes.txt").read_text()
    code, _, err = cli("export", "analysis.ipynb", "-o", "out.pdf")
    assert code == 2 and "use a .ipynb or .md file name" in err


def test_verify_and_snapshot(workspace: Path) -> None:
    log = the_log(workspace)
    snapshot.path_for(log).unlink()
    code, out, _ = cli("verify", str(log))
    assert code == 0 and ": OK:" in out and "no snapshot" in out
    code, out, err = cli("snapshot", log.stem)
    assert code == 0 and out.startswith("wrote ") and snapshot.path_for(log).name in out and not err
    report = json.loads(cli("verify", str(log), "--json")[1])
    assert report["ok"] and "snapshot agrees" in report["notes"][0]


def test_compact_is_the_deprecated_old_name_of_snapshot(workspace: Path) -> None:
    """``nbagent compact`` still writes the snapshot, and says once on stderr that it is deprecated."""
    log = the_log(workspace)
    snapshot.path_for(log).unlink()
    code, out, err = cli("compact", log.stem)
    assert code == 0 and out.startswith("wrote ") and snapshot.path_for(log).name in out
    assert err == "nbagent compact: deprecated, use `nbagent snapshot` (it does the same)\n"
    assert snapshot.path_for(log).is_file() and json.loads(cli("verify", str(log), "--json")[1])["ok"]
    assert out == cli("snapshot", log.stem)[1]  # the same effect, the same report


def test_verify_a_damaged_log_exits_1_with_a_precise_report(workspace: Path) -> None:
    log = the_log(workspace)
    offset = line_offsets(log)[6]
    flip_bit(log, offset + 25)
    code, out, err = cli("verify", str(log))
    assert code == 1 and not err
    assert f"PROBLEM {log}, line 7 (byte offset {offset}): damaged line: checksum mismatch" in out


@pytest.mark.parametrize("command", ["show", "tail", "export"])
def test_reading_a_damaged_log_is_a_one_line_error(workspace: Path, command: str) -> None:
    log = the_log(workspace)
    flip_bit(log, line_offsets(log)[4] + 25)
    extra = ["-o", "x.ipynb"] if command == "export" else []
    code, _, err = cli(command, str(log), *extra)
    assert code == 1 and err.count("\n") == 1
    assert f"{log}, line 5 (byte offset {line_offsets(log)[4]}) is damaged" in err and "nbagent verify" in err


def test_a_newer_schema_is_refused(workspace: Path) -> None:
    log = the_log(workspace)
    log.write_bytes(log.read_bytes().replace(b'{"v":%d,' % nbagent.record.events.SCHEMA_VERSION, b'{"v":9,'))
    _rechecksum(log)
    for command in ("show", "tail", "verify"):
        code, out, err = cli(command, str(log))
        assert code == 1, command
        assert "schema v9" in (err or out) or "v9 is newer" in (err or out), command
    assert "newer nbagent" in cli("sessions")[1]


def test_usage_errors_are_one_line_with_exit_2(workspace: Path) -> None:
    for argv, expected in [
        (("show", "nope"), "unknown session 'nope'"),
        (("show", "missing.jsonl"), "missing.jsonl: no such file"),
        (("sessions", "missing-folder"), "missing-folder: no such file or folder"),
        (("tail", "analysis.ipynb", "--since", "-3"), "--since must be 0 or more"),
        (("verify", "."), "is a folder"),
        (("sessions", "--grep", ""), "--grep needs some text"),
    ]:
        code, _, err = cli(*argv)
        assert code == 2, argv
        assert expected in err and err.count("\n") == 1, err


def test_snapshot_refuses_a_log_another_process_writes(workspace: Path) -> None:
    with nbagent.Session.open(the_log(workspace)):
        code, _, err = cli("snapshot", str(the_log(workspace)))
    assert code == 1 and "open for writing in another process" in err


# As real processes ---------------------------------------------------------------------------
def run_cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(NBAGENT), *argv], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_console_script_errors_have_no_traceback(workspace: Path) -> None:
    done = run_cli("show", "no-such-session", cwd=workspace)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("nbagent show: unknown session 'no-such-session'") and done.stderr.count("\n") == 1


def test_bad_arguments_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invalid choice: 'frobnicate'" in err and "--help" in err


def test_an_unreadable_log(workspace: Path) -> None:
    unreadable = workspace / "locked.jsonl"
    shutil.copy(the_log(workspace), unreadable)
    if os.geteuid() == 0:  # root reads any file: use garbage at the start instead
        unreadable.write_bytes(b"\x00garbage\n" + the_log(workspace).read_bytes())
        code, out, _ = cli("verify", str(unreadable))
        assert code == 1 and f"{unreadable}, line 1 (byte offset 0): damaged line" in out
    else:
        unreadable.chmod(0)
        code, _, err = cli("verify", str(unreadable))
        assert code == 2 and "permission denied" in err


def test_python_dash_m_and_verify_exit_code(workspace: Path) -> None:
    log = the_log(workspace)
    flip_bit(log, line_offsets(log)[2] + 12)
    done = subprocess.run([sys.executable, "-m", "nbagent", "verify", str(log)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "line 3" in done.stdout and "Traceback" not in done.stderr


WRITER = """
import sys, time
import nbagent
with nbagent.Session.open(sys.argv[1]) as session:
    for i in range(int(sys.argv[2])):
        session.append("note", text=f"live note {i}")
        time.sleep(0.05)
    time.sleep(0.5)
"""


@pytest.mark.slow
def test_tail_follow_prints_events_another_process_writes(tmp_path: Path, client: anthropic.Anthropic, fake: FakeAnthropic) -> None:
    log = record_session(tmp_path / "live.jsonl", client, fake)
    start = len(list(nbagent.read_events(log)))
    tail = subprocess.Popen(
        [str(NBAGENT), "tail", "-f", str(log), "--since", str(start - 1), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        writer = subprocess.run([sys.executable, "-c", WRITER, str(log), "20"], timeout=120, capture_output=True, text=True)
        assert writer.returncode == 0, writer.stderr
        seen: list[dict[str, object]] = []
        deadline = time.monotonic() + 60
        assert tail.stdout is not None
        while len(seen) < 21 and time.monotonic() < deadline:
            line = tail.stdout.readline()
            if line:
                seen.append(json.loads(line))
    finally:
        tail.kill()
        tail.wait()
    assert [e["seq"] for e in seen] == list(range(start, start + 21))
    assert [e.get("text") for e in seen[1:]] == [f"live note {i}" for i in range(20)]


def test_show_mentions_a_torn_tail(workspace: Path) -> None:
    log = the_log(workspace)
    size = log.stat().st_size
    torn = b'{"v":1,"seq":99,"ts":1.0,"type":"delta","te'
    with open(log, "ab") as handle:
        handle.write(torn)
    code, out, _ = cli("show", str(log))
    assert code == 0 and "Goodbye!" in out
    assert f"a torn last line of {len(torn)} bytes at byte offset {size}: the last line has no newline" in out


def test_the_log_readers_load_neither_the_sdk_nor_nbformat() -> None:
    """``nbagent sessions/show/tail/export x.md`` start in a fraction of a second: the SDK's types take over a second to
    import, and nbformat's jsonschema format checkers as long; only a model call and a .ipynb export need them."""
    heavy = "('anthropic', 'nbformat', 'jsonschema', 'IPython', 'ipywidgets')"
    code = f"import sys, nbagent.cli.main, nbagent.cli.export; print(sorted(m for m in sys.modules if m.split('.')[0] in {heavy}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
