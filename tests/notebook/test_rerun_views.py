"""What a re-run cell's panel shows of a recorded turn: text cut off mid-stream is labelled, an interrupted question says so."""

from __future__ import annotations

from typing import Any

import pytest

from nbagent.notebook.panel import Panel
from nbagent.render import html as render
from nbagent.render.text import transcript_text

CUT = [  # a turn whose kernel died while the reply streamed, then continued by the cell's re-run
    {"type": "user_msg", "seq": 1, "content": "explain it"},
    {"type": "model_call", "seq": 2, "attempt": 1},
    {"type": "delta", "seq": 3, "index": 0, "text": "Half an "},
    {"type": "delta", "seq": 4, "index": 0, "text": "**ans**"},
    {"type": "model_call", "seq": 5, "attempt": 1},  # the continuation asks again
    {"type": "delta", "seq": 6, "index": 0, "text": "The whole answer."},
    {"type": "assistant_msg", "seq": 7, "content": [{"type": "text", "text": "The whole answer."}], "stop_reason": "end_turn", "usage": {}},
]
ASKED = [  # a question interrupted before anyone answered
    {"type": "user_msg", "seq": 1, "content": "clean up"},
    {
        "type": "assistant_msg",
        "seq": 2,
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {"command": "rm -r build"}}],
        "stop_reason": "tool_use",
        "usage": {},
    },
    {"type": "approval", "seq": 3, "tool_use_id": "toolu_1", "reason": "irreversible", "decision": "pending", "question": "rm?"},
    {"type": "approval", "seq": 4, "tool_use_id": "toolu_1", "reason": "irreversible", "decision": "interrupted"},
    {"type": "interrupted", "seq": 5, "during": "waiting for approval", "open_calls": ["toolu_1"]},
]


def feed(events: list[dict[str, Any]]) -> Panel:
    panel = Panel("re-run")
    for event in events:
        panel(dict(event))
    return panel


def test_text_cut_off_mid_stream_is_labelled_above_the_full_answer_live_and_static() -> None:
    panel = feed(CUT)
    values = [c.value for c in panel.items.children]
    [cut] = [i for i, v in enumerate(values) if "Half an" in v]
    [whole] = [i for i, v in enumerate(values) if "The whole answer." in v]
    assert cut < whole and "cut off</span>" in values[cut] and "cut off" not in values[whole]
    assert values[cut].index("Half an") < values[cut].index("cut off</span>")
    panel.finish()
    static = panel.transcript_html()
    assert static.index("Half an") < static.index("cut off</span>") < static.index("The whole answer.")
    assert static.count("Half an") == 1 and static.count("The whole answer.") == 1


@pytest.mark.parametrize(
    "events, labelled",
    [
        (CUT, True),  # cut off, then asked again
        (CUT[:4], True),  # cut off, nothing after it (shown, not continued)
        ([*CUT[:4], {"type": "interrupted", "seq": 5, "during": "model"}], True),
        ([CUT[0], CUT[1], CUT[5], CUT[6]], False),  # streamed and finished: shown once, no label
    ],
)
def test_the_static_transcript_labels_a_cut_off_stream_only(events: list[dict[str, Any]], labelled: bool) -> None:
    assert ("cut off</span>" in render.transcript_html(events)) is labelled


def test_an_interrupted_question_says_it_was_not_answered_and_the_call_did_not_run() -> None:
    panel = feed(ASKED)
    assert any("unanswered</span> (interrupted): the call was not run" in c.value for c in panel.items.children)
    assert "shell: unanswered (interrupted): the call was not run" in transcript_text(ASKED)
    panel.finish()
    assert "unanswered</span> (interrupted)" in panel.transcript_html()
