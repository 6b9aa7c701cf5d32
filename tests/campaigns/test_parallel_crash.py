"""SIGKILL while a reply's reads run side by side, then resume (issue 25, item 1): what finished is reused, reads run again.

The child (tests/support/parallel_child.py) runs a reply of a write, three reads and a write; the reads ``b`` and
``c`` block inside their bodies, so the child is killed with both running beside each other and ``a``
answered.  The resume, in this process, must not repeat the first write nor ``a``, must run ``b`` and
``c`` again and the last write once, and must send the very request an uninterrupted run sends.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import anthropic
import pytest

import nbagent
from nbagent.record import events as ev
from tests.support.fake_anthropic import FakeAnthropic, text, tool_uses
from tests.support.parallel_child import CALLS, make_tools

pytestmark = pytest.mark.slow  # a real child process, killed with SIGKILL

ROOT = Path(__file__).resolve().parents[2]


def wait_until(check: Callable[[], bool], what: str, child: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if child.poll() is not None:
            raise AssertionError(f"the child ended ({child.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def started(effects: Path) -> list[str]:
    """The tool bodies started so far, as the tools recorded them ("fetch a", "note w1", ...)."""
    return [line.rsplit(" ", 1)[0] for line in effects.read_text().splitlines()] if effects.exists() else []


def answered(log: Path) -> set[str]:
    """The calls whose result the child's log holds (read as bytes: the child still writes it)."""
    found = set()
    for line in log.read_bytes().splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if event.get("type") == ev.TOOL_RESULT:
                found.add(event["tool_use_id"])
    return found


def logged(log: Path) -> list[ev.Event]:
    with nbagent.Session.open(log) as session:  # reading needs no writer: the child is dead by then
        return list(session.events())


def test_sigkill_while_reads_run_side_by_side_then_resume(fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path) -> None:
    # What an uninterrupted run sends after the calls: the request the resume must send too, byte for byte.
    fake.script(tool_uses(CALLS, "Working."), text("All done."))
    with nbagent.Session.open(tmp_path / "baseline.jsonl") as session:
        nbagent.run(session, "fetch and note", tools=make_tools(tmp_path / "baseline-effects"), client=client, model="claude-test")
    expected = fake.requests[-1].raw

    log, effects = tmp_path / "session.jsonl", tmp_path / "effects"
    fake.script(tool_uses(CALLS, "Working."), text("All done."))
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.support.parallel_child", str(log), str(effects), fake.base_url, "--block", "b,c"],
        cwd=ROOT,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: {"fetch b", "fetch c"} <= set(started(effects)), "b and c running", child)
        wait_until(lambda: "toolu_a" in answered(log), "a's result", child)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL

    before = logged(log)
    results = {e["tool_use_id"] for e in before if e["type"] == ev.TOOL_RESULT}
    running = {e["tool_use_id"] for e in before if e["type"] == ev.TOOL_STARTED} - results
    assert results == {"toolu_w1", "toolu_a"} and running == {"toolu_b", "toolu_c"}  # killed with two reads side by side

    with nbagent.Session.open(log) as session:
        assert nbagent.run(session, tools=make_tools(effects), client=client, model="claude-test") == "All done."
        after = list(session.events(since=before[-1]["seq"]))
    assert sorted(started(effects)) == sorted(["note w1", "fetch a", "fetch b", "fetch c", "fetch b", "fetch c", "note w2"])
    again = {e["tool_use_id"]: e["attempt"] for e in after if e["type"] == ev.TOOL_STARTED}
    assert again == {"toolu_b": 2, "toolu_c": 2, "toolu_w2": 1}  # the reads run again; the write that never started, once
    assert fake.requests[-1].raw == expected  # the same request as a run that was never killed
