"""Parallel tool calls (issue 25, item 1): the grouping rule as a table, then the loop with the real SDK against the fake API.

Reads of one reply are shown to run side by side by a barrier each must reach with the others (a timeout
breaks it, and the call fails); a write between reads runs alone, in order; the request is the same bytes
whichever call finished first; an interrupt while calls run logs nothing after it, and a resume re-runs the reads.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anthropic
import pytest

import nbagent
from nbagent.agent.parallel import DEFAULT_BOUND, Slot, bound, groups
from nbagent.record import events as ev
from tests.support.fake_anthropic import FakeAnthropic, text, tool_uses

MODEL = "claude-test"
WAIT = 20.0  # seconds a barrier waits for the others on a loaded machine (a sequential run breaks it at once, see below)

R, W = True, False  # a read that runs without asking; anything else (a write, a call to ask about, a refusal)


@pytest.mark.parametrize(
    ("slots", "limit", "expected"),
    [
        ([], 4, []),
        ([("a", "read_file", R)], 4, [["a"]]),
        ([("a", "read_file", R), ("b", "read_file", R), ("c", "lookup", R)], 4, [["a", "b", "c"]]),
        # the bound is the pool's: a group of 6 reads runs 2 at a time, still one group
        ([(x, "lookup", R) for x in "abcdef"], 2, [list("abcdef")]),
        # one at a time: every call alone, in the reply's order (what parallel=False does)
        ([("a", "lookup", R), ("b", "lookup", R)], 1, [["a"], ["b"]]),
        # a write is a barrier: the reads before it, then it alone, then the reads after it
        ([("a", "lookup", R), ("b", "lookup", R), ("w", "write_file", W), ("c", "lookup", R)], 4, [["a", "b"], ["w"], ["c"]]),
        ([("w", "write_file", W), ("x", "shell", W)], 4, [["w"], ["x"]]),
        ([("w", "write_file", W), ("a", "lookup", R), ("b", "lookup", R)], 4, [["w"], ["a", "b"]]),
        # a read that must be asked about (or is refused) runs alone, after the reads before it
        ([("a", "read_file", R), ("b", "read_file", W), ("c", "read_file", R)], 4, [["a"], ["b"], ["c"]]),
        # python never beside python, even declared a read: its twin starts a new group
        ([("p", "python", R), ("a", "lookup", R), ("q", "python", R), ("b", "lookup", R)], 4, [["p", "a"], ["q", "b"]]),
        ([("p", "python", W), ("q", "python", W)], 4, [["p"], ["q"]]),
    ],
)
def test_groups(slots: Sequence[tuple[str, str, bool]], limit: int, expected: list[list[str]]) -> None:
    assert groups([Slot(*s) for s in slots], limit) == expected


@pytest.mark.parametrize(("parallel", "expected"), [(True, DEFAULT_BOUND), (False, 1), (1, 1), (16, 16)])
def test_bound(parallel: int | bool, expected: int) -> None:
    assert bound(parallel) == expected


@pytest.mark.parametrize("parallel", [0, -2, 2.5, "4", None])
def test_bound_refuses_what_is_not_a_count(parallel: Any) -> None:
    with pytest.raises(ValueError, match="parallel must be True, False or a number"):
        bound(parallel)


# The loop --------------------------------------------------------------------------------------------------
class Trace:
    """What the tools did, in order, from every thread: ("start" | "end", name)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.steps: list[tuple[str, str]] = []

    def add(self, step: str, name: str) -> None:
        with self.lock:
            self.steps.append((step, name))

    def index(self, step: str, name: str) -> int:
        return self.steps.index((step, name))


def meeting_tools(trace: Trace, barriers: dict[str, threading.Barrier]) -> list[nbagent.Tool]:
    """A read that waits at its group's barrier until the other reads of that group reach it, and a write."""

    @nbagent.tool(effect="read")
    def meet(name: str, group: str) -> str:
        """Wait for the other calls of a group.

        Args:
            name: This call's name.
            group: The group it meets.
        """
        trace.add("start", name)
        barriers[group].wait()  # BrokenBarrierError if the others never come: the call fails
        trace.add("end", name)
        return f"{name} met {group}"

    @nbagent.tool
    def note(text: str) -> str:
        """Write a note (a side effect).

        Args:
            text: The note.
        """
        trace.add("start", text)
        trace.add("end", text)
        return f"noted {text}"

    return [meet, note]


def go(session: nbagent.Session, client: anthropic.Anthropic, prompt: str | None, tools: list[nbagent.Tool], **kw: Any) -> str:
    model = nbagent.AnthropicModel(MODEL, client=client)
    return nbagent.Loop(session, tools=tools, model=model, approval="deny", **kw).run(prompt)


def results(session: nbagent.Session) -> list[ev.Event]:
    return [e for e in session.events() if e["type"] == ev.TOOL_RESULT]


def test_three_reads_of_one_reply_run_side_by_side(fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path) -> None:
    trace = Trace()
    tools = meeting_tools(trace, {"g": threading.Barrier(3, timeout=WAIT)})
    calls = [("meet", {"name": n, "group": "g"}, f"toolu_{n}") for n in "abc"]
    fake.script(tool_uses(calls, "Three at once."), text("All met."))
    with nbagent.Session.open(log_path) as session:
        delivered: list[int] = []
        session.subscribe(lambda event: delivered.append(event["seq"]), since=session.seq)
        first = session.seq
        assert go(session, client, "meet", tools) == "All met."
        done = results(session)
        # one writer: whichever thread appends, seqs are contiguous and every subscriber gets them in order, once
        assert delivered == list(range(first + 1, session.seq + 1)) == [e["seq"] for e in session.events(since=first)]
        starts = [e["tool_use_id"] for e in session.events() if e["type"] == ev.TOOL_STARTED]
    assert starts == ["toolu_a", "toolu_b", "toolu_c"]  # starts are logged in the reply's order, each before its body
    assert [e.get("is_error", False) for e in done] == [False] * 3, done  # each met the other two at the barrier
    assert {e["content"] for e in done} == {"a met g", "b met g", "c met g"}
    # the request carries the results in the reply's order, whichever finished first
    sent = [b["tool_use_id"] for b in fake.requests[1].body["messages"][-1]["content"]]
    assert sent == ["toolu_a", "toolu_b", "toolu_c"]


def test_the_barrier_breaks_when_the_reads_run_one_at_a_time(fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path) -> None:
    """The check above can fail: with parallel=False the first read waits alone at the barrier and fails."""
    tools = meeting_tools(Trace(), {"g": threading.Barrier(3, timeout=0.3)})
    fake.script(tool_uses([("meet", {"name": n, "group": "g"}, f"toolu_{n}") for n in "abc"]), text("no"))
    with nbagent.Session.open(log_path) as session:
        go(session, client, "meet", tools, parallel=False)
        assert all(e.get("is_error") for e in results(session))


def test_a_write_between_reads_runs_alone_and_in_order(fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path) -> None:
    trace = Trace()
    tools = meeting_tools(trace, {"before": threading.Barrier(2, timeout=WAIT), "after": threading.Barrier(2, timeout=WAIT)})
    calls = [
        ("meet", {"name": "r1", "group": "before"}, "toolu_1"),
        ("meet", {"name": "r2", "group": "before"}, "toolu_2"),
        ("note", {"text": "w"}, "toolu_3"),
        ("meet", {"name": "r3", "group": "after"}, "toolu_4"),
        ("meet", {"name": "r4", "group": "after"}, "toolu_5"),
    ]
    fake.script(tool_uses(calls), text("done"))
    with nbagent.Session.open(log_path) as session:
        go(session, client, "go", tools)
        logged = [e for e in session.events() if e["type"] in (ev.TOOL_STARTED, ev.TOOL_RESULT)]
    assert not any(e.get("is_error") for e in logged)  # the reads of each side met: they ran side by side
    # the write started after both reads before it ended, and ended before the reads after it started
    assert max(trace.index("end", "r1"), trace.index("end", "r2")) < trace.index("start", "w")
    assert trace.index("end", "w") < min(trace.index("start", "r3"), trace.index("start", "r4"))
    # so in the log too: the write's start follows the first two results, and its result precedes the next starts
    at = {(e["type"], e["tool_use_id"]): i for i, e in enumerate(logged)}
    assert max(at[(ev.TOOL_RESULT, "toolu_1")], at[(ev.TOOL_RESULT, "toolu_2")]) < at[(ev.TOOL_STARTED, "toolu_3")]
    assert at[(ev.TOOL_RESULT, "toolu_3")] < min(at[(ev.TOOL_STARTED, "toolu_4")], at[(ev.TOOL_STARTED, "toolu_5")])
    # every start is logged before its result, and the write's start is durable (effect write)
    assert all(at[(ev.TOOL_STARTED, t)] < at[(ev.TOOL_RESULT, t)] for _, _, t in calls)
    assert [b["tool_use_id"] for b in fake.requests[1].body["messages"][-1]["content"]] == [t for _, _, t in calls]


def finishing_in(order: str, session: nbagent.Session) -> list[nbagent.Tool]:
    """A read whose calls all start, then finish in ``order``: each returns once the results before it are logged."""
    turn = threading.Condition()
    logged: list[str] = []

    def seen(event: ev.Event) -> None:
        if event["type"] == ev.TOOL_RESULT:
            with turn:
                logged.append(event["tool_use_id"])
                turn.notify_all()

    session.subscribe(seen, since=session.seq)

    @nbagent.tool(effect="read")
    def fetch(name: str) -> str:
        """Fetch a value.

        Args:
            name: Which value.
        """
        with turn:
            if not turn.wait_for(lambda: len(logged) == order.index(name), timeout=WAIT):
                raise TimeoutError(f"{name} waited for its turn to finish")
        return f"value of {name}"

    return [fetch]


def test_the_request_is_the_same_bytes_whichever_call_finished_first(
    fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path
) -> None:
    calls = [("fetch", {"name": n}, f"toolu_{n}") for n in "abc"]
    logged: dict[str, list[str]] = {}
    for order in ("abc", "cba", "bca"):
        fake.script(tool_uses(calls, "Fetching."), text("Fetched."))
        log = tmp_path / f"{order}.jsonl"
        with nbagent.Session.open(log) as session:
            go(session, client, "fetch them", finishing_in(order, session))
            logged[order] = [e["tool_use_id"][-1] for e in results(session)]
        log.with_name(log.name + ".snapshot").unlink()
        with nbagent.Session.open(log) as reopened:  # a resume folds the log again: the same messages
            assert json.dumps(reopened.messages[:-1]) == json.dumps(fake.requests[-1].body["messages"])
    assert logged == {"abc": list("abc"), "cba": list("cba"), "bca": list("bca")}  # logged as they finished
    sent = [r.raw for r in fake.requests[1::2]]
    assert sent[0] == sent[1] == sent[2]


def join_started(thread: threading.Thread) -> None:
    """Join ``thread``, also one whose ``start()`` the interrupt cut short after it was launched (not yet marked started)."""
    deadline = time.monotonic() + WAIT
    while True:
        try:
            thread.join(max(0.0, deadline - time.monotonic()))
            return
        except RuntimeError:  # "cannot join thread before it is started": it is about to run
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def test_an_interrupt_while_reads_run_logs_nothing_after_it_and_a_resume_runs_them_again(
    fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path, sigint_raises: None
) -> None:
    release, interrupted = threading.Event(), threading.Event()
    runs: list[str] = []

    @nbagent.tool(effect="read")
    def slow(name: str) -> str:
        """A read that takes its time.

        Args:
            name: Which.
        """
        runs.append(name)
        if name == "a" and runs.count("a") == 1:
            for _ in range(10):  # the user interrupts the cell (again if the signal landed where Python ignores it, a gc callback)
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
                if interrupted.wait(2):
                    break
        if not release.is_set():
            release.wait(WAIT)
        return f"{name} read"

    fake.script(tool_uses([("slow", {"name": n}, f"toolu_{n}") for n in "ab"]), text("Both read."))
    with nbagent.Session.open(log_path) as session:
        session.subscribe(lambda event: interrupted.set() if event["type"] == ev.INTERRUPTED else None)
        with pytest.raises(nbagent.Interrupted):
            go(session, client, "read both", [slow])
        release.set()
        for thread in threading.enumerate():  # the bodies still running end; what they return is not logged
            if thread.name.startswith("nbagent-tool-"):
                join_started(thread)
        kinds = [e["type"] for e in session.events()]
        assert kinds[-1] == ev.INTERRUPTED and ev.TOOL_RESULT not in kinds
        assert go(session, client, None, [slow]) == "Both read."  # the reads run again, each answered once
        assert sorted(e["tool_use_id"] for e in results(session)) == ["toolu_a", "toolu_b"]
    assert [b["content"] for b in fake.requests[1].body["messages"][-1]["content"]] == ["a read", "b read"]


@pytest.mark.parametrize(("value", "error"), [(4, None), (1, None), (16, None), (0, "1 or more, not 0"), (-1, "1 or more, not -1")])
def test_the_notebook_setting(value: int, error: str | None) -> None:
    from traitlets import TraitError

    from nbagent.notebook.settings import Agent

    agent = Agent()
    assert agent.parallel_tools == DEFAULT_BOUND
    if error is None:
        agent.parallel_tools = value
        assert agent.parallel_tools == value
    else:
        with pytest.raises(TraitError, match=error):
            agent.parallel_tools = value


@pytest.mark.slow  # the SDK's first requests in a process take seconds
def test_the_benchmark_runs_on_tiny_sizes() -> None:
    from benchmarks.parallel_tools import MODES, measure, report

    found = measure([2], delay=0.0, runs=1)
    assert set(found) == {(2, name) for name, _ in MODES}
    assert report(found, [2], 0.0).count("\n") == 1 + len(MODES)


# The panel ------------------------------------------------------------------------------------------------
def working_rows(panel: Any) -> list[str]:
    return [c.value for c in panel.items.children if "nbagent-working" in c.value]


def test_the_panel_shows_calls_running_side_by_side(fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path) -> None:
    from nbagent.notebook.panel import Panel

    panel = Panel("side by side")
    seen: list[list[str]] = []
    barrier = threading.Barrier(3, timeout=WAIT)

    @nbagent.tool(effect="read")
    def lookup(name: str) -> str:
        """Look a value up.

        Args:
            name: Which value.
        """
        barrier.wait()  # all three bodies started, so all three starts are logged and shown
        if name == "a":
            seen.append([*working_rows(panel), panel.status])
        barrier.wait()
        return f"value of {name}"

    fake.script(tool_uses([("lookup", {"name": n}, f"toolu_{n}") for n in "abc"]), text("Looked."))
    with nbagent.Session.open(log_path) as session:
        session.subscribe(panel, since=session.seq)
        go(session, client, "look them up", [lookup])
    [[*rows, status]] = seen
    assert len(rows) == 3 and all("working…" in row for row in rows)  # three rows working at once, in the reply's order
    assert [f"lookup(name=&#x27;{n}&#x27;)" in row for n, row in zip("abc", rows)] == [True] * 3
    assert status == "running 3 tools"
    assert working_rows(panel) == []  # each result took its row's place
    shown = [c.value for c in panel.items.children if "nbagent-result" in c.value]
    assert [next(n for n in "abc" if f"value of {n}" in row) for row in shown] == list("abc")  # in the reply's order
    panel.close()


def test_a_read_that_must_run_alone_runs_on_the_loops_thread(fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path) -> None:
    """read_notebook waits for a reply only the kernel's main thread can pump: a tool marked ``alone`` never runs beside others."""
    threads: dict[str, bool] = {}

    @nbagent.tool(effect="read")
    def peek(name: str) -> str:
        """Peek at a value.

        Args:
            name: Which value.
        """
        threads[name] = threading.current_thread() is threading.main_thread()
        return name

    @nbagent.tool(effect="read")
    def read_doc() -> str:
        """Read the document."""
        threads["doc"] = threading.current_thread() is threading.main_thread()
        return "doc"

    read_doc.alone = True
    calls = [("peek", {"name": "a"}, "t1"), ("peek", {"name": "b"}, "t2"), ("read_doc", {}, "t3"), ("peek", {"name": "c"}, "t4")]
    fake.script(tool_uses(calls), text("ok"))
    with nbagent.Session.open(log_path) as session:
        go(session, client, "peek", [peek, read_doc])
    assert threads == {"a": False, "b": False, "doc": True, "c": True}  # a and b side by side; the rest alone, on the loop's thread


def test_a_result_logged_first_waits_in_the_fold_and_a_snapshot_keeps_it(log_path: Path) -> None:
    """The fold holds b's result until a's is in (even across a snapshot), then both go in, in the reply's order."""
    with nbagent.Session.open(log_path) as session:
        session.append(ev.USER_MSG, content="go")
        calls = [{"type": "tool_use", "id": t, "name": "fetch", "input": {}} for t in ("toolu_a", "toolu_b")]
        session.append(ev.ASSISTANT_MSG, message_id="m", model=MODEL, content=calls, stop_reason="tool_use", usage={})
        session.append(ev.TOOL_STARTED, tool_use_id="toolu_b", name="fetch", effect="read", attempt=1)
        session.append(ev.TOOL_RESULT, tool_use_id="toolu_b", content="b", effect="read")
        assert session.messages[-1]["role"] == "assistant" and list(session.state.open_calls) == ["toolu_a"]
        assert session.state.frontier == "tools" and list(session.state.held) == ["toolu_b"]
        session.snapshot()
    with nbagent.Session.open(log_path) as session:
        assert session.snapshot_note == "" and list(session.state.held) == ["toolu_b"]  # from the snapshot
        session.append(ev.TOOL_RESULT, tool_use_id="toolu_a", content="a", effect="read")
        assert [b["tool_use_id"] for b in session.messages[-1]["content"]] == ["toolu_a", "toolu_b"]
        assert session.state.held == {} and session.state.awaiting == [] and session.state.frontier == "model"
