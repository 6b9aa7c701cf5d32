"""Crash tests with real processes: SIGKILL a child running the loop at four points, resume in a fresh process.

The fake server runs here, in the pytest process; its reply is a function of
the request alone (how many messages it carries), so an interrupted-then-resumed
session and an uninterrupted one see the same answers.  The task is one turn:
charge (keyed) -> append_note (un-keyed write) -> lookup (read) -> final text.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent.state.decide import UNKNOWN_OUTCOME
from nbagent.tools.decorator import idempotency_key
from tests.support.crash_tools import read_effects
from tests.support.fake_anthropic import FakeAnthropic, RecordedRequest, Reply, text, tool_use

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "Charge 500, note it, then check the balance."
DENY_NOTE = "Approval is set to 'deny', so this call was not run."
WAIT = 30.0  # generous: a loaded CI machine; the tests end as soon as the condition holds

# The reply to a request with this many messages.
REPLIES: dict[int, Callable[[], Reply]] = {
    1: lambda: tool_use("charge", {"order": "order-1", "amount": 500}, id="toolu_charge", text="Starting the job: first the charge."),
    3: lambda: tool_use("append_note", {"text": "charged 500"}, id="toolu_note"),
    5: lambda: tool_use("lookup", {"name": "balance"}, id="toolu_lookup"),
    7: lambda: text("All done: charged, noted, and the balance is 42."),
}
FINAL = "All done: charged, noted, and the balance is 42."

pytestmark = pytest.mark.slow  # a crash campaign: real processes killed with SIGKILL


def responder(hang: dict[int, int] | None = None) -> Callable[[RecordedRequest], Reply]:
    """Answer by message count; ``hang`` maps a message count to the SSE event index to stall at (once)."""
    pending = dict(hang or {})

    def respond(request: RecordedRequest) -> Reply:
        count = len(request.body["messages"])
        reply = REPLIES[count]()
        if count in pending:
            reply.hang_after = pending.pop(count)
        return reply

    return respond


class Lines:
    """A process's stdout, collected line by line in a thread."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc, self.lines = proc, []  # type: list[str]
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, prefix: str, start: int = 0) -> str:
        """The first line from index ``start`` on that begins with ``prefix``."""
        deadline = time.monotonic() + WAIT
        while True:
            for line in self.lines[start:]:
                if line.startswith(prefix):
                    return line
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no {prefix!r} line; got {self.lines[start:]}")
            time.sleep(0.002)


class Zygote:
    """python -m tests.support.crash_child --zygote: one Popen'd process that has imported the SDK and forks a fresh process per run."""

    def __init__(self) -> None:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.crash_child", "--zygote"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.out = Lines(proc)

    def spawn(self, argv: list[str], stderr: Path) -> Child:
        self.out.wait_for("READY zygote")
        start = len(self.out.lines)
        assert self.out.proc.stdin is not None
        self.out.proc.stdin.write(json.dumps({"argv": argv, "stderr": str(stderr)}) + "\n")
        self.out.proc.stdin.flush()
        pid = int(self.out.wait_for("PID ", start).split()[1])
        return Child(self, pid, start, stderr)

    def close(self) -> None:
        assert self.out.proc.stdin is not None
        self.out.proc.stdin.close()
        try:
            self.out.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.out.proc.kill()
            self.out.proc.wait()


class Child:
    """One run of the loop in its own process, forked by the zygote."""

    def __init__(self, zygote: Zygote, pid: int, start: int, stderr: Path) -> None:
        self.zygote, self.pid, self.start, self.stderr_path = zygote, pid, start, stderr

    @property
    def lines(self) -> list[str]:
        return self.zygote.out.lines[self.start :]

    def returncode(self) -> int | None:
        ends = [line for line in self.lines if line.startswith(f"EXIT {self.pid} ")]
        return int(ends[0].split()[2]) if ends else None

    def wait_until(self, condition: Callable[[], bool], what: str) -> None:
        """Poll until ``condition`` holds; fail if the child exits first or it takes far too long."""
        deadline = time.monotonic() + WAIT
        while not condition():
            if self.returncode() is not None:
                pytest.fail(f"child exited ({self.returncode()}) before {what}: {self.stderr()}")
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"gave up waiting for {what}; child said {self.lines}: {self.stderr()}")
            time.sleep(0.002)

    def kill(self) -> int:
        """SIGKILL: no cleanup, no finally blocks, no flushing; returns the exit code the zygote saw."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:  # it had ended (and been reaped) already
            pass
        return self.wait()

    def wait(self) -> int:
        line = self.zygote.out.wait_for(f"EXIT {self.pid} ", self.start)
        return int(line.split()[2])

    def finish(self) -> str:
        """Wait for a clean exit and return the final text the child printed."""
        assert self.wait() == 0, self.stderr()
        done = [line for line in self.lines if line.startswith("DONE ")]
        assert len(done) == 1, self.lines
        return json.loads(done[0].split(" final=", 1)[1])

    def stderr(self) -> str:
        return self.stderr_path.read_text()[-3000:] if self.stderr_path.exists() else ""


def events(log: Path) -> list[dict[str, Any]]:
    return list(nbagent.read_events(log)) if log.exists() else []


def count(log: Path, kind: str) -> int:
    return sum(1 for e in events(log) if e["type"] == kind)


def effects_of(path: Path, tool: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_effects(path) if e["tool"] == tool and e["kind"] == kind]


@dataclass
class Run:
    """What one scenario left behind."""

    log: Path
    effects: Path
    before: list[RecordedRequest] = field(default_factory=list)  # requests before the kill
    after: list[RecordedRequest] = field(default_factory=list)  # requests of the resumed process

    @property
    def session_id(self) -> str:
        return events(self.log)[0]["session_id"]

    def messages(self) -> list[dict[str, Any]]:
        with nbagent.Session.open(self.log) as session:
            assert session.state.frontier == "done"
            return list(session.messages)


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    server = Zygote()
    yield server
    server.close()


@pytest.fixture(scope="module")
def baseline(zygote: Zygote, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The same job run start to finish without a crash."""
    folder = tmp_path_factory.mktemp("baseline")
    run = Run(folder / "session.jsonl", folder / "effects.jsonl")
    with FakeAnthropic() as fake:
        fake.responder = responder()
        argv = [str(run.log), str(run.effects), fake.base_url, "--prompt", PROMPT]
        started = time.perf_counter()
        assert zygote.spawn(argv, folder / "stderr").finish() == FINAL
        print(f"baseline run in a forked child: {time.perf_counter() - started:.2f}s")
        run.after = list(fake.requests)
    assert [len(r.body["messages"]) for r in run.after] == [1, 3, 5, 7]
    return run


@pytest.fixture
def crash(tmp_path: Path, fake: FakeAnthropic, zygote: Zygote) -> Iterator[Callable[..., Run]]:
    """Run the job in a child, kill it when ``until`` holds, then resume it in a fresh child."""

    def scenario(
        until: Callable[[Run, Child], None], *child_args: str, hang: dict[int, int] | None = None, resume_args: tuple[str, ...] = ()
    ) -> Run:
        run = Run(tmp_path / "session.jsonl", tmp_path / "effects.jsonl")
        fake.responder = responder(hang)
        common = [str(run.log), str(run.effects), fake.base_url]
        first = zygote.spawn([*common, "--prompt", PROMPT, *child_args], tmp_path / "first.stderr")
        children.append(first)
        until(run, first)
        assert first.kill() == -signal.SIGKILL
        run.before = list(fake.requests)
        fake.responder = responder()
        resumed = zygote.spawn([*common, *resume_args], tmp_path / "resumed.stderr")
        children.append(resumed)
        assert resumed.finish() == FINAL
        run.after = fake.requests[len(run.before) :]
        return run

    children: list[Child] = []
    yield scenario
    for child in children:  # a failed test must not leave a blocked child behind
        if child.returncode() is None:
            child.kill()


def bodies(requests: list[RecordedRequest]) -> list[dict[str, Any]]:
    return [r.body for r in requests]


def check_effects(run: Run, *, charge_attempts: int, notes: int = 1) -> None:
    """Keyed effects exactly once, every attempt with this call's one key; un-keyed writes as many as stated."""
    key = idempotency_key(run.session_id, "toolu_charge")
    applied = effects_of(run.effects, "charge", "applied")
    assert [(e["key"], e["args"]) for e in applied] == [(key, {"order": "order-1", "amount": 500})]
    assert [e["key"] for e in effects_of(run.effects, "charge", "attempt")] == [key] * charge_attempts
    assert [e["args"] for e in effects_of(run.effects, "append_note", "applied")] == [{"text": "charged 500"}] * notes


def test_baseline_effects(baseline: Run) -> None:
    assert baseline.messages()[-1] == {"role": "assistant", "content": [{"type": "text", "text": FINAL}]}
    check_effects(baseline, charge_attempts=1)
    assert len(effects_of(baseline.effects, "lookup", "read")) == 1


def test_a_killed_mid_stream(crash: Callable[..., Run], baseline: Run) -> None:
    def mid_stream(run: Run, child: Child) -> None:
        child.wait_until(lambda: count(run.log, "delta") >= 1, "the first reply's text so far in the log")

    # events: message_start, ping, text block start, 4 text deltas, then the stream stalls; the
    # loop's flusher logs what came (up to a word end) 50 ms later, while the stream hangs
    run = crash(mid_stream, hang={1: 7})
    assert [len(r.body["messages"]) for r in run.before] == [1]
    assert count(run.log, "assistant_msg") == 4  # the cut-off reply left deltas, never an assistant message
    # The cut-off call is made again with the same request; nothing completed is re-requested.
    assert bodies(run.after) == bodies(baseline.after)
    assert run.messages() == baseline.messages()
    check_effects(run, charge_attempts=1)


def test_b_killed_after_the_assistant_message_before_the_tool(crash: Callable[..., Run], baseline: Run) -> None:
    def after_assistant(run: Run, child: Child) -> None:
        child.wait_until(lambda: "READY after assistant_msg" in child.lines, "the first assistant message")
        assert count(run.log, "tool_started") == 0

    run = crash(after_assistant, "--pause-after", "assistant_msg:1")
    assert bodies(run.before) == bodies(baseline.after[:1])
    assert bodies(run.after) == bodies(baseline.after[1:])  # the completed first turn is not re-requested
    assert run.messages() == baseline.messages()
    check_effects(run, charge_attempts=1)


def test_c_killed_inside_a_keyed_tool(crash: Callable[..., Run], baseline: Run) -> None:
    def in_charge(run: Run, child: Child) -> None:
        child.wait_until(lambda: "READY in charge" in child.lines, "the charge tool to run")
        assert count(run.log, "tool_started") == 1 and count(run.log, "tool_result") == 0

    run = crash(in_charge, "--block-in", "charge")
    assert bodies(run.before) == bodies(baseline.after[:1])
    assert bodies(run.after) == bodies(baseline.after[1:])
    assert run.messages() == baseline.messages()  # the re-run with the same key answers as the first would have
    check_effects(run, charge_attempts=2)  # attempted twice, with one key, applied once
    started = [e for e in events(run.log) if e["type"] == "tool_started" and e["name"] == "charge"]
    assert [(e["attempt"], e["idempotency_key"]) for e in started] == [
        (1, started[0]["idempotency_key"]),
        (2, started[0]["idempotency_key"]),
    ]


def test_c_killed_inside_an_unkeyed_write_is_not_repeated(crash: Callable[..., Run], baseline: Run) -> None:
    def in_note(run: Run, child: Child) -> None:
        child.wait_until(lambda: "READY in append_note" in child.lines, "the append_note tool to run")

    run = crash(in_note, "--block-in", "append_note")  # both processes run with approval="deny"
    assert bodies(run.before) == bodies(baseline.after[:2])
    check_effects(run, charge_attempts=1, notes=1)  # the write happened once and was not silently repeated
    # The one legitimate difference: the interrupted write's result says its outcome is unknown, as it must.
    unknown = {"type": "tool_result", "tool_use_id": "toolu_note", "content": f"{UNKNOWN_OUTCOME} {DENY_NOTE}", "is_error": True}

    def normalized(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = json.loads(json.dumps(messages))
        for message in out:
            if message["role"] == "user" and isinstance(message["content"], list):
                message["content"] = [unknown if b.get("tool_use_id") == "toolu_note" else b for b in message["content"]]
        return out

    assert run.messages() == normalized(baseline.messages())
    assert bodies(run.after) == [dict(b, messages=normalized(b["messages"])) for b in bodies(baseline.after[2:])]
    approvals = [(e["reason"], e["decision"]) for e in events(run.log) if e["type"] == "approval"]
    assert approvals == [("unknown_outcome", "pending"), ("unknown_outcome", "declined")]


def test_c_killed_inside_an_unkeyed_write_is_not_repeated_under_auto(crash: Callable[..., Run], baseline: Run) -> None:
    """SIGKILL inside a write without an idempotency key, resumed with approval="auto": the write is not done twice."""

    def in_note(run: Run, child: Child) -> None:
        child.wait_until(lambda: "READY in append_note" in child.lines, "the append_note tool to run")

    run = crash(in_note, "--block-in", "append_note", resume_args=("--approval", "auto"))
    check_effects(run, charge_attempts=1, notes=1)  # "auto" approves the user's own new calls, never this repeat
    result = next(e for e in events(run.log) if e["type"] == "tool_result" and e["tool_use_id"] == "toolu_note")
    assert result["is_error"] and result["content"].startswith(UNKNOWN_OUTCOME) and "'auto'" in result["content"]
    approvals = [(e["reason"], e["decision"], e.get("by")) for e in events(run.log) if e["type"] == "approval"]
    assert approvals == [("unknown_outcome", "pending", None), ("unknown_outcome", "declined", "auto")]
    assert run.messages()[-1] == {"role": "assistant", "content": [{"type": "text", "text": FINAL}]}


def test_c_killed_inside_a_read_tool_reruns_it(crash: Callable[..., Run], baseline: Run) -> None:
    def in_lookup(run: Run, child: Child) -> None:
        child.wait_until(lambda: "READY in lookup" in child.lines, "the lookup tool to run")

    run = crash(in_lookup, "--block-in", "lookup")
    assert bodies(run.before) == bodies(baseline.after[:3])
    assert bodies(run.after) == bodies(baseline.after[3:])
    assert run.messages() == baseline.messages()
    check_effects(run, charge_attempts=1)
    assert len(effects_of(run.effects, "lookup", "read")) == 2


def test_d_killed_after_a_tool_result_before_the_next_model_call(crash: Callable[..., Run], fake: FakeAnthropic, baseline: Run) -> None:
    def before_next_call(run: Run, child: Child) -> None:
        # The server holds the second request (the one after charge's result) until the kill.
        child.wait_until(lambda: len(fake.requests) == 2, "the request after the first tool result")
        assert count(run.log, "tool_result") == 1 and count(run.log, "assistant_msg") == 1

    run = crash(before_next_call, hang={3: 0})
    assert bodies(run.before) == bodies(baseline.after[:2])
    assert bodies(run.after) == bodies(baseline.after[1:])  # only the unanswered call is made again
    assert run.messages() == baseline.messages()
    check_effects(run, charge_attempts=1)


def test_d_killed_right_after_the_tool_result_is_logged(crash: Callable[..., Run], baseline: Run) -> None:
    def after_result(run: Run, child: Child) -> None:
        child.wait_until(lambda: "READY after tool_result" in child.lines, "the first tool result")
        assert count(run.log, "model_call") == 1

    run = crash(after_result, "--pause-after", "tool_result:1")
    assert bodies(run.before) == bodies(baseline.after[:1])
    assert bodies(run.after) == bodies(baseline.after[1:])
    assert run.messages() == baseline.messages()
    check_effects(run, charge_attempts=1)
