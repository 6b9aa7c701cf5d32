"""Re-running a notebook after a kernel restart: ``%agent`` cells re-rendered from the log vs the same notebook of ``print()`` cells.

Each notebook is executed with nbclient in a fresh kernel (a kernel restart and
Run All), against the project's fake Anthropic server on 127.0.0.1, with a fake
key and a private ``NBAGENT_DATA_DIR`` and ``IPYTHONDIR`` in the kernel's
environment.  The ``%agent`` notebook is first run once to record its turns; every
later run re-renders them from the log, and must make no model request.

``python -m benchmarks.rerun [--base HEAD] [--cells 300] [--rounds 5]`` compares a commit (unpacked with
``git archive``; its kernels import it through ``PYTHONPATH``) with the working tree, the two interleaved.
"""

from __future__ import annotations

import argparse
import compileall
import datetime
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

import nbagent
from benchmarks.postgres_real import unpack

ANSWER = "Done: the column sums to 42."
TIMEOUT = 600  # seconds per cell; a re-run cell takes milliseconds
REPO = Path(__file__).resolve().parent.parent


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
    load: float = 0.0  # seconds the first cell, `%load_ext nbagent`, kept the kernel busy


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
    return Run(wall, [_busy(c) for c in nb.cells[1:]], [_text(c) for c in nb.cells[1:]], _busy(nb.cells[0]))


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


def _environment(fake: Any, workdir: Path) -> dict[str, str]:
    """The kernels' environment: the fake API and key, a private data folder and IPython profile."""
    (workdir / "data").mkdir(exist_ok=True)
    (workdir / "ipython").mkdir(exist_ok=True)
    env = {
        **os.environ,
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_API_KEY": "fake-key",
        "NBAGENT_DATA_DIR": str(workdir / "data"),
        "IPYTHONDIR": str(workdir / "ipython"),
    }
    env.pop("ANTHROPIC_AUTH_TOKEN", None)
    return env


def _record(fake: Any, folder: Path, cells: int, env: dict[str, str]) -> tuple[dict[bool, Path], Run]:
    """Write the two notebooks of ``cells`` cells into ``folder`` and record the %agent one's turns (one model request a cell)."""
    folder.mkdir()
    paths = {agent: folder / ("agent.ipynb" if agent else "print.ipynb") for agent in (True, False)}
    for agent, path in paths.items():
        nbformat.write(notebook(cells, agent), path)
    before = len(fake.requests)
    recorded = execute(paths[True], env)
    if len(fake.requests) - before != cells or any(ANSWER not in out for out in recorded.outputs):
        raise AssertionError(f"recording {cells} %agent cells made {len(fake.requests) - before} model requests")
    return paths, recorded


def _check(reruns: list[Run]) -> None:
    """Raise if a re-run %agent cell did not show its recorded answer."""
    if any(ANSWER not in out for rerun in reruns for out in rerun.outputs):
        raise AssertionError("a re-run %agent cell did not show its recorded answer")


def _result(cells: int, agent: list[Run], plain: list[Run], recorded: Run) -> RerunResult:
    """The figures of one size from its rounds (``agent[i]`` and ``plain[i]`` ran next to each other)."""
    return RerunResult(
        cells,
        statistics.median(r.wall for r in agent),
        statistics.median(r.wall for r in plain),
        [statistics.median(times) for times in zip(*(r.cells for r in agent))],
        [statistics.median(times) for times in zip(*(r.cells for r in plain))],
        recorded.wall,
        [a.wall / p.wall for a, p in zip(agent, plain)],
    )


def bench_rerun(sizes: tuple[int, ...], repeats: int, workdir: Path) -> list[RerunResult]:
    """Record each size's %agent notebook once; then ``repeats`` rounds, each re-running every size's %agent and print() notebooks.

    Sizes and notebooks are interleaved within a round, so that a change in the machine's load
    reaches all of them alike.  Raises if a re-run calls the model or a re-run cell does not show
    its recorded answer.  nbagent's bytecode is compiled first, as installing it does: else, with
    ``PYTHONDONTWRITEBYTECODE`` set, every kernel compiles the modules the first %agent cell imports.
    """
    compileall.compile_dir(Path(nbagent.__file__).parent, quiet=1)
    from tests.support.fake_anthropic import FakeAnthropic, text

    with FakeAnthropic() as fake:
        fake.responder = lambda _request: text(ANSWER)
        env = _environment(fake, workdir)
        paths: dict[tuple[int, bool], Path] = {}
        recorded: dict[int, Run] = {}
        for cells in sizes:
            made, recorded[cells] = _record(fake, workdir / f"rerun-{cells}", cells, env)
            paths.update({(cells, agent): path for agent, path in made.items()})
        before = len(fake.requests)
        runs: dict[tuple[int, bool], list[Run]] = {key: [] for key in paths}
        for round_number in range(repeats):
            order = list(paths.items())
            for key, path in order if round_number % 2 == 0 else reversed(order):  # neither notebook always goes first
                runs[key].append(execute(path, env))
        if len(fake.requests) != before:
            raise AssertionError(f"re-running the %agent notebooks called the model {len(fake.requests) - before} times")
        _check([rerun for cells in sizes for rerun in runs[cells, True]])
    return [_result(cells, runs[cells, True], runs[cells, False], recorded[cells]) for cells in sizes]


# Two trees side by side (python -m benchmarks.rerun) ---------------------------------------------------


@dataclass
class TreeResult:
    """One tree's re-runs: the figures, the `%load_ext nbagent` cell's busy time in each of its kernels, each round's two runs."""

    name: str
    result: RerunResult
    loads: list[float]
    walls: list[tuple[float, float]]  # (the %agent re-run, its print() run) of each round, seconds


FLOOR = "floor: `display()` of the same output"


def unpack_compiled(rev: str, into: Path) -> Path:
    """Commit ``rev`` unpacked as the other benchmarks unpack it, its bytecode compiled (as an install does)."""
    unpack(rev, into)
    compileall.compile_dir(into / "nbagent", quiet=1)
    return into


def _display_notebook(recorded: Path, cells: int) -> Any:
    """``%load_ext nbagent``, then ``cells`` cells that each display the bundle a re-rendered cell of ``recorded`` shows."""
    outputs = nbformat.read(recorded, as_version=4).cells[1].outputs
    bundle = next(dict(o["data"]) for o in outputs if o["output_type"] == "display_data" and "text/html" in o["data"])
    setup = f"%load_ext nbagent\nfrom IPython.display import display\nBUNDLE = {bundle!r}"
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in [setup, *["display(BUNDLE, raw=True)"] * cells]])


def compare_trees(trees: dict[str, Path], cells: int, rounds: int, workdir: Path, *, floor: bool = False) -> list[TreeResult]:
    """Each tree's notebooks recorded once, then ``rounds`` rounds: in each, every tree's %agent re-run next to its print() run.

    A kernel imports the tree through ``PYTHONPATH``. The trees' order and the order within each pair alternate from
    one round to the next, so that neither goes first every time. ``floor``: the last tree's notebook of ``display()``
    cells showing the same output as its re-rendered cells is run too, next to a print() run: what the display costs alone.
    """
    from tests.support.fake_anthropic import FakeAnthropic, text

    with FakeAnthropic() as fake:
        fake.responder = lambda _request: text(ANSWER)
        base = _environment(fake, workdir)
        envs = {
            name: {**base, "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), base.get("PYTHONPATH")]))} for name, tree in trees.items()
        }
        paths = {name: _record(fake, workdir / f"rerun-{name}", cells, envs[name]) for name in trees}
        last = list(trees)[-1]
        if floor:  # the output a re-run shows, from a first re-run of the last tree's notebook
            execute(paths[last][0][True], envs[last])
            shown = paths[last][0][True].with_name("display.ipynb")
            nbformat.write(_display_notebook(paths[last][0][True], cells), shown)
            envs[FLOOR], paths[FLOOR] = envs[last], ({True: shown, False: paths[last][0][False]}, paths[last][1])
        before = len(fake.requests)
        runs: dict[tuple[str, bool], list[Run]] = {(name, agent): [] for name in paths for agent in (True, False)}
        for round_number in range(rounds):
            names = list(paths) if round_number % 2 == 0 else list(reversed(paths))
            for name in names:
                for agent in (True, False) if (round_number // 2) % 2 == 0 else (False, True):
                    runs[name, agent].append(execute(paths[name][0][agent], envs[name]))
            print(f"  round {round_number + 1}: load average {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
        if len(fake.requests) != before:
            raise AssertionError(f"re-running the %agent notebooks called the model {len(fake.requests) - before} times")
    results = []
    for name in paths:
        if name != FLOOR:
            _check(runs[name, True])
        loads = [r.load for agent in (True, False) for r in runs[name, agent]]
        walls = [(a.wall, p.wall) for a, p in zip(runs[name, True], runs[name, False])]
        results.append(TreeResult(name, _result(cells, runs[name, True], runs[name, False], paths[name][1]), loads, walls))
    return results


def report(results: list[TreeResult], limit: float) -> str:
    """The comparison as a Markdown table: each round's ratio, and whether every round is within ``limit``."""
    lines = [
        "| tree | `print()` run | `%agent` re-run | ratio in each round | median | max | "
        "`%load_ext nbagent` (kernel busy, median) | kernel busy per cell: `%agent` − `print()` | first `%agent` cell |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for tree in results:
        r = tree.result
        rounds = ", ".join(f"{x:.3f}x" for x in r.ratios)
        verdict = "PASS" if max(r.ratios) <= limit else "FAIL"
        lines.append(
            f"| {tree.name} | {r.plain:.2f} s | {r.agent:.2f} s | {rounds} | {r.ratio:.3f}x | {max(r.ratios):.3f}x ({verdict}) | "
            f"{statistics.median(tree.loads) * 1000:.0f} ms | {r.per_cell_busy * 1000:.2f} ms | {r.agent_cells[0] * 1000:.0f} ms |"
        )
    lines += ["", "| tree | each round: `%agent` re-run / `print()` run (seconds) |", "|---|---|"]
    lines += [f"| {tree.name} | {', '.join(f'{a:.2f}/{p:.2f}' for a, p in tree.walls)} |" for tree in results]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Compare ``--base`` with the working tree."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rerun", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--base", default="HEAD", help="the commit to compare the working tree with (default HEAD)")
    parser.add_argument("--cells", type=int, default=300, help="%%agent cells in the notebook (default 300)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, each tree's two notebooks in each (default 5)")
    parser.add_argument("--limit", type=float, default=1.1, help="the target: each round's ratio at most this (default 1.1)")
    parser.add_argument("--floor", action="store_true", help="also run display() cells of the same output: what the display costs alone")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nbagent-rerun-") as scratch:
        work = Path(scratch)
        compileall.compile_dir(Path(nbagent.__file__).parent, quiet=1)
        trees = {f"before ({args.base})": unpack_compiled(args.base, work / "base"), "after (working tree)": REPO}
        load = os.getloadavg()
        print(
            f"{args.cells} cells, {args.rounds} rounds on {os.cpu_count()} cores; load average {load[0]:.2f} {load[1]:.2f}", file=sys.stderr
        )
        results = compare_trees(trees, args.cells, args.rounds, work, floor=args.floor)
        load = os.getloadavg()
    print(report(results, args.limit))
    print(f"\nload average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (1, 5, 15 min)")


if __name__ == "__main__":
    main()
