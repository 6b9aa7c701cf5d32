"""The replay's timeline without widgets, the status rule both live views follow, and the renderers' tables."""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser
from typing import Any

import pytest

from nbagent.record import events as ev
from nbagent.render import html, text, view
from nbagent.render.parts import gap, when
from nbagent.render.timeline import Timeline
from nbagent.state.fold import State, fold
from tests.render.test_render import without_our_styles

T0 = 1_790_000_000.0


def log(*records: dict[str, Any], gaps: list[float] | None = None) -> list[ev.Event]:
    """Events with consecutive seqs, one second apart unless ``gaps`` says otherwise."""
    steps = gaps or [1.0] * len(records)
    events, ts = [], T0
    for seq, (record, step) in enumerate(zip(records, steps), 1):
        ts += step
        events.append({"v": 2, "seq": seq, "ts": ts, **record})
    return events


def use(tid: str, name: str = "add", **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": args}


START = {"type": "session_start", "session_id": "s1"}
TURN = [
    START,
    {"type": "user_msg", "content": "add 2 and 3"},
    {"type": "model_call", "model": "claude-test", "attempt": 1},
    {"type": "delta", "index": 0, "text": "Let me "},
    {"type": "delta", "index": 0, "text": "add."},
    {"type": "assistant_msg", "content": [{"type": "text", "text": "Let me add."}, use("t1", a=2, b=3)], "stop_reason": "tool_use"},
    {"type": "tool_started", "tool_use_id": "t1", "name": "add", "effect": "read", "attempt": 1},
    {"type": "tool_result", "tool_use_id": "t1", "content": "5"},
    {"type": "model_call", "model": "claude-test", "attempt": 1},
    {"type": "delta", "index": 0, "text": "The sum is **5**."},
    {
        "type": "assistant_msg",
        "content": [{"type": "text", "text": "The sum is **5**."}],
        "stop_reason": "end_turn",
        "usage": {"output_tokens": 7},
    },
    {"type": "user_msg", "content": "and now?"},
    {"type": "model_call", "model": "claude-test", "attempt": 1},
    {"type": "delta", "index": 0, "text": "Half an ans"},
    {"type": "interrupted", "during": "model"},
]


# The tables: adding an event type means declaring it, folding it and rendering it once per medium -------------
@pytest.mark.parametrize("table", [html.HTML, text.SHOW, view.STATUS], ids=["html", "text", "status"])
def test_every_renderer_says_what_every_event_type_shows(table: dict[str, Any]) -> None:
    assert set(table) == set(ev.EVENT_TYPES)


def test_the_timeline_and_the_renderers_need_no_widgets() -> None:
    code = "import sys, nbagent.render.timeline, nbagent.render.text; print(sorted(m for m in sys.modules if m.split('.')[0] in ('IPython', 'ipywidgets', 'jupyter_server')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# The status rule ------------------------------------------------------------------------------------------
OPEN_TWO = [
    START,
    {"type": "user_msg", "content": "go"},
    {"type": "assistant_msg", "content": [use("t1"), use("t2")], "stop_reason": "tool_use"},
]
STATUS_CASES = [
    # (events before, the event, the status after it; None: unchanged)
    ([START], {"type": "user_msg", "content": "go"}, "waiting for the model"),
    (OPEN_TWO[:2], {"type": "model_call", "attempt": 1}, "streaming"),
    (OPEN_TWO[:2], {"type": "model_call", "attempt": 3}, "streaming (attempt 3)"),
    (OPEN_TWO[:2], {"type": "delta", "text": "x"}, None),
    (OPEN_TWO[:2], {"type": "assistant_msg", "content": [use("t1")], "stop_reason": "tool_use"}, "running tools"),
    (OPEN_TWO[:2], {"type": "assistant_msg", "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn"}, "done"),
    (OPEN_TWO[:2], {"type": "assistant_msg", "content": [], "stop_reason": "pause_turn"}, "waiting for the model"),
    (OPEN_TWO[:2], {"type": "model_error", "message": "Overloaded", "retryable": True}, "retrying after a model error"),
    (OPEN_TWO[:2], {"type": "model_error", "message": "Bad key", "retryable": False}, "model error"),
    (OPEN_TWO, {"type": "approval", "tool_use_id": "t1", "decision": "pending", "question": "?"}, "waiting for approval"),
    (OPEN_TWO, {"type": "approval", "tool_use_id": "t1", "decision": "approved", "by": "panel"}, "running tools"),
    (OPEN_TWO, {"type": "tool_started", "tool_use_id": "t1", "name": "add", "effect": "read"}, "running tool add"),
    (OPEN_TWO, {"type": "tool_result", "tool_use_id": "t1", "content": "1"}, "running tools"),  # t2 is still open
    (OPEN_TWO[:3] + [{"type": "tool_result", "tool_use_id": "t1", "content": "1"}], {"type": "tool_result", "tool_use_id": "t2", "content": "2"}, "waiting for the model"),
    (OPEN_TWO, {"type": "interrupted", "during": "tools"}, "interrupted"),
    (OPEN_TWO, {"type": "note", "text": "hello"}, None),
    # a budget stop before a model call: said as the listing says it, never "waiting for the model"
    (OPEN_TWO[:2], {"type": "note", "kind": "budget_reached", "reached": "max_session_cost", "text": "stopped: the session cost $0.10"}, "stopped at its budget"),
    (OPEN_TWO, {"type": "trust", "vouches": 3, "prefix_sha256": "0" * 64}, None),
    ([], START, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("before", "event", "expected"), STATUS_CASES, ids=[f"{e['type']}-{i}" for i, (_, e, _) in enumerate(STATUS_CASES)]
)
def test_the_status_rule(before: list[dict[str, Any]], event: dict[str, Any], expected: str | None) -> None:
    events = log(*before, event)
    state = fold(events)
    assert view.status(events[-1], state) == expected


def test_a_malformed_event_folds_to_nothing_more_in_a_view() -> None:
    state = view.follow(State(), {"seq": 1, "ts": T0, "type": "tool_result"})  # no tool_use_id: apply raises
    assert state.messages == [] and state.status == "idle"


# The timeline ---------------------------------------------------------------------------------------------
def test_streamed_text_grows_then_the_finished_message_replaces_it() -> None:
    timeline = Timeline(log(*TURN))
    assert "<p>Let me</p>" in timeline.transcript_at(3) and "add." not in timeline.transcript_at(3)
    assert "Let me add.</p>" in timeline.transcript_at(4)
    assert timeline.transcript_at(5).count("Let me add.") == 1 and timeline.htmls[5] in timeline.transcript_at(5)  # the call
    assert timeline.htmls[7] and timeline.htmls[7] in timeline.transcript_at(7)  # its result
    assert timeline.transcript_at(10).count("The sum is <strong>5</strong>.") == 1
    # An interrupted stream stays on screen as far as it got.
    assert "Half an ans" in timeline.transcript_at(14) and "interrupted</span> during model" in timeline.transcript_at(14)
    assert "Half an ans" in timeline.frame(13) and "now</span> streaming" in timeline.frame(13)  # the text streamed so far


def test_statuses_follow_the_panel_and_add_the_tokens() -> None:
    timeline = Timeline(log(*TURN))
    assert timeline.statuses[:8] == [
        "starting",
        "waiting for the model",
        "streaming",
        "streaming",
        "streaming",
        "running tools",
        "running tool add",
        "waiting for the model",
    ]
    assert timeline.statuses[10] == "done · this request: 0 tokens in · 7 out · cost unknown; context 7 / 200k"
    # interrupted before the second request's first reply: nothing of its own yet, the session's figures labelled
    assert timeline.statuses[-1] == "interrupted · session: 0 tokens in · 7 out · cost unknown; context 7 / 200k"
    assert timeline.title == "add 2 and 3"


def test_times_gaps_turns_and_playback_time() -> None:
    timeline = Timeline(
        log(
            START,
            {"type": "user_msg", "content": "go"},
            {"type": "note", "text": "a"},
            {"type": "user_msg", "content": "again"},
            gaps=[0.0, 0.25, 3600.0, 1.5],
        )
    )
    assert timeline.play_times == [0.0, 0.25, 2.25, 3.75]
    assert timeline.gaps[1:] == [0.25, 3600.0, 1.5]
    assert timeline.turn_starts == [1, 3]
    assert [timeline.previous_turn(i) for i in range(4)] == [0, 0, 1, 1]
    assert [timeline.next_turn(i) for i in range(4)] == [1, 3, 3, 3]
    assert timeline.at_play_time(2.0) == 1 and timeline.at_play_time(2.0, not_before=2) == 2 and timeline.at_play_time(99) == 3
    assert "+1 h 0 min after the previous event (plays as 2 s)" in timeline.position_text(2, times=True)
    assert timeline.position_text(1, times=True).startswith("turn 1 of 2 · event 2 of 4 · user_msg · ")
    assert "plays as" not in timeline.position_text(1, times=True)
    assert [timeline.position_text(i) for i in range(4)] == ["before the first turn", "turn 1 of 2", "turn 1 of 2", "turn 2 of 2"]
    assert timeline.gutter(1) == f"#2 · {when(T0 + 0.25, date=False, ms=True)} · +0.250 s"
    assert [gap(s) for s in (0.004, 1.5, 200, 7500, 3 * 86400 + 4 * 3600, -2)] == [
        "+0.004 s",
        "+1.5 s",
        "+3 min 20 s",
        "+2 h 5 min",
        "+3 d 4 h",
        "-2.0 s",
    ]


def test_search_finds_whole_messages_not_deltas_and_wraps() -> None:
    timeline = Timeline(log(*TURN))
    [found] = timeline.find("SUM")
    assert (found.index, found.turn, found.where, found.text()) == (10, 1, "reply", "reply: The [sum] is **5**.")
    found_add = [f.index for f in timeline.find("add")]  # the request and the reply with the call (not its deltas)
    assert found_add == [1, 5] and not any(timeline.events[i]["type"] == "delta" for i in found_add)
    assert [f.index for f in timeline.find("a=")] == [] and [f.index for f in timeline.find('"a": 2')] == [5]  # the call's input
    assert timeline.find("  ") == [] and timeline.find("no such words") == []
    assert [(f.index, f.where) for f in timeline.find("half an")] == [(13, "reply (cut off)")]  # a cut-off stream, where it ends
    assert timeline.next_match(found_add, 1) == 5 and timeline.next_match(found_add, 7) == 1 and timeline.next_match([], 3) is None


def test_events_shown_only_as_a_status_are_said_by_the_cursor() -> None:
    timeline = Timeline(log(*TURN))
    assert timeline.cursor_words(6) == "running tool add" and "now</span> running tool add" in timeline.frame(6)
    assert timeline.cursor_words(2) == "streaming"
    assert timeline.cursor_words(0) == "the start of the session · 2 turns to replay" and "s1" not in timeline.frame(0)


class Active(HTMLParser):
    """What a browser would act on: active tags, event handlers, script URLs."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in {"script", "iframe", "svg", "img", "style", "object", "embed", "math", "template", "form"}:
            self.found.append(tag)
        self.found += [f"{tag} {k}" for k, v in attrs if k.startswith("on") or (v or "").lower().startswith("javascript:")]


def test_hostile_unknown_and_unrenderable_events_stay_inert() -> None:
    events = log(
        START,
        {"type": "<script>evil</script>", "payload": "<img src=x onerror=alert(10)>"},  # an unknown type
        {"type": "assistant_msg", "content": [{"type": ["unhashable"]}]},  # the HTML renderer raises on it
        {"type": "model_call", "model": "<svg onload=alert(1)>", "attempt": "<b onmouseover=alert(4)>"},
        {"type": "note", "text": "\x1b]52;c;ZXZpbA==\x07 <a href='javascript:alert(8)'>x</a>"},
    )
    timeline = Timeline(events)
    shown = [timeline.frame(i, times=True) for i in range(len(events))] + [timeline.match_html(f) for f in timeline.find("e")]
    assert len(shown) > len(events)
    static_html, static_text = timeline.static()
    for value in [*shown, static_html, timeline.header_html()]:
        parser = Active()
        parser.feed(without_our_styles(value))
        assert parser.found == [], value
    [evil] = timeline.find("evil")
    assert evil.index == 1 and "&lt;script&gt;<mark" in timeline.match_html(evil)  # an unknown type is found as text, escaped
    assert "[event 3 (assistant_msg) could not be rendered: TypeError]" in timeline.frame(2)
    assert "\\x1b]52;c;ZXZpbA==\\x07" in static_text and "\x1b" not in static_text  # text/plain is terminal-safe
    assert "could not be rendered" not in static_text  # the static transcript leaves out what could not be shown
