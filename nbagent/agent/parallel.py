"""Parallel tool calls: which calls of one reply run side by side (a pure rule, table: tests/agent/test_parallel.py), and the runner.

A reply's calls run in groups, one group after the other, in the reply's order. A group of several
holds only ``read`` calls that run without asking; a call that is not such a read is a group of its
own, a barrier: the reads before it finish before it starts, the reads after it start after it ends.
A tool of :data:`SERIAL` (the ``python`` tool shares the kernel's namespace) never runs beside
another call of its own name. The runner logs each call's start when its body is about to run and
its result when it finishes; the fold puts the results back in the reply's order (nbagent/state/fold.py).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_BOUND = 4  # reads at most at once when Loop(parallel=True) (the default)
SERIAL = frozenset({"python"})  # tools that never run beside another call of the same name


@dataclass(frozen=True)
class Slot:
    """One call of a reply as the rule sees it: its id, its tool's name, and whether it may run beside others."""

    id: str
    name: str
    concurrent: bool  # a read that runs now without asking (no approval, no refusal)


def bound(parallel: int | bool) -> int:
    """How many calls may run at once for ``Loop(parallel=...)``: True is the default bound, False (or 1) one at a time."""
    if parallel is True:
        return DEFAULT_BOUND
    if parallel is False:
        return 1
    if not isinstance(parallel, int) or parallel < 1:
        raise ValueError(f"parallel must be True, False or a number of calls of at least 1; got {parallel!r}")
    return parallel


def groups(slots: Sequence[Slot], limit: int) -> list[list[str]]:
    """The ids of ``slots`` in groups run one after another; a group's calls run side by side, ``limit`` at most at once."""
    out: list[list[str]] = []
    group: list[str] = []
    names: set[str] = set()
    for slot in slots:
        if limit > 1 and slot.concurrent:
            if slot.name in SERIAL and slot.name in names:  # its twin is in this group: a new group starts with it
                out.append(group)
                group, names = [], set()
            group.append(slot.id)
            names.add(slot.name)
            continue
        if group:
            out.append(group)
            group, names = [], set()
        out.append([slot.id])
    if group:
        out.append(group)
    return out


@dataclass
class Job:
    """One call of a group: ``start`` logs that its body starts, ``body`` runs it, ``finish`` logs what it returned."""

    start: Callable[[], None]
    body: Callable[[], Any]
    finish: Callable[[Any], None]


class Gate:
    """What a group's workers log goes through here: once closed (an interrupt, a failure), nothing more is logged."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.closed = False

    def log(self, write: Callable[[], None]) -> bool:
        """Run ``write`` unless the gate is closed; whether it ran."""
        with self._lock:
            if self.closed:
                return False
            write()
            return True

    def close(self) -> None:
        """Let nothing more through; waits for a write under way to end."""
        with self._lock:
            self.closed = True


def run_group(jobs: Sequence[Job], limit: int) -> None:
    """Run ``jobs`` side by side on at most ``limit`` daemon threads; return when all have finished.

    The calling thread only waits, so an interrupt (KeyboardInterrupt) reaches it: the gate then
    closes, jobs not yet started never start, and nothing running logs a result after it. The
    first job that fails (logging its start or result raised) closes the gate and is raised here.
    """
    gate = Gate()
    pending = list(reversed(jobs))
    lock = threading.Lock()
    done = threading.Semaphore(0)
    failures: list[BaseException] = []

    def next_job() -> Job | None:
        """The next job with its start logged (so starts are logged in the reply's order); None once none is left or the gate closed."""
        with lock:
            while pending and not gate.closed:
                job = pending.pop()
                try:
                    if gate.log(job.start):
                        return job
                except BaseException as exc:  # a failed log write: stop the group and tell the caller
                    failures.append(exc)
                    gate.close()
                done.release()  # not started: done
            return None

    def worker() -> None:
        while (job := next_job()) is not None:
            try:
                gate.log(functools.partial(job.finish, job.body()))
            except BaseException as exc:
                failures.append(exc)
                gate.close()
            finally:
                done.release()

    try:
        for number in range(min(limit, len(jobs))):
            threading.Thread(target=worker, name=f"nbagent-tool-{number}", daemon=True).start()
        for _ in jobs:
            done.acquire()  # a signal (an interrupt) still reaches this thread while it waits
            if failures:
                break
    except BaseException:
        gate.close()
        raise
    if failures:
        gate.close()
        raise failures[0]
