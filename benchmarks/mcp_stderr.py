"""Peak memory of a stdio MCP server that writes a lot of stderr, then fails: ``python -m benchmarks.mcp_stderr``.

Each case runs in a fresh child process (peak resident set = ``VmHWM`` of ``/proc/self/status``: unlike ``ru_maxrss``,
it does not carry the parent's size over the fork and exec that started the child):
it starts nbagent's MCP servers for one server that writes ``--mb`` MiB to stderr and exits before it speaks MCP,
lists its tools (none: it failed) and reads the note saying why. A case of 0 MiB is the floor (Python, the SDKs,
the manager's thread). Issue 33, item 13: the whole stderr was kept in a file and read whole on failure.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The server: ``mb`` MiB of stderr in 64 KiB writes (a last line that says why), then exit 1 without speaking MCP.
LOUD = (
    "import sys\n"
    "chunk = ('x' * 1023 + '\\n') * 64\n"
    "for _ in range({mb} * 16):\n"
    "    sys.stderr.write(chunk)\n"
    "sys.stderr.write('the loud server gives up\\n')\n"
    "sys.exit(1)\n"
)


def peak_mib() -> float:
    """This process's peak resident set in MiB (``VmHWM``; ``ru_maxrss`` where there is no /proc)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def one(mb: int) -> dict[str, object]:
    """In this process: start the loud server, take the note; the peak resident set (MiB) and the note's length."""
    from nbagent.tools.mcp import Manager, McpServers

    manager = Manager()
    try:
        servers = McpServers(
            {"loud": {"command": sys.executable, "args": ["-c", LOUD.format(mb=mb)], "startup_timeout": 120}}, manager=manager
        )
        servers.tools()
        notes = servers.notes()
    finally:
        manager.close()
    peak = peak_mib()
    said = next((n for n in notes if "'loud'" in n), "")
    return {"mb": mb, "peak_mib": round(peak, 1), "note_chars": len(said), "says_why": "gives up" in said}


def measure(mb: int) -> dict[str, object]:
    """One case in a fresh child process."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.mcp_stderr", "--child", str(mb)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def report(sizes: list[int]) -> str:
    """A Markdown table: each size's peak resident set, over the 0 MiB floor."""
    rows = [measure(0)] + [measure(mb) for mb in sizes]
    floor = float(rows[0]["peak_mib"])  # type: ignore[arg-type]
    lines = ["| stderr | peak RSS | over the floor | note (characters) | the note has its last line |", "|---|---|---|---|---|"]
    for row in rows:
        peak = float(row["peak_mib"])  # type: ignore[arg-type]
        lines.append(f"| {row['mb']} MiB | {peak:.1f} MiB | {peak - floor:.1f} MiB | {row['note_chars']} | {row['says_why']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Print the table (``--child MB``: one case, as JSON)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, nargs="*", default=[1, 50], help="MiB of stderr per case")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(one(args.child)))
        return
    print(report(args.mb))


if __name__ == "__main__":
    main()
