"""Issue 35 items 4 and 6 in a real ipykernel: outcomes that are not errors are said calmly with how to go on.

No API key and a stop at a budget print plain output and end the cell normally where a front end told the kernel its
notebook (JupyterLab, Notebook 7 set JPY_SESSION_NAME); headless (no path: nbclient, nbconvert) they stay a
UsageError, so the run fails there. An interrupted panel shows its request's own figures and what to do next, and
running the cell again does what it said.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from nbagent.notebook.outcomes import AFTER_NO_KEY
from tests.support.fake_anthropic import text, tool_use
from tests.support.kernels import Kernel, Message, kernel_env, stream

pytestmark = [pytest.mark.kernel, pytest.mark.slow]

DIME = {"input_tokens": 50_000, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 0}


def ran(kernel: Kernel, code: str, cell_id: str | None = None) -> tuple[str, list[Message]]:
    messages, reply = kernel.execute(code, cell_id=cell_id)
    return reply["content"]["status"], messages


def shown_text(messages: list[Message]) -> str:
    """The panel's final text/plain (its static transcript)."""
    updates = [m["content"]["data"].get("text/plain", "") for m in messages if m["msg_type"] == "update_display_data"]
    return updates[-1] if updates else ""


def test_no_key_is_said_calmly_in_a_notebook_and_fails_a_headless_run(tmp_path: Path) -> None:
    keyless = {k: v for k, v in kernel_env().items() if not k.startswith("ANTHROPIC_") and k != "JPY_SESSION_NAME"}
    with Kernel(tmp_path, {**keyless, "JPY_SESSION_NAME": str(tmp_path / "work.ipynb")}) as kernel:
        kernel.run("%load_ext nbagent")
        status, messages = ran(kernel, "%agent What is in this folder?")
        assert status == "ok" and stream(messages, "stderr") == ""  # no red UsageError block
        said = stream(messages)
        assert said.startswith("nbagent: No Anthropic API key") and "Agent.demo = True" in said and AFTER_NO_KEY in said
    with Kernel(tmp_path, keyless) as headless:  # nobody reads the cells: the run must fail at this cell
        headless.run("%load_ext nbagent")
        status, messages = ran(headless, "%agent What is in this folder?")
        assert status == "error" and stream(messages, "stderr").startswith("UsageError: No Anthropic API key")
    assert not (tmp_path / ".nbagent").exists()


def test_a_budget_stop_is_an_outcome_with_how_to_go_on(kernels, fake) -> None:
    fake.script(*(tool_use("python", {"code": f"x{i} = {i}"}, usage=DIME) for i in range(3)), text("all set", usage=DIME))
    kernel = kernels()
    kernel.run("%load_ext nbagent\n%config Agent.max_cost = 0.15", "setup")
    status, messages = ran(kernel, "%agent set three variables", "cell")
    assert status == "ok" and "UsageError" not in stream(messages, "stderr")
    panel = shown_text(messages)
    assert "stopped at its budget · this request: 100,000 tokens in · 0 out · $0.20; context" in panel
    assert "stopped: this request cost $0.20, its budget is $0.15 (max_cost)" in panel
    said = stream(messages)
    assert "nbagent: this request stopped at its budget" in said
    assert "set Agent.max_cost to a higher amount, or to None for no limit, and run again" in said
    # what it said works: a higher budget, the same cell again, and the request goes on to its answer
    kernel.run("%config Agent.max_cost = 1")
    status, messages = ran(kernel, "%agent set three variables", "cell")
    assert status == "ok" and "all set" in shown_text(messages) and len(fake.requests) == 4


def test_an_interrupted_panel_says_its_figures_and_what_to_do_next(kernels, fake, tmp_path: Path) -> None:
    effect = tmp_path / "ran.txt"
    slow = f"open({str(effect)!r}, 'a').write('x')\nimport time\ntime.sleep(60)"
    fake.script(text("first"), tool_use("python", {"code": slow}, text="Running."), text("Stopped, as you asked."))
    kernel = kernels()
    kernel.run("%load_ext nbagent\n%config Agent.approval = 'auto'", "setup")
    kernel.run("%agent hello", "first")
    sent = kernel.send("%agent do a long thing", "long")

    def interrupt() -> None:
        deadline = time.monotonic() + 60
        # written, not only created: an interrupt between open() and the write left the file empty (CI, once)
        while not (effect.exists() and effect.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.05)
        kernel.km.interrupt_kernel()

    threading.Thread(target=interrupt, daemon=True).start()
    reply, said = kernel.wait(sent)
    assert reply["status"] == "ok"
    panel = said[said.rindex("do a long thing — ") :]
    head = panel.splitlines()[0]
    # this request's own tokens beside its own cost, then the session's, each labelled (not the first turn's tokens too)
    assert head.startswith("do a long thing — interrupted · this request: ") and "; session: " in head, head
    assert "next: Run this cell again to continue this request: python was interrupted while running" in panel
    # and running it again does what the panel said: python is asked before it runs again ("auto" never approves a
    # repeat of unknown outcome), so it does not run, and the request goes on to Claude's answer
    again = kernel.run("%agent do a long thing", "long")
    assert "Stopped, as you asked." in again and effect.read_text() == "x"  # it ran once, before the interrupt
