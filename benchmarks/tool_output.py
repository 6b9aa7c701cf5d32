"""Peak memory of a tool printing a lot: ``python -m benchmarks.tool_output [--mb 1000]``.

Each case runs in a fresh child process: the ``shell`` tool through ``Tool.invoke`` (a command
printing the bytes), and the notebook's ``python`` tool in an in-process IPython shell (code
printing 1 MB lines).  The child reports its resident memory before the call, its peak
(``ru_maxrss``) after, and how long the result the model sees is.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from typing import Any

CASES = ("shell", "python")
LINE = 1_000_000  # bytes per printed line in the python case


def rss_mb() -> float:
    """This process's resident memory now, in MB."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def peak_mb() -> float:
    """This process's peak resident memory so far, in MB (Linux reports ru_maxrss in KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def shell_command(size: int) -> str:
    """A shell command printing ``size`` bytes (``y`` lines) on stdout."""
    return f"yes | head -c {size}"


def python_code(size: int) -> str:
    """Python code printing ``size`` bytes on stdout, in lines of ``LINE`` characters."""
    return f"for _ in range({size // LINE}):\n    print('x' * {LINE - 1})"


def measure(case: str, size: int) -> dict[str, Any]:
    """Run one case here (in the child) and return its figures."""
    if case == "shell":
        from nbagent.tools import builtin as toolkit

        before = rss_mb()
        began = time.perf_counter()
        content, _ = toolkit.shell.invoke({"command": shell_command(size), "timeout": 600}, key="k")
    else:
        from IPython.core.interactiveshell import InteractiveShell

        from nbagent.notebook.python_tool import run_code

        ip = InteractiveShell.instance()
        before = rss_mb()
        began = time.perf_counter()
        blocks, _ = run_code(ip, python_code(size))
        content = blocks[0]["text"]
    seconds = time.perf_counter() - began
    return {"case": case, "mb": size / 1e6, "before_mb": before, "peak_mb": peak_mb(), "seconds": seconds, "result_chars": len(content)}


def run_case(case: str, size: int) -> dict[str, Any]:
    """One case in a fresh child process."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.tool_output", "--child", case, "--bytes", str(size)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def table(rows: list[dict[str, Any]]) -> str:
    """The figures as a Markdown table."""
    lines = [
        "| tool | printed | RSS before | peak RSS | growth | tool result | time |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['mb']:,.0f} MB | {r['before_mb']:,.0f} MB | {r['peak_mb']:,.0f} MB | "
            f"{r['peak_mb'] - r['before_mb']:,.0f} MB | {r['result_chars']:,} chars | {r['seconds']:.1f} s |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run every case (or, with --child, one case in this process) and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mb", type=int, default=1000, help="how much each tool prints, in MB (default 1000)")
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--bytes", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.bytes)))
        return
    print(table([run_case(case, args.mb * 1_000_000) for case in CASES]))


if __name__ == "__main__":
    main()
