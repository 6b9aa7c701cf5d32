"""Smoke test of the benchmarks on tiny sizes: they run, the naive loop and the engine agree; no timing is checked."""

from __future__ import annotations

from pathlib import Path

import pytest

import nbagent
from benchmarks import cases, context_report, naive, rerun, run, sdk_calls
from benchmarks import long_sessions as ls
from benchmarks.scripted import DELTAS_PER_REPLY


def test_naive_loop_and_engine_write_the_same_transcript(tmp_path: Path) -> None:
    results = cases.bench_loops(requests=3, naive_requests=2, workdir=tmp_path)
    by_name = {r.name.split(",")[0].split(" ")[0]: r for r in results}
    assert [r.turns for r in results] == [4, 6, 6, 6]
    assert results[3].events > results[2].events  # a line per delta vs coalesced, same transcript (bench_loops checks)
    naive_messages = naive.rebuild_messages(naive.load_events(tmp_path / "naive.jsonl"))
    with nbagent.Session.open(tmp_path / "engine-turn.jsonl") as session:
        engine_messages = session.messages
    with nbagent.Session.open(tmp_path / "engine-per-delta.jsonl") as session:
        events = list(session.events())
    assert len(naive_messages) == 8 and engine_messages[:8] == naive_messages
    assert len(engine_messages) == 12 and engine_messages[-1]["role"] == "assistant"
    # With a line per delta every reply was streamed: its text deltas add up to the recorded message.
    streamed, replies = [], []
    for event in events:
        if event["type"] == "model_call":
            streamed.append("")
        elif event["type"] == "delta" and "text" in event:
            streamed[-1] += event["text"]
        elif event["type"] == "assistant_msg":
            replies.append(event["content"][0]["text"])
    assert streamed == replies and len(replies) == 6
    assert by_name["naive"].events == 2 * (1 + 2 * DELTAS_PER_REPLY + 1 + 1 + 1)


@pytest.mark.slow  # every benchmark, on tiny sizes
@pytest.mark.kernel  # the notebook re-run starts real kernels (three: record, re-run, the print() notebook)
def test_the_whole_report_runs_on_tiny_sizes(tmp_path: Path) -> None:
    tiny = run.Sizes(
        requests=2,
        naive_requests=1,
        appends=30,
        append_rounds=1,
        resume_sizes=(40, 120),
        resume_repeats=1,
        memory_size=0,
        rerun_sizes=(2,),
        rerun_repeats=1,
        context=TINY_CONTEXT,
    )
    report = run.run(tiny, tmp_path, progress=False)
    for heading in ("Harness overhead", "Append throughput", "Resume time", "Re-running a notebook", "Targets"):
        assert heading in report
    assert "sqlite3" in report and "need sizes 10k and 100k" in report and "need 50 and 300 cells" in report
    before, long_sessions = report.split("### 6. ")
    assert before.count("**PASS**") + before.count("**FAIL**") == 1  # only the overhead target applies here
    assert "Long-session targets" in long_sessions


def test_the_notebooks_of_the_rerun_benchmark() -> None:
    agent, plain = rerun.notebook(3, agent=True), rerun.notebook(3, agent=False)
    assert [c.source for c in agent.cells] == ["%load_ext nbagent"] + [f"%agent {rerun.request(n)}" for n in (1, 2, 3)]
    assert [c.source for c in plain.cells] == ["%load_ext nbagent"] + [f"print({rerun.request(n)!r})" for n in (1, 2, 3)]
    paired = [1.5, 1.1, 1.3]  # each round's ratio: the median is taken over rounds, not of the two medians
    result = rerun.RerunResult(
        10, agent=3.0, plain=2.0, agent_cells=[0.2] + [0.01] * 9, plain_cells=[0.002] * 10, record=1.0, ratios=paired
    )
    assert result.ratio == 1.3 and result.per_cell == pytest.approx(0.1)
    assert result.per_cell_busy == pytest.approx(0.008) and result.window(True) == 0.2 and result.window(False) == 0.01


def test_resume_memory_is_measured_in_a_child_process(tmp_path: Path) -> None:
    with_snapshot, _ = cases.build_logs([60], tmp_path)[60]
    memory = cases.resume_memory(with_snapshot, True)
    assert memory["peak_rss_mib"] > memory["rss_growth_mib"] >= 0
    assert memory["traced_peak_mib"] > 0


# The long-session sections (benchmarks/context_report.py) -------------------------------------------------------
TINY_CONTEXT = context_report.Sizes(
    requests=30, resume_sizes=(40, 120), every=30, resume_repeats=1, snapshot_repeats=1, sdk_requests=1, overhead_requests=3
)


def test_request_sizes_with_and_without_compaction(tmp_path: Path) -> None:
    server, local, none = ls.bench_request_sizes(30, tmp_path)  # raises if the computed requests disagree with the sent ones
    assert [len(k.tokens) for k in (server, local, none)] == [30, 30, 30]
    assert server.compactions >= 1 and server.summary_requests == 0
    assert local.compactions >= 1 and local.summary_requests >= local.compactions
    assert none.compactions == 0 and none.tokens == sorted(none.tokens)  # without compaction a request only grows
    assert max(server.tokens) <= ls.WINDOW and max(local.tokens) <= ls.WINDOW < max(none.tokens)
    assert none.tokens[0] == server.tokens[0] == local.tokens[0] and none.body_bytes[-1] > 2 * server.body_bytes[-1]


def test_resume_logs_compact_every_so_many_events(tmp_path: Path) -> None:
    logs = ls.build_logs([200], 40, tmp_path)
    kinds = [e["type"] for e in nbagent.read_events(logs[(200, True)][1])]
    assert len(kinds) == 200 and set(kinds) == {"session_start", "user_msg", "assistant_msg", "tool_result"}
    compacted = [
        e for e in nbagent.read_events(logs[(200, True)][1]) if e["type"] == "assistant_msg" and e["content"][0]["type"] == "compaction"
    ]
    assert len(compacted) == 5 and 0 < 200 - compacted[-1]["seq"] <= 40  # at events ~20, 60, ..., 180
    resumes = {(r.compacted, r.snapshot): r for r in ls.bench_resume(logs, 1)}
    assert resumes[(True, True)].message_count == resumes[(True, False)].message_count < 40  # the live part only
    assert resumes[(False, True)].message_count == resumes[(False, False)].message_count == 199
    assert resumes[(True, True)].body_bytes < resumes[(False, True)].body_bytes / 4
    snaps = {s.compacted: s for s in ls.bench_snapshots(logs, 1, tmp_path)}
    assert snaps[True].messages < 40 and snaps[True].file_bytes < snaps[False].file_bytes / 4


def test_every_way_of_calling_the_sdk_builds_the_same_reply() -> None:
    ways = sdk_calls.bench_ways(1)  # raises if a way builds another reply than the helper
    assert len(ways) == 2 * 7 and all(len(w.wall) == len(w.cpu) == 1 for w in ways)
    own = sdk_calls.via_own
    with sdk_calls.fake_process(5, 2) as client:
        params = {"model": sdk_calls.MODEL, "max_tokens": 100, "messages": sdk_calls.history(1)}
        assert own(client.messages, params) == sdk_calls.via_helper(client.messages, params)


def test_p95_is_the_nearest_rank() -> None:
    assert ls.p95([float(n) for n in range(1, 101)]) == 95 and ls.p95([3.0]) == 3 and ls.p95([1.0, 2.0]) == 2


@pytest.mark.slow  # every long-session measurement, on tiny sizes (child processes, the fake API)
def test_the_long_session_sections_run_on_tiny_sizes(tmp_path: Path) -> None:
    report = "\n".join(context_report.section(TINY_CONTEXT, tmp_path))
    for heading in ("### 6. Request size", "### 7. Resume", "### 8. Snapshot", "### 9. One streamed request", "### 10. nbagent's overhead"):
        assert heading in report
    assert "needs both sizes" in report  # the growth target needs 10k and 100k events
    assert report.count("**PASS**") + report.count("**FAIL**") == 2 + 2 + 2  # windows, resume vs encode per size, snapshot


@pytest.mark.slow  # a round of every command as its own process
def test_the_startup_benchmark_runs_every_command() -> None:
    from benchmarks import startup

    result = startup.measure(runs=1)
    assert len(result) == 8 and all(seconds > 0 for seconds in result.values())
    table = startup.report(result)
    assert "| nbagent export .ipynb |" in table and "× the interpreter's floor" in table
