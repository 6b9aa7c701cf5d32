"""The engine's CPU per request, one commit against another, side by side: ``python -m benchmarks.rules_overhead [--base REV] [--new REV]``.

Issue 21 added rules to every request (the stop-reason rule in the fold, the refused-request check, the
plain-endpoint history, one retry budget). Their cost is measured where they run: ``nbagent.run`` on a
session whose model is an in-process scripted object (no HTTP, no SDK), fsync="never", so what is left
is the engine's own work per request: the fold, the request, the log lines. Each round runs the same
script in a child process for each commit (each a ``git worktree``), in turns.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from .cases import REPO

_CHILD = r"""
import sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import nbagent
requests = int(sys.argv[2])

class Scripted:
    name = "claude-test"
    def stream(self, request, on_delta):
        on_delta({"index": 0, "text": "fine"})
        return {"id": "m", "model": self.name, "content": [{"type": "text", "text": "fine " * 20}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 5}}

folder = Path(tempfile.mkdtemp())
model = Scripted()
with nbagent.Session.open(folder / "s.jsonl", fsync="never") as session:
    for n in range(20):  # warm up: imports, first appends
        nbagent.run(session, f"warm {n}", model=model, context=nbagent.ContextSettings(compact="off"))
    began = time.process_time()
    for n in range(requests):
        nbagent.run(session, f"request {n}", model=model, context=nbagent.ContextSettings(compact="off"))
    print((time.process_time() - began) / requests * 1e6)
"""


def per_request_us(tree: Path, requests: int) -> float:
    """CPU microseconds per request of ``nbagent.run`` importing nbagent from ``tree``."""
    done = subprocess.run([sys.executable, "-c", _CHILD, str(tree), str(requests)], capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def bench(base: str, new: str = "HEAD", rounds: int = 7, requests: int = 400) -> dict[str, float]:
    """Median CPU per request for ``base`` and ``new``, alternating which goes first, and their difference."""
    with tempfile.TemporaryDirectory() as scratch:
        trees = [Path(scratch) / "base", Path(scratch) / "new"]
        for tree, rev in zip(trees, (base, new)):
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), rev], capture_output=True, check=True)
        try:
            before: list[float] = []
            after: list[float] = []
            for index in range(rounds):
                pair = [(before, trees[0]), (after, trees[1])]
                for into, tree in pair if index % 2 == 0 else pair[::-1]:
                    into.append(per_request_us(tree, requests))
        finally:
            for tree in trees:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], capture_output=True)
    paired = [a - b for a, b in zip(after, before)]
    return {
        "before_us": statistics.median(before),
        "after_us": statistics.median(after),
        "difference_us": statistics.median(paired),
        "ratio": statistics.median(a / b for a, b in zip(after, before)),
    }


def main(argv: list[str] | None = None) -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rules_overhead", description=__doc__)
    parser.add_argument("--base", default="c364a4c", help="the commit before (default: main before issues 20 and 21)")
    parser.add_argument("--new", default="HEAD", help="the commit after (default: HEAD)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=400)
    args = parser.parse_args(argv)
    result = bench(args.base, args.new, args.rounds, args.requests)
    print(f"engine CPU per request ({args.requests} requests, median of {args.rounds} paired rounds)")
    print(f"  {args.base}: {result['before_us']:.0f} us   {args.new}: {result['after_us']:.0f} us")
    print(f"  difference: {result['difference_us']:+.1f} us per request (ratio {result['ratio']:.3f}); target: at most +100 us")


if __name__ == "__main__":
    main()
