"""The long-session section of the report (issue 12): ``python -m benchmarks.context_report [--quick]`` runs it alone.

benchmarks/run.py puts the same section into RESULTS.md.  Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import long_sessions as ls
from . import sdk_calls


@dataclass(frozen=True)
class Sizes:
    """How much work the section does."""

    requests: int  # model requests of the scripted session (section 6)
    resume_sizes: tuple[int, ...]
    every: int  # a server compaction every this many events in the resume logs
    resume_repeats: int
    snapshot_repeats: int
    sdk_requests: int  # per way of calling the SDK
    overhead_requests: int  # per loop


FULL = Sizes(1_000, (1_000, 10_000, 100_000), 1_000, 7, 3, 300, 300)
QUICK = Sizes(100, (1_000, 10_000), 1_000, 2, 1, 20, 50)
OLD_GROWTH = (
    9.2  # resume + messages from 10k to 100k events without compaction, as issue 12 quotes it (section 3 measures the mix it came from)
)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f} ms"


def _verdict(ok: bool) -> str:
    return "**PASS**" if ok else "**FAIL**"


def _spread(values: list[int]) -> str:
    return f"{min(values):,} | {statistics.median(values):,.0f} | {ls.p95([float(v) for v in values]):,.0f} | {max(values):,}"


def section(sizes: Sizes, workdir: Path, say: Callable[[str], None] = lambda text: None) -> list[str]:
    """Run the long-session measurements and return their Markdown."""
    out: list[str] = []
    targets: list[str] = []

    say(f"long sessions: request sizes over {sizes.requests:,} requests (server and local compaction)")
    kinds = ls.bench_request_sizes(sizes.requests, workdir)
    out.append(f"### 6. Request size over a {sizes.requests:,}-request session, with and without compaction\n")
    out.append(
        f"One scripted session (each user request: a tool call, a {len(ls.ROWS):,}-character read-only tool result, an answer; "
        "two model requests) through the real SDK against the fake API with a small window "
        f'(`ContextSettings(window={ls.WINDOW:,}, trigger={ls.TRIGGER:,})`; local: `compact="local", keep_tokens={ls.KEEP:,}`). '
        "Bytes = the HTTP body the SDK sent (tools, settings and messages); tokens = the fake API's estimate (JSON characters / 4, "
        "from the latest compaction block on). The row without compaction is the fold of the server run's log with its "
        "compaction taken out, computed and not sent (the local run folds to the same requests, checked).\n"
    )
    out.append(
        "| session | requests | compactions | summary requests | bytes: min | median | p95 | max | tokens: min | median | p95 | max | at the last request |"
    )
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k in kinds:
        out.append(
            f"| {k.name} | {len(k.tokens):,} | {k.compactions:,} | {k.summary_requests:,} | {_spread(k.body_bytes)} | {_spread(k.tokens)} "
            f"| {k.body_bytes[-1]:,} B, {k.tokens[-1]:,} tokens |"
        )
    out.append("")
    server, local, none = kinds
    out.append(
        f"At request {len(none.tokens):,} the request without compaction is **{none.tokens[-1] / server.tokens[-1]:,.1f}x** the "
        f"server-compacted one and **{none.tokens[-1] / local.tokens[-1]:,.1f}x** the locally compacted one (tokens; bytes: "
        f"{none.body_bytes[-1] / server.body_bytes[-1]:,.1f}x and {none.body_bytes[-1] / local.body_bytes[-1]:,.1f}x); "
        "the last request's ratio depends on how long ago the last compaction was: the medians over the whole session are "
        f"{statistics.median(none.tokens) / statistics.median(server.tokens):,.1f}x and "
        f"{statistics.median(none.tokens) / statistics.median(local.tokens):,.1f}x."
    )
    out.append("")
    for k in (server, local):
        targets.append(
            f"| {k.name.split(' (')[0]}: every request inside the window ({ls.WINDOW:,} tokens), {len(k.tokens):,} requests "
            f"| max {max(k.tokens):,} tokens | {_verdict(max(k.tokens) <= ls.WINDOW)} |"
        )

    say(f"long sessions: building logs of {', '.join(f'{n:,}' for n in sizes.resume_sizes)} events, compacted and not")
    logs = ls.build_logs(list(sizes.resume_sizes), sizes.every, workdir)
    say(f"long sessions: resume, {sizes.resume_repeats} repeats")
    resumes = {(r.events, r.compacted, r.snapshot): r for r in ls.bench_resume(logs, sizes.resume_repeats)}
    out.append(
        f"### 7. Resume with every message the next request needs (median of {sizes.resume_repeats} interleaved rounds: "
        f"{ls.SNAPSHOT_SAMPLES} snapshot resumes and one full replay per log each round; warm page cache)\n"
    )
    out.append(
        "Logs of turns (`user_msg`, `assistant_msg` with a tool call, `tool_result` of 1 KB, `assistant_msg` answer), appended "
        f'through `nbagent.Session` (fsync="never"); compacted: a server `compaction` block in an answer every {sizes.every:,} '
        f"events, the last one about {sizes.every // 2:,} events before the end. `open` = `Session.open`; `+ messages` = open + "
        "`list(session.messages)`; `+ request` = that + the request body json-encoded as the SDK encodes it; `encode` = the bare "
        "encode of the same body, the messages already in memory (the cost the request pays anyway); ratio = (`+ messages`) / `encode`.\n"
    )
    out.append("| events | compaction | resume | messages in the request | body | open | + messages | + request | encode | ratio |")
    out.append("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for (events, compacted, snap), r in sorted(resumes.items(), key=lambda item: (not item[0][1], not item[0][2], item[0][0])):
        out.append(
            f"| {events:,} | {'every ' + format(sizes.every, ',') + ' events' if compacted else 'none'} | "
            f"{'snapshot' if snap else 'full replay'} | {r.message_count:,} | {r.body_bytes / 1024:,.0f} KiB | {_ms(r.open)} | "
            f"{_ms(r.messages)} | {_ms(r.request)} | {_ms(r.encode)} | {r.over_encode:.2f}x |"
        )
    out.append("")
    if all((n, c, True) in resumes for n in (10_000, 100_000) for c in (True, False)):
        grow = resumes[(100_000, True, True)].messages / resumes[(10_000, True, True)].messages
        grow_request = resumes[(100_000, True, True)].request / resumes[(10_000, True, True)].request
        plain = resumes[(100_000, False, True)].messages / resumes[(10_000, False, True)].messages
        targets.append(
            f"| with compaction, resume + messages grows ≤ 1.5x from 10k to 100k events (snapshot) | {grow:.2f}x (+ request encoded: "
            f"{grow_request:.2f}x; without compaction, same run: {plain:.2f}x; before: {OLD_GROWTH}x) | {_verdict(grow <= 1.5)} |"
        )
    else:
        targets.append("| resume growth from 10k to 100k events | needs both sizes | not measured |")
    for n in sizes.resume_sizes:
        r = resumes[(n, True, True)]
        targets.append(
            f"| resume + messages ≤ 2x the bare encode of the request, {n:,} events, compacted, snapshot | {_ms(r.messages)} / "
            f"{_ms(r.encode)} = {r.over_encode:.2f}x | {_verdict(r.over_encode <= 2)} |"
        )

    say(f"long sessions: snapshot writes, {sizes.snapshot_repeats} repeats")
    snaps = ls.bench_snapshots(logs, sizes.snapshot_repeats, workdir)
    out.append(f"### 8. Snapshot size and write cost as the session grows (median of {sizes.snapshot_repeats})\n")
    out.append(
        'Written by `Session.snapshot()` on a copy of each log opened with fsync="never" (no disk wait), one event after: '
        "after a resume from the snapshot (the encoded messages spliced in) and after a full replay (every message encoded). "
        "A snapshot pins the log before it for its trust record (`prefix_sha256`): the first one after opening a log checks, "
        "once, that the log under the old snapshot is unchanged, which reads and hashes the whole log (the last column times that "
        "hash alone); later snapshots of the same run hash only what came since (the 'next write' column).\n"
    )
    out.append(
        "| events | compaction | log | snapshot file | messages in it | first write after a resume | next write | after a full replay "
        "| SHA-256 of the log |"
    )
    out.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for s in sorted(snaps, key=lambda s: (not s.compacted, s.events)):
        out.append(
            f"| {s.events:,} | {'yes' if s.compacted else 'none'} | {s.log_bytes / 2**20:,.1f} MiB | {s.file_bytes / 2**20:,.2f} MiB "
            f"| {s.messages:,} | {_ms(s.after_resume)} | {_ms(s.next_write)} | {_ms(s.after_replay)} | {_ms(s.log_sha256)} |"
        )
    out.append("")
    compacted = sorted((s for s in snaps if s.compacted), key=lambda s: s.events)
    if len(compacted) >= 2:
        small, big = compacted[0], compacted[-1]
        targets.append(
            f"| with compaction, the snapshot stays flat: file {big.events:,} vs {small.events:,} events | "
            f"{big.file_bytes / small.file_bytes:.2f}x | {_verdict(big.file_bytes / small.file_bytes <= 1.5)} |"
        )
        targets.append(
            f"| same, writing a snapshot in a running session | {_ms(big.next_write)} vs {_ms(small.next_write)}: "
            f"{big.next_write / small.next_write:.1f}x | {_verdict(big.next_write / small.next_write <= 1.5)} |"
        )
        targets.append(
            f"| (not flat, by design) the first snapshot after opening also checks the log under the old one: one SHA-256 pass | "
            f"{_ms(big.after_resume)} vs {_ms(small.after_resume)}; the hash alone {_ms(big.log_sha256)} | reported |"
        )

    say(f"long sessions: the SDK call, {sizes.sdk_requests} requests per way")
    ways = sdk_calls.bench_ways(sizes.sdk_requests)
    out.append(f"### 9. One streamed request through the SDK ({sizes.sdk_requests} per way, round robin, fake API in a child process)\n")
    out.append(
        "The same request (21 messages) each time; each way calls the same delta callback for every text delta and returns the "
        "same reply (checked). Wall = median per request (includes the fake's own time, the same for all); client CPU = mean "
        "`time.process_time()` per request (the client alone). Difference = against the helper in the same reply and API.\n"
    )
    out.append("| reply | API | way | wall / request | client CPU / request | CPU vs the helper |")
    out.append("|---|---|---|---:|---:|---:|")
    helper = {(w.reply, w.api): statistics.fmean(w.cpu) for w in ways if w.name.startswith("`messages.stream()`")}
    for w in ways:
        cpu = statistics.fmean(w.cpu)
        diff = cpu - helper[(w.reply, w.api)]
        out.append(
            f"| {w.reply} | {w.api} | {w.name} | {_ms(statistics.median(w.wall))} | {_ms(cpu)} | {'' if not diff else f'{diff * 1e3:+,.2f} ms'} |"
        )
    out.append("")

    say(f"long sessions: harness overhead over a floor, {sizes.overhead_requests} requests per loop")
    times = sdk_calls.bench_overhead(sizes.overhead_requests, workdir)
    out.append(
        f"### 10. nbagent's overhead per request over a floor sending the same history ({sizes.overhead_requests} requests, "
        f"blocks of {sdk_calls.BLOCK}, fake API in a child process)\n"
    )
    out.append(
        "Each request: a user message and a streamed 60-word reply (20 text deltas), no tools, the same plain Messages call "
        '(nbagent with `ContextSettings(compact="off")`); every loop keeps its own history and the histories are checked equal. '
        "The middle rows split nbagent's overhead: its adapter (`nbagent.model.claude.AnthropicModel`), then the delta log, then the "
        "loop and the rest of the log. The history grows by two messages a request, the same for every loop; wall times include "
        "the fake's own time, so they carry its noise; client CPU is the client alone (user + system, so fsync's kernel work counts).\n"
    )
    out.append("| loop | wall / request: median | mean | client CPU / request | over the floor: median wall | mean wall | CPU |")
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    floor_wall, floor_cpu = times["floor"]
    base_wall, base_mean, base_cpu = statistics.median(floor_wall), statistics.fmean(floor_wall), statistics.fmean(floor_cpu)
    for name, (wall, cpu) in times.items():
        median, mean, used = statistics.median(wall), statistics.fmean(wall), statistics.fmean(cpu)
        extra = "| | | |" if name == "floor" else f"| {_ms(median - base_wall)} | {_ms(mean - base_mean)} | {_ms(used - base_cpu)} |"
        out.append(f"| {sdk_calls.LOOPS[name]} | {_ms(median)} | {_ms(mean)} | {_ms(used)} {extra}")
    out.append("")

    out.append("### Long-session targets (issue 12)\n")
    out.append("| target | measured | verdict |")
    out.append("|---|---|---|")
    out += targets
    out.append("")
    return out


def main(argv: list[str] | None = None) -> int:
    """Run this section alone and print it."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.context_report", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="nbagent-bench-") as temp:
        lines = section(QUICK if args.quick else FULL, Path(temp), lambda text: print(f"... {text}", file=sys.stderr, flush=True))
    print("\n".join(lines))
    print(f"\n({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
