"""The measurements: loop overhead (naive vs engine), append throughput, resume time, resume memory."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbagent
from nbagent.agent.deltas import DELTA_INTERVAL
from nbagent.record import events as ev
from nbagent.record import line_codec
from nbagent.stores import snapshot
from nbagent.stores.writer import EventLog

from . import naive
from .scripted import TOOL_NAME, ScriptedModel, Stopwatch, event_mix, make_lookup, prompt

REPO = Path(__file__).resolve().parent.parent


# 1. Harness overhead per turn ----------------------------------------------------------------------
@dataclass
class LoopResult:
    """Harness overhead of one loop over a whole scripted session (seconds)."""

    name: str
    requests: int
    turns: int
    events: int
    wall: float
    overheads: list[float]
    durable: int = 0  # events the policy fsyncs

    @property
    def per_turn(self) -> float:
        return statistics.fmean(self.overheads)

    def window(self, first: bool) -> float:
        """Mean overhead of the first or last tenth of the turns."""
        size = max(1, len(self.overheads) // 10)
        return statistics.fmean(self.overheads[:size] if first else self.overheads[-size:])


def _timed_request(call: Callable[[], object], stopwatch: Stopwatch) -> tuple[float, list[float]]:
    """Run one request; return its wall time and the harness time of each of its turns."""
    first = len(stopwatch.starts)
    started = time.perf_counter()
    call()
    ended = time.perf_counter()
    stopwatch.starts[first] = started  # the first turn also pays for logging the request
    bounds = stopwatch.starts[first + 1 :] + [ended]
    overheads = [
        b - s - m - t for s, b, m, t in zip(stopwatch.starts[first:], bounds, stopwatch.model_own[first:], stopwatch.tool_own[first:])
    ]
    return ended - started, overheads


# The loops take turns in blocks of this many requests: each runs as it would alone (one loop's fsyncs
# do not stall another's writes, its caches stay warm), while machine noise still reaches all of them.
BLOCK = 50
ENGINES = {  # name: (fsync policy, delta_interval)
    "turn": ("turn", DELTA_INTERVAL),
    "never": ("never", DELTA_INTERVAL),
    "per delta": ("never", 0.0),
}


def bench_loops(requests: int, naive_requests: int, workdir: Path) -> list[LoopResult]:
    """Run the naive loop and the engine on the same scripted session, taking turns in blocks of ``BLOCK`` requests.

    Each request is one user message, one tool call and a final answer: two
    model turns with 20 streamed deltas each.  The naive loop is quadratic, so
    it runs only the first ``naive_requests``; the engine runs all
    ``requests``: with fsync="turn", with "never" (its CPU cost alone), and
    with "never" and a log line per delta (``delta_interval=0``: what a stream
    slower than the coalescing interval costs).  Raises if the transcripts differ.
    """
    naive_path = workdir / "naive.jsonl"
    naive_path.unlink(missing_ok=True)
    clocks = {name: Stopwatch() for name in ("naive", *ENGINES)}
    models = {name: ScriptedModel(clock) for name, clock in clocks.items()}
    naive_tools = {TOOL_NAME: make_lookup(clocks["naive"])}
    engine_tools = {name: [nbagent.tool(make_lookup(clocks[name]))] for name in ENGINES}
    sessions = {}
    for name, (policy, _) in ENGINES.items():
        path = workdir / f"engine-{name.replace(' ', '-')}.jsonl"
        for stale in (path, path.with_name(path.name + ".snapshot")):
            stale.unlink(missing_ok=True)
        sessions[name] = nbagent.Session.open(path, fsync=policy)  # type: ignore[arg-type]
    walls = dict.fromkeys(clocks, 0.0)
    overheads: dict[str, list[float]] = {name: [] for name in clocks}
    prefix: list[dict[str, Any]] = []

    def engine(name: str, text: str) -> Callable[[], object]:
        loop = nbagent.Loop(sessions[name], tools=engine_tools[name], model=models[name], approval="auto", delta_interval=ENGINES[name][1])
        return lambda: loop.run(text)

    def naive_call(text: str) -> Callable[[], object]:
        return lambda: naive.run(naive_path, text, models["naive"], naive_tools)

    try:
        for first in range(1, requests + 1, BLOCK):
            for name in ("naive", *ENGINES):
                for number in range(first, min(first + BLOCK, requests + 1)):
                    if name == "naive" and number > naive_requests:
                        break
                    call = naive_call(prompt(number)) if name == "naive" else engine(name, prompt(number))
                    wall, turn_overheads = _timed_request(call, clocks[name])
                    walls[name] += wall
                    overheads[name].extend(turn_overheads)
                    if name == "turn" and number == naive_requests:
                        prefix = list(sessions["turn"].messages)
        final = {name: (list(session.messages), session.seq) for name, session in sessions.items()}
    finally:
        for session in sessions.values():
            session.close()
    naive_events = naive.load_events(naive_path)
    if naive.rebuild_messages(naive_events) != prefix:
        raise AssertionError("the naive loop and the engine produced different transcripts")
    if any(messages != final["turn"][0] for messages, _ in final.values()):
        raise AssertionError("the engine's transcript depends on its fsync policy or delta interval")
    with nbagent.Session.open(workdir / "engine-turn.jsonl") as reopened:
        if reopened.messages != final["turn"][0]:
            raise AssertionError("the engine's log does not replay to the transcript it produced")
    durable = sum(ev.is_durable(e["type"], e) for e in nbagent.read_events(workdir / "engine-turn.jsonl"))
    labels = {
        "turn": 'nbagent, fsync="turn"',
        "never": 'nbagent, fsync="never" (CPU only)',
        "per delta": 'nbagent, fsync="never", a log line per delta (delta_interval=0)',
    }
    return [
        LoopResult(
            "naive (reference design)",
            naive_requests,
            len(clocks["naive"].starts),
            len(naive_events),
            walls["naive"],
            overheads["naive"],
            len(naive_events),
        ),
        *(
            LoopResult(
                labels[name],
                requests,
                len(clocks[name].starts),
                final[name][1],
                walls[name],
                overheads[name],
                durable if name == "turn" else 0,
            )
            for name in ENGINES
        ),
    ]


# 2. Append throughput ----------------------------------------------------------------------------------
def encoded_mix(count: int) -> list[tuple[str, dict[str, Any], bytes, bool]]:
    """The event mix as (type, payload, encoded line, durable) with seqs 1..count."""
    out = []
    for seq, (kind, payload) in enumerate(event_mix(count), start=1):
        line, _ = line_codec.encode(ev.make(seq, kind, payload))
        out.append((kind, payload, line, ev.is_durable(kind, payload)))
    return out


def _append_session(path: Path, mix: list[tuple[str, dict[str, Any], bytes, bool]], policy: str) -> float:
    with nbagent.Session.open(path, fsync=policy, snapshot_every=0) as session:  # type: ignore[arg-type]
        started = time.perf_counter()
        for kind, payload, _, _ in mix:
            session.append(kind, **payload)
        return time.perf_counter() - started


def _append_raw(path: Path, mix: list[tuple[str, dict[str, Any], bytes, bool]], policy: str) -> float:
    log = EventLog(path, fsync=policy)  # type: ignore[arg-type]
    try:
        started = time.perf_counter()
        for _, _, line, durable in mix:
            log.append(line, durable=durable)
        return time.perf_counter() - started
    finally:
        log.close()


def _append_sqlite(path: Path, mix: list[tuple[str, dict[str, Any], bytes, bool]]) -> float:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, type TEXT NOT NULL, body TEXT NOT NULL)")
        rows = [(seq, kind, line[:-1].decode("ascii")) for seq, (kind, _, line, _) in enumerate(mix, start=1)]
        started = time.perf_counter()
        for row in rows:
            db.execute("BEGIN")
            db.execute("INSERT INTO events VALUES (?, ?, ?)", row)
            db.execute("COMMIT")
        return time.perf_counter() - started
    finally:
        db.close()


APPEND_CASES = ("always", "turn", "never")


def bench_append(count: int, rounds: int, workdir: Path) -> dict[str, float]:
    """Events per second (median of ``rounds``, cases interleaved) for each policy and for sqlite3."""
    mix = encoded_mix(count)
    timings: dict[str, list[float]] = {}
    for round_number in range(rounds):
        for policy in APPEND_CASES:
            for kind, bench in (("session", _append_session), ("raw", _append_raw)):
                path = workdir / f"append-{kind}-{policy}-{round_number}.jsonl"
                timings.setdefault(f"{kind} {policy}", []).append(bench(path, mix, policy))
                path.unlink()
        path = workdir / f"append-{round_number}.sqlite"
        timings.setdefault("sqlite", []).append(_append_sqlite(path, mix))
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
    return {name: count / statistics.median(values) for name, values in timings.items()}


# 2b. Redaction cost per line ----------------------------------------------------------------------------
# The shapes events.py looked for before nbagent.record.redact (kept here as the baseline).
OLD_KEY_SHAPES = (
    r"sk-ant-[A-Za-z0-9_\-]{16,}|sk-(?:proj-)?[A-Za-z0-9_\-]{32,}|AKIA[0-9A-Z]{16}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}|xox[abpr]-[A-Za-z0-9\-]{20,}"
)


def redaction_lines() -> dict[str, str]:
    """A typical ~500-byte assistant line and a ~5 KB tool result line, encoded as the log encodes them (no secrets in them)."""
    words = "the a data frame column mean value python print import pandas as pd read csv file result of tool call rows".split()
    prose = " ".join(words[(i * 7) % len(words)] for i in range(60))[:330]
    table = "\n".join(f"{i:4d}  {prose[:60]}  {i * 3.14159:10.4f}  2024-01-{i % 28 + 1:02d}" for i in range(55))
    typical = {
        "v": 1,
        "seq": 123,
        "ts": 1712345678.123456,
        "type": "assistant_msg",
        "content": [{"type": "text", "text": prose}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1234, "output_tokens": 56},
    }
    tool = {
        "v": 1,
        "seq": 124,
        "ts": 1712345678.123456,
        "type": "tool_result",
        "tool_use_id": "toolu_01ABCDEF",
        "content": [{"type": "text", "text": table}],
    }
    return {"typical": line_codec._ENCODER.encode(typical), "tool result": line_codec._ENCODER.encode(tool)}


def bench_redaction(number: int = 20000) -> dict[str, tuple[int, float, float]]:
    """Per line: (bytes, seconds with the old single regex, seconds with nbagent.record.redact.json_body); best of 5."""
    import re
    import timeit

    from nbagent.record import redact

    old = re.compile(OLD_KEY_SHAPES)
    out = {}
    for name, body in redaction_lines().items():
        redact.json_body(body)  # compile once
        before = min(timeit.repeat(lambda b=body: old.search(b) and old.sub(redact.REDACTED, b), number=number, repeat=5)) / number
        after = min(timeit.repeat(lambda b=body: redact.json_body(b), number=number, repeat=5)) / number
        out[name] = (len(body), before, after)
    return out


# 3. Resume time ---------------------------------------------------------------------------------------
def build_logs(sizes: list[int], workdir: Path) -> dict[int, tuple[Path, Path]]:
    """For each size, the same log of that many events twice: with a snapshot beside it and without."""
    built = {}
    for size in sizes:
        with_snapshot = workdir / f"with-{size}" / "session.jsonl"
        without = workdir / f"without-{size}" / "session.jsonl"
        with nbagent.Session.open(with_snapshot, fsync="never") as session:
            for kind, payload in event_mix(size - 1):  # session_start is the first event
                session.append(kind, **payload)
        without.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(with_snapshot, without)
        built[size] = (with_snapshot, without)
    return built


def time_resume(path: Path, use_snapshot: bool) -> tuple[float, float, float]:
    """Seconds to open the session; to open it and have its state ready; and to also have every message as a list.

    "Ready" is what resuming needs before any work: the frontier, open tool calls, usage
    and title.  The messages are decoded only when something reads them all (the first
    model request does).
    """
    started = time.perf_counter()
    session = nbagent.Session.open(path, snapshot_every=1000 if use_snapshot else 0)
    opened = time.perf_counter()
    state = session.state
    _ = state.frontier, state.open_calls, state.usage, state.title
    ready = time.perf_counter()
    list(session.messages)
    decoded = time.perf_counter()
    session.close()  # writes nothing: the snapshot (if any) is current; snapshot_every=0 writes none
    return opened - started, ready - started, decoded - started


@dataclass
class ResumeResult:
    """Median resume times (seconds) for one log size."""

    events: int
    snapshot_open: float
    snapshot_ready: float
    snapshot_messages: float
    replay_open: float
    replay_ready: float
    replay_messages: float
    snapshot_bytes: int


def bench_resume(logs: dict[int, tuple[Path, Path]], repeats: int) -> list[ResumeResult]:
    """Median of ``repeats`` resumes per size and mode, interleaved (warm page cache)."""
    samples: dict[tuple[int, bool], list[tuple[float, float, float]]] = {}
    for _ in range(repeats):
        for size, (with_snapshot, without) in logs.items():
            for use_snapshot, path in ((True, with_snapshot), (False, without)):
                samples.setdefault((size, use_snapshot), []).append(time_resume(path, use_snapshot))
    results = []
    for size in logs:
        snap, full = samples[(size, True)], samples[(size, False)]
        results.append(
            ResumeResult(
                size,
                *(statistics.median(s[i] for s in snap) for i in range(3)),
                *(statistics.median(s[i] for s in full) for i in range(3)),
                snapshot.path_for(logs[size][0]).stat().st_size,
            )
        )
    return results


# 4. Memory of a resume -------------------------------------------------------------------------------
_CHILD = """
import gc, json, sys, tracemalloc
import nbagent
path, use_snapshot = sys.argv[1], sys.argv[2] == "1"
def status_kib(key):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(key + ":"))
def resume():
    session = nbagent.Session.open(path, snapshot_every=1000 if use_snapshot else 0)
    session.state, list(session.messages)  # every message decoded, as the first model request needs
    session.close()
baseline = status_kib("VmRSS")
resume()
# VmHWM, not ru_maxrss: ru_maxrss survives exec and may be the parent's high-water mark.
hwm = status_kib("VmHWM")
gc.collect()
tracemalloc.start()  # a second, traced resume (tracing itself costs memory, so it comes after the RSS reading)
resume()
print(json.dumps({"baseline_kib": baseline, "hwm_kib": hwm, "traced_peak": tracemalloc.get_traced_memory()[1]}))
"""


def resume_memory(path: Path, use_snapshot: bool) -> dict[str, float]:
    """Peak memory of a resume in a fresh child process: peak RSS (VmHWM), its growth over the RSS after import, tracemalloc peak."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), "1" if use_snapshot else "0"], capture_output=True, text=True, check=True, env=env
    )
    data = json.loads(done.stdout)
    return {
        "traced_peak_mib": data["traced_peak"] / 2**20,
        "peak_rss_mib": data["hwm_kib"] / 1024,
        "rss_growth_mib": (data["hwm_kib"] - data["baseline_kib"]) / 1024,
    }
