"""What a fork costs beside what it copies: ``python -m benchmarks.forks [--turns N] [--runs N]``.

A session of ``--turns`` finished turns (a request and a reply each) is forked at its last turn, and
copied with ``nbagent copy``, side by side in one process, in turns (wall time, median of ``--runs``).
Both write every line of the parent and open the result once (a full read and fold, and a snapshot);
a fork also folds the parent once to find where a fork may start (``lineage.survey``) and writes its own
``session_start``.  Also: ``trust.check_log`` of the fork against the parent's (a fork's lines are
checked under its own id only where a line fails under the current one: no per-line cost).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from nbagent.agent.fork import fork
from nbagent.agent.session import Session
from nbagent.history.copy import copy
from nbagent.record import events as ev
from nbagent.record import signing, trust


def parent(folder: Path, turns: int) -> Path:
    """A closed session of ``turns`` turns (about 600 bytes each)."""
    path = folder / "parent.jsonl"
    with Session.open(path, fsync="never", snapshot_every=0) as session:
        for n in range(turns):
            session.append(ev.USER_MSG, content=f"request {n} " + "x" * 200)
            session.append(ev.ASSISTANT_MSG, content=[{"type": "text", "text": f"answer {n} " + "y" * 300}], stop_reason="end_turn")
    return path


def timed(action: Callable[..., object], *args: object, **kwargs: object) -> float:
    start = time.perf_counter()
    action(*args, **kwargs)
    return time.perf_counter() - start


def fork_and_open(source: Path, name: str) -> None:
    """A fork of ``source``, opened once as ``nbagent fork`` does (a full read and fold, and a snapshot)."""
    made = fork(source, name=name, store_spec="files")
    with Session.open(made.path, store="files"):
        pass


def measure(turns: int, runs: int) -> dict[str, float]:
    """Median seconds of a fork, a copy and the two check_logs, over ``runs`` rounds."""
    found: dict[str, list[float]] = {"fork": [], "copy": [], "check parent": [], "check fork": []}
    with tempfile.TemporaryDirectory() as folder:
        os.environ.setdefault("NBAGENT_DATA_DIR", str(Path(folder) / "data"))
        source = parent(Path(folder), turns)
        user = signing.signer()
        for run in range(runs):
            found["fork"].append(timed(fork_and_open, source, f"fork-{run}"))
            found["copy"].append(timed(copy, str(source), str(Path(folder) / f"copy-{run}.jsonl")))
        forked, data = (Path(folder) / "fork-0.jsonl").read_bytes(), source.read_bytes()
        for _ in range(runs):
            found["check parent"].append(timed(trust.check_log, data, user=user))
            found["check fork"].append(timed(trust.check_log, forked, user=user))
    return {name: statistics.median(times) for name, times in found.items()}


def main(argv: list[str] | None = None) -> int:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    result = measure(args.turns, args.runs)
    print(f"| {args.turns:,} turns | median ms |\n|---|---:|")
    for name, seconds in result.items():
        print(f"| {name} | {seconds * 1000:,.1f} |")
    print(
        f"\nfork / copy: {result['fork'] / result['copy']:.2f}; check_log fork / parent: {result['check fork'] / result['check parent']:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
