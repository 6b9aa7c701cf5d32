"""Scenario 9, two writers on one log: refused at once, the lock outlives other descriptors, a crashed holder frees it.

Writers are real processes (``python -c``) and, for the notebook case, two real ipykernels
started with jupyter_client on the same notebook, both running ``%agent``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbagent
from nbagent.errors import LogLockedError
from tests.support.fake_anthropic import FakeAnthropic, text
from tests.support.kernels import Kernel

ROOT = Path(__file__).resolve().parent.parent
LOCKED_WORDS = "is open for writing in another process"
CELL: dict[str, Any] = {"allow_stdin": True, "timeout": 120}  # a frontend that could answer input(), on a loaded machine

# A second writer in its own process: tries to open the log, prints what happened as JSON.
TRY_OPEN = """
import json, sys, time
import nbagent
began = time.perf_counter()
try:
    with nbagent.Session.open(sys.argv[1]) as s:
        s.append("note", text="second writer")
        outcome = {"opened": True, "seq": s.seq}
except Exception as exc:
    outcome = {"opened": False, "error": type(exc).__name__, "message": str(exc)}
outcome["seconds"] = time.perf_counter() - began
print(json.dumps(outcome))
"""

# A holder that is SIGKILLed while it holds the lock.
HOLD = """
import sys, threading
import nbagent
s = nbagent.Session.open(sys.argv[1])
s.append("note", text="holder was here")
print("HOLDING", flush=True)
threading.Event().wait()
"""

# Another process that opens and closes the log and its lock file (other descriptors of the same files).
TOUCH = """
import os, sys
for name in (sys.argv[1], sys.argv[1] + ".lock"):
    fd = os.open(name, os.O_RDWR)
    os.close(fd)
    open(name, "rb").close()
print("TOUCHED")
"""


def _python(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def second_writer(log: Path) -> dict[str, Any]:
    """Try to open ``log`` for writing in a fresh process."""
    proc = _python(TRY_OPEN, str(log))
    out, err = proc.communicate(timeout=120)
    if proc.returncode != 0 or not out.strip():
        raise RuntimeError(f"the second-writer process failed: {err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


class Tally:
    """Cases and failures of one scenario."""

    def __init__(self) -> None:
        self.cases, self.failures, self.refusals = 0, [], []  # type: int, list[str], list[float]

    def check(self, ok: bool, what: str) -> None:
        self.cases += 1
        if not ok:
            self.failures.append(what)

    def refused(self, outcome: dict[str, Any], what: str) -> None:
        ok = not outcome["opened"] and outcome.get("error") == "LogLockedError" and LOCKED_WORDS in outcome.get("message", "")
        self.check(ok, f"{what}: expected LogLockedError, got {outcome}")
        if ok:
            self.refusals.append(outcome["seconds"])


def process_cases(folder: Path, tally: Tally, round_: int) -> None:
    """Second writers in other processes and in this one; descriptors closed; crashed and closed holders."""
    log = folder / f"round{round_}.jsonl"
    holder = nbagent.Session.open(log)
    holder.append("note", text="first writer")
    tally.refused(second_writer(log), "another process while the holder writes")
    try:
        nbagent.Session.open(log).close()
        tally.check(False, "a second Session.open in the holder's own process was allowed")
    except LogLockedError as exc:
        tally.check(LOCKED_WORDS in str(exc), f"same-process refusal message: {exc}")
    # Other descriptors of the log and of its lock file, opened and closed here and in another process:
    # with POSIX record locks (fcntl) the first close would drop the lock; flock must not.
    for name in (log, Path(f"{log}.lock")):
        os.close(os.open(name, os.O_RDWR))
        open(name, "rb").close()
    touch = _python(TOUCH, str(log))
    touch.communicate(timeout=120)
    tally.check(touch.returncode == 0, "the process touching the files failed")
    tally.refused(second_writer(log), "another process after other descriptors were closed")
    holder.append("note", text="still the writer")
    holder.close()
    outcome = second_writer(log)
    tally.check(outcome["opened"], f"after the holder closed, a new writer was refused: {outcome}")
    # A holder killed with SIGKILL: the kernel drops its flock, the next writer gets in at once.
    crashed = folder / f"crashed{round_}.jsonl"
    proc = _python(HOLD, str(crashed))
    assert proc.stdout is not None
    line = proc.stdout.readline()
    tally.check(line.strip() == "HOLDING", f"the holder did not start: {line!r}")
    tally.refused(second_writer(crashed), "another process while a live holder waits")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.communicate()
    outcome = second_writer(crashed)
    tally.check(outcome["opened"], f"after the holder was SIGKILLed, a new writer was refused: {outcome}")
    notes = [e.get("text") for e in nbagent.read_events(crashed) if e["type"] == "note"]
    tally.check(notes == ["holder was here", "second writer"], f"the crashed holder's log reads {notes}")


def kernel_cases(folder: Path, tally: Tally) -> None:
    """Two ipykernels on one notebook, ``%agent`` in both: the second gets a UsageError naming the lock."""
    with FakeAnthropic() as fake:
        fake.responder = lambda request: text("Hello from the fake Claude.")
        env = {
            **os.environ,
            "ANTHROPIC_BASE_URL": fake.base_url,
            "ANTHROPIC_API_KEY": "test-key",
            "JPY_SESSION_NAME": str(folder / "shared.ipynb"),
        }
        first = second = None
        try:
            first, second = Kernel(folder, env, timeout=120), Kernel(folder, env, timeout=120)
            for kernel in (first, second):
                kernel.try_run("%load_ext nbagent", **CELL)
            status, shown = first.try_run("%agent say hello", **CELL)
            tally.check(status == "ok" and "Hello from the fake Claude." in shown, f"the first kernel's %agent: {status} {shown[-500:]}")
            status, shown = second.try_run("%agent say hello too", **CELL)
            tally.check(
                status == "error" and "UsageError" in shown and LOCKED_WORDS in shown and "Traceback" not in shown,
                f"the second kernel's %agent was not refused with a UsageError naming the lock: {status} {shown[-800:]}",
            )
            first.kill()
            first = None
            status, shown = second.try_run("%agent say hello too", **CELL)
            tally.check(
                status == "ok" and "Hello from the fake Claude." in shown,
                f"after the first kernel was SIGKILLed, the second still could not write: {status} {shown[-500:]}",
            )
        finally:
            for kernel in (first, second):
                if kernel is not None:
                    kernel.shutdown()


def run_locks(quick: bool, seed: int) -> dict[str, Any]:
    """Scenario 9 (deterministic; ``seed`` only labels the row)."""
    began = time.perf_counter()
    tally = Tally()
    folder = Path(tempfile.mkdtemp(prefix="nbagent-locks-"))
    try:
        for round_ in range(2 if quick else 20):
            process_cases(folder, tally, round_)
        kernel_cases(folder, tally)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    refusals = sorted(tally.refusals)
    return {
        "scenario": "9. Two writers on one log",
        "cases": f"{tally.cases} checks ({2 if quick else 20} rounds of 8 process cases + 2 ipykernels on one notebook)",
        "checked": (
            "a second writer (another process, the same process, a second kernel's %agent) is refused at once with "
            "LogLockedError / a UsageError naming the lock; still refused after other descriptors of the log and "
            "lock file were opened and closed in the holder and in another process; a closed or SIGKILLed "
            "holder's lock is free at once and its events are kept"
        ),
        "result": "pass" if not tally.failures else f"FAIL ({len(tally.failures)})",
        "failures": tally.failures[:20],
        "details": {
            "refusals in another process": len(refusals),
            "time to refuse, median (open + refusal, in the second process)": f"{refusals[len(refusals) // 2] * 1000:.1f} ms"
            if refusals
            else "n/a",
            "lock mechanism": "flock on <log>.lock (filelock), timeout 0",
        },
        "seed": seed,
        "duration": time.perf_counter() - began,
    }


SCENARIOS: dict[str, Callable[[bool, int], dict[str, Any]]] = {"locks": run_locks}
