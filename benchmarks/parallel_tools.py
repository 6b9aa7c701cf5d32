"""Wall time of one reply's read calls, side by side against one at a time: ``python -m benchmarks.parallel_tools``.

A reply asks for N calls of a read tool that takes ``--delay`` seconds (0.5: it sleeps, as a read waiting on a
disk or a network does), N = 1, 4, 16. Each N runs through the real loop and SDK against the fake API
(tests/support/fake_anthropic.py, in this process), with ``parallel=False``, the default bound (4) and a bound of 16.
Timed: the tool phase (from the reply's ``assistant_msg`` to the last ``tool_result``, read from the log's
timestamps) and the whole request (both model calls included); the ratios are one-at-a-time over side-by-side.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import anthropic

import nbagent
from nbagent.agent.parallel import DEFAULT_BOUND
from nbagent.record import events as ev
from tests.support.fake_anthropic import FakeAnthropic, text, tool_uses

MODES: tuple[tuple[str, int | bool], ...] = (
    ("one at a time", False),
    (f"side by side, {DEFAULT_BOUND} at once (default)", True),
    ("side by side, 16 at once", 16),
)


@dataclass
class Timing:
    """One run's wall times in seconds: the tool phase and the whole request."""

    tools: float
    whole: float


def one_run(client: anthropic.Anthropic, fake: FakeAnthropic, folder: Path, calls: int, delay: float, parallel: int | bool) -> Timing:
    """One request whose reply asks for ``calls`` reads of ``delay`` seconds each."""

    @nbagent.tool(effect="read")
    def slow_read(name: str) -> str:
        """Read a value slowly.

        Args:
            name: Which value.
        """
        time.sleep(delay)
        return f"value of {name}"

    fake.script(tool_uses([("slow_read", {"name": f"v{i}"}, f"toolu_{i:03d}") for i in range(calls)], "Reading."), text("Read."))
    with nbagent.Session.open(folder / f"{calls}-{parallel}-{time.monotonic_ns()}.jsonl", fsync="turn") as session:
        loop = nbagent.Loop(session, tools=[slow_read], model=nbagent.AnthropicModel("claude-test", client=client), parallel=parallel)
        started = time.perf_counter()
        loop.run("read them")
        whole = time.perf_counter() - started
        events = list(session.events())
    reply = next(e["ts"] for e in events if e["type"] == ev.ASSISTANT_MSG)
    last = max(e["ts"] for e in events if e["type"] == ev.TOOL_RESULT)
    return Timing(last - reply, whole)


def measure(sizes: list[int], delay: float, runs: int) -> dict[tuple[int, str], Timing]:
    """The median timing of each size and mode."""
    found: dict[tuple[int, str], Timing] = {}
    with tempfile.TemporaryDirectory() as folder, FakeAnthropic() as fake:
        client = anthropic.Anthropic(base_url=fake.base_url, api_key="bench-key", max_retries=0)
        one_run(client, fake, Path(folder), 1, 0.0, True)  # warm up the SDK's models
        for calls in sizes:
            for name, parallel in MODES:
                timings = [one_run(client, fake, Path(folder), calls, delay, parallel) for _ in range(runs)]
                found[(calls, name)] = Timing(statistics.median(t.tools for t in timings), statistics.median(t.whole for t in timings))
    return found


def report(found: dict[tuple[int, str], Timing], sizes: list[int], delay: float) -> str:
    """A markdown table: each size and mode, its times, and the ratio to one at a time."""
    lines = [
        f"| reads of {delay} s in one reply | mode | tool phase | whole request | one at a time / this (tool phase) |",
        "|---:|---|---:|---:|---:|",
    ]
    for calls in sizes:
        base = found[(calls, MODES[0][0])].tools
        for name, _ in MODES:
            timing = found[(calls, name)]
            lines.append(f"| {calls} | {name} | {timing.tools:.2f} s | {timing.whole:.2f} s | {base / timing.tools:.2f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4,16", help="numbers of read calls in the reply (default 1,4,16)")
    parser.add_argument("--delay", type=float, default=0.5, help="seconds each read takes (default 0.5)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each size and mode; the median is shown (default 3)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(report(measure(sizes, args.delay, args.runs), sizes, args.delay))


if __name__ == "__main__":
    main()
