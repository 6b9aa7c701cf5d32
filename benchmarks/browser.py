"""In the browser: how long after the last streamed delta of a 20,000-character answer the panel is finished.

A real JupyterLab server and headless Chromium (tests/browser/harness.py, as the browser tests use them),
the kernel talking to the project's fake Anthropic server on 127.0.0.1.  One ``%agent`` cell streams a
20,000-character markdown answer (2,500 deltas of 8 characters, as fast as the fake can send them).

- *last streamed delta*: the timestamp of the session log's last ``delta`` event (the kernel writes streamed
  text to the log at most 50 ms after it arrives, and the rest when the block ends);
- *finished*: the first moment the cell's output shows the whole answer and the final status ``done``
  (a MutationObserver in the page, Date.now(); the kernel and Chromium share the machine's clock);
- *settled*: the last change to the output after that (the live view torn down, the static transcript in).

Usage: ``python -m benchmarks.browser [--runs N]``; prints the median of the runs (not asserted anywhere).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from nbagent import events as ev
from nbagent.reader import read_events
from tests.browser.harness import Jupyter, JupyterServer, kernel_env, launch_chromium, wait_stable, write_notebook
from tests.fake_anthropic import FakeAnthropic, text

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


def run(runs: int) -> list[dict[str, float]]:
    """Start the fake API, JupyterLab and Chromium; measure ``runs`` long answers."""
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
                    return [measure_once(jupyter, server, fake, n) for n in range(1, runs + 1)]
                finally:
                    browser.close()
        finally:
            server.stop()


def main(argv: list[str] | None = None) -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="long answers to measure (default 3); the median is printed")
    args = parser.parse_args(argv)
    started = time.monotonic()
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


if __name__ == "__main__":
    sys.exit(main())
