"""Parallel tool calls in a real kernel (issue 25, item 1): the notebook's own reads and a user's read tool run side by side.

The user's read tool waits at a barrier the other call must reach (a timeout breaks it, and the call fails), so
the two are shown to overlap inside the kernel; the python call between reads runs alone on the cell's thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nbagent.notebook import notebook_tools as nt
from tests.support.fake_anthropic import FakeAnthropic, text, tool_uses
from tests.support.kernels import Kernel, kernel_env

pytestmark = [pytest.mark.kernel, pytest.mark.slow]

SETUP = '''
import threading, nbagent
import pandas as pd
df = pd.DataFrame({"price": [1.5, None, 3.0]})
_meeting = threading.Barrier(2, timeout=30)

@nbagent.tool(effect="read")
def meet(name: str) -> str:
    """Wait for the other call at the barrier.

    Args:
        name: This call's name.
    """
    _meeting.wait()
    return f"{name} met the other on {threading.current_thread().name}"
'''


def results(fake: FakeAnthropic) -> dict[str, Any]:
    return {
        block["tool_use_id"]: block
        for message in fake.requests[-1].body["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    }


def test_reads_run_side_by_side_in_a_kernel(fake: FakeAnthropic, tmp_path: Path) -> None:
    calls = [
        ("meet", {"name": "a"}, "toolu_a"),
        ("meet", {"name": "b"}, "toolu_b"),
        ("python", {"code": "total = df['price'].sum()\nprint(total)"}, "toolu_py"),
        (nt.INSPECT, {"name": "df"}, "toolu_inspect"),
        (nt.HISTORY, {"first": 1}, "toolu_history"),
    ]
    fake.script(tool_uses(calls, "Looking."), text("Done."))
    with Kernel(tmp_path, kernel_env(fake.base_url)) as kernel:
        kernel.run("%load_ext nbagent")
        kernel.run(SETUP)
        kernel.run("%config Agent.approval = 'auto'")
        kernel.run("%agent look at df")
        assert kernel.run("print(total)").strip().endswith("4.5")  # the python call ran in the kernel's namespace
    found = results(fake)
    assert list(found) == [c[2] for c in calls]  # in the reply's order
    assert not any(block.get("is_error") for block in found.values()), found
    met = [found[f"toolu_{n}"]["content"] for n in "ab"]
    assert all("met the other on nbagent-tool-" in m for m in met), met  # both on the pool's threads, at once
    inspected = found["toolu_inspect"]["content"]
    assert "3 rows" in (inspected if isinstance(inspected, str) else str(inspected))
