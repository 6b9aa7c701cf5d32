"""Session history on logs written by real runs (real SDK, fake server): summaries, listing, grep, verify, compact."""

from __future__ import annotations

import os
import shutil
import zlib
from pathlib import Path
from typing import Any

import anthropic
import pytest

import nbagent
from nbagent import history
from nbagent.stores import folders as store
from nbagent.stores import snapshot
from tests.support import snapshots
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use, tool_uses

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


@nbagent.tool(name="python")
def python_tool(code: str) -> list[dict[str, Any]]:
    """Run Python code (test stand-in: echoes the code and returns a tiny image)."""
    return [
        {"type": "text", "text": f"ran {len(code)} characters\n"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
    ]


@nbagent.tool(effect="read")
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}: Quarterly Revenue was 42"


def record_session(path: Path, client: anthropic.Anthropic, fake: FakeAnthropic) -> Path:
    """A two-turn session written by nbagent.run: a python call, a read call, replies."""
    fake.script(
        tool_use("python", {"code": "print(1 + 1)"}, text="Let me compute."),
        tool_use("read_file", {"path": "data.csv"}),
        text("The answer is 2 and the revenue is 42."),
        text("Goodbye!"),
    )
    with nbagent.Session.open(path) as session:
        nbagent.run(session, "Compute 1+1 and read data.csv", tools=[python_tool, read_file], client=client, model="claude-test")
        nbagent.run(session, "Thanks, that's all", tools=[python_tool, read_file], client=client, model="claude-test")
    return path


def notebook_session(folder: Path, client: anthropic.Anthropic, fake: FakeAnthropic, notebook: str = "analysis.ipynb") -> Path:
    """A recorded session in the log folder of ``folder/notebook``."""
    (folder / notebook).parent.mkdir(parents=True, exist_ok=True)
    (folder / notebook).write_text("{}")
    log = store.log_path(store.log_dir_for(folder / notebook), store.new_name())
    return record_session(log, client, fake)


@pytest.fixture
def recorded(log_path: Path, client: anthropic.Anthropic, fake: FakeAnthropic) -> Path:
    return record_session(log_path, client, fake)


def flip_bit(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x04
    path.write_bytes(bytes(data))


def line_offsets(path: Path) -> list[int]:
    data = path.read_bytes()
    starts, pos = [], 0
    while pos < len(data):
        starts.append(pos)
        pos = data.index(b"\n", pos) + 1
    return starts


# Summaries -----------------------------------------------------------------------------------------
def test_summary_from_snapshot_equals_full_read(recorded: Path) -> None:
    from_snapshot = history.summarize(recorded)
    assert from_snapshot.source == "snapshot"
    snapshot.path_for(recorded).unlink()
    full = history.summarize(recorded)
    assert full.source == "log"
    assert {**history.json_row(from_snapshot), "source": ""} == {**history.json_row(full), "source": ""}
    assert full.title == "Compute 1+1 and read data.csv"
    assert full.turns == 2 and full.complete and full.status == "complete"
    assert full.tokens > 0 and full.events == len(list(nbagent.read_events(recorded)))


def test_summary_folds_the_tail_after_a_stale_snapshot(recorded: Path) -> None:
    with nbagent.Session.open(recorded, snapshot_every=0) as session:  # closes without a new snapshot
        session.append("user_msg", content="one more question")
    summary = history.summarize(recorded)
    assert summary.source == "snapshot"
    assert summary.turns == 3 and not summary.complete and summary.status == "unfinished: model reply"
    snapshot.path_for(recorded).unlink()
    assert history.json_row(history.summarize(recorded)) | {"source": ""} == history.json_row(summary) | {"source": ""}


def test_a_snapshot_that_disagrees_with_the_log_is_not_trusted(recorded: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    shutil.copy(recorded, other)
    with nbagent.Session.open(other, snapshot_every=0) as session:
        session.append("user_msg", content="diverged")
    # Give `recorded` the snapshot of a different history whose last line is elsewhere.
    with nbagent.Session.open(other) as session:
        session.snapshot()
    shutil.copy(snapshot.path_for(other), snapshot.path_for(recorded))
    summary = history.summarize(recorded)
    assert summary.source == "log" and summary.turns == 2 and summary.complete


def test_pending_work_is_described(tmp_path: Path, client: anthropic.Anthropic, fake: FakeAnthropic) -> None:
    path = tmp_path / "open.jsonl"
    fake.script(tool_uses([("read_file", {"path": "a"}), ("read_file", {"path": "b"})]))
    with nbagent.Session.open(path) as session:
        session.append("user_msg", content="read two files")
        loop = nbagent.Loop(session, tools=[read_file], model=nbagent.AnthropicModel("claude-test", client=client))
        loop._call_model()  # one model step: the reply asks for two tools, none has run
    assert history.summarize(path).status == "unfinished: 2 tool calls"
    with nbagent.Session.open(path) as session:
        session.append("interrupted", during="tools", open_calls=list(session.state.open_calls))
    assert history.summarize(path).status == "unfinished: interrupted (2 tool calls pending)"


def test_damaged_and_newer_logs_are_listed_with_a_reason(recorded: Path, tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    damaged = folder / "damaged.jsonl"
    shutil.copy(recorded, damaged)
    flip_bit(damaged, line_offsets(damaged)[3] + 20)
    newer = folder / "newer.jsonl"
    newer.write_bytes(recorded.read_bytes().replace(b'{"v":%d,' % nbagent.record.events.SCHEMA_VERSION, b'{"v":9,', 1))
    _rechecksum(newer)
    summaries = {s.name: s for s in history.list_summaries(folder)}
    assert summaries["damaged"].status.startswith("unfinished: damaged log (line 4, byte")
    assert "newer nbagent" in summaries["newer"].status


def _rechecksum(path: Path) -> None:
    """Recompute every line's checksum (to forge a well-formed log from another schema)."""
    lines = []
    for line in path.read_bytes().splitlines():
        body = line[: line.rindex(b',"crc":')] + b"}"
        lines.append(body[:-1] + b',"crc":"%08x"}' % zlib.crc32(body))
    path.write_bytes(b"\n".join(lines) + b"\n")


# Finding and resolving ---------------------------------------------------------------------------
def test_find_logs_from_notebook_folder_and_log(tmp_path: Path, client: anthropic.Anthropic, fake: FakeAnthropic) -> None:
    first = notebook_session(tmp_path, client, fake, "a.ipynb")
    second = notebook_session(tmp_path, client, fake, "sub/b.ipynb")
    (tmp_path / ".venv" / ".nbagent" / "x.ipynb").mkdir(parents=True)  # hidden folders are not searched
    assert history.find_logs(tmp_path / "a.ipynb") == [first]
    assert sorted(history.find_logs(tmp_path)) == sorted([first, second])
    assert history.find_logs(first.parent) == [first]
    assert history.find_logs(second) == [second]
    assert history.notebook_of(second) == str(tmp_path / "sub" / "b.ipynb")
    with pytest.raises(history.HistoryError, match="no such file"):
        history.find_logs(tmp_path / "missing")
    # A configured log root (Agent.log_dir) holds one folder per notebook.
    configured = tmp_path / "logs"
    moved = store.log_dir_for(tmp_path / "c.ipynb", base=configured)
    moved.mkdir(parents=True)
    shutil.copy(first, moved / first.name)
    assert history.find_logs(configured) == [moved / first.name]


def test_resolve_by_path_name_prefix_id_and_notebook(tmp_path: Path, client: anthropic.Anthropic, fake: FakeAnthropic) -> None:
    log = notebook_session(tmp_path, client, fake)
    name = history.session_name(log)
    session_id = history.summarize(log).session_id
    assert history.resolve(str(log)) == log
    assert history.resolve(name, root=tmp_path) == log
    assert history.resolve(name[:10], root=tmp_path) == log
    assert history.resolve(session_id[:8], root=tmp_path) == log
    assert history.resolve(str(tmp_path / "analysis.ipynb")) == log
    with pytest.raises(history.HistoryError, match="unknown session 'nope'"):
        history.resolve("nope", root=tmp_path)
    with pytest.raises(history.HistoryError, match="no such file"):
        history.resolve("missing/x.jsonl", root=tmp_path)
    with pytest.raises(history.HistoryError, match="is a folder"):
        history.resolve(str(tmp_path), root=tmp_path)


def test_an_ambiguous_prefix_names_the_candidates(tmp_path: Path, recorded: Path) -> None:
    folder = tmp_path / ".nbagent" / "n.ipynb"
    folder.mkdir(parents=True)
    for name in ("run-1", "run-2"):
        shutil.copy(recorded, folder / f"{name}.jsonl")
    with pytest.raises(history.HistoryError, match="ambiguous.*run-1.jsonl.*run-2.jsonl"):
        history.resolve("run-", root=tmp_path)


# Grep ----------------------------------------------------------------------------------------------
def test_grep_searches_requests_replies_and_tool_io(recorded: Path) -> None:
    def where(needle: str) -> set[str]:
        return {m.where for m in history.grep([recorded], needle)}

    assert where("READ DATA.CSV") == {"request"}
    assert where("answer is 2") == {"reply"}
    assert where("print(1 + 1)") == {"tool call"}
    assert where("quarterly revenue") == {"tool result"}
    assert where("not anywhere") == set()
    match = next(history.grep([recorded], "revenue was"))
    assert "Revenue was 42" in match.snippet and match.name == "session"


# Verify ----------------------------------------------------------------------------------------------
def _unchanged(paths: list[Path]) -> dict[Path, tuple[bytes, int]]:
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in paths if p.exists()}


def test_a_clean_log_verifies(recorded: Path) -> None:
    report = history.verify(recorded)
    assert report.ok, report.problems
    assert report.events == len(list(nbagent.read_events(recorded)))
    assert any("snapshot agrees" in note for note in report.notes)


def test_a_bit_flip_mid_file_is_reported_precisely_and_nothing_changes(recorded: Path) -> None:
    starts = line_offsets(recorded)
    flip_bit(recorded, starts[5] + 30)
    before = _unchanged([recorded, snapshot.path_for(recorded)])
    report = history.verify(recorded)
    assert not report.ok
    problem = report.problems[0]
    assert (problem.file, problem.line, problem.offset) == (str(recorded), 6, starts[5])
    assert "damaged line: checksum mismatch" in problem.message
    assert _unchanged([recorded, snapshot.path_for(recorded)]) == before
    assert not list(recorded.parent.glob("*.torn-*"))


def test_a_torn_tail_is_reported(recorded: Path) -> None:
    size, lines = recorded.stat().st_size, len(line_offsets(recorded))
    with open(recorded, "ab") as handle:
        handle.write(b'{"v":1,"seq":999,"ts":1.0,"type":"del')
    report = history.verify(recorded)
    assert [(p.line, p.offset) for p in report.problems] == [(lines + 1, size)]
    assert "torn tail" in report.problems[0].message
    assert any("snapshot agrees" in note for note in report.notes)


def test_a_newer_schema_and_a_sequence_gap_are_reported(recorded: Path, tmp_path: Path) -> None:
    newer = tmp_path / "newer.jsonl"
    newer.write_bytes(recorded.read_bytes().replace(b'{"v":%d,"seq":3,' % nbagent.record.events.SCHEMA_VERSION, b'{"v":7,"seq":3,'))
    _rechecksum(newer)
    report = history.verify(newer)
    assert len(report.problems) == 1 and report.problems[0].line == 3
    assert "log schema v7, newer than this nbagent reads" in report.problems[0].message

    gap = tmp_path / "gap.jsonl"
    lines = recorded.read_bytes().splitlines(keepends=True)
    gap.write_bytes(b"".join(lines[:4] + lines[5:]))
    report = history.verify(gap)
    assert report.problems[0].line == 5 and "expected seq 5 but found seq 6" in report.problems[0].message


def test_snapshot_disagreement_is_reported(recorded: Path) -> None:
    target = snapshot.path_for(recorded)
    # A well-formed snapshot whose state is not the fold of the log.
    snapshots.rewrite_state(recorded, lambda state: state.update(turns=99))
    report = history.verify(recorded)
    assert [p.file for p in report.problems] == [str(target)]
    assert "differs from a full fold" in report.problems[0].message and "turns" in report.problems[0].message

    target.write_bytes(target.read_bytes().replace(b'"turns":99', b'"turns":98'))
    problem = history.verify(recorded).problems[0]
    assert "checksum" in problem.message and problem.line == 2

    header, state_line, messages_line = snapshots.parts(recorded)
    snapshots.put(recorded, header, state_line.replace(b'"turns":98', b'"turns":2'), messages_line)
    snapshots.flip_messages_byte(recorded, b"Let me")
    problem = history.verify(recorded).problems[0]
    assert "messages line fails its checksum" in problem.message and problem.line == 3


def test_compact_writes_a_snapshot_that_verifies(recorded: Path) -> None:
    snapshot.path_for(recorded).unlink()
    assert history.summarize(recorded).source == "log"
    written, seq = history.compact(recorded)
    assert written == snapshot.path_for(recorded) and seq == history.summarize(recorded).events
    assert history.summarize(recorded).source == "snapshot"
    assert history.verify(recorded).ok


# Listing many ------------------------------------------------------------------------------------
def test_listing_many_sessions_reads_only_snapshot_headers(recorded: Path, tmp_path: Path) -> None:
    folder = tmp_path / ".nbagent" / "many.ipynb"
    folder.mkdir(parents=True)
    for i in range(200):
        shutil.copy(recorded, folder / f"s{i:04d}.jsonl")
        shutil.copy(snapshot.path_for(recorded), folder / f"s{i:04d}.jsonl.snapshot")
    summaries = history.list_summaries(tmp_path / ".nbagent")
    assert len(summaries) == 200
    assert {s.source for s in summaries} == {"snapshot"}
    assert {s.status for s in summaries} == {"complete"}


def test_printer_shows_a_readable_transcript(recorded: Path) -> None:
    import io

    out = io.StringIO()
    history.transcript(history.read_all(recorded), out, result_limit=15)
    shown = out.getvalue()
    for expected in (
        "request:\n    Compute 1+1 and read data.csv",
        '-> python({"code": "print(1 + 1)"})',
        "running python (write)",
        "read data.csv\n    contents of dat",
        "contents of dat",
        "more characters]",
        "The answer is 2",
        "Goodbye!",
    ):
        assert expected in shown, expected
    assert os.linesep == "\n"


def test_verify_refuses_a_line_over_the_limit(recorded: Path, tmp_path: Path) -> None:
    from nbagent.record import events as ev

    huge = tmp_path / "huge.jsonl"
    huge.write_bytes(recorded.read_bytes() + b'{"v":2,"seq":99,' + b"x" * (ev.MAX_LINE + 1) + b"\n")
    report = history.verify(huge)
    assert not report.ok and "MiB limit" in report.problems[0].message
