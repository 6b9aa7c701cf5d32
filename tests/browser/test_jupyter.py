"""nbagent as a user meets it: a real JupyterLab 4 and Notebook 7 in a real Chromium, the kernels talking to the fake API.

Issue 11, items 5 and 6.  The tests run in file order and share one JupyterLab page: the first run of a notebook
(streaming, a python tool row, Approve and Decline clicked while the cell runs), Restart Kernel and Run All, the
replay widget, contrast in both themes and glyphs (with a live panel waiting for approval in a second notebook),
closing and reopening the notebook, an interrupt, then Notebook 7 and the console.  Each step is a module fixture
that does what the user does; its test checks what the user sees and lists every problem it finds in one failure
message, in the user's terms.
"""

from __future__ import annotations

import json
import re
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import nbformat
import pytest

from tests.browser.harness import (
    ConsoleLog,
    Jupyter,
    JupyterServer,
    contrast,
    visible_text,
    wait_stable,
    wait_until,
    write_notebook,
)
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use, tool_uses

if TYPE_CHECKING:
    from playwright.sync_api import Locator

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # a real Jupyter server and Chromium: seconds to start
T = TypeVar("T")

NOTEBOOK = "analysis.ipynb"
INTERRUPTED_NOTEBOOK = "interrupted.ipynb"
LIVE_NOTEBOOK = "live.ipynb"
NOTEBOOK7 = "notebook7.ipynb"
MIN_CONTRAST = 4.5

ANSWER = """\
## Zanzibar plan

The plan has **three** steps:

1. Gather the *spice* ledgers.
2. Count the dhows.
3. Report back to the harbour master.

> Trade winds decide the schedule.

| Port | Dhows |
|------|-------|
| Stone Town | 12 |

```
total = sum(dhows)
```

Each step waits for the one before it, and the harbour master signs off on the count before anyone sails.
The ledgers go back to the archive when the season ends. That is the whole plan.
"""
PYTHON_CODE = "dhows = [5, 7]\nprint(sum(dhows) * 3)"
FINAL = {  # the cell index of each %agent cell -> the last words of its answer
    2: "That is the whole plan.",
    3: "There are 36 dhows in total.",
    4: "One line is in the ledger; you declined the other.",
}
SESSIONS_CELL, REPLAY_CELL = 5, 6
NBAGENT_CELLS = (*FINAL, SESSIONS_CELL, REPLAY_CELL)
QUESTION = "marked irreversible"  # words of the approval question (nbagent/agent/approval.py), to count how often it is drawn
MARKER = re.compile(r"interrupt", re.IGNORECASE)
NOT_FOUND = "model not found"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SAVED_WIDGETS: dict[str, list[int]] = {}  # notebook -> cells whose saved outputs hold a widget view (for the console's message)


def note_saved_widgets(path: Path) -> None:
    """Note which cells of the saved notebook at ``path`` keep a widget view in their outputs."""
    nb = nbformat.read(path, as_version=4)
    SAVED_WIDGETS[path.name] = [
        i for i, cell in enumerate(nb.cells) if any(WIDGET_VIEW in output.get("data", {}) for output in cell.get("outputs", []))
    ]


def tool_cell(ledger: Path) -> str:
    """A notebook cell defining an irreversible user tool that appends a line to ``ledger``."""
    return textwrap.dedent(
        f'''\
        import nbagent

        @nbagent.tool(effect="irreversible")
        def append_line(line: str) -> str:
            """Append one line to the ledger file.

            Args:
                line: the text to append
            """
            with open({str(ledger)!r}, "a") as f:
                f.write(line + "\\n")
            return "appended"
        '''
    )


def approval_replies() -> list[Any]:
    """The model asks for two irreversible calls at once, then answers."""
    calls = [("append_line", {"line": "first: approved"}), ("append_line", {"line": "second: declined"})]
    return [tool_uses(calls), text(FINAL[4])]


def second_decline(output: Locator) -> Locator:
    """The second question's Decline, once that question shows.

    The first question's buttons are disabled and hidden once it is decided, by updates to two widget models (the
    button's and its layout's). A locator resolved while they land held the first question's Decline, hidden and not
    yet disabled, and the click waited on that element until it timed out (CI, once). The second question is placed
    after those updates were sent, and only visible buttons are taken.
    """
    output.get_by_text("approval needed").nth(1).wait_for(state="visible", timeout=60_000)
    return output.locator("button:not([disabled]):visible", has_text="Decline").first


def check(what: str, problems: list[str]) -> None:
    """Fail with one message, what was checked and then each problem a user would see on its own line, if there are any."""
    if problems:
        pytest.fail(f"{what}: {len(problems)} problem(s) a user would see:\n" + "\n".join(f"  - {p}" for p in problems), pytrace=False)


def shorten(value: str, limit: int = 300) -> str:
    """One line of at most ``limit`` characters."""
    value = " ".join(value.split())
    return value if len(value) <= limit else value[: limit - 1] + "…"


def request_texts(body: Any) -> list[str]:
    """Every text the user's side of a Messages request carries (strings and text blocks, tool results left out)."""
    found = []
    for message in body.get("messages", []) if isinstance(body, dict) else []:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            found.append(content)
        elif isinstance(content, list):
            found += [str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"]
    return found


def tool_results(body: Any) -> list[dict[str, Any]]:
    """The tool_result blocks of a request's last message."""
    content = body["messages"][-1].get("content") if isinstance(body, dict) else None
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] if isinstance(content, list) else []


def expand_rows(jupyter: Jupyter, path: str) -> None:
    """Open every collapsible row (``<details>``) in the nbagent outputs, as a user clicking each one would."""
    for index in NBAGENT_CELLS:
        jupyter.output(path, index).evaluate("(el) => el.querySelectorAll('details').forEach((d) => { d.open = true; })")


def outputs(jupyter: Jupyter, path: str, cells: tuple[int, ...]) -> list[Any]:
    """The output elements of ``cells`` (what nbagent drew there); the notebook is brought to the front first."""
    jupyter.activate(path)
    return [jupyter.output(path, i).locator(".jp-OutputArea-output") for i in cells]


def contrast_failures(locators: list[Any], where: str) -> str | None:
    """The contrast report of every visible text under ``locators``, or None if all reach MIN_CONTRAST."""
    records = contrast(locators)
    measured = [r for r in records if not r["excluded"]]
    excluded = len(records) - len(measured)
    if not measured:
        return f"{where}: no visible nbagent text found to measure"
    print(f"{where}: {len(measured)} text nodes measured (lowest {min(r['ratio'] for r in measured):.2f}:1), {excluded} not judged")
    low = sorted((r for r in measured if r["ratio"] < MIN_CONTRAST), key=lambda r: r["ratio"])
    if not low:
        return None
    seen, worst = set(), []
    for r in low:
        key = (r["color"], r["background"], r["where"])
        if key not in seen:
            seen.add(key)
            worst.append(f"{r['ratio']:.2f}:1  {r['text']!r}  text {r['color']} on {r['background']}  ({r['where']})")
    return (
        f"{where}: {len(low)} of {len(measured)} visible text nodes have a contrast below {MIN_CONTRAST}:1 "
        f"(WCAG AA), so a user cannot read them comfortably; worst first (distinct colours and places):\n    "
        + "\n    ".join(worst[:15])
        + f"\n  ({excluded} text nodes not judged: disabled controls, and code in the theme's own syntax colours)"
    )


def missing_glyphs(jupyter: Jupyter, locators: list[Any]) -> list[tuple[str, str]]:
    """The characters under ``locators`` that this machine's fonts draw as empty boxes, with where each is."""
    roots = [handle for locator in locators for handle in locator.element_handles()]
    return [(ch, where) for ch, where in jupyter.page.evaluate(f"(roots) => ({MISSING_GLYPHS_JS})(roots)", roots)]


# Whether the rendered markdown's code block, block quote and table are styled at all (the browser's defaults have no
# background, border or padding for them).
MARKDOWN_STYLES_JS = """
(el) => {
  const s = (q) => { const e = el.querySelector(q); return e ? getComputedStyle(e) : null; };
  const pre = s('pre'), quote = s('blockquote'), cell = s('td') || s('th');
  const clear = (c) => c.backgroundColor === 'rgba(0, 0, 0, 0)' || c.backgroundColor === 'transparent';
  const bordered = (c) => ['Top', 'Right', 'Bottom', 'Left'].some((side) => parseFloat(c[`border${side}Width`]) > 0);
  return {
    'code block': !!pre && (!clear(pre) || bordered(pre) || parseFloat(pre.paddingLeft) > 0),
    'block quote': !!quote && (!clear(quote) || parseFloat(quote.borderLeftWidth) > 0 || parseFloat(quote.paddingLeft) > 0),
    'table': !!cell && (parseFloat(cell.paddingLeft) >= 4 || bordered(cell)),
  };
}
"""


# Watches the answer's output while it streams: how often it showed a partial answer, and the markdown styles of the
# live panel once the code block is in (before the turn ends and the output becomes the static transcript).
STREAM_WATCH_JS = (
    """
([el, first, last, code]) => {
  const styles = """
    + MARKDOWN_STYLES_JS
    + """;
  const record = {partial: 0, styles: null};
  const check = () => {
    const shown = el.innerText;
    if (shown.includes(first) && !shown.includes(last)) {
      record.partial += 1;
      if (!record.styles && shown.includes(code)) record.styles = styles(el);
    }
  };
  new MutationObserver(check).observe(el, {subtree: true, childList: true, characterData: true});
  window.__nbagentStream = record;
}
"""
)


# Glyphs: a character the installed fonts lack is drawn as the same empty box as a code point no font has.
MISSING_GLYPHS_JS = """
(roots) => {
  const canvas = document.createElement('canvas');
  canvas.width = 48; canvas.height = 48;
  const ctx = canvas.getContext('2d', {willReadFrequently: true});
  const draw = (ch, font) => {
    ctx.clearRect(0, 0, 48, 48);
    ctx.font = font; ctx.fillStyle = '#000'; ctx.textBaseline = 'top';
    ctx.fillText(ch, 4, 4);
    const d = ctx.getImageData(0, 0, 48, 48).data;
    let sum = 0, weighted = 0;
    for (let i = 3; i < d.length; i += 4) { sum += d[i]; weighted = (weighted + d[i] * (i + 1)) % 1000000007; }
    return sum + ':' + weighted;
  };
  const found = new Map();
  for (const root of roots) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const el = node.parentElement;
      if (!el || !el.checkVisibility()) continue;
      const s = getComputedStyle(el);
      const font = `${s.fontStyle} ${s.fontWeight} 32px ${s.fontFamily}`;
      for (const ch of node.textContent) {
        if (ch.codePointAt(0) < 0x2000 || /\\s/.test(ch) || found.has(ch)) continue;
        const nobody = draw('\\u{10FFFD}', font);
        const ink = draw(ch, font);
        if (ink === nobody || ink.startsWith('0:')) found.set(ch, (el.closest('button') ? 'button ' : '') + JSON.stringify(node.textContent.trim().slice(0, 40)));
      }
    }
  }
  return [...found.entries()];
}
"""


# The first run: streaming, a python tool row, approvals clicked while the cell runs ---------------------------------
@pytest.fixture(scope="module")
def first_run(lab: Jupyter, lab_server: JupyterServer, fake_api: FakeAnthropic) -> dict[str, Any]:
    """Open a new notebook, Run All, click Approve on the first irreversible call and Decline on the second."""
    root = lab_server.root
    ledger = root / "ledger.txt"
    cells = [
        "%load_ext nbagent",
        tool_cell(ledger),
        "%agent Explain the Zanzibar plan",
        "%agent How many dhows are there in total?",
        "%agent Record both results in the ledger",
        "%agent_sessions",
        "%agent_replay",
    ]
    write_notebook(root / NOTEBOOK, cells)
    fake_api.script(
        text(ANSWER, chunks=40, delay=0.05),
        tool_use("python", {"code": PYTHON_CODE}),
        text(FINAL[3]),
        *approval_replies(),
    )
    lab.open(NOTEBOOK)
    answer_output = lab.output(NOTEBOOK, 2)
    answer_output.evaluate(f"(el) => ({STREAM_WATCH_JS})([el, 'Zanzibar plan', {FINAL[2]!r}, 'total = sum(dhows)'])")
    lab.run_all(NOTEBOOK)
    wait_until(
        lambda: FINAL[2] in visible_text(answer_output),
        60,
        lambda: f"the streamed answer never finished; the cell shows: {shorten(visible_text(answer_output))}",
    )
    watched = lab.page.evaluate("() => window.__nbagentStream")

    # Approve the first call, decline the second, each while the cell runs.
    output = lab.output(NOTEBOOK, 4)
    approve = output.locator("button:not([disabled])", has_text="Approve").first
    approve.wait_for(state="visible", timeout=90_000)
    at_first_question = visible_text(output)
    ledger_before_click = ledger.read_text() if ledger.exists() else ""
    button = approve.element_handle()
    approve.click()
    lab.page.wait_for_function("(b) => !b.isConnected || b.disabled", arg=button, timeout=30_000)
    decline = second_decline(output)
    decline.wait_for(state="visible", timeout=60_000)
    at_second_question = visible_text(output)
    decline.click()
    lab.wait_idle(NOTEBOOK)
    return {
        "ledger": ledger,
        "partial": watched["partial"],
        "live_styles": watched["styles"] or {},
        "at_first_question": at_first_question,
        "at_second_question": at_second_question,
        "ledger_before_click": ledger_before_click,
        "requests": len(fake_api.requests),
    }


def test_first_run_streams_markdown_expands_a_tool_row_and_takes_one_approval(
    first_run: dict[str, Any], lab: Jupyter, fake_api: FakeAnthropic
) -> None:
    problems: list[str] = []
    answer = lab.output(NOTEBOOK, 2)

    # Streaming: the user saw the answer grow, not appear at once at the end.
    if not first_run["partial"]:
        problems.append("streaming: the answer appeared all at once; no partial answer was shown while the model streamed it")

    # Markdown is rendered, not shown as source.
    shown = visible_text(answer)
    for selector, words, what in (
        ("h2", "Zanzibar plan", "the heading"),
        ("strong", "three", "the bold word"),
        ("ol > li", "Count the dhows", "the numbered list"),
        ("blockquote", "Trade winds", "the block quote"),
        ("td", "Stone Town", "the table"),
        ("pre", "total = sum(dhows)", "the code block"),
    ):
        if not answer.locator(selector, has_text=words).first.is_visible():
            problems.append(f"markdown: {what} ({words!r}) is not rendered as <{selector}>; the cell shows: {shorten(shown, 200)}")
    if "## " in shown or "**three**" in shown:
        problems.append("markdown: raw markdown syntax (## or **) is visible in the answer")

    # The live panel (sampled while streaming) and the finished output style code blocks, block quotes and tables.
    for when, styles in (
        ("while streaming (live panel)", first_run["live_styles"]),
        ("when finished", answer.evaluate(MARKDOWN_STYLES_JS)),
    ):
        if not styles:
            problems.append(f"{when}: the code block was never seen before the answer ended; the live panel could not be checked")
        for part, ok in styles.items():
            if not ok:
                problems.append(f"{when}: the {part} in the answer is unstyled (no background, border or padding)")

    # The python tool row expands to show the code as code.
    tool_output = lab.output(NOTEBOOK, 3)
    row = tool_output.locator("summary", has_text="python").first
    if not row.is_visible():
        problems.append(f"tool row: no collapsible row for the python call; the cell shows: {shorten(visible_text(tool_output), 200)}")
    else:
        row.click()
        details = tool_output.locator("details", has=lab.page.locator("summary", has_text="python")).first
        wait_until(lambda: details.evaluate("(d) => d.open"), 10, "tool row: clicking the python row did not expand it")
        code = visible_text(details)
        lines = [line.strip() for line in code.splitlines()]
        if "dhows = [5, 7]" not in lines or "print(sum(dhows) * 3)" not in lines:
            problems.append(f"tool row: the python input is not shown as code, one statement per line; it shows: {shorten(code, 200)}")
        if "\\n" in code or '"code"' in code:
            problems.append(f"tool row: the python input is shown as escaped JSON: {shorten(code, 200)}")
    expand_rows(lab, NOTEBOOK)
    if "36" not in visible_text(tool_output):
        problems.append("tool row: the python result (36) is not shown in the expanded result row")
    if FINAL[3] not in visible_text(tool_output):
        problems.append(f"tool cell: the final answer {FINAL[3]!r} is not shown")

    # Approval: asked once per call, answered by clicks while the cell ran, and exactly one run on disk.
    ledger = first_run["ledger"]
    on_disk = ledger.read_text() if ledger.exists() else "(no ledger file)"
    if on_disk != "first: approved\n":
        problems.append(f"approval: the ledger should hold exactly the approved line once; it holds {on_disk!r}")
    if first_run["ledger_before_click"]:
        problems.append(f"approval: the irreversible tool ran before the user clicked Approve: {first_run['ledger_before_click']!r}")
    for calls, moment in enumerate(("at_first_question", "at_second_question"), start=1):
        drawn = first_run[moment].count(QUESTION)
        if drawn != calls:
            problems.append(
                f"approval: when call {calls} of 2 is asked, the approval question is drawn {drawn} times for {calls} call(s) (each should be drawn once)"
            )
    if first_run["requests"] != 5:
        problems.append(f"model: expected 5 requests for the three cells, the fake API received {first_run['requests']}")
    else:
        results = tool_results(fake_api.requests[4].body)
        outcome = [(bool(r.get("is_error")), json.dumps(r.get("content"))) for r in results]
        if len(results) != 2 or outcome[0][0] or "appended" not in outcome[0][1] or "declined" not in outcome[1][1].lower():
            problems.append(f"model: the tool results sent back should be 'appended' then a decline; they are {outcome}")
    after = visible_text(lab.output(NOTEBOOK, 4))
    for word in ("approved", "declined"):
        if word not in after.lower():
            problems.append(f"approval: after the clicks the panel does not say {word!r}; it shows: {shorten(after, 300)}")
    if FINAL[4] not in after:
        problems.append(f"approval cell: the final answer {FINAL[4]!r} is not shown")
    check("first run in JupyterLab", problems)


# Restart Kernel and Run All ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def restarted(first_run: dict[str, Any], lab: Jupyter, fake_api: FakeAnthropic) -> dict[str, Any]:
    """Save, then Kernel > Restart Kernel and Run All Cells… (confirmed), and wait until every cell has run again."""
    lab.save(NOTEBOOK)
    before = {"requests": len(fake_api.requests), "ledger": first_run["ledger"].read_text(), "kernel": lab.state(NOTEBOOK)["kernel"]}
    dialog = lab.restart_run_all(NOTEBOOK)
    lab.wait_run_all(NOTEBOOK, 120)
    return {"before": before, "dialog": dialog, "kernel": lab.state(NOTEBOOK)["kernel"]}


def test_restart_and_run_all_rerenders_every_panel_without_the_model(
    restarted: dict[str, Any], first_run: dict[str, Any], lab: Jupyter, fake_api: FakeAnthropic
) -> None:
    problems: list[str] = []
    before = restarted["before"]
    asked = len(fake_api.requests) - before["requests"]
    if asked:
        problems.append(f"{asked} model request(s) reached the API; recorded turns must be re-rendered from the log with none")
    now = first_run["ledger"].read_text()
    if now != before["ledger"]:
        problems.append(f"a tool ran again: the ledger changed from {before['ledger']!r} to {now!r}")
    for index, last_words in FINAL.items():
        shown = visible_text(lab.output(NOTEBOOK, index))
        if last_words not in shown:
            problems.append(
                f"cell {index}: the re-rendered panel does not show the recorded answer {last_words!r}; it shows: {shorten(shown, 200)}"
            )
        if not re.search(r"\blog\b", shown, re.IGNORECASE):
            problems.append(f"cell {index}: the re-rendered panel looks like a fresh run; it does not say it came from the log")
    enabled = lab.output(NOTEBOOK, 4).locator("button:not([disabled])", has_text="Approve").count()
    if enabled:
        problems.append("the re-rendered approval cell shows an active Approve button again")
    check("Restart Kernel and Run All in JupyterLab", problems)


# The replay widget -------------------------------------------------------------------------------------------------
def readout(output: Any) -> int:
    """The number the replay's event slider shows."""
    return int(output.locator(".widget-readout").first.inner_text().strip())


def shown_outside_lists(output: Any, words: str) -> int:
    """How often ``words`` are visible in an output, not counting the replay's list of matches."""
    return visible_text(output).count(words) - sum(visible_text(s).count(words) for s in output.locator(".nbagent-match").all())


def test_replay_plays_scrubs_and_searches(restarted: dict[str, Any], lab: Jupyter) -> None:
    lab.activate(NOTEBOOK)
    output = lab.output(NOTEBOOK, REPLAY_CELL)
    play = output.get_by_role("button", name=re.compile(r"play|pause", re.IGNORECASE)).first
    assert play.is_visible(), f"replay: no Play button is shown; the cell shows: {shorten(visible_text(output))}"
    handle = output.locator(".noUi-handle").first
    total = int(float(handle.get_attribute("aria-valuemax") or 0))
    assert total > 5, f"replay: the event slider has only {total} positions for a session of three turns"
    assert readout(output) == 1, f"replay: a fresh replay should show event 1; it shows {readout(output)}"
    assert shown_outside_lists(output, "Stone Town") == 0, "replay: at event 1 the first answer is already shown"

    # Search (from event 1): matches are counted and listed in context; choosing one jumps there and shows it.
    search = output.locator("input[type=text], input:not([type])").first
    search.fill("Stone Town")
    count = wait_until(
        lambda: re.search(r"(\d+) match", visible_text(output)),
        10,
        lambda: f"replay: searching shows no match count; {shorten(visible_text(output))}",
    )
    assert int(count.group(1)) >= 1, f"replay: searching 'Stone Town' (in the first answer) found {count.group(0)}"
    listing = output.locator(".nbagent-match").first  # a row per match: its turn, the text around it, a Show button
    wait_until(listing.is_visible, 10, "replay: the matches are not listed")
    label = visible_text(listing)
    assert "Stone Town" in label and re.search(r"Turn \d", label), f"replay: a match is not shown in context with its turn: {label!r}"
    listing.get_by_role("button", name="Show").click()
    wait_until(lambda: readout(output) > 1, 10, lambda: f"replay: choosing the match {label!r} did not move the slider")
    wait_until(
        lambda: shown_outside_lists(output, "Stone Town") > 0,
        10,
        lambda: (
            f"replay: after choosing the match {label!r}, the event shown does not contain 'Stone Town': {shorten(visible_text(output))}"
        ),
    )

    # Scrub: drag the slider's handle to a quarter of its track.
    track = output.locator(".noUi-target").first.bounding_box()
    knob = handle.bounding_box()
    assert track and knob, "replay: the event slider is not drawn"
    shown_before, at = visible_text(output), readout(output)
    target_x = track["x"] + track["width"] * 0.25
    lab.page.mouse.move(knob["x"] + knob["width"] / 2, knob["y"] + knob["height"] / 2)
    lab.page.mouse.down()
    lab.page.mouse.move(target_x, knob["y"] + knob["height"] / 2, steps=12)
    lab.page.mouse.up()
    expected = round(1 + (total - 1) * 0.25)
    wait_until(
        lambda: abs(readout(output) - expected) <= max(2, total // 10) and readout(output) != at,
        10,
        lambda: f"replay: dragging the slider to a quarter should show event ~{expected} of {total}; it shows {readout(output)}",
    )
    wait_until(lambda: visible_text(output) != shown_before, 10, "replay: scrubbing moved the slider but the event shown did not change")

    # Play (from there): the position advances by itself; Pause stops it.
    start, shown_before = readout(output), visible_text(output)
    play.click()
    wait_until(lambda: readout(output) > start, 15, f"replay: after clicking Play the event slider stayed at {start}")
    assert visible_text(output) != shown_before, "replay: playing changed the slider but not the event shown"
    if re.search(r"pause", play.inner_text(), re.IGNORECASE):
        play.click()
        wait_until(lambda: re.search(r"play", play.inner_text(), re.IGNORECASE), 10, "replay: Pause did not stop playback")


# Readable in Light and Dark, labels without an emoji font -------------------------------------------------------------
@pytest.fixture(scope="module")
def live_notebook(restarted: dict[str, Any], lab: Jupyter, lab_server: JupyterServer) -> Iterator[str]:
    """A second notebook whose ``%agent`` cell (index 2) is run again whenever a live panel waiting for approval is needed."""
    write_notebook(
        lab_server.root / LIVE_NOTEBOOK,
        ["%load_ext nbagent", tool_cell(lab_server.root / "ledger-live.txt"), "%agent Add the theme to the ledger"],
    )
    lab.open(LIVE_NOTEBOOK)
    for index in (0, 1):
        lab.run_cell(LIVE_NOTEBOOK, index)
        lab.wait_idle(LIVE_NOTEBOOK)
    yield LIVE_NOTEBOOK
    with suppress(Exception):  # the page may be gone after a failure; the server's shutdown stops the kernel anyway
        lab.shutdown_kernel(LIVE_NOTEBOOK)
        lab.close(LIVE_NOTEBOOK)


def while_asking(lab: Jupyter, fake: FakeAnthropic, path: str, look: Callable[[list[Any]], T]) -> T:
    """Run the live notebook's ``%agent`` cell; while its panel waits for approval, ``look`` at its output; then Decline."""
    fake.script(tool_use("append_line", {"line": "never"}, text="I will add the theme to the ledger."), text("Nothing was added."))
    lab.run_cell(path, 2)
    output = lab.output(path, 2)
    decline = output.locator("button:not([disabled])", has_text="Decline").first
    decline.wait_for(state="visible", timeout=60_000)
    try:
        return look(outputs(lab, path, (2,)))
    finally:
        decline.click()
        lab.wait_idle(path)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_views_are_readable_in_light_and_dark(
    restarted: dict[str, Any], live_notebook: str, lab: Jupyter, fake_api: FakeAnthropic, theme: str
) -> None:
    lab.change_theme(theme)
    name = theme.title()
    live = while_asking(
        lab, fake_api, live_notebook, lambda found: contrast_failures(found, f"live panel asking for approval, {name} theme")
    )
    expand_rows(lab, NOTEBOOK)
    rerun = contrast_failures(outputs(lab, NOTEBOOK, NBAGENT_CELLS), f"re-rendered panels, sessions list and live replay, {name} theme")
    check(f"contrast in JupyterLab {name}", [report for report in (live, rerun) if report])


def test_labels_show_without_an_emoji_font(restarted: dict[str, Any], live_notebook: str, lab: Jupyter, fake_api: FakeAnthropic) -> None:
    found = while_asking(lab, fake_api, live_notebook, lambda live: missing_glyphs(lab, live))
    found += missing_glyphs(lab, outputs(lab, NOTEBOOK, NBAGENT_CELLS))
    missing = dict(found)
    listed = "\n  ".join(f"U+{ord(ch):04X} {ch!r} in {where}" for ch, where in missing.items())
    if missing:
        pytest.fail(
            f"{len(missing)} character(s) in nbagent's views are drawn as empty boxes with this machine's fonts (no emoji font):\n  {listed}",
            pytrace=False,
        )


# Close and reopen: the saved notebook shows static views ------------------------------------------------------------
@pytest.fixture(scope="module")
def reopened(restarted: dict[str, Any], lab: Jupyter) -> dict[str, Any]:
    """Save, Kernel > Shut Down Kernel, close the tab, open the notebook again (a new kernel starts; nothing is run)."""
    lab.save(NOTEBOOK)
    note_saved_widgets(lab.server.root / NOTEBOOK)
    lab.shutdown_kernel(NOTEBOOK)
    lab.close(NOTEBOOK)
    lab.open(NOTEBOOK)
    shown = wait_stable(lab.notebook(NOTEBOOK), quiet=2.5, timeout=40)
    return {"shown": shown, "page": lab.page.evaluate("() => document.body.innerText")}


def test_reopened_notebook_shows_the_transcripts_and_no_broken_widget(reopened: dict[str, Any], lab: Jupyter) -> None:
    problems: list[str] = []
    if NOT_FOUND in reopened["page"].lower():
        broken = [i for i in range(REPLAY_CELL + 1) if NOT_FOUND in visible_text(lab.output(NOTEBOOK, i)).lower()]
        problems.append(f"'Error displaying widget: model not found' is shown in the outputs of cells {broken}")
    for index, last_words in FINAL.items():
        output = lab.output(NOTEBOOK, index)
        if not output.get_by_text(last_words).first.is_visible():
            problems.append(f"cell {index}: the transcript is not visible; the output shows: {shorten(visible_text(output), 200)}")
    replay = visible_text(lab.output(NOTEBOOK, REPLAY_CELL))
    if "Zanzibar" not in replay and "Replay" not in replay:
        problems.append(f"replay cell: no static summary of the session is shown; the output shows: {shorten(replay, 200)}")
    if not re.search(r"re-?run", replay, re.IGNORECASE):
        problems.append("replay cell: no hint to re-run the cell for the interactive replay")
    sessions = visible_text(lab.output(NOTEBOOK, SESSIONS_CELL))
    if "Explain the Zanzibar plan" not in sessions:
        problems.append(f"sessions cell: the session list is not shown; it shows: {shorten(sessions, 200)}")
    check("the saved notebook reopened in JupyterLab (kernel shut down, tab closed, opened again)", problems)


@pytest.mark.parametrize("theme", ["dark", "light"])
def test_reopened_views_are_readable_in_light_and_dark(reopened: dict[str, Any], lab: Jupyter, theme: str) -> None:
    if FINAL[2] not in reopened["shown"]:
        pytest.fail(
            "the reopened notebook shows no transcript (see the reopen test), so there is nothing of nbagent's to measure", pytrace=False
        )
    lab.change_theme(theme)
    expand_rows(lab, NOTEBOOK)
    report = contrast_failures(outputs(lab, NOTEBOOK, NBAGENT_CELLS), f"reopened notebook (static views), {theme.title()} theme")
    check(f"contrast in JupyterLab {theme.title()}", [report] if report else [])


# Interrupt during a stream ------------------------------------------------------------------------------------------
def test_interrupt_during_a_stream_is_marked_in_the_next_request(lab: Jupyter, lab_server: JupyterServer, fake_api: FakeAnthropic) -> None:
    story = " ".join(f"The lighthouse keeper counted wave number {n} and wrote it down." for n in range(60))
    write_notebook(
        lab_server.root / INTERRUPTED_NOTEBOOK,
        ["%load_ext nbagent", "%agent Tell me a long story about lighthouses", "%agent Now summarise the harbour news"],
    )
    fake_api.script(text(story, chunks=200, delay=0.05), text("Harbour news: all calm."))
    lab.open(INTERRUPTED_NOTEBOOK)
    lab.run_cell(INTERRUPTED_NOTEBOOK, 0)
    lab.wait_idle(INTERRUPTED_NOTEBOOK)
    first = len(fake_api.requests)
    lab.run_cell(INTERRUPTED_NOTEBOOK, 1)
    streaming = lab.output(INTERRUPTED_NOTEBOOK, 1)
    wait_until(lambda: "wave number 3 " in visible_text(streaming), 30, "the story never started streaming into the panel")
    assert "wave number 59" not in visible_text(streaming), "the stream finished before the interrupt could be sent"
    lab.interrupt(INTERRUPTED_NOTEBOOK)
    lab.wait_idle(INTERRUPTED_NOTEBOOK)
    interrupted_shown = visible_text(streaming)
    lab.run_cell(INTERRUPTED_NOTEBOOK, 2)
    lab.wait_idle(INTERRUPTED_NOTEBOOK)
    problems: list[str] = []
    if not MARKER.search(interrupted_shown):
        problems.append(f"the interrupted cell's panel does not say it was interrupted: {shorten(interrupted_shown, 200)}")
    requests = fake_api.requests[first:]
    if len(requests) != 2:
        problems.append(f"expected the interrupted request and one new request; the fake API received {len(requests)}")
    if requests:
        texts = request_texts(requests[-1].body)
        if not any(MARKER.search(t) for t in texts):
            problems.append(
                "the request after the interrupt does not tell the model the previous request was interrupted; its user texts are: "
                + " | ".join(shorten(t, 120) for t in texts)
            )
    second = visible_text(lab.output(INTERRUPTED_NOTEBOOK, 2))
    if "Harbour news: all calm." not in second:
        problems.append(f"the request after the interrupt was not answered: {shorten(second, 200)}")
    lab.shutdown_kernel(INTERRUPTED_NOTEBOOK)
    lab.close(INTERRUPTED_NOTEBOOK)
    check("interrupt during a stream, then a new request", problems)


# Notebook 7: approval and reopen ---------------------------------------------------------------------------------------
def test_notebook7_approval_and_reopen(notebook7: Jupyter, notebook7_server: JupyterServer, fake_api: FakeAnthropic) -> None:
    root = notebook7_server.root
    ledger = root / "ledger7.txt"
    write_notebook(root / NOTEBOOK7, ["%load_ext nbagent", tool_cell(ledger), "%agent Record both results in the ledger", "%agent_replay"])
    fake_api.script(*approval_replies())
    notebook7.open(NOTEBOOK7)
    notebook7.run_all(NOTEBOOK7)
    output = notebook7.output(NOTEBOOK7, 2)
    approve = output.locator("button:not([disabled])", has_text="Approve").first
    approve.wait_for(state="visible", timeout=90_000)
    button = approve.element_handle()
    approve.click()
    notebook7.page.wait_for_function("(b) => !b.isConnected || b.disabled", arg=button, timeout=30_000)
    second_decline(output).click(timeout=60_000)
    notebook7.wait_idle(NOTEBOOK7)
    problems: list[str] = []
    on_disk = ledger.read_text() if ledger.exists() else "(no ledger file)"
    if on_disk != "first: approved\n":
        problems.append(f"approval: the ledger should hold exactly the approved line once; it holds {on_disk!r}")
    if FINAL[4] not in visible_text(output):
        problems.append(f"approval cell: the final answer is not shown: {shorten(visible_text(output), 200)}")

    notebook7.save(NOTEBOOK7)
    note_saved_widgets(root / NOTEBOOK7)
    notebook7.shutdown_kernel(NOTEBOOK7)
    notebook7.close(NOTEBOOK7)
    notebook7.open(NOTEBOOK7)
    wait_stable(notebook7.notebook(NOTEBOOK7), quiet=2.5, timeout=40)
    page = str(notebook7.page.evaluate("() => document.body.innerText"))
    if NOT_FOUND in page.lower():
        problems.append("reopened: 'Error displaying widget: model not found' is shown")
    reopened = notebook7.output(NOTEBOOK7, 2)
    if not reopened.get_by_text(FINAL[4]).first.is_visible():
        problems.append(f"reopened: the transcript is not visible; the output shows: {shorten(visible_text(reopened), 200)}")
    replay = visible_text(notebook7.output(NOTEBOOK7, 3))
    if not re.search(r"re-?run", replay, re.IGNORECASE):
        problems.append(f"reopened: the replay cell shows no static summary with a hint to re-run it: {shorten(replay, 200)}")
    check("Notebook 7: approval while the cell runs, then save, close and reopen", problems)


# The console ---------------------------------------------------------------------------------------------------------
# Console errors that are not nbagent's, each with the reason it is safe to ignore; everything else fails the test.
# Besides these, an error that the same page also logged while the app loaded (no notebook open yet) is not nbagent's.
IGNORED_CONSOLE: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"favicon", re.IGNORECASE), "a missing favicon is the server's, not nbagent's"),
    (
        re.compile(r"Could not restore the debugger state: Canceled future for debug_request"),
        "JupyterLab's debugger asks every new kernel for its state; a restart or shutdown the test makes cancels that request",
    ),
]


def test_the_console_shows_no_error_from_nbagent(console: ConsoleLog, lab: Jupyter) -> None:
    time.sleep(0.5)  # late console messages of the last page
    ignored, errors = [], []
    for entry in console.entries:
        line = f"[{entry['page']}] {entry['kind']}: {shorten(entry['text'], 400)}" + (f" ({entry['stack']})" if entry["stack"] else "")
        reason = next((why for pattern, why in IGNORED_CONSOLE if pattern.search(entry["text"] + " " + entry["stack"])), None)
        if reason is None and console.in_baseline(entry):
            reason = "also logged while the app loaded, before any notebook was open"
        (ignored if reason else errors).append(f"{line}  -- ignored: {reason}" if reason else line)
    outside = [r for r in console.failed_requests if "127.0.0.1" not in r.split(" (")[0]]
    if ignored:
        print("ignored console errors:\n  " + "\n  ".join(ignored))
    problems = errors + [f"the page tried to reach the network: {r}" for r in outside]
    if any(NOT_FOUND in e for e in errors):
        saved = "; ".join(f"{name} cells {cells}" for name, cells in SAVED_WIDGETS.items() if cells) or "none"
        problems.append(
            f"('widget model not found' is what the widget manager logs when it renders a saved widget view whose kernel is gone; "
            f"saved outputs that still hold a widget view: {saved})"
        )
    check("browser console (F12) during the whole suite, JupyterLab and Notebook 7 pages", problems)
