"""How long a command takes to start, and a turn to make its model: ``python -m benchmarks.startup [--runs N]``.

Side by side in one run, in turns (each round runs every command once), medians of ``--runs``:

* the interpreter alone (``python -c pass``): the floor every command pays;
* ``nbagent sessions`` on an empty folder, ``nbagent show`` and ``nbagent export`` to .md and to .ipynb of a short
  log, each as its own process (``python -m nbagent``), as a user runs them;
* ``python -c "import anthropic"``: what a command would pay if it imported the SDK (the log readers must not);
* in this process: an ``AnthropicModel`` for a turn, the first (which builds the SDK's client) and the next ones
  (each ``%agent`` turn makes its model; the client and its connections are kept per configuration).

Ratios are to the interpreter's floor; nothing is asserted (tests/cli/test_cli.py checks the readers import
neither the SDK nor nbformat, which is what keeps them quick).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _log(folder: Path) -> Path:
    """A short finished session: a request and its answer."""
    import nbagent
    from nbagent.model.claude import DemoModel

    path = folder / "s.jsonl"
    with nbagent.Session.open(path) as session:
        nbagent.Loop(session, model=DemoModel()).run("Say hello.")
    return path


def _commands(folder: Path, log: Path) -> dict[str, list[str]]:
    nbagent = [sys.executable, "-m", "nbagent"]
    return {
        "python -c pass (the floor)": [sys.executable, "-c", "pass"],
        "nbagent sessions (empty folder)": [*nbagent, "sessions", str(folder / "empty")],
        "nbagent show": [*nbagent, "show", str(log)],
        "nbagent export .md": [*nbagent, "export", str(log), "-o", str(folder / "s.md")],
        "nbagent export .ipynb": [*nbagent, "export", str(log), "-o", str(folder / "s.ipynb")],
        'python -c "import anthropic"': [sys.executable, "-c", "import anthropic"],
    }


def measure(runs: int = 5) -> dict[str, float]:
    """Median seconds of each command, and of making a turn's model (first and kept), measured in turns."""
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="nbagent-startup-") as name:
        folder = Path(name)
        (folder / "empty").mkdir()
        log = _log(folder)
        env = {**os.environ, "NBAGENT_DATA_DIR": str(folder / "data")}
        commands = _commands(folder, log)
        for _ in range(runs):
            for label, argv in commands.items():
                started = time.perf_counter()
                subprocess.run(argv, env=env, capture_output=True, check=True, timeout=120)
                times.setdefault(label, []).append(time.perf_counter() - started)
    times.update(_model_times(runs))
    return {label: statistics.median(values) for label, values in times.items()}


def _model_times(runs: int) -> dict[str, list[float]]:
    """Seconds to make a turn's AnthropicModel: the first in a fresh process (builds the client), then kept ones."""
    code = (
        "import time; from nbagent.model.claude import AnthropicModel; import anthropic\n"
        "t = time.perf_counter(); AnthropicModel('claude-sonnet-4-6'); first = time.perf_counter() - t\n"
        "t = time.perf_counter(); [AnthropicModel('claude-sonnet-4-6') for _ in range(20)]; kept = (time.perf_counter() - t) / 20\n"
        "print(first, kept)"
    )
    env = {**os.environ, "ANTHROPIC_API_KEY": "benchmark-key", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}  # never reached
    found: dict[str, list[float]] = {}
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=120)
        first, kept = map(float, done.stdout.split())
        found.setdefault("a turn's model: the first (builds the SDK client)", []).append(first)
        found.setdefault("a turn's model: the next ones (the client kept)", []).append(kept)
    return found


def report(result: dict[str, float]) -> str:
    """The table: each median, and its ratio to the interpreter's floor for the commands."""
    floor = result["python -c pass (the floor)"]
    lines = ["| what | median | × the interpreter's floor |", "| --- | --- | --- |"]
    for label, seconds in result.items():
        ratio = f"{seconds / floor:.1f}×" if not label.startswith("a turn's model") else ""
        lines.append(f"| {label} | {seconds * 1000:,.1f} ms | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds of every command (default 5); medians are printed")
    args = parser.parse_args(argv)
    print(report(measure(args.runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
