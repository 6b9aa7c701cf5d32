"""What an interrupted panel says to do next (issue 35 item 4): the rule as a table, and the panel that says it."""

from __future__ import annotations

from typing import Any

import pytest

from nbagent.notebook.next_step import after_interrupt
from nbagent.notebook.output import StaticPanel
from nbagent.notebook.panel import Panel
from nbagent.record import events as ev
from nbagent.state.fold import fold

USAGE = {"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}


def call(tool: str, call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": tool, "input": {}}


def events(*later: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """A session with one finished request, then a second whose reply calls python and read_file, then ``later``."""
    payloads = [
        (ev.SESSION_START, {"session_id": "s"}),
        (ev.USER_MSG, {"content": "first"}),
        (ev.ASSISTANT_MSG, {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "usage": USAGE}),
        (ev.USER_MSG, {"content": "second"}),
        (ev.ASSISTANT_MSG, {"content": [call("python", "t1"), call("read_file", "t2")], "stop_reason": "tool_use", "usage": USAGE}),
        *later,
    ]
    return [ev.make(seq, kind, payload) for seq, (kind, payload) in enumerate(payloads, 1)]


STARTED_WRITE = (ev.TOOL_STARTED, {"tool_use_id": "t1", "name": "python", "attempt": 1, "effect": "write"})
STARTED_READ = (ev.TOOL_STARTED, {"tool_use_id": "t2", "name": "read_file", "attempt": 1, "effect": "read"})
PYTHON_DONE = (ev.TOOL_RESULT, {"tool_use_id": "t1", "content": "done"})
READ_DONE = (ev.TOOL_RESULT, {"tool_use_id": "t2", "content": "text"})
INTERRUPTED = (ev.INTERRUPTED, {"during": "tools", "open_calls": []})

CASES = {
    "a write interrupted while it ran, a read not started": (
        [STARTED_WRITE, INTERRUPTED],
        "Run this cell again to continue this request: python was interrupted while running and may or may not "
        "have taken effect, so it runs again only if you approve it in the panel; read_file had not started and goes "
        "ahead (asking you first where needed). Or make a new request in another cell: the open calls are then not "
        "run, and Claude is told so.",
    ),
    "a read interrupted while it ran": (
        [STARTED_WRITE, PYTHON_DONE, STARTED_READ, INTERRUPTED],
        "Run this cell again to continue this request: read_file runs again (safe to repeat). Or make a new "
        "request in another cell: the open calls are then not run, and Claude is told so.",
    ),
    "while the model streamed": (
        [STARTED_WRITE, PYTHON_DONE, STARTED_READ, READ_DONE, (ev.MODEL_CALL, {"attempt": 1}), (ev.INTERRUPTED, {"during": "model"})],
        "Run this cell again to continue this request (Claude is asked again from where it stopped). Or make a "
        "new request in another cell.",
    ),
    "not interrupted": ([STARTED_WRITE, PYTHON_DONE], ""),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_next_step_after_an_interrupt(case: str) -> None:
    later, said = CASES[case]
    assert after_interrupt(fold(events(*later))) == said


def test_an_interrupted_panel_says_its_own_figures_and_what_to_do_next() -> None:
    panel = Panel("second")
    for event in events(STARTED_WRITE, INTERRUPTED):
        panel(event)
    panel.finish()
    bundle = panel.bundle()
    # this request's figures beside the session's, each labelled: never the session's tokens beside the request's cost
    line = "interrupted · this request: 100 tokens in · 10 out · cost unknown; session: 200 tokens in · 20 out · cost unknown"
    assert line in bundle["text/plain"] and line in bundle["text/html"]
    assert "next: Run this cell again to continue this request: python was interrupted" in bundle["text/plain"]
    assert '<span class="nbagent-label">next</span> Run this cell again' in bundle["text/html"]


def test_a_rerendered_interrupted_turn_says_no_next_step_nor_one_the_turn_went_past() -> None:
    static = StaticPanel("second")  # a turn re-rendered after a restart is not continued by this cell
    for event in events(STARTED_WRITE, INTERRUPTED):
        static(event)
    assert "run this cell again" not in static.static_bundle()["text/plain"]
    panel = Panel("second")  # a live panel whose turn went on after the interrupt (the cell ran again)
    for event in events(STARTED_WRITE, INTERRUPTED, PYTHON_DONE):
        panel(event)
    panel.finish()
    assert "run this cell again" not in panel.bundle()["text/plain"]


def test_an_interrupted_panel_with_work_left_marks_its_final_output_unfinished() -> None:
    """The page reads ``unfinished`` to say "run this cell to continue" if the kernel stops next (labextension/src/gone.ts)."""
    marks = {}
    for case, later in {"cut": (STARTED_WRITE, INTERRUPTED), "went on": (STARTED_WRITE, INTERRUPTED, PYTHON_DONE), "done": ()}.items():
        panel = Panel("second")
        panel.session_name = "s"
        for event in events(*later):
            panel(event)
        panel.finish()
        marks[case] = panel.final_metadata()["nbagent"]
    assert marks["cut"] == {"final": {"session": "s", "from": 1, "to": 7}, "unfinished": True}
    assert marks["went on"] == {"final": {"session": "s", "from": 1, "to": 8}}
    assert marks["done"] == {"final": {"session": "s", "from": 1, "to": 5}}
