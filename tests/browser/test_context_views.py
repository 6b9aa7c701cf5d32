"""Compactions and thinking as a user sees them in JupyterLab: real panels, Chromium, Light and Dark.

One notebook, thinking on: a turn (the fake API's reply starts with a thinking block), ``%agent --compact`` (a
local compaction through the real magic), then a turn past a low trigger, whose reply carries the API's own
compaction block.  The test
checks what the finished panels show (a compaction entry with its summary folded, thinking collapsed, context use
in the header) and measures the contrast of every text, with every ``<details>`` opened, in both themes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.harness import Jupyter, contrast, visible_text, write_notebook
from tests.support.fake_anthropic import FakeAnthropic, text

pytestmark = [pytest.mark.browser, pytest.mark.slow]
NOTEBOOK = "long_session.ipynb"
MIN_CONTRAST = 4.5
CELLS = [
    "%load_ext nbagent\n%config Agent.thinking = 2048",
    "%agent Explain the tides in Stone Town",
    "%agent --compact",
    "%config Agent.compact_trigger = 10\n%agent And the moon?",
]
AGENT_CELLS = {1: "turn", 2: "compact", 3: "server"}
ANSWER, SUMMARY, MOON = "High tide is at noon.", "SUMMARY: the user asked about the tides; high tide is at noon.", "The moon pulls."


@pytest.fixture(scope="module")
def ran(lab: Jupyter, fake_api: FakeAnthropic) -> Iterator[dict[str, str]]:
    """The notebook run cell by cell, as a user would; the visible text of each agent cell's output."""
    write_notebook(lab.server.root / NOTEBOOK, CELLS)
    fake_api.script(text(ANSWER), text(SUMMARY), text(MOON))
    lab.open(NOTEBOOK)
    shown: dict[str, str] = {}
    for index in range(len(CELLS)):
        lab.run_cell(NOTEBOOK, index)
        lab.wait_idle(NOTEBOOK)
    for index, name in AGENT_CELLS.items():
        lab.output(NOTEBOOK, index).evaluate("(el) => el.querySelectorAll('details').forEach((d) => { d.open = true; })")
        shown[name] = visible_text(lab.output(NOTEBOOK, index))
    yield shown
    lab.close(NOTEBOOK)


def test_the_panels_show_the_compactions_and_the_thinking(ran: dict[str, str]) -> None:
    problems = []
    turn, compact, server = ran["turn"], ran["compact"], ran["server"]
    for words in (ANSWER, "Thinking (", "Thinking about request", "context "):
        if words not in turn:
            problems.append(f"the turn's panel does not show {words!r}; it shows: {turn[:400]!r}")
    for words in (MOON, "the API compacted the context", "Summary", "messages compacted by the server"):
        if words not in server:
            problems.append(f"the panel of the turn the API compacted does not show {words!r}; it shows: {server[:400]!r}")
    for words in ("compaction", "earlier message", "summarised", SUMMARY):
        if words not in compact:
            problems.append(f"the --compact panel does not show {words!r}; it shows: {compact[:400]!r}")
    if "compacting the context: summarising" in compact:
        problems.append("the finished --compact panel still shows the in-progress line")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_compactions_and_thinking_are_readable_in_light_and_dark(ran: dict[str, str], lab: Jupyter, theme: str) -> None:
    lab.change_theme(theme)
    lab.activate(NOTEBOOK)
    found: list[Any] = []
    for index in AGENT_CELLS:
        lab.output(NOTEBOOK, index).evaluate("(el) => el.querySelectorAll('details').forEach((d) => { d.open = true; })")
        found.append(lab.output(NOTEBOOK, index).locator(".jp-OutputArea-output"))
    records = [r for r in contrast(found) if not r["excluded"]]
    assert records, "no visible nbagent text to measure"
    low = sorted((r for r in records if r["ratio"] < MIN_CONTRAST), key=lambda r: r["ratio"])
    assert not low, f"{theme}: {len(low)} of {len(records)} texts below {MIN_CONTRAST}:1, worst first: " + "; ".join(
        f"{r['ratio']:.2f}:1 {r['text']!r} {r['color']} on {r['background']} ({r['where']})" for r in low[:10]
    )
