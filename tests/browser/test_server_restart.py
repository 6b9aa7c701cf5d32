"""The Jupyter server restarted mid-turn, with the page left open (issue 32, item 5); and the kernel restarted from the menu.

An ``%agent`` cell streams its answer slowly; the server is stopped as a user stops it (SIGTERM, which takes its
kernel with it) and started again on the same port. The page's live panel stops saying "working…" and says the
kernel stopped and to run the cell to continue exactly once (labextension/src/gone.ts). The user starts a kernel
and runs all cells: the cell re-renders the recorded turn, the text streamed before the cut is labelled "cut off",
the turn continues with one request to the fake API, and the final answer shows. A cell that recorded two turns
before the restart re-renders both (nbagent/notebook/restart.py ``matches``). docs/notebook.md, "Reopening a notebook".
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.browser.harness import Jupyter, JupyterServer, visible_text, wait_until, write_notebook
from tests.support.fake_anthropic import FakeAnthropic, RecordedRequest, text

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.kernel, pytest.mark.usefixtures("extension_installed")]
STOPPED = "interrupted: the kernel stopped; run this cell to continue exactly once"
LOST = "the connection to the kernel was lost: if the kernel stopped, run this cell to continue exactly once"
SLOW = "Once upon a time the kernel was streaming this answer when the server went away without a word."
FIRST = "The first turn answered at once."
FINAL = "The answer, continued after the restart, arrived whole."
NOTICE = ".nbagent-gone"


def alive(pid: int) -> bool:
    """Whether a process of this id runs (not a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not status.exists() or "\nState:\tZ" not in status.read_text()


def prepare(lab: Jupyter, name: str, pid_file: Path, agent_cells: int = 1) -> None:
    """Write and open a notebook that loads nbagent (noting its kernel's pid) and asks in ``agent_cells`` cells; run the first cell."""
    setup = f"%load_ext nbagent\nimport os; open({str(pid_file)!r}, 'w').write(str(os.getpid()))"
    write_notebook(lab.server.root / name, [setup, *["%agent Tell me something, slowly"] * agent_cells])
    lab.open(name)
    lab.run_cell(name, 0)
    lab.wait_idle(name)
    lab.save(name)


def restart_server(server: JupyterServer, pid: int, sig: int) -> None:
    """Stop the server with ``sig`` and start it again on the same port; the kernel ``pid`` must be gone by then."""
    code = server.stop_as_user(sig)
    wait_until(lambda: not alive(pid), 30, f"the kernel {pid} outlived the server (exit code {code})")
    server.start_again()


def told(lab: Jupyter, name: str, index: int) -> str:
    """What cell ``index`` says once its turn no longer looks live: the notice under it (whichever way the turn was cut)."""
    output, notice = lab.output(name, index), lab.cell(name, index).locator(NOTICE)

    def said() -> str:
        shown = visible_text(output)
        if "working…" in shown or "streaming" in shown:
            return ""
        return STOPPED if notice.count() and visible_text(notice.first) == STOPPED else ""

    return str(
        wait_until(
            said,
            60,
            lambda: (
                f"cell {index} does not say the kernel stopped: {visible_text(output)[-300:]!r}; notices "
                f"{[visible_text(n) for n in notice.all()]}; state {lab.state(name)}"
            ),
            0.25,
        )
    )


def start_kernel_and_run_all(lab: Jupyter, name: str) -> None:
    """As a user: close the "Server Connection Error" dialog, give the notebook a kernel if it has none (Kernel > Change Kernel…), Run All."""
    deadline = time.monotonic() + 90
    asked = False
    while lab.state(name)["status"] != "idle":
        dialog = lab.page.locator(".jp-Dialog").last
        if dialog.count() and "Server Connection Error" in dialog.inner_text():
            dialog.get_by_role("button", name="Close").click()  # its only button, not an accepting one
        elif dialog.count():
            print(f"{name}: {lab.accept_dialog()!r} accepted")
        elif lab.state(name)["kernel"] is None and not asked:
            lab.activate(name)
            lab.command("kernelmenu:change", wait=False)
            asked = True
        if time.monotonic() > deadline:
            raise AssertionError(f"{name}: no idle kernel after the restart: {lab.state(name)}")
        time.sleep(0.5)
    lab.run_all(name)
    lab.wait_idle(name)


def bodies(requests: list[RecordedRequest]) -> list[str]:
    """Each Messages request's content, as compared: its messages and system prompt."""
    out = []
    for r in requests:
        body: dict[str, Any] = r.body if isinstance(r.body, dict) else {}
        out.append(json.dumps([body.get("system"), body.get("messages")], sort_keys=True))
    return out


def restart_kernel_from_the_menu(lab: Jupyter, name: str, pid: int) -> None:
    """Kernel > Restart Kernel…, confirming the dialog; the kernel ``pid`` must be gone by then."""
    lab.activate(name)
    lab.command("notebook:restart-kernel", wait=False)
    print(f"{name}: {lab.accept_dialog()!r} accepted")
    wait_until(lambda: not alive(pid), 30, f"the kernel {pid} outlived its restart")


# SIGTERM: Ctrl+C or ``kill``: the server shuts its kernels down (it interrupts each first: the turn logs ``interrupted``
# and its panel ends as the transcript before the kernel goes); SIGHUP: the terminal it ran in closed: the server dies
# at once and ipykernel exits when it sees its parent gone; Kernel > Restart Kernel… from the menu: the server stays, the
# kernel is replaced. Each way the cell says the kernel stopped.
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGHUP, "menu"], ids=["sigterm", "sighup", "kernel-menu"])
def test_a_restart_mid_stream_says_so_and_run_all_continues_the_turn_once(
    lab: Jupyter, lab_server: JupyterServer, fake_api: FakeAnthropic, how: int | str
) -> None:
    name = f"restart-{'kernel-menu' if how == 'menu' else signal.Signals(how).name.lower()}.ipynb"
    pid_file = lab_server.root / f"{name}.pid"
    prepare(lab, name, pid_file)
    fake_api.script(text(SLOW, chunks=20, delay=0.5), text(FINAL))
    before = len(fake_api.requests)
    lab.run_cell(name, 1)
    output = lab.output(name, 1)
    wait_until(lambda: "Once upon" in visible_text(output), 60, lambda: f"the answer never began to stream: {visible_text(output)[-300:]}")
    assert "working" in visible_text(output) or "streaming" in visible_text(output), visible_text(output)[-300:]

    if how == "menu":
        restart_kernel_from_the_menu(lab, name, int(pid_file.read_text()))
    else:
        restart_server(lab_server, int(pid_file.read_text()), int(how))
    said = told(lab, name, 1)
    print(f"{name}: the page says {said!r}: {visible_text(output)!r}")
    cut = len(fake_api.requests)
    assert cut == before + 1

    start_kernel_and_run_all(lab, name)
    wait_until(lambda: FINAL in visible_text(output), 90, lambda: f"no final answer: {visible_text(output)[-500:]}")
    shown = visible_text(output)
    assert "from the log, recorded" in shown and "its unfinished turn continues below" in shown, shown[:600]
    assert "cut off" in shown and shown.index("Once upon") < shown.index("cut off") < shown.index(FINAL), shown[-600:]
    assert lab.cell(name, 1).locator(NOTICE).count() == 0  # the notice goes when the cell runs again
    after = fake_api.requests[cut:]
    assert len(after) == 1, bodies(after)  # the continuation: one request
    lab.wait_idle(name)
    assert len(fake_api.requests) == cut + 1
    lab.shutdown_kernel(name)
    lab.close(name)


def test_a_cell_that_ran_two_turns_re_renders_both_after_the_restart(
    lab: Jupyter, lab_server: JupyterServer, fake_api: FakeAnthropic
) -> None:
    name = "server-restart-two-turns.ipynb"
    pid_file = lab_server.root / f"{name}.pid"
    prepare(lab, name, pid_file)
    fake_api.script(text(FIRST), text(SLOW, chunks=20, delay=0.5), text(FINAL))
    output = lab.output(name, 1)
    lab.run_cell(name, 1)
    lab.wait_idle(name)
    assert FIRST in visible_text(output)
    lab.run_cell(name, 1)  # the same request again: a second turn of the same cell
    wait_until(
        lambda: "Once upon" in visible_text(output), 60, lambda: f"the second turn never began to stream: {visible_text(output)[-300:]}"
    )

    restart_server(lab_server, int(pid_file.read_text()), signal.SIGTERM)
    told(lab, name, 1)
    cut = len(fake_api.requests)
    start_kernel_and_run_all(lab, name)
    wait_until(lambda: FINAL in visible_text(output), 90, lambda: f"no final answer: {visible_text(output)[-500:]}")
    shown = visible_text(output)
    assert shown.count("You: Tell me something, slowly") == 2, shown
    assert shown.index(FIRST) < shown.index("Once upon") < shown.index("cut off") < shown.index(FINAL), shown
    assert len(fake_api.requests) == cut + 1  # the second turn continues once; the first is only shown
    lab.shutdown_kernel(name)
    lab.close(name)
