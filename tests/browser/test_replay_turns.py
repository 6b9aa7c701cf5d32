"""``%agent_replay`` in JupyterLab, built around turns (issue 22, point 6): what the first frame says, a search whose match is
shown in context and moves the cursor there, the cursor kept in sight, and screenshots of the replay in Light and Dark.

A session of two turns is recorded by the notebook's own kernel (the fake API answers), then replayed in the same notebook.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.browser.harness import Jupyter, JupyterServer, visible_text, wait_stable, wait_until, write_notebook
from tests.support.fake_anthropic import FakeAnthropic, text

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.kernel]
NOTEBOOK = "replay-turns.ipynb"
FIRST, SECOND = "What grows in the Spice Garden?", "Which field is the largest?"
GARDEN = "\n\n".join(
    [
        "The Spice Garden has four fields.",
        *(f"Field {n} grows {crop}, planted in rows of {n * 10}." for n, crop in enumerate(["cloves", "nutmeg", "vanilla"], 1)),
        "The fourth field grows cardamom beside the old well, where the shade keeps the pods from drying out too soon.",
        *(f"Note {n}: the harvest is weighed at the gate before noon." for n in range(1, 16)),  # longer than the replay's box
    ]
)
LARGEST = "The cardamom field is the largest: twice the others together."
REPLAY_CELL = 3
# How wide a select's longest option is, and the room its box leaves for text (its padding holds the arrow).
FITS = """(sel) => {
  const style = getComputedStyle(sel), ctx = document.createElement('canvas').getContext('2d');
  ctx.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
  const widest = Math.max(...[...sel.options].map((o) => ctx.measureText(o.text).width));
  return {widest, room: sel.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)};
}"""


def in_sight(output: Any) -> bool:
    """Whether the cursor line lies inside the visible part of the transcript's scrolling box."""
    return bool(
        output.evaluate(
            """(el) => {
              const box = el.querySelector('.nbagent-replay-scroll'), cursor = el.querySelector('.nbagent-cursor');
              if (!box || !cursor) return false;
              const b = box.getBoundingClientRect(), c = cursor.getBoundingClientRect();
              return c.height > 0 && c.top >= b.top - 1 && c.bottom <= b.bottom + 1;
            }"""
        )
    )


def test_the_replay_opens_on_what_the_session_was_and_finds_words_in_context(
    lab: Jupyter, lab_server: JupyterServer, fake_api: FakeAnthropic
) -> None:
    fake_api.script(text(GARDEN), text(LARGEST))
    write_notebook(lab_server.root / NOTEBOOK, ["%load_ext nbagent", f"%agent {FIRST}", f"%agent {SECOND}", "%agent_replay"])
    lab.open(NOTEBOOK)
    lab.run_all(NOTEBOOK)
    lab.wait_idle(NOTEBOOK)
    output = lab.output(NOTEBOOK, REPLAY_CELL)
    cover = output.locator(".nbagent-replay-cover")
    wait_until(cover.is_visible, 30, lambda: f"replay: no first frame is shown; the cell shows: {visible_text(output)[:400]}")

    # The first frame says what the session was, not "session <id> started".
    problems: list[str] = []
    said = " ".join(visible_text(cover).split())
    for words in (f"Session {FIRST}", f"{NOTEBOOK} when:", "(local time)", "written by: yours", "2 turns"):
        if words not in said:
            problems.append(f"the first frame does not say {words!r}; it says {said!r}")
    if not re.search(r"notebook: \S*/replay-turns\.ipynb when: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", said):
        problems.append(f"the first frame does not say when the session was written: {said!r}")
    transcript = visible_text(output.locator(".nbagent-replay-scroll"))
    if re.search(r"#\d+ · \d\d:\d\d", transcript) or re.search(r"session [0-9a-f]{8}", transcript):
        problems.append(f"the first frame shows event numbers, times or the session id: {transcript[:300]!r}")
    assert not problems, "\n".join(problems)

    # Search: the match in context, marked, with its turn; choosing it moves the cursor there, in sight.
    output.get_by_placeholder("words in the transcript").fill("cardamom")
    hits = output.locator(".nbagent-replay-hit")
    wait_until(
        lambda: hits.count() == 2 and hits.first.is_visible(), 15, lambda: f"replay: no matches listed: {visible_text(output)[:400]}"
    )
    first = " ".join(visible_text(hits.first).split())
    assert first.startswith("Turn 1 reply:") and "grows cardamom beside the old well" in first, first
    assert [m.lower() for m in hits.first.locator("mark").all_inner_texts()] == ["cardamom"]
    assert " ".join(visible_text(hits.nth(1)).split()).startswith("Turn 2 reply: The cardamom field is the largest")
    wait_stable(output, quiet=1.0)  # the rows are refilled as the search box's value arrives: click the final ones
    lab.wait_idle(NOTEBOOK)  # a click is a comm message: the kernel takes it when no cell runs
    output.locator(".nbagent-match").first.get_by_role("button", name="Show").click()
    turn = output.locator(".nbagent-turn-heading")
    scroll = output.locator(".nbagent-replay-scroll")
    wait_until(
        lambda: turn.count() == 1 and "cardamom beside" in visible_text(scroll),
        15,
        lambda: f"replay: Show did not move the cursor to the match: {turn.count()} turn headings; {visible_text(output)[-700:]!r}",
    )
    assert visible_text(turn.first).strip() == f"Turn 1 · {FIRST}"
    assert "now" in visible_text(output.locator(".nbagent-cursor")) and in_sight(output), "the cursor is not in sight after a jump"

    # The last event: both turns, each under its heading, the cursor at the end and in sight.
    output.get_by_role("button", name="Next turn").click()
    output.get_by_role("button", name="Next turn").click()
    wait_until(lambda: turn.count() == 2, 15, "replay: Next turn did not reach the second turn")
    assert [visible_text(h).strip() for h in turn.all()] == [f"Turn 1 · {FIRST}", f"Turn 2 · {SECOND}"]
    wait_until(lambda: in_sight(output), 10, "replay: the cursor is out of sight at the end of a long transcript")

    # The controls' labels are whole: the speed dropdown shows "instant", not "instar"; the header names the log
    # relative to the notebook's folder, not by its absolute path.
    room = output.locator(".widget-dropdown", has_text="speed").locator("select").first.evaluate(FITS)
    assert room["widest"] <= room["room"], f"the speed dropdown cuts its longest option, 'instant': {room}"
    header = " ".join(visible_text(output.locator(".widget-vbox .nbagent-header").first).split())
    assert f".nbagent/{NOTEBOOK}/" in header and str(lab_server.root) not in header, header

    shots = lab.shoot_themes(output, "replay-turns")
    assert shots[0].read_bytes() != shots[1].read_bytes(), "the dark theme drew the output as the light one did"
