"""Scenario 8, the kill loop: SIGKILL a child running a scripted session at seeded points, resume it, check everything.

Each case runs ``reliability/child.py`` (forked from a warmed-up zygote) on a fresh log,
kills it at a seeded point, then resumes it in a fresh process which may itself be
killed, until a run finishes.  Kill points: after the Nth event of a type (the child
pauses in a subscriber), inside a tool after its effect, or after a seeded random delay.
The fake Messages API runs in this process; its reply depends only on the request.

Checked after every case, against the tools' own fsynced effects file and against an
uninterrupted baseline run:

* keyed effects (``charge``) applied exactly once per call, every attempt with that call's key;
* un-keyed writes (``append_note``) applied at most once; a call that had started but had no
  result when a process was killed ends with the unknown-outcome ``tool_result`` (and only such calls);
* every event the child announced as durable is in the final log with the same seq, type and checksum;
* the final log scans whole (no gap, no damage), and the final transcript equals the baseline's
  after one normalization: the ``tool_result`` block of each such interrupted un-keyed call is
  taken from the killed run (it says the outcome is unknown), nothing else.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbagent import stores
from nbagent.record.log_reader import scan
from nbagent.state import fold
from nbagent.state.decide import UNKNOWN_OUTCOME
from nbagent.stores import ENV
from nbagent.tools.decorator import idempotency_key
from tests.support.crash_tools import read_effects
from tests.support.fake_anthropic import FakeAnthropic, RecordedRequest, Reply, text, tool_uses

ROOT = Path(__file__).resolve().parent.parent
WAIT = 60.0  # generous; every wait ends as soon as its condition holds


# The scripted conversation ------------------------------------------------------------------
def respond(request: RecordedRequest) -> Reply:
    """The fake model: a reply chosen by the turn (prompts so far) and step (assistant messages since)."""
    messages = request.body["messages"]
    prompts = [i for i, m in enumerate(messages) if m["role"] == "user" and _has_text(m["content"])]
    turn, step = len(prompts), sum(1 for m in messages[prompts[-1] :] if m["role"] == "assistant")
    if step == 0:
        return tool_uses(
            [
                ("charge", {"order": f"order-{turn}", "amount": 100 * turn}, f"toolu_t{turn}_charge"),
                ("lookup", {"name": f"balance-{turn}"}, f"toolu_t{turn}_lookup"),
            ],
            f"Turn {turn}: I will charge order-{turn} and look up the balance at the same time.",
        )
    if step == 1:
        return tool_uses([("append_note", {"text": f"charged order-{turn}"}, f"toolu_t{turn}_note")], "Now the ledger.")
    return text(f"Turn {turn} is done: order-{turn} was charged, the ledger has a line, and the balance is 42.")


def _has_text(content: Any) -> bool:
    return isinstance(content, str) or any(b.get("type") == "text" for b in content)


# The zygote and its children ----------------------------------------------------------------
class Zygote:
    """``python -m reliability.child --zygote``: forks one fresh child per run."""

    def __init__(self, store: str = "") -> None:
        env = {**os.environ, ENV: store} if store else {k: v for k, v in os.environ.items() if k != ENV}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "reliability.child", "--zygote"],
            cwd=ROOT,
            env=env,  # the children open their session in this store (NBAGENT_STORE), the files when ''
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        self.wait_for(lambda line: line == "READY zygote", 0, 120.0)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.changed:
                self.lines.append(line.rstrip("\n"))
                self.changed.notify_all()
        with self.changed:
            self.lines.append("ZYGOTE GONE")
            self.changed.notify_all()

    def wait_for(self, match: Any, start: int, timeout: float = WAIT) -> str | None:
        """The first line from ``start`` on for which ``match`` holds (None on timeout)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for line in self.lines[start:]:
                    if match(line) or line == "ZYGOTE GONE":
                        return line
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.changed.wait(left)

    def spawn(self, argv: list[str], stderr: Path) -> Child:
        with self.changed:
            start = len(self.lines)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"argv": argv, "stderr": str(stderr)}) + "\n")
        self.proc.stdin.flush()
        line = self.wait_for(lambda s: s.startswith("PID "), start)
        if line is None or not line.startswith("PID "):
            raise RuntimeError(f"the zygote did not fork a child: {line}")
        return Child(self, int(line.split()[1]), start, stderr)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass
class Child:
    """One forked run."""

    zygote: Zygote
    pid: int
    start: int
    stderr: Path

    def output(self) -> list[str]:
        """This child's stdout lines (its own lines are prefixed EV/READY/DONE; the zygote's PID/EXIT)."""
        with self.zygote.changed:
            return self.zygote.lines[self.start :]

    def ended(self) -> str | None:
        return self.zygote.wait_for(lambda s: s.startswith(f"EXIT {self.pid} "), self.start, 0)

    def wait_ready_or_exit(self) -> str | None:
        """``READY ...`` if the child reached its kill hook, ``EXIT ...`` if it ended first."""
        return self.zygote.wait_for(lambda s: s.startswith("READY ") or s.startswith(f"EXIT {self.pid} "), self.start)

    def kill(self) -> int:
        """SIGKILL (if still running) and return the exit code the zygote saw."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return self.wait()

    def wait(self) -> int:
        line = self.zygote.wait_for(lambda s: s.startswith(f"EXIT {self.pid} "), self.start)
        if line is None or not line.startswith("EXIT "):
            raise RuntimeError(f"no exit seen for child {self.pid}; its last output: {self.output()[-8:]}")
        return int(line.split()[2])


# Kill plans -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """Where to kill one run: ``kind`` is "event", "tool" or "delay"."""

    kind: str
    label: str
    args: tuple[str, ...] = ()
    delay: float = 0.0


def choose_plan(rng: random.Random, counts: dict[str, int], duration: float) -> Plan:
    """A seeded kill point: after an event of some type, inside a tool, or after a delay."""
    roll = rng.random()
    if roll < 0.5:
        kind = rng.choice(sorted(counts))
        nth = rng.randint(1, counts[kind])
        return Plan("event", f"after {kind}", ("--pause-after", f"{kind}:{nth}"))
    if roll < 0.65:
        tool = rng.choice(["charge", "append_note", "lookup"])
        return Plan("tool", f"in {tool}", ("--block-in", f"{tool}:{rng.randint(1, 2)}"))
    return Plan("delay", "random delay", delay=rng.uniform(0.0, duration * 1.2))


# One case -------------------------------------------------------------------------------------
@dataclass
class Baseline:
    """The uninterrupted run: its transcript, event counts per type and duration."""

    messages: list[dict[str, Any]]
    counts: dict[str, int]
    duration: float


@dataclass
class CaseResult:
    kills: Counter[str] = field(default_factory=Counter)
    runs: int = 0
    resume_kills: int = 0
    unknown: int = 0
    durable_checked: int = 0
    announced_kept: int = 0
    keyed_retries: int = 0
    read_reruns: int = 0
    torn: int = 0
    failures: list[str] = field(default_factory=list)


def run_job(zygote: Zygote, folder: Path, plan: Plan | None, base_url: str, index: int) -> tuple[Child, bool]:
    """Start one run with ``plan``; return the child and whether it was killed."""
    argv = [str(folder / "session.jsonl"), str(folder / "effects.jsonl"), base_url, *(plan.args if plan else ())]
    child = zygote.spawn(argv, folder / f"run{index}.stderr")
    if plan is None:
        return child, child.wait() == -signal.SIGKILL
    if plan.kind == "delay":
        time.sleep(plan.delay)
        if child.ended() is not None:
            return child, False
    else:
        line = child.wait_ready_or_exit()
        if line is None or not line.startswith("READY "):
            return child, child.wait() == -signal.SIGKILL
    return child, child.kill() == -signal.SIGKILL


def log_bytes(log: Path, store: str) -> bytes:
    """The session's lines: the log file, or its rows in the database ``store`` names (b'' before it exists)."""
    if not store:
        return log.read_bytes() if log.exists() else b""
    source: Any = stores.get_store(store)  # a database store: it also reads a session's lines whole
    if not any(item.name == log.stem for item in source.list(notebook=str(log.parent))):
        return b""  # killed before its first commit
    return source.read_bytes(log)


def open_unkeyed_calls(log: Path, store: str) -> set[str]:
    """Un-keyed write calls that have started and have no result in the log (read right after a kill)."""
    started, finished = set(), set()
    for event in scan(log_bytes(log, store), path=str(log)).events:
        if event["type"] == "tool_started" and event["name"] == "append_note":
            started.add(event["tool_use_id"])
        elif event["type"] == "tool_result":
            finished.add(event["tool_use_id"])
    return started - finished


def run_case(
    zygote: Zygote, folder: Path, rng: random.Random, baseline: Baseline, base_url: str, max_kills: int, store: str = ""
) -> CaseResult:
    """Kill and resume one session until a run finishes, then check it."""
    result = CaseResult()
    log, effects = folder / "session.jsonl", folder / "effects.jsonl"
    durable: dict[int, tuple[str, str]] = {}
    announced: dict[int, tuple[str, str]] = {}
    interrupted: set[str] = set()
    plan: Plan | None = choose_plan(rng, baseline.counts, baseline.duration)
    while True:
        child, killed = run_job(zygote, folder, plan, base_url, result.runs)
        result.runs += 1
        for line in child.output():
            if line.startswith("EV ") and len(line.split()) == 5:
                _, seq, kind, crc, is_durable = line.split()
                announced[int(seq)] = (kind, crc)
                if is_durable == "1":
                    durable[int(seq)] = (kind, crc)
            if line.startswith(f"EXIT {child.pid} "):
                break
        if not killed:
            code = child.wait()
            if code != 0:
                result.failures.append(f"run {result.runs} exited with {code}: {child.stderr.read_text()[-2000:]}")
                return result
            break
        assert plan is not None
        result.kills[plan.label] += 1
        if result.runs > 1:
            result.resume_kills += 1
        interrupted |= open_unkeyed_calls(log, store)
        plan = (
            choose_plan(rng, baseline.counts, baseline.duration) if sum(result.kills.values()) < max_kills and rng.random() < 0.5 else None
        )
    result.torn = len(list(folder.glob("session.jsonl.torn-*")))
    check_case(result, log_bytes(log, store), log, effects, baseline, durable, announced, interrupted)
    return result


def check_case(
    result: CaseResult,
    data: bytes,
    log: Path,
    effects: Path,
    baseline: Baseline,
    durable: dict[int, tuple[str, str]],
    announced: dict[int, tuple[str, str]],
    interrupted: set[str],
) -> None:
    """Compare one finished case with the effects record, the announced events and the baseline."""
    fail = result.failures.append
    try:
        whole = scan(data, path=str(log))
    except Exception as exc:  # noqa: BLE001 - any error here is a finding
        fail(f"the final log does not scan: {exc}")
        return
    if whole.torn:
        fail(f"the final log has a torn tail: {whole.torn_reason}")
    events = whole.events
    by_seq = {e["seq"]: e for e in events}
    for seq, (kind, crc) in durable.items():
        found = by_seq.get(seq)
        if found is None or (found["type"], found["crc"]) != (kind, crc):
            fail(f"durable event seq {seq} ({kind}) was lost or replaced by {found and found['type']}")
    result.durable_checked = len(durable)
    result.announced_kept = sum(1 for seq, pair in announced.items() if seq in by_seq and (by_seq[seq]["type"], by_seq[seq]["crc"]) == pair)
    state = fold.fold(events)
    if state.frontier != "done" or state.turns != 2:
        fail(f"the session did not end done after two turns (frontier {state.frontier}, turns {state.turns})")
        return
    uses = {b["id"]: b for m in state.messages if m["role"] == "assistant" for b in m["content"] if b.get("type") == "tool_use"}
    results = {
        b["tool_use_id"]: b
        for m in state.messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    }
    started = Counter(e["tool_use_id"] for e in events if e["type"] == "tool_started")
    done = read_effects(effects)
    keys = {idempotency_key(state.session_id, tid): tid for tid, b in uses.items() if b["name"] == "charge"}
    applied = Counter(e["key"] for e in done if e["tool"] == "charge" and e["kind"] == "applied")
    attempts = Counter(e["key"] for e in done if e["tool"] == "charge" and e["kind"] == "attempt")
    for key, tid in keys.items():
        if applied[key] != 1:
            fail(f"keyed charge {tid} was applied {applied[key]} times")
        result.keyed_retries += max(0, attempts[key] - 1)
    if set(applied) - set(keys) or set(attempts) - set(keys):
        fail(f"charges with keys of no recorded call: {sorted(set(applied) | set(attempts) - set(keys))}")
    for tid, use in uses.items():
        block = results.get(tid)
        if block is None:
            fail(f"call {tid} has no result")
            continue
        unknown = bool(block.get("is_error")) and str(block["content"]).startswith(UNKNOWN_OUTCOME)
        if use["name"] == "append_note":
            times = sum(1 for e in done if e["tool"] == "append_note" and e["args"] == use["input"])
            if times > 1:
                fail(f"un-keyed write {tid} was applied {times} times")
            if started[tid] != 1:
                fail(f"un-keyed write {tid} was started {started[tid]} times")
            if unknown != (tid in interrupted):
                fail(f"un-keyed write {tid}: unknown-outcome result {unknown}, but interrupted while running {tid in interrupted}")
            if not unknown and times != 1:
                fail(f"un-keyed write {tid} reported success but was applied {times} times")
            result.unknown += unknown
        elif unknown or block.get("is_error"):
            fail(f"{use['name']} call {tid} ended with an error result: {block['content']}")
        if use["name"] == "lookup":
            result.read_reruns += max(0, started[tid] - 1)
    expected = [_normalized(m, results, interrupted) for m in baseline.messages]
    if state.messages != expected:
        fail("the final transcript differs from the uninterrupted run's (after normalizing unknown outcomes)")


def _normalized(message: dict[str, Any], results: dict[str, dict[str, Any]], interrupted: set[str]) -> dict[str, Any]:
    """A baseline message with the result blocks of interrupted un-keyed calls taken from the killed run."""
    if message["role"] != "user" or not isinstance(message["content"], list):
        return message
    blocks = [results.get(b.get("tool_use_id"), b) if b.get("tool_use_id") in interrupted else b for b in message["content"]]
    return {"role": "user", "content": blocks}


def make_baseline(zygote: Zygote, work: Path, base_url: str, store: str = "") -> Baseline:
    """Run the job once, uninterrupted."""
    folder = work / "baseline"
    folder.mkdir()
    started = time.perf_counter()
    child, killed = run_job(zygote, folder, None, base_url, 0)
    duration = time.perf_counter() - started
    if killed or child.wait() != 0:
        raise RuntimeError(f"the baseline run failed: {(folder / 'run0.stderr').read_text()[-2000:]}")
    events = scan(log_bytes(folder / "session.jsonl", store), path="baseline").events
    counts = Counter(e["type"] for e in events)
    del counts["session_start"]  # logged once, before anything can go wrong; still hit by delay kills
    return Baseline(fold.fold(events).messages, dict(counts), duration)


# The campaign -----------------------------------------------------------------------------------
def run_killloop(quick: bool, seed: int, *, kills: int | None = None, workers: int = 2, store: str = "") -> dict[str, Any]:
    """Scenario 8: at least ``kills`` SIGKILLs (quick: 40, full: 1,000) with resumes; returns the table row.

    ``store``: a ``postgresql://`` URL to run every session in that database instead of in files.
    """
    target = kills if kills is not None else (40 if quick else 1000)
    began = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="nbagent-killloop-"))
    totals = CaseResult()
    failures: list[str] = []
    lock = threading.Lock()
    next_case = [0]
    cases = [0]
    with FakeAnthropic() as fake:
        fake.responder = respond
        # A killed child resets its connection mid-stream; that is the point, not an error to print.
        fake._httpd.handle_error = lambda *_: None  # type: ignore[method-assign]
        zygotes = [Zygote(store) for _ in range(max(1, workers))]
        try:
            baseline = make_baseline(zygotes[0], work, fake.base_url, store)

            def worker(zygote: Zygote) -> None:
                while True:
                    with lock:
                        if sum(totals.kills.values()) >= target or len(failures) >= 20:
                            return
                        index = next_case[0]
                        next_case[0] += 1
                    folder = work / f"case{index}"
                    folder.mkdir()
                    rng = random.Random(f"{seed}:{index}")
                    try:
                        outcome = run_case(zygote, folder, rng, baseline, fake.base_url, max_kills=4, store=store)
                    except Exception as exc:  # noqa: BLE001 - reported as a failure of this case
                        outcome = CaseResult(failures=[f"harness error: {exc!r}"])
                    with lock:
                        cases[0] += 1
                        _add(totals, outcome)
                        failures.extend(f"seed {seed} case {index}: {f}" for f in outcome.failures)
                    if not outcome.failures:
                        shutil.rmtree(folder, ignore_errors=True)

            threads = [threading.Thread(target=worker, args=(z,)) for z in zygotes]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            for zygote in zygotes:
                zygote.close()
            requests = len(fake.requests)
    if not failures:
        shutil.rmtree(work, ignore_errors=True)
    killed = sum(totals.kills.values())
    by_point = ", ".join(f"{label} {n}" for label, n in sorted(totals.kills.items(), key=lambda kv: -kv[1]))
    return {
        "scenario": "8. Kill loop (SIGKILL + resume)" + (" on PostgreSQL" if store else ""),
        "cases": f"{killed} kills in {cases[0]} sessions ({totals.runs} runs, {totals.resume_kills} kills during a resume)",
        "checked": (
            "keyed charge applied exactly once per call; un-keyed write at most once, and the unknown-outcome "
            "result present exactly for the calls interrupted while running; every announced durable event kept "
            "(seq, type, crc); final log scans whole; final transcript == uninterrupted run (result blocks of "
            "interrupted un-keyed calls normalized)"
        ),
        "result": "pass" if not failures else f"FAIL ({len(failures)})",
        "failures": failures[:20],
        "details": {
            "kills by point": by_point,
            "unknown outcomes reported": totals.unknown,
            "keyed re-attempts (same key, applied once)": totals.keyed_retries,
            "read tool re-runs": totals.read_reruns,
            "durable events checked": totals.durable_checked,
            "announced events (durable or not) found after resume": totals.announced_kept,
            "torn tails cut off and kept aside": totals.torn,
            "model requests served": requests,
            "baseline run": f"{baseline.duration:.2f} s, {sum(baseline.counts.values()) + 1} events",
            "workers": len(zygotes),
            "work folder kept": str(work) if failures else "removed (no failure)",
        },
        "seed": seed,
        "duration": time.perf_counter() - began,
    }


def _add(totals: CaseResult, case: CaseResult) -> None:
    totals.kills.update(case.kills)
    totals.runs += case.runs
    totals.resume_kills += case.resume_kills
    totals.unknown += case.unknown
    totals.durable_checked += case.durable_checked
    totals.announced_kept += case.announced_kept
    totals.keyed_retries += case.keyed_retries
    totals.read_reruns += case.read_reruns
    totals.torn += case.torn


SCENARIOS = {"killloop": run_killloop}
