"""Time and peak memory of ``inspect_variable`` on a large array: ``python -m benchmarks.inspect_variable [--gb 2]``.

Each case runs in a fresh child process with the tool's own function (``notebook_tools.inspect`` on an in-process
IPython shell's namespace): a ``np.memmap`` over a sparse file of ``--gb`` GB (made with a truncate: it costs no
disk, and reading it costs no disk either, only page faults and memory), and an in-memory float64 array of a
tenth of that size.  The child reports its resident memory before the call, its peak (``ru_maxrss``) after, the
call's wall time (after a first call on a small array, which compiles redaction's patterns), and the first lines of the answer (what was sampled).  Needs numpy.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CASES = ("memmap", "array")


def rss_mb() -> float:
    """This process's resident memory now, in MB."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def peak_mb() -> float:
    """This process's peak resident memory so far, in MB (Linux reports ru_maxrss in KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(case: str, size: int, folder: str) -> dict[str, Any]:
    """Run one case here (in the child) and return its figures."""
    import numpy as np
    from IPython.core.interactiveshell import InteractiveShell

    from nbagent.notebook.notebook_tools import inspect
    from nbagent.notebook.variables import VariableWatch

    ip = InteractiveShell.instance()
    if case == "memmap":
        path = Path(folder) / "big.f64"
        with open(path, "wb") as handle:
            handle.truncate(size)  # sparse: no disk used
        value: Any = np.memmap(path, dtype="float64", mode="r", shape=(size // 8,))
    else:
        value = np.arange(size // 80, dtype="float64")
    ip.user_ns["big"], ip.user_ns["warm"] = value, np.arange(10.0)
    watch = VariableWatch(ip)
    inspect(ip, watch, "warm")  # first use: redaction's patterns are compiled once per process
    before = rss_mb()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    began = time.perf_counter()
    answer = inspect(ip, watch, "big")
    seconds = time.perf_counter() - began
    return {
        "case": case,
        "mb": value.nbytes / 1e6,
        "before_mb": before,
        "peak_mb": peak_mb(),
        "seconds": seconds,
        "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults,
        "answer": answer.splitlines()[:3],
    }


def run_case(case: str, size: int) -> dict[str, Any]:
    """One case in a fresh child process."""
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.inspect_variable", "--child", case, "--bytes", str(size), "--folder", folder],
            capture_output=True,
            text=True,
            check=True,
        )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def table(rows: list[dict[str, Any]]) -> str:
    """The figures as a Markdown table, then each answer's first lines."""
    lines = [
        "| value | size | RSS before | peak RSS | growth | page faults | time |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['mb']:,.0f} MB | {r['before_mb']:,.0f} MB | {r['peak_mb']:,.0f} MB | "
            f"{max(r['peak_mb'] - r['before_mb'], 0):,.0f} MB | {r['faults']:,} | {r['seconds'] * 1000:,.1f} ms |"
        )
    for r in rows:
        lines += ["", f"{r['case']}:", *(f"    {line}" for line in r["answer"])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run every case (or, with --child, one case in this process) and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--gb", type=float, default=2.0, help="the memmap's size in GB (the array is a tenth of it; default 2)")
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--bytes", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.bytes, args.folder)))
        return
    size = int(args.gb * 1e9) // 8 * 8
    print(table([run_case(case, size) for case in CASES]))


if __name__ == "__main__":
    main()
