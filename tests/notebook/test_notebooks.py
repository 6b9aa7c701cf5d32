"""The shipped notebooks, executed headless with nbclient in a real kernel against the fake Anthropic server."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError

import nbagent
from nbagent.record import events as ev
from nbagent.stores import folders as store
from tests.support.fake_anthropic import text, tool_use, tool_uses

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"

pytestmark = [pytest.mark.kernel, pytest.mark.slow]  # each runs a notebook with nbclient in a real kernel


def execute(name: str, folder: Path, fake, **env: str):
    """Run All on a fresh kernel whose working folder is ``folder``; return the executed notebook."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    kernel_env = {
        **os.environ,
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "JPY_SESSION_NAME": str(folder / f"{name}.ipynb"),
        **env,
    }
    client = NotebookClient(
        nb, timeout=120, kernel_name="python3", shutdown_kernel="immediate", resources={"metadata": {"path": str(folder)}}
    )
    client.execute(env=kernel_env)
    return nb


def shown(cell) -> str:
    parts = []
    for output in cell.get("outputs", []):
        parts.append(output.get("text", "") if output["output_type"] == "stream" else output.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def cell_with(nb, source_start: str):
    return next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith(source_start))


def test_quickstart(fake, tmp_path: Path):
    config = tmp_path / "ipython" / "profile_default"
    config.mkdir(parents=True)
    (config / "ipython_kernel_config.py").write_text("c.Agent.model = 'claude-set-in-a-config-file'\n")
    fake.script(
        tool_use("python", {"code": "mean_temp = round(sum(temperatures) / len(temperatures), 2)\nmean_temp"}),
        text("The mean is 22.36 °C; it is in `mean_temp`."),
        tool_uses([("write_file", {"path": "summary.txt", "content": "mean: 22.36\n"}), ("shell", {"command": "cat summary.txt"})]),
        text("Done: summary.txt says mean: 22.36."),
        tool_use("fahrenheit", {"celsius": 25.1}),
        text("The warmest is 77.2 °F."),
    )
    nb = execute("quickstart", tmp_path, fake, IPYTHONDIR=str(tmp_path / "ipython"))
    assert "The mean is 22.36" in shown(cell_with(nb, "%agent What is the mean"))
    assert shown(cell_with(nb, "mean_temp")).strip() == "22.36"  # the agent's variable is the user's variable
    assert "Done: summary.txt" in shown(cell_with(nb, "%%agent"))
    assert (tmp_path / "summary.txt").read_text() == "mean: 22.36\n"
    assert "exit code 0" in fake.requests[3].body["messages"][-1]["content"][1]["content"]  # approval = 'auto'
    assert "77.2" in shown(cell_with(nb, "%agent What is the warmest"))
    assert "fahrenheit" in {t["name"] for t in fake.requests[4].body["tools"]}
    assert {r.body["model"] for r in fake.requests} == {"claude-set-in-a-config-file"}
    listing = shown(cell_with(nb, "%agent_sessions"))
    assert "complete" in listing and "What is the mean of temperatures" in listing
    assert len(fake.requests) == 6
    [log] = store.list_sessions(tmp_path / ".nbagent" / "quickstart.ipynb")
    assert nbagent.Session.open(log.path).state.turns == 3


def test_crash_and_resume(fake, tmp_path: Path):
    fake.script(
        tool_use("send_email", {"to": "ana@example.com", "subject": "Weekly report"}),
        text("Sent the weekly report to ana@example.com."),
    )
    outbox = tmp_path / "outbox.txt"
    with pytest.raises(DeadKernelError):  # run 1: the kernel dies inside send_email
        execute("crash_and_resume", tmp_path, fake)
    assert len(outbox.read_text().splitlines()) == 1 and len(fake.requests) == 1

    nb = execute("crash_and_resume", tmp_path, fake)  # run 2: the unfinished turn continues, once
    agent_cell = shown(cell_with(nb, "%agent Email"))
    assert "sent to ana@example.com" in agent_cell and "Sent the weekly report" in agent_cell
    assert len(outbox.read_text().splitlines()) == 1  # the email went out exactly once
    assert len(fake.requests) == 2

    nb = execute("crash_and_resume", tmp_path, fake)  # run 3: replayed from the log
    assert "Sent the weekly report" in shown(cell_with(nb, "%agent Email"))
    assert len(fake.requests) == 2 and len(outbox.read_text().splitlines()) == 1
    assert "complete" in shown(cell_with(nb, "%agent_sessions"))
    [log] = store.list_sessions(tmp_path / ".nbagent" / "crash_and_resume.ipynb")
    started = [e for e in nbagent.read_events(log.path) if e["type"] == ev.TOOL_STARTED]
    assert [e["attempt"] for e in started] == [1, 2] and started[0]["idempotency_key"] == started[1]["idempotency_key"]
