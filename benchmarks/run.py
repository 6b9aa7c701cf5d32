"""Run every benchmark and print one table: ``python -m benchmarks.run [--quick] [--write]``.

Nothing here asserts a time: the targets from the issue are reported as
PASS/FAIL next to the measured ratios.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import cases, context_report, rerun

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
NOTES_MARKER = "<!-- notes: kept by --write -->"


@dataclass(frozen=True)
class Sizes:
    """How much work each benchmark does."""

    requests: int  # engine session length in user requests (two model turns each)
    naive_requests: int  # the naive loop is quadratic: it runs this prefix of the same session
    appends: int
    append_rounds: int
    resume_sizes: tuple[int, ...]
    resume_repeats: int
    memory_size: int  # 0: skip the memory measurement
    rerun_sizes: tuple[int, ...]  # notebooks of this many %agent cells, re-run after a restart (): skip
    rerun_repeats: int
    context: context_report.Sizes = context_report.QUICK  # the long-session sections (benchmarks/context_report.py)
    external: bool = False  # the server stream and PostgreSQL benchmarks (their own modules, a real server / cluster)


FULL = Sizes(
    requests=2000,
    naive_requests=150,
    appends=1000,
    append_rounds=5,
    resume_sizes=(1_000, 10_000, 100_000),
    resume_repeats=7,
    memory_size=100_000,
    rerun_sizes=(50, 300),
    rerun_repeats=7,
    context=context_report.FULL,
    external=True,
)
QUICK = Sizes(
    requests=60,
    naive_requests=10,
    appends=200,
    append_rounds=2,
    resume_sizes=(1_000, 10_000, 100_000),
    resume_repeats=2,
    memory_size=0,
    rerun_sizes=(10, 50),
    rerun_repeats=1,
)
RERUN_TARGET = (50, 300)  # the sizes: the targets need both


# The machine ----------------------------------------------------------------------------------------
def _first(path: str, prefix: str) -> str:
    try:
        with open(path) as handle:
            return next((line.split(":", 1)[1].strip() for line in handle if line.startswith(prefix)), "?")
    except OSError:
        return "?"


def _filesystem(path: Path) -> str:
    best, kind = "", "?"
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                _, point, fstype, *_ = line.split()
                if str(path).startswith(point) and len(point) > len(best):
                    best, kind = point, fstype
    except OSError:
        pass
    return f"{kind} (mounted at {best or '?'})"


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=cases.REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def _fsync_latency(workdir: Path, count: int = 100) -> float:
    """Median seconds of one 100-byte append + fsync on this file system."""
    fd = os.open(workdir / "fsync-probe", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    samples = []
    try:
        for _ in range(count):
            started = time.perf_counter()
            os.write(fd, b"x" * 99 + b"\n")
            os.fsync(fd)
            samples.append(time.perf_counter() - started)
    finally:
        os.close(fd)
    return statistics.median(samples)


def machine(workdir: Path, fsync_latency: float) -> list[tuple[str, str]]:
    """What the numbers were measured on."""
    mem_kib = _first("/proc/meminfo", "MemTotal")
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return [
        ("date", datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")),
        ("CPU", f"{_first('/proc/cpuinfo', 'model name')}, {os.cpu_count()} cores"),
        ("RAM", f"{int(mem_kib.split()[0]) / 2**20:.1f} GiB" if mem_kib != "?" else "?"),
        ("OS", f"{platform.system()} {platform.release()}"),
        ("Python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("temp dir", f"{workdir.parent} on {_filesystem(workdir)}"),
        ("fsync latency", f"{fsync_latency * 1e6:.0f} µs (median append+fsync of one line, measured at start)"),
        ("load average at start", f"{load[0]:.2f} (other work on the machine adds noise)"),
        ("nbagent commit", _commit()),
        ("anthropic SDK", importlib.metadata.version("anthropic")),  # the release the install resolved (.ci/run prints it too)
    ]


# The table -------------------------------------------------------------------------------------------
def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f} ms"


def _verdict(ok: bool) -> str:
    return "**PASS**" if ok else "**FAIL**"


def run(sizes: Sizes, workdir: Path, progress: bool = True) -> str:
    """Run everything and return the report as Markdown."""

    def say(text: str) -> None:
        if progress:
            print(f"... {text}", file=sys.stderr, flush=True)

    started = time.perf_counter()
    out: list[str] = []
    fsync_latency = _fsync_latency(workdir)
    info = machine(workdir, fsync_latency)

    say(f"loops: naive for {sizes.naive_requests} requests, nbagent for {sizes.requests}")
    naive, engine, cpu, per_delta = cases.bench_loops(sizes.requests, sizes.naive_requests, workdir)
    engine_prefix = statistics.fmean(engine.overheads[: naive.turns])

    say(f"append throughput: {sizes.appends} events x {sizes.append_rounds} rounds")
    rates = cases.bench_append(sizes.appends, sizes.append_rounds, workdir)

    say(f"building logs of {', '.join(map(str, sizes.resume_sizes))} events")
    logs = cases.build_logs(sorted(set(sizes.resume_sizes) | ({sizes.memory_size} - {0})), workdir)
    say(f"resume: {sizes.resume_repeats} repeats")
    resumes = cases.bench_resume({n: logs[n] for n in sizes.resume_sizes}, sizes.resume_repeats)
    memory = {}
    if sizes.memory_size:
        say("memory of a resume (child processes)")
        with_snapshot, without = logs[sizes.memory_size]
        memory = {
            "with snapshot": cases.resume_memory(with_snapshot, True),
            "without snapshot (full replay)": cases.resume_memory(without, False),
        }
    reruns = []
    if sizes.rerun_sizes:
        say(
            f"notebook re-runs after a restart: {', '.join(map(str, sizes.rerun_sizes))} cells, {sizes.rerun_repeats} repeats (real kernels)"
        )
        reruns = rerun.bench_rerun(sizes.rerun_sizes, sizes.rerun_repeats, workdir)

    # 1
    out.append("### 1. Harness overhead per model turn (scripted model, 20 streamed deltas per reply, one trivial tool call per request)\n")
    out.append(
        "Overhead = wall time minus the model's and the tool's own time. A request is user message → tool call → answer (2 turns). "
        f"The loops take turns in blocks of {cases.BLOCK} requests. The scripted model streams its 20 deltas at once, so the engine "
        "logs one delta line per content block (a real stream: a line per 50 ms at most); the last row logs every delta, as a "
        "stream slower than 20 deltas a second would.\n"
    )
    out.append(
        "| loop | requests | turns | events | events / turn | fsynced events | mean overhead / turn | first 10% of turns | last 10% of turns |"
    )
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in (naive, engine, cpu, per_delta):
        out.append(
            f"| {r.name} | {r.requests:,} | {r.turns:,} | {r.events:,} | {r.events / r.turns:.1f} | {r.durable:,} | {_us(r.per_turn)} | {_us(r.window(True))} | {_us(r.window(False))} |"
        )
    out.append("")
    per_event = (per_delta.per_turn - cpu.per_turn) / ((per_delta.events - cpu.events) / per_delta.turns)
    out.append(
        f"A logged delta costs {_us(per_event)} of CPU (the difference between the last two rows per extra line); "
        f"coalescing saves {_us(per_delta.per_turn - cpu.per_turn)} per turn here."
    )
    out.append("")
    out.append(
        f"Same first {naive.turns} turns: naive {_us(naive.per_turn)} vs nbagent {_us(engine_prefix)} per turn, "
        f"**{naive.per_turn / engine_prefix:,.0f}x** less overhead; the naive loop's overhead grows with the log "
        f"(re-reads it every step), the engine's does not. Transcripts checked equal."
    )
    out.append("")
    per_turn_fsyncs = engine.durable / engine.turns
    fsync_share = engine.per_turn - cpu.per_turn
    out.append(
        f'fsync="turn" makes {per_turn_fsyncs:.1f} fsyncs per turn (user message, assistant messages, `tool_started` of a '
        f"non-read tool, tool result: what the durability rules require). The difference between the two nbagent rows, "
        f"{_us(fsync_share)} per turn, is their cost: {_us(fsync_share / per_turn_fsyncs)} per fsync during this run "
        f"(the probe at the start measured {_us(fsync_latency)}; other processes writing to the same disk make it vary)."
    )
    out.append("")

    # 2
    out.append(
        f"### 2. Append throughput ({sizes.appends:,} events of the session's mix, {sum(1 for k in cases.encoded_mix(sizes.appends) if k[3])} of them durable; median of {sizes.append_rounds} interleaved rounds)\n"
    )
    out.append("| store | `Session.append` (encode, redact, write, fold) | raw `EventLog.append` of pre-encoded lines |")
    out.append("|---|---:|---:|")
    for policy in cases.APPEND_CASES:
        out.append(f'| nbagent fsync="{policy}" | {rates["session " + policy]:,.0f} ev/s | {rates["raw " + policy]:,.0f} ev/s |')
    out.append(f"| sqlite3 WAL, synchronous=FULL, INSERT+COMMIT per event (same JSON text) | | {rates['sqlite']:,.0f} ev/s |")
    out.append("")
    out.append(
        f'fsync="turn" appends {rates["session turn"] / rates["sqlite"]:.1f}x as many events per second as sqlite3 '
        f'("always": {rates["session always"] / rates["sqlite"]:.1f}x).'
    )
    out.append("")

    # 2b
    redaction = cases.bench_redaction()
    out.append(
        "### 2b. Redaction cost per line (`nbagent.record.redact.json_body` vs the single key-shape regex it replaced; no secret in the line)\n"
    )
    out.append("| line | bytes | old regex | nbagent.record.redact | ratio |")
    out.append("|---|---:|---:|---:|---:|")
    for name, (size, before, after) in redaction.items():
        out.append(f"| {name} | {size:,} | {before * 1e6:.1f} µs | {after * 1e6:.1f} µs | {after / before:.1f}x |")
    out.append("")

    # 3
    out.append(f"### 3. Resume time (median of {sizes.resume_repeats}, interleaved, warm page cache)\n")
    out.append(
        "`open` = `Session.open` (the snapshot's header and the log after it); `ready` = open + `state` usable (frontier, open tool "
        "calls, usage, title: the snapshot's small state line); `+ messages` = ready + `list(session.messages)` (the "
        "transcript decoded, as the first model request needs; a full replay has it at `ready`).\n"
    )
    out.append(
        "| events | snapshot file | with snapshot: open | with snapshot: ready | with snapshot: + messages | full replay: open | full replay: ready | replay / snapshot (ready) |"
    )
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in resumes:
        out.append(
            f"| {r.events:,} | {r.snapshot_bytes / 2**20:.2f} MiB | {_ms(r.snapshot_open)} | {_ms(r.snapshot_ready)} | {_ms(r.snapshot_messages)} | {_ms(r.replay_open)} | {_ms(r.replay_ready)} | {r.replay_ready / r.snapshot_ready:,.1f}x |"
        )
    out.append("")

    # 4
    if memory:
        out.append(f"### 4. Peak memory of one resume at {sizes.memory_size:,} events, every message decoded (fresh child process each)\n")
        out.append(
            "| resume | tracemalloc peak (Python allocations) | peak RSS (VmHWM) | peak RSS growth over the process after `import nbagent` |"
        )
        out.append("|---|---:|---:|---:|")
        for name, m in memory.items():
            out.append(f"| {name} | {m['traced_peak_mib']:.1f} MiB | {m['peak_rss_mib']:.1f} MiB | {m['rss_growth_mib']:.1f} MiB |")
        out.append("")

    # 5
    if reruns:
        out.append(
            f"### 5. Re-running a notebook after a kernel restart: `%agent` cells re-rendered from the log vs `print()` cells (median of {sizes.rerun_repeats}, interleaved)\n"
        )
        out.append(
            "Each notebook is `%load_ext nbagent` and then its cells: `%agent <short request>`, or the same requests as `print(...)`. "
            "The `%agent` notebook was run once to record its turns (the fake Anthropic server answers each in one line: the last "
            "column); every re-run is nbclient executing the saved notebook in a fresh kernel, as Restart Kernel and Run All does, "
            "and makes no model request (checked), each cell showing its recorded answer (checked). Whole run = kernel start, every "
            "cell, shutdown. Ratio = the median over the rounds of each round's `%agent` run / its `print()` run (the two run next to "
            "each other, first one then the other, in turn), since kernel start-up alone varies by a second on a shared machine. Per re-rendered cell = (`%agent` − `print()`) / cells. Kernel busy = each cell's busy-to-idle time on "
            "the kernel's clock, the median cell (the first `%agent` cell also imports the renderers); the first and last tenth of the "
            "`%agent` cells show whether a cell gets slower as the notebook goes on.\n"
        )
        out.append(
            "| cells | `print()` run | `%agent` re-run | ratio | per re-rendered cell (whole runs) | kernel busy: `print()` cell | `%agent` cell | `%agent` − `print()` | first 10% of `%agent` cells | last 10% | recording run |"
        )
        out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in reruns:
            out.append(
                f"| {r.cells:,} | {r.plain:.2f} s | {r.agent:.2f} s | {r.ratio:.2f}x | {_ms(r.per_cell)} | {_ms(statistics.median(r.plain_cells))} "
                f"| {_ms(statistics.median(r.agent_cells))} | {_ms(r.per_cell_busy)} | {_ms(r.window(True))} | {_ms(r.window(False))} | {r.record:.1f} s |"
            )
        out.append("")

    # Targets
    by_size = {r.events: r for r in resumes}
    out.append("### Targets (from the issue)\n")
    out.append("| target | measured | verdict |")
    out.append("|---|---|---|")
    if 10_000 in by_size and 100_000 in by_size:
        small, big = by_size[10_000], by_size[100_000]
        growth_ready = big.snapshot_ready / small.snapshot_ready
        growth_open = big.snapshot_open / small.snapshot_open
        growth_messages = big.snapshot_messages / small.snapshot_messages
        out.append(
            f"| with a snapshot, resume grows ≤ 1.5x from 10k to 100k events (ready: frontier, open calls, usage, title) | {growth_ready:.2f}x | {_verdict(growth_ready <= 1.5)} |"
        )
        out.append(f"| same, open only | {growth_open:.2f}x | {_verdict(growth_open <= 1.5)} |")
        out.append(
            f"| same, + messages (every message decoded; not a target: the first model request sends them all) | {growth_messages:.2f}x | (information) |"
        )
        speedup = big.replay_ready / big.snapshot_ready
        out.append(f"| with a snapshot ≥ 20x faster than a full replay at 100k (ready) | {speedup:.1f}x | {_verdict(speedup >= 20)} |")
    else:
        out.append("| resume targets | need sizes 10k and 100k | not measured |")
    out.append(
        f'| harness overhead per turn well under 1 ms (CPU: fsync="never") | {_us(cpu.per_turn)} ({cpu.per_turn / 1e-3:.0%} of 1 ms) | {_verdict(cpu.per_turn < 1e-3)} |'
    )
    out.append(f"| same, a log line per delta (a stream slower than 20 deltas/s) | {_us(per_delta.per_turn)} | (information) |")
    out.append(
        f'| same, fsync="turn": CPU + {engine.durable / engine.turns:.1f} fsyncs per turn, as the durability rules require, each a wait '
        f"on this disk ({_us(fsync_latency)} at the probe) | {_us(engine.per_turn)} | (disk-bound: see the fsync note) |"
    )
    by_cells = {r.cells: r for r in reruns}
    if all(n in by_cells for n in RERUN_TARGET):
        small, big = (by_cells[n] for n in RERUN_TARGET)
        out.append(
            f"| re-running {big.cells} `%agent` cells after a restart takes ≤ 1.1x the `print()` notebook in each round "
            f"| max {max(big.ratios):.2f}x, median {big.ratio:.2f}x ({small.cells} cells: {small.ratio:.2f}x) | {_verdict(max(big.ratios) <= 1.1)} |"
        )
        growth = big.per_cell_busy / small.per_cell_busy if small.per_cell_busy > 0 else float("inf")
        out.append(
            f"| the cost of a re-rendered cell does not grow with the cell count: kernel busy per cell over `print()`, {big.cells} vs "
            f"{small.cells} cells, ≤ 1.2x | {_ms(big.per_cell_busy)} vs {_ms(small.per_cell_busy)}: {growth:.2f}x | {_verdict(growth <= 1.2)} |"
        )
    else:
        out.append(f"| notebook re-run targets | need {' and '.join(map(str, RERUN_TARGET))} cells | not measured |")
    out.append("")

    # 6-10: long sessions (issue 12), with their own targets
    out += context_report.section(sizes.context, workdir, say)

    # 11-13: the server's event stream, the PostgreSQL store and tool output, each its own module (python -m benchmarks.<name>)
    if sizes.external:
        out += _external("11. The server extension's event stream (`python -m benchmarks.server`)", "benchmarks.server", say)
        out += _external("12. The PostgreSQL store (`python -m benchmarks.postgres`)", "benchmarks.postgres", say)
        out += _external("13. Peak memory of a tool printing 1 GB (`python -m benchmarks.tool_output`)", "benchmarks.tool_output", say)

    head = ["| machine | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in info]
    mode = "quick" if sizes == QUICK else "full"
    head.append(f"| run | `python -m benchmarks.run{' --quick' if mode == 'quick' else ''}`, {time.perf_counter() - started:.0f} s |")
    return "\n".join(head + [""] + out)


def _external(title: str, module: str, say: Callable[[str], None]) -> list[str]:
    """A benchmark module's own Markdown, run in its own process (it starts a Jupyter server or a PostgreSQL cluster)."""
    say(f"{module} (its own process)")
    done = subprocess.run([sys.executable, "-m", module], capture_output=True, text=True, cwd=cases.REPO, timeout=3600)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return [f"### {title}", "", f"Not measured: {why}", ""]
    return [f"### {title}", "", done.stdout.strip(), ""]


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    parser.add_argument("--write", action="store_true", help=f"also write the report to {RESULTS.relative_to(cases.REPO)}")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the benchmark files (default: a temp dir)")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    with tempfile.TemporaryDirectory(prefix="nbagent-bench-", dir=args.dir) as temp:
        report = run(sizes, Path(temp))
    print(report)
    if args.write:
        # Hand-written notes below the marker (profiling findings) survive a rewrite.
        old = RESULTS.read_text() if RESULTS.exists() else ""
        notes = old[old.index(NOTES_MARKER) :] if NOTES_MARKER in old else NOTES_MARKER + "\n"
        RESULTS.write_text(
            "# nbagent benchmarks\n\nProduced by `python -m benchmarks.run --write` "
            "(see benchmarks/run.py; numbers are medians, nothing here is a test).\n\n" + report + "\n\n" + notes
        )
        print(f"\nwrote {RESULTS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
