"""Defect 10 of issue 20: a tool printing gigabytes must not hold them in memory.

Each attack runs in a fresh child process (so its peak resident memory is its own): a real
``nbagent.run`` against the fake Messages API on 127.0.0.1, the model asking for the ``shell``
tool (a command printing the bytes; a command printing forever, killed at its timeout) or the
notebook's ``python`` tool in an in-process IPython shell (code printing 1 MB lines). The child
reports how far its memory grew during the run and the tool result the model was sent next; the
result must be the output's head, a note counting exactly the characters left out, and its tail.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import Context, Finding

QUICK_SIZE = 200_000_000  # bytes printed in a quick run
FULL_SIZE = 2_000_000_000  # the size
LINE = 1_000_000  # characters per line the python code prints
SHELL_LIMIT, PYTHON_LIMIT = 50_000, 20_000  # the tools' limits (toolkit.MAX_SHELL_OUTPUT, python_tool.MAX_TEXT)
TIMEOUT = 600.0  # a child that takes longer hangs
RESULT_BUDGET = 40_000  # characters of one tool result a request carries by default (context.DEFAULT_RESULT_BUDGET)


def _note(left_out: int) -> str:
    return f"\n[... {left_out} more characters not shown]\n"


def expected(case: str, size: int) -> str | re.Pattern[str]:
    """The tool result the model must be sent for ``case`` printing ``size`` bytes."""
    if case == "shell":
        half = "y\n" * (SHELL_LIMIT // 4)
        return f"exit code 0\nstdout:\n{half}{_note(size - SHELL_LIMIT)}{half}"
    if case == "python":
        tail = "x" * (PYTHON_LIMIT // 2 - 1)  # the last line's newline is stripped
        return "x" * (PYTHON_LIMIT // 2) + _note(size - PYTHON_LIMIT) + tail
    half = SHELL_LIMIT // 2  # "forever": killed at its timeout, so only the shape is known
    return re.compile(
        rf"TimeoutError: timed out after 1 s; killed\nstdout:\n(y\n){{{half // 2}}}\n\[\.\.\. \d+ more characters not shown\]\n[y\n]{{{half}}}"
    )


def _request(case: str, size: int) -> tuple[str, dict[str, Any]]:
    if case == "shell":
        return "shell", {"command": f"yes | head -c {size}"}
    if case == "python":
        return "python", {"code": f"for _ in range({size // LINE}):\n    print('x' * {LINE - 1})"}
    return "shell", {"command": "yes", "timeout": 1}


def _status(field: str) -> int:
    """A field of /proc/self/status in bytes (VmRSS: now, VmHWM: the peak)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith(field + ":"))


def reset_peak() -> bool:
    """Reset this process's peak resident memory (VmHWM) to its current size; False where Linux does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        return False
    return True


def child(case: str, size: int, folder: Path) -> dict[str, Any]:
    """In the child: one run through the loop; how much memory grew, the logged tool result, what the request carried."""
    import anthropic

    import nbagent
    from nbagent.record import events as ev
    from nbagent.tools import builtin as toolkit
    from tests.support.fake_anthropic import FakeAnthropic, text, tool_use

    tools: list[Any] = [toolkit.shell]
    if case == "python":
        from IPython.core.interactiveshell import InteractiveShell

        from nbagent.notebook.python_tool import python_tool

        tools = [python_tool(InteractiveShell.instance())]
    name, arguments = _request(case, size)
    log = folder / f"{case}.jsonl"
    with FakeAnthropic() as fake:
        fake.script(tool_use(name, arguments), text("done"))
        client = anthropic.Anthropic(base_url=fake.base_url, api_key="test-key", max_retries=0)
        reset_peak()
        before = _status("VmRSS")
        with nbagent.Session.open(log) as session:
            nbagent.run(session, "print a lot", tools=tools, client=client, approval="auto")
        peak = _status("VmHWM")
        sent = fake.requests[1].body["messages"][-1]["content"][0]
    logged = next(e for e in nbagent.read_events(log) if e["type"] == ev.TOOL_RESULT)
    return {
        "growth": peak - before,
        "logged": _text(logged["content"]),
        "sent": _text(sent["content"]),
        "is_error": bool(logged.get("is_error")),
    }


def _text(content: Any) -> str:
    return content if isinstance(content, str) else "".join(block.get("text", "") for block in content)


def _attack(ctx: Context, cases: list[tuple[str, int]]) -> list[Finding]:
    folder = ctx.sub("output").folder
    args = [sys.executable, "-m", "reliability.redteam.output", str(folder), *(f"{case}:{size}" for case, size in cases)]
    done = subprocess.run(args, cwd=folder, env=dict(os.environ), capture_output=True, text=True, timeout=TIMEOUT)
    findings = []
    for case, size in cases:
        what = {"shell": f"shell tool printing {size:,} bytes", "python": f"python tool printing {size:,} bytes"}
        attack = what.get(case, "shell command printing forever, killed at its 1 s timeout")
        report = folder / f"{case}.json"
        if done.returncode != 0 or not report.exists():
            findings.append(Finding(10, attack, "inert", [f"the run failed: {done.stderr.strip()[-500:]}"]))
            continue
        seen = json.loads(report.read_text())
        problems = []
        bound = max(size, QUICK_SIZE) // 4
        if seen["growth"] >= bound:
            problems.append(f"memory grew by {seen['growth'] / 1e6:,.0f} MB while the tool ran (bound {bound / 1e6:,.0f} MB)")
        want, logged = expected(case, size), seen["logged"]
        if isinstance(want, str) and logged != want or isinstance(want, re.Pattern) and not want.fullmatch(logged):
            problems.append(f"the result is not the head, the count and the tail: {len(logged):,} characters, {logged[:80]!r}...")
        if not seen["sent"].startswith(logged[:RESULT_BUDGET]):
            problems.append("the request did not carry the result (or its first tool_result_budget characters)")
        if seen["is_error"] != (case == "forever"):
            problems.append(f"is_error was {seen['is_error']}")
        findings.append(Finding(10, attack, "inert", problems))
    return findings


def attacks(ctx: Context) -> list[Finding]:
    """The shell and python tools printing a lot (200 MB quick, 2 GB full), and a command printing until killed."""
    size = QUICK_SIZE if ctx.quick else FULL_SIZE
    cases = [("shell", size), ("python", size), ("forever", 0)]
    if reset_peak():  # one child for all: its peak is reset before each case
        return _attack(ctx, cases)
    return [finding for case in cases for finding in _attack(ctx, [case])]


if __name__ == "__main__":
    where = Path(sys.argv[1])
    for arg in sys.argv[2:]:
        case, size = arg.split(":")
        (where / f"{case}.json").write_text(json.dumps(child(case, int(size), where)))
