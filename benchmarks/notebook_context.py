"""The cost of gathering the notebook context at the start of a turn: ``python -m benchmarks.notebook_context [--runs N]``.

In one IPython shell (in-process, IPython's own ``InteractiveShell``) with 1,000 user variables and 200
executed cells (every tenth raises), it times what a turn's start does: ``CellLog.since`` and
``VariableWatch.changes`` and, where it exists, the whole note (``NotebookContext.gather``: the same two
plus composing the note). The 1,000 variables hold either a 1,000,000-row DataFrame, a 10,000,000-element
array and 998 small values ("big data"), or 1,000 small values ("small data"): the two must cost the
same (flat in the data's size). The two are timed in turns (CPU time), median of ``--runs`` calls. Two kinds of turn:

* first turn: nothing marked yet, so all 200 cells and 1,000 variables are news (the worst case);
* next turn: after a mark, 10 cells run and 5 variables changed.

It also reports the characters the note adds to a request in each kind of turn. Needs numpy and pandas.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nbagent.notebook.cells import CellLog
from nbagent.notebook.variables import VariableWatch

TARGET_MS = 5.0


@dataclass
class Turn:
    """One kind of turn's timings (ms) for both data sizes, and the note's size."""

    name: str
    big: list[float]
    small: list[float]
    chars: int | None = None  # the note's characters (None: notebook_context.py is not in this tree)
    capture: list[float] = field(default_factory=list)  # CellLog.since + VariableWatch.changes alone, big data

    @property
    def ratio(self) -> float:
        return statistics.median(self.big) / statistics.median(self.small)


class Settings:
    """The Agent settings the note reads (its defaults)."""

    notebook_context = "auto"
    notebook_context_exclude: list[str] = []

    def __init__(self) -> None:
        try:
            from nbagent.notebook.settings import DEFAULT_NOTEBOOK_BUDGET  # type: ignore[attr-defined,unused-ignore]
        except ImportError:
            DEFAULT_NOTEBOOK_BUDGET = 6000
        self.notebook_context_budget = DEFAULT_NOTEBOOK_BUDGET


class Gather:
    """What a turn's start runs: J2's NotebookContext.gather where it exists, else CellLog.since + VariableWatch.changes."""

    def __init__(self, shell: Any) -> None:
        self.settings = Settings()
        try:
            from nbagent.notebook.notebook_context import NotebookContext
        except ImportError:
            self.context: Any = None
            self.cells, self.watch = CellLog(shell), VariableWatch(shell)
            self.what = "CellLog.since + VariableWatch.changes"
        else:
            self.context = NotebookContext(shell)
            self.cells, self.watch = self.context.cells, self.context.variables
            self.what = "NotebookContext.gather (CellLog.since + VariableWatch.changes + composing the note)"
        self.last = 0
        self.cells.register()

    def __call__(self) -> Any:
        if self.context is not None:
            return self.context.gather(self.settings, restarted=False)
        return self.cells.since(self.last), self.watch.changes()

    def capture(self) -> Any:
        """The capture alone: the cells since the last turn and the variables changed."""
        return self.cells.since(self.last if self.context is None else self.context.last), self.watch.changes()

    def mark(self) -> None:
        if self.context is not None:
            self.context.mark()
        else:
            self.watch.mark()
            self.last = self.cells.count

    def size(self) -> int | None:
        """The note's characters to the model (None: no note is composed in this tree)."""
        if self.context is None:
            return None
        note = self()
        return len(note.to_model) if note is not None else 0


def fill(shell: Any, cells: int, variables: int, big: bool, rows: int, elements: int) -> None:
    """The user namespace: ``variables`` names (two of them big data if ``big``), after ``cells`` executed cells."""
    import numpy as np
    import pandas as pd

    ns = shell.user_ns
    for i in range(variables):
        ns[f"v{i}"] = i if i % 3 == 0 else (f"value {i}" if i % 3 == 1 else [i, i + 1])
    if big:
        ns["df"] = pd.DataFrame({"id": np.arange(rows), "x": np.zeros(rows), "label": "a"})
        ns["arr"] = np.zeros(elements)
    else:
        ns["df"], ns["arr"] = 1, 2
    for n in range(cells):
        code = f"v{n % variables} = {n}\nraise ValueError('cell {n}')" if n % 10 == 9 else f"v{n % variables} = {n}\nv{n % variables} * 2"
        shell.run_cell(code, store_history=True, silent=False)


def sample_ms(f: Callable[[], Any]) -> float:
    """One call's CPU time in ms (CPU, not wall: other work on a shared machine would otherwise be counted)."""
    began = time.process_time()
    f()
    return (time.process_time() - began) * 1e3


def bench(
    runs: int = 21, cells: int = 200, variables: int = 998, rows: int = 1_000_000, elements: int = 10_000_000
) -> tuple[list[Turn], str]:
    """Both kinds of turn, both data sizes, timed in turns; and what was timed."""
    import contextlib
    import io

    from IPython.core.interactiveshell import InteractiveShell

    shells: dict[bool, Any] = {}
    gathers: dict[bool, Gather] = {}
    quiet = (contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()))
    for big in (True, False):
        shell = shells[big] = InteractiveShell()  # not the singleton: two namespaces side by side
        gathers[big] = Gather(shell)
        with quiet[0], quiet[1]:
            fill(shell, cells, variables, big, rows, elements)
    first = Turn(f"first turn: {cells} cells and {variables + 2:,} variables are news", [], [])
    time_turns(first, gathers, runs)
    nxt = Turn("next turn: 10 cells run, 5 variables changed since the mark", [], [])
    for big in (True, False):
        gathers[big].mark()
        with quiet[0], quiet[1]:
            for n in range(10):
                shells[big].run_cell(f"v{n} = 'changed {n}'" if n < 5 else f"{n} + 1", store_history=True)
    time_turns(nxt, gathers, runs)
    for big in (True, False):
        gathers[big].cells.unregister()
    return [first, nxt], gathers[True].what


def time_turns(turn: Turn, gathers: dict[bool, Gather], runs: int) -> None:
    """``runs`` samples of each data size, alternating which goes first; then the note's size."""
    for index in range(runs):
        for big in (True, False) if index % 2 == 0 else (False, True):
            (turn.big if big else turn.small).append(sample_ms(gathers[big]))
        turn.capture.append(sample_ms(gathers[True].capture))
    turn.chars = gathers[True].size()


def report(turns: list[Turn], what: str, runs: int) -> str:
    """The table (markdown)."""
    lines = [
        f"Timed: {what}; CPU time, median of {runs} calls, big and small data in turns.",
        "",
        "| turn | big data: 1M-row DataFrame + 10M-element array + 998 small | small data: 1,000 small | ratio | "
        "of which capture (since + changes), big data | note size | target (≤ 5 ms) |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for t in turns:
        big, small = statistics.median(t.big), statistics.median(t.small)
        chars = "n/a" if t.chars is None else f"{t.chars:,} chars"
        verdict = "**PASS**" if big <= TARGET_MS else "**FAIL**"
        capture = statistics.median(t.capture)
        lines.append(f"| {t.name} | {big:.2f} ms | {small:.2f} ms | {t.ratio:.2f}x | {capture:.2f} ms | {chars} | {verdict} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.notebook_context", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=101)
    args = parser.parse_args(argv)
    try:
        import numpy  # noqa: F401
        import pandas  # noqa: F401
    except ImportError:
        sys.exit("benchmarks.notebook_context needs numpy and pandas: pip install numpy pandas")
    turns, what = bench(args.runs)
    print(report(turns, what, args.runs))


if __name__ == "__main__":
    main()
