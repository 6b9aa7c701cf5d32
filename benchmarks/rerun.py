"""Re-running a notebook after a kernel restart: ``%agent`` cells re-rendered from the log vs the same notebook of ``print()`` cells.

Each notebook is executed with nbclient in a fresh kernel (a kernel restart and
Run All), against the project's fake Anthropic server on 127.0.0.1, with a fake
key and a private ``NBAGENT_DATA_DIR`` and ``IPYTHONDIR`` in the kernel's
environment.  The ``%agent`` notebook is first run once to record its turns; every
later run re-renders them from the log, and must make no model request.
"""

from __future__ import annotations

import compileall
import datetime
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

import nbagent

ANSWER = "Done: the column sums to 42."
TIMEOUT = 600  # seconds per cell; a re-run cell takes milliseconds


def request(number: int) -> str:
    """The short request of cell ``number``."""
    return f"Summarize table {number} in one line"


def notebook(cells: int, agent: bool) -> Any:
    """``%load_ext nbagent`` then ``cells`` cells: ``%agent <request>``, or ``print(<request>)`` for the reference notebook."""
    body = [f"%agent {request(n)}" if agent else f"print({request(n)!r})" for n in range(1, cells + 1)]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in ["%load_ext nbagent", *body]])


@dataclass
class Run:
    """One execution of a notebook in a fresh kernel."""

    wall: float  # seconds for nbclient's whole run: kernel start, every cell, shutdown
    cells: list[float]  # seconds each cell after the first kept the kernel busy (its busy to idle, kernel clock)
    outputs: list[str]  # each cell's text output (text/plain and streams), after the first


def _busy(cell: Any) -> float:
    timing = cell.metadata.get("execution", {})
    begin, end = (datetime.datetime.fromisoformat(timing[k].replace("Z", "+00:00")) for k in ("iopub.status.busy", "iopub.status.idle"))
    return (end - begin).total_seconds()


def _text(cell: Any) -> str:
    parts = []
    for output in cell.get("outputs", []):
        parts.append(output.get("text", "") if output["output_type"] == "stream" else output.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def execute(path: Path, env: dict[str, str]) -> Run:
    """Run All on a fresh kernel, as a restart does; save the executed notebook back to ``path``."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    with open(path.parent / "kernel.log", "ab") as kernel_log:  # the kernels' own warnings, out of the report
        started = time.perf_counter()
        client.execute(env={**env, "JPY_SESSION_NAME": str(path)}, stderr=kernel_log)
        wall = time.perf_counter() - started
    nbformat.write(nb, path)
    return Run(wall, [_busy(c) for c in nb.cells[1:]], [_text(c) for c in nb.cells[1:]])


@dataclass
class RerunResult:
    """Re-runs of one size (seconds; medians over the repeats, the two notebooks interleaved)."""

    cells: int
    agent: float  # whole re-run of the %agent notebook
    plain: float  # whole run of the print() notebook
    agent_cells: list[float]  # per-cell busy time of each %agent cell, median over the repeats
    plain_cells: list[float]
    record: float  # the recording run (model calls included), once
    ratios: list[float]  # each round's %agent re-run time / its print() run time (the two run one after the other)

    @property
    def ratio(self) -> float:
        """%agent re-run time / print() run time: the median of the rounds' ratios.

        Each round's two runs are next to each other in time, so a change in the machine's load
        between rounds (kernel start-up alone varies by a second here) does not enter a ratio.
        """
        return statistics.median(self.ratios)

    @property
    def per_cell(self) -> float:
        """What one re-rendered cell adds over a print() cell, from the whole runs."""
        return (self.agent - self.plain) / self.cells

    @property
    def per_cell_busy(self) -> float:
        """Median kernel busy time of an %agent cell minus that of a print() cell (the first cell's imports left out by the median)."""
        return statistics.median(self.agent_cells) - statistics.median(self.plain_cells)

    def window(self, first: bool) -> float:
        """Median busy time of the first or last tenth of the %agent cells."""
        size = max(1, len(self.agent_cells) // 10)
        return statistics.median(self.agent_cells[:size] if first else self.agent_cells[-size:])


def bench_rerun(sizes: tuple[int, ...], repeats: int, workdir: Path) -> list[RerunResult]:
    """Record each size's %agent notebook once; then ``repeats`` rounds, each re-running every size's %agent and print() notebooks.

    Sizes and notebooks are interleaved within a round, so that a change in the machine's load
    reaches all of them alike.  Raises if a re-run calls the model or a re-run cell does not show
    its recorded answer.  nbagent's bytecode is compiled first, as installing it does: else, with
    ``PYTHONDONTWRITEBYTECODE`` set, every kernel compiles the modules the first %agent cell imports.
    """
    compileall.compile_dir(Path(nbagent.__file__).parent, quiet=1)
    from tests.support.fake_anthropic import FakeAnthropic, text

    (workdir / "data").mkdir(exist_ok=True)
    (workdir / "ipython").mkdir(exist_ok=True)
    with FakeAnthropic() as fake:
        fake.responder = lambda _request: text(ANSWER)
        env = {
            **os.environ,
            "ANTHROPIC_BASE_URL": fake.base_url,
            "ANTHROPIC_API_KEY": "fake-key",
            "NBAGENT_DATA_DIR": str(workdir / "data"),
            "IPYTHONDIR": str(workdir / "ipython"),
        }
        env.pop("ANTHROPIC_AUTH_TOKEN", None)
        paths: dict[tuple[int, bool], Path] = {}
        recorded: dict[int, Run] = {}
        for cells in sizes:
            folder = workdir / f"rerun-{cells}"
            folder.mkdir()
            for agent in (True, False):
                paths[cells, agent] = folder / ("agent.ipynb" if agent else "print.ipynb")
                nbformat.write(notebook(cells, agent), paths[cells, agent])
            before = len(fake.requests)
            recorded[cells] = execute(paths[cells, True], env)
            if len(fake.requests) - before != cells or any(ANSWER not in out for out in recorded[cells].outputs):
                raise AssertionError(f"recording {cells} %agent cells made {len(fake.requests) - before} model requests")
        before = len(fake.requests)
        runs: dict[tuple[int, bool], list[Run]] = {key: [] for key in paths}
        for round_number in range(repeats):
            order = list(paths.items())
            for key, path in order if round_number % 2 == 0 else reversed(order):  # neither notebook always goes first
                runs[key].append(execute(path, env))
        if len(fake.requests) != before:
            raise AssertionError(f"re-running the %agent notebooks called the model {len(fake.requests) - before} times")
        if any(ANSWER not in out for cells in sizes for rerun in runs[cells, True] for out in rerun.outputs):
            raise AssertionError("a re-run %agent cell did not show its recorded answer")
    return [
        RerunResult(
            cells,
            statistics.median(r.wall for r in runs[cells, True]),
            statistics.median(r.wall for r in runs[cells, False]),
            [statistics.median(times) for times in zip(*(r.cells for r in runs[cells, True]))],
            [statistics.median(times) for times in zip(*(r.cells for r in runs[cells, False]))],
            recorded[cells].wall,
            [agent.wall / plain.wall for agent, plain in zip(runs[cells, True], runs[cells, False])],
        )
        for cells in sizes
    ]
