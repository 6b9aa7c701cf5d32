"""benchmarks/forks.py runs on a tiny size (its numbers are in the report, never asserted)."""

from __future__ import annotations

from benchmarks.forks import main, measure


def test_the_fork_benchmark_runs_on_a_tiny_size(capsys: object) -> None:
    result = measure(3, 1)
    assert set(result) == {"fork", "copy", "check parent", "check fork"} and all(v > 0 for v in result.values())
    assert main(["--turns", "2", "--runs", "1"]) == 0
