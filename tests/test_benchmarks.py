"""Smoke test of the benchmarks on tiny sizes: they run, the naive loop and the engine agree; no timing is checked."""

from __future__ import annotations

from pathlib import Path

import pytest

import nbagent
from benchmarks import cases, naive, rerun, run
from benchmarks.scripted import DELTAS_PER_REPLY


def test_naive_loop_and_engine_write_the_same_transcript(tmp_path: Path) -> None:
    results = cases.bench_loops(requests=3, naive_requests=2, workdir=tmp_path)
    by_name = {r.name.split(",")[0].split(" ")[0]: r for r in results}
    assert [r.turns for r in results] == [4, 6, 6, 6]
    assert results[3].events > results[2].events  # a line per delta vs coalesced, same transcript (bench_loops checks)
    naive_messages = naive.rebuild_messages(naive.load_events(tmp_path / "naive.jsonl"))
    with nbagent.Session.open(tmp_path / "engine-turn.jsonl") as session:
        engine_messages = session.messages
        events = list(session.events())
    assert len(naive_messages) == 8 and engine_messages[:8] == naive_messages
    assert len(engine_messages) == 12 and engine_messages[-1]["role"] == "assistant"
    # Every reply was streamed: its text deltas add up to the recorded message (however the engine chunks them).
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
    )
    report = run.run(tiny, tmp_path, progress=False)
    for heading in ("Harness overhead", "Append throughput", "Resume time", "Re-running a notebook", "Targets"):
        assert heading in report
    assert "sqlite3" in report and "need sizes 10k and 100k" in report and "need 50 and 300 cells" in report
    assert report.count("**PASS**") + report.count("**FAIL**") == 1  # only the overhead target applies here


def test_the_notebooks_of_the_rerun_benchmark() -> None:
    agent, plain = rerun.notebook(3, agent=True), rerun.notebook(3, agent=False)
    assert [c.source for c in agent.cells] == ["%load_ext nbagent"] + [f"%agent {rerun.request(n)}" for n in (1, 2, 3)]
    assert [c.source for c in plain.cells] == ["%load_ext nbagent"] + [f"print({rerun.request(n)!r})" for n in (1, 2, 3)]
    result = rerun.RerunResult(10, agent=3.0, plain=2.0, agent_cells=[0.2] + [0.01] * 9, plain_cells=[0.002] * 10, record=1.0)
    assert result.ratio == 1.5 and result.per_cell == pytest.approx(0.1)
    assert result.per_cell_busy == pytest.approx(0.008) and result.window(True) == 0.2 and result.window(False) == 0.01


def test_resume_memory_is_measured_in_a_child_process(tmp_path: Path) -> None:
    with_snapshot, _ = cases.build_logs([60], tmp_path)[60]
    memory = cases.resume_memory(with_snapshot, True)
    assert memory["peak_rss_mib"] > memory["rss_growth_mib"] >= 0
    assert memory["traced_peak_mib"] > 0
