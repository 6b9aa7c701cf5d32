"""In the browser: how long after the last streamed delta of a 20,000-character answer the panel is finished; and the swap.

A real JupyterLab server and headless Chromium (tests/browser/harness.py, as the browser tests use them),
the kernel talking to the project's fake Anthropic server on 127.0.0.1.  One ``%agent`` cell streams a
20,000-character markdown answer (2,500 deltas of 8 characters, as fast as the fake can send them).

- *last streamed delta*: the timestamp of the session log's last ``delta`` event (the kernel writes streamed
  text to the log at most 50 ms after it arrives, and the rest when the block ends);
- *finished*: the first moment the cell's output shows the whole answer and the final status ``done``
  (a MutationObserver in the page, Date.now(); the kernel and Chromium share the machine's clock);
- *settled*: the last change to the output after that (the live view torn down, the static transcript in).

With ``--swap`` (issue 22, point 8), what the end of a turn does to the page: a turn with a python tool row and a
streamed answer, in a notebook with cells below it, in view.  When the live panel's widgets show the whole answer
(*answered*), the kernel makes the cell's output the static transcript (*swapped*: the output holds the transcript and
no live widget any more).  Measured: answered -> swapped, the last logged event -> swapped, and the Cumulative Layout
Shift of that swap (Chromium's ``layout-shift`` entries from answered to one second after swapped, a PerformanceObserver
in the page); once as the panel is, and once with every row the user could open opened during the turn.  The code
measured is whatever ``nbagent`` the kernels import: run it with ``PYTHONPATH`` set to another checkout to measure that.

With ``--insert`` (issue 24): a turn of 1 and of 50 python calls, then a click on "Insert as cells" (nbagent's
JupyterLab extension); measured from the click (``performance.now()`` in the page, the click made by the page itself)
to the inserted cells present in the notebook's DOM (polled each animation frame), and to the kernel's ``insert`` message
arriving in the page (the kernel connection's ``anyMessage``): the rest is the extension inserting into the model and
JupyterLab drawing the cells. The kernel answers the
``insert_request`` with the recorded calls over the comm; the extension inserts them through the notebook model.

Usage: ``python -m benchmarks.browser [--runs N] [--swap | --insert]``; prints the median of the runs (not asserted anywhere).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nbagent.record import events as ev
from nbagent.record.log_reader import read_events
from tests.browser.harness import PANEL_JS, Jupyter, JupyterServer, kernel_env, launch_chromium, wait_stable, write_notebook
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use

LENGTH = 20_000
NOTEBOOK = "long-answer.ipynb"
ENDING = "End of the long answer."

# Watches one output area: when it first shows ``tail`` and a "done" status, and when it last changed.
OBSERVE_JS = """
([el, tail]) => {
  const record = {finished: null, last: null, mutations: 0};
  const check = () => {
    record.last = Date.now();
    record.mutations += 1;
    if (record.finished === null) {
      const shown = el.innerText;
      if (shown.includes(tail) && /\\bdone\\b/.test(shown)) record.finished = record.last;
    }
  };
  new MutationObserver(check).observe(el, {subtree: true, childList: true, characterData: true, attributes: true});
  window.__nbagentBench = record;
}
"""


def answer(length: int = LENGTH) -> str:
    """A markdown answer of exactly ``length`` characters: numbered paragraphs, some bold, a final line to look for."""
    parts, n = [], 0
    while sum(map(len, parts)) < length:
        n += 1
        parts.append(f"{n}. The **harbour** log for day {n} lists the dhows that came in, the weather and the cargo unloaded.\n\n")
    body = "".join(parts)
    ending = f"\n\n{ENDING}"
    return body[: length - len(ending)] + ending


def last_delta_time(log_folder: Path) -> float:
    """The timestamp of the last ``delta`` event in the notebook's session log."""
    [log] = sorted(log_folder.glob("*.jsonl"))
    return max(float(e["ts"]) for e in read_events(log) if e["type"] == ev.DELTA)


def measure_once(jupyter: Jupyter, server: JupyterServer, fake: FakeAnthropic, number: int) -> dict[str, float]:
    """Run one long answer in a new notebook; its times in milliseconds after the last streamed delta."""
    name = f"run{number}-{NOTEBOOK}"
    long = answer()
    write_notebook(server.root / name, ["%load_ext nbagent", "%agent Write the harbour log"])
    fake.script(text(long))
    jupyter.open(name)
    jupyter.run_cell(name, 0)
    jupyter.wait_idle(name)
    output = jupyter.cell(name, 1).locator(".jp-Cell-outputArea, .jp-OutputArea").first
    output.evaluate(f"(el) => ({OBSERVE_JS})([el, {ENDING!r}])")
    jupyter.run_cell(name, 1)
    jupyter.wait_idle(name)
    wait_stable(output, quiet=2.0, timeout=60)
    record: dict[str, Any] = jupyter.page.evaluate("() => window.__nbagentBench")
    if record["finished"] is None:
        shown = output.inner_text()
        raise RuntimeError(f"the panel never showed the whole answer with status 'done'; it shows {shown[:200]!r} … {shown[-200:]!r}")
    last = last_delta_time(server.root / ".nbagent" / name) * 1000
    jupyter.shutdown_kernel(name)
    jupyter.close(name)
    return {"finished": record["finished"] - last, "settled": record["last"] - last, "mutations": record["mutations"]}


SWAP_NOTEBOOK = "swap.ipynb"
SWAP_ENDING = "That is all the dhows."
SWAP_ANSWER = (
    "## Dhows in the harbour\n\nThe ledger lists **two** moorings; the count is below.\n\n"
    "| Mooring | Dhows |\n|---|---:|\n| North | 5 |\n| South | 7 |\n\n"
    "Three times the total is 36, which matches the harbour master's note for the season.\n\n" + SWAP_ENDING
)
BELOW = ["# md\n## Below the agent cell\n\nA note the user wrote under the agent's cell.", "print('a cell below')"]

# Watches one output area through the end of a turn: when the live panel shows ``tail``, when the output is the static
# transcript, its height on each side of the swap, and every layout shift (``open``: open each row of the live panel).
SWAP_JS = """
([el, tail, open]) => {
  const record = {answered: null, swapped: null, swappedEpoch: null, liveHeight: null, staticHeight: null, shifts: []};
  const live = () => el.querySelector('.jupyter-widgets.nbagent, .widget-vbox.nbagent, .lm-Widget.nbagent');
  const check = () => {
    const panel = live();
    if (panel) {
      if (open) panel.querySelectorAll('details:not([open])').forEach((d) => { d.open = true; });
      record.liveHeight = el.getBoundingClientRect().height;
      if (record.answered === null && panel.innerText.includes(tail)) record.answered = performance.now();
    } else if (record.swapped === null && el.querySelector('.nbagent-transcript')) {
      record.swapped = performance.now();
      record.swappedEpoch = Date.now();
      requestAnimationFrame(() => requestAnimationFrame(() => { record.staticHeight = el.getBoundingClientRect().height; }));
    }
  };
  new MutationObserver(check).observe(el, {subtree: true, childList: true, characterData: true, attributes: true});
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) record.shifts.push({at: e.startTime, value: e.value, input: e.hadRecentInput});
  }).observe({type: 'layout-shift', buffered: false});
  window.__nbagentSwap = record;
}
"""


def last_event_time(log_folder: Path) -> float:
    """The timestamp of the last event in the notebook's session log."""
    [log] = sorted(log_folder.glob("*.jsonl"))
    return max(float(e["ts"]) for e in read_events(log))


def measure_swap(jupyter: Jupyter, server: JupyterServer, fake: FakeAnthropic, number: int, *, open_rows: bool) -> dict[str, float]:
    """Run one turn in a new notebook with cells below it; the swap's times (ms) and layout shift."""
    name = f"run{number}-{'open-' if open_rows else ''}{SWAP_NOTEBOOK}"
    write_notebook(server.root / name, ["%load_ext nbagent", "%agent Count the dhows", *BELOW])
    fake.script(
        tool_use("python", {"code": "dhows = [5, 7]\nprint(sum(dhows) * 3)"}, text="I will count them."),
        text(SWAP_ANSWER, chunks=40, delay=0.02),
    )
    jupyter.open(name)
    jupyter.run_cell(name, 0)
    jupyter.wait_idle(name)
    cell = jupyter.cell(name, 1)
    cell.evaluate("(el) => el.scrollIntoView({block: 'start'})")
    output = cell.locator(".jp-Cell-outputArea, .jp-OutputArea").first
    output.evaluate(f"(el) => ({SWAP_JS})([el, {SWAP_ENDING!r}, {str(open_rows).lower()}])")
    jupyter.run_cell(name, 1)
    jupyter.wait_idle(name)
    wait_stable(output, quiet=2.0, timeout=60)
    record: dict[str, Any] = jupyter.page.evaluate("() => window.__nbagentSwap")
    if record["answered"] is None or record["swapped"] is None:
        raise RuntimeError(f"the swap was not seen: {record}; the output shows {output.inner_text()[:300]!r}")
    window = [s for s in record["shifts"] if record["answered"] - 50 <= s["at"] <= record["swapped"] + 1000 and not s["input"]]
    last = last_event_time(server.root / ".nbagent" / name) * 1000
    jupyter.shutdown_kernel(name)
    jupyter.close(name)
    return {
        "answered_to_swapped": record["swapped"] - record["answered"],
        "logged_to_swapped": record["swappedEpoch"] - last,
        "cls": sum(s["value"] for s in window),
        "height_change": (record["staticHeight"] or 0) - (record["liveHeight"] or 0),
    }


INSERT_JS = """
async ([notebookId, outputIndex, want]) => {
  const notebook = document.getElementById(notebookId);
  const count = () => notebook.querySelectorAll('.jp-Notebook > .jp-Cell, .jp-WindowedPanel-viewport > .jp-Cell').length;
  const button = notebook.querySelectorAll('.jp-Cell')[outputIndex].querySelector('button.nbagent-cells-insert');
  const panel = [...window.jupyterapp.shell.widgets('main')].find((w) => w.id === notebookId);
  let received = null;  // the kernel's insert message arriving (before the extension inserts and JupyterLab draws)
  panel.sessionContext.session.kernel.anyMessage.connect((_, args) => {
    const msg = args.msg;
    if (received === null && args.direction === 'recv' && msg.header.msg_type === 'comm_msg' && msg.content.data.type === 'insert') {
      received = performance.now();
    }
  });
  const started = performance.now();
  button.click();
  while (count() < want) {
    if (performance.now() - started > 120000) return [-1, -1];
    await new Promise((resolve) => requestAnimationFrame(resolve));
  }
  return [performance.now() - started, received === null ? -1 : received - started];
}
"""


def measure_insert(jupyter: Jupyter, server: JupyterServer, fake: FakeAnthropic, number: int, calls: int) -> tuple[float, float]:
    """A turn of ``calls`` python calls in a new notebook; ms from the click on "Insert as cells" to the cells present in
    the DOM, and to the kernel's ``insert`` message arriving in the page."""
    name = f"run{number}-insert-{calls}.ipynb"
    write_notebook(server.root / name, ["%load_ext nbagent", "%agent Count the dhows"])
    fake.script(*(tool_use("python", {"code": f"dhows_{i} = {i}\nprint('mooring', {i})"}) for i in range(calls)), text("Counted."))
    jupyter.open(name)
    jupyter.run_cell(name, 0)
    jupyter.wait_idle(name)
    state = f"(path) => ({PANEL_JS})(path).node.dataset.nbagentCells"
    deadline = time.monotonic() + 60
    while jupyter.page.evaluate(state, name) != "ready":
        if time.monotonic() > deadline:
            raise RuntimeError("nbagent's extension never connected: is it installed (jupyter labextension list)?")
        time.sleep(0.1)
    jupyter.run_cell(name, 1)
    jupyter.wait_idle(name, timeout=600)
    jupyter.output(name, 1).locator("button.nbagent-cells-insert").wait_for(state="visible", timeout=60_000)
    elapsed, received = (float(t) for t in jupyter.page.evaluate(INSERT_JS, [jupyter.state(name)["id"], 1, 2 + calls]))
    if elapsed < 0:
        raise RuntimeError(f"the {calls} cells were not inserted within 120 s")
    jupyter.shutdown_kernel(name)
    jupyter.close(name)
    return elapsed, received


@contextlib.contextmanager
def lab_page() -> Iterator[tuple[Jupyter, JupyterServer, FakeAnthropic]]:
    """The fake API, a JupyterLab on it and a Chromium page showing it, all stopped afterwards."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="nbagent-browser-bench-") as folder, FakeAnthropic() as fake:
        home = Path(folder)
        server = JupyterServer("lab", home / "root", kernel_env(home / "home", fake.base_url, home / "nbagent-data")).start()
        try:
            with sync_playwright() as playwright:
                browser = launch_chromium(playwright)
                try:
                    page = browser.new_page(viewport={"width": 1280, "height": 1000})
                    jupyter = Jupyter(page, server)
                    jupyter.start()
                    yield jupyter, server, fake
                finally:
                    browser.close()
        finally:
            server.stop()


def run_inserts(runs: int) -> list[dict[str, float]]:
    """Start the fake API, JupyterLab and Chromium; ``runs`` inserts of 1 and of 50 calls."""
    with lab_page() as (jupyter, server, fake):
        jupyter.page.set_default_timeout(60_000)
        results = []
        for n in range(1, runs + 1):
            for calls in (1, 50):
                shown, received = measure_insert(jupyter, server, fake, n, calls)
                results.append({"calls": float(calls), "ms": shown, "model_ms": received})
        return results


def run(runs: int, *, swap: bool = False) -> list[dict[str, float]]:
    """Start the fake API, JupyterLab and Chromium; measure ``runs`` long answers (``swap``: ``runs`` swaps each way)."""
    with lab_page() as (jupyter, server, fake):
        if swap:
            return [
                {"open_rows": float(opened), **measure_swap(jupyter, server, fake, n, open_rows=opened)}
                for n in range(1, runs + 1)
                for opened in (False, True)
            ]
        return [measure_once(jupyter, server, fake, n) for n in range(1, runs + 1)]


def main(argv: list[str] | None = None) -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="long answers to measure (default 3); the median is printed")
    parser.add_argument(
        "--swap", action="store_true", help="measure the end of a turn: live panel -> static transcript, and its layout shift"
    )
    parser.add_argument("--insert", action="store_true", help='measure "Insert as cells": click -> cells present, 1 and 50 calls')
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.insert:
        inserts = run_inserts(args.runs)
        for calls in (1.0, 50.0):
            times = [r["ms"] for r in inserts if r["calls"] == calls]
            model = [r["model_ms"] for r in inserts if r["calls"] == calls]
            print(
                f"Insert as cells, a turn of {calls:.0f} python call{'s' if calls > 1 else ''}: click -> cells present "
                f"{statistics.median(times):.0f} ms (median of {len(times)}: {', '.join(f'{t:.0f}' for t in times)}); "
                f"of which click -> the kernel's insert message in the page {statistics.median(model):.0f} ms"
            )
        print(f"whole benchmark {time.monotonic() - started:.0f} s")
        return 0
    if args.swap:
        return print_swaps(run(args.runs, swap=True), started)
    results = run(args.runs)
    for n, r in enumerate(results, 1):
        print(
            f"run {n}: finished {r['finished']:.0f} ms, settled {r['settled']:.0f} ms after the last delta ({r['mutations']:.0f} DOM mutations)"
        )
    finished = statistics.median(r["finished"] for r in results)
    settled = statistics.median(r["settled"] for r in results)
    print(
        f"{LENGTH:,}-character answer in JupyterLab: last streamed delta -> finished panel {finished:.0f} ms, "
        f"-> output settled {settled:.0f} ms (medians of {len(results)}; whole benchmark {time.monotonic() - started:.0f} s)"
    )
    return 0


def print_swaps(results: list[dict[str, float]], started: float) -> int:
    """Print each swap and the medians, rows as shown and every row opened."""
    for r in results:
        rows = "every row opened" if r["open_rows"] else "rows as shown"
        print(
            f"{rows}: answered -> swapped {r['answered_to_swapped']:.0f} ms, last logged event -> swapped {r['logged_to_swapped']:.0f} ms, "
            f"CLS {r['cls']:.4f}, output height {r['height_change']:+.0f} px"
        )
    for opened in (0.0, 1.0):
        some = [r for r in results if r["open_rows"] == opened]
        rows = "every row opened" if opened else "rows as shown"
        median = {k: statistics.median(r[k] for r in some) for k in ("answered_to_swapped", "logged_to_swapped", "cls", "height_change")}
        print(
            f"median, {rows}: answered -> swapped {median['answered_to_swapped']:.0f} ms, last logged event -> swapped "
            f"{median['logged_to_swapped']:.0f} ms, CLS {median['cls']:.4f}, output height {median['height_change']:+.0f} px ({len(some)} runs)"
        )
    print(f"whole benchmark {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
