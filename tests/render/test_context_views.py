"""Compactions, thinking and context use as people see them: every renderer, a table of events each.

The secret tests put a key shape in thinking and compaction blocks (which the log keeps verbatim) and
check that no view and no export ever shows it.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from nbagent import history
from nbagent.agent.session import Session
from nbagent.cli import export
from nbagent.notebook.output import StaticPanel
from nbagent.notebook.panel import Panel
from nbagent.record import events as ev
from nbagent.render import html, text
from nbagent.render.parts import Start, ToolNames, context_text, short_tokens, superseded_starts
from nbagent.render.style import MATH
from nbagent.render.timeline import Timeline
from nbagent.render.view import status
from nbagent.state.asides import Asides
from nbagent.state.fold import fold
from tests.render.test_render import assert_safe

SECRET = "sk-ant-api03-" + "Q" * 93 + "AA"  # the shape of an Anthropic key: redaction knows it
THOUGHT = f"The key in the env is {SECRET}; never repeat it."
SUMMARY = "The user loaded data.csv (3 rows) and asked for the mean; it is 2.0."


def event(seq: int, kind: str, **payload: object) -> dict[str, object]:
    return {"v": ev.SCHEMA_VERSION, "seq": seq, "ts": 1_796_000_000.0 + seq, "type": kind, **payload}


def session_events() -> list[dict[str, object]]:
    """A session with both kinds of compaction, thinking, redacted thinking and a context event."""
    return [
        event(1, ev.SESSION_START, session_id="abc123"),
        event(2, ev.CONTEXT, result_budget=40_000, window=200_000, trigger=175_000, compact="auto"),
        event(3, ev.USER_MSG, content="What is the mean?"),
        event(
            4,
            ev.ASSISTANT_MSG,
            content=[
                {"type": "compaction", "content": f"Server summary: the user asked things. {SECRET}", "encrypted_content": "xyz"},
                {"type": "thinking", "thinking": THOUGHT, "signature": "sig"},
                {"type": "redacted_thinking", "data": "ENCRYPTED-THOUGHTS"},
                {"type": "text", "text": "The mean is 2.0."},
            ],
            stop_reason="end_turn",
            usage={"input_tokens": 143_000, "output_tokens": 400},
        ),
        event(5, ev.COMPACTION_STARTED, keep=2, reason="request", model="claude-test"),
        event(
            6,
            ev.COMPACTION,
            summary=SUMMARY,
            messages=1,
            through=5,
            final=True,
            model="claude-test",
            usage={"input_tokens": 900, "output_tokens": 60},
        ),  # fmt: skip
    ]


SERVER_WORDS = "the API compacted the context: the earlier conversation is summarised"
LOCAL_WORDS = "1 earlier message summarised (claude-test; 900 tokens in · 60 out)"
STARTED_WORDS = "compacting the context: summarising all but the latest 2 messages (asked for)"


# One table per renderer: the event (by seq) and what it must show --------------------------------------
HTML_CASES = [
    (2, []),  # the context event: settings, not conversation (the header shows the window)
    (4, ['<div class="nbagent-compaction"><span class="nbagent-label">compaction</span> ' + SERVER_WORDS,
         f'<details class="{MATH}"><summary>Summary</summary><p>Server summary: the user asked things. [REDACTED]</p>',
         '<details class="nbagent-tool"><summary>Thinking <span class="nbagent-dim">(',
         "The mean is 2.0."]),
    (5, [f'<div class="nbagent-compaction nbagent-dim">{STARTED_WORDS}…</div>']),
    (6, [f'<span class="nbagent-label">compaction</span> {LOCAL_WORDS}', f'<details class="{MATH}"><summary>Summary</summary><p>{SUMMARY}</p>']),
]  # fmt: skip


@pytest.mark.parametrize(("seq", "shown"), HTML_CASES)
def test_html_shows_each_compaction_as_an_entry_and_thinking_collapsed(seq: int, shown: list[str]) -> None:
    fragment = html.event_html(session_events()[seq - 1])
    assert_safe(fragment)
    if not shown:
        assert fragment == ""
    for piece in shown:
        assert piece in fragment, (piece, fragment)
    assert " open" not in fragment  # thinking and summaries are collapsed


# Thinking with no words to read (redacted, or omitted: display "omitted", as a model that cannot turn thinking off sends
# with thinking off) shows no row in any view; thinking with words shows its collapsed row.
THINKING_CASES = [
    ({"type": "thinking", "thinking": "", "signature": "sig"}, "", ""),
    ({"type": "redacted_thinking", "data": "ENCRYPTED"}, "", ""),
    ({"type": "thinking", "thinking": "hmm", "signature": "sig"}, "(3 characters)", "[thinking (3 characters)]"),
]


@pytest.mark.parametrize(("block", "in_html", "in_text"), THINKING_CASES)
def test_thinking_shows_a_row_only_with_words_to_read(block: dict[str, object], in_html: str, in_text: str) -> None:
    reply = event(1, ev.ASSISTANT_MSG, content=[block, {"type": "text", "text": "Done."}], stop_reason="end_turn")
    fragment = html.event_html(reply)
    assert ("Thinking" in fragment) == bool(in_html) and in_html in fragment and "redacted thinking" not in fragment
    assert text.show(reply).body == (f"{in_text}\nDone." if in_text else "Done.")


TEXT_CASES = [
    (2, "context settings: window 200k tokens, compaction auto at 175k tokens, tool results cut at 40,000 characters in requests", ""),
    (4, "assistant (end_turn; 143,000 tokens in · 400 out)",
     f"[compaction] {SERVER_WORDS}:\n    Server summary: the user asked things. [REDACTED]\n"
     f"[thinking ({len(THOUGHT)} characters)]\nThe mean is 2.0."),
    (5, STARTED_WORDS, ""),
    (6, f"compaction: {LOCAL_WORDS}", SUMMARY),
]  # fmt: skip


@pytest.mark.parametrize(("seq", "line", "body"), TEXT_CASES)
def test_text_shows_a_line_per_compaction_and_thinking_as_one_line(seq: int, line: str, body: str) -> None:
    shown = text.show(session_events()[seq - 1])
    assert (shown.line, shown.body) == (line, body)


def test_the_context_line_names_every_setting_it_has() -> None:
    line = text.show(event(1, ev.CONTEXT, result_budget=None, keep_tool_results=3, window=1_000_000, compact="off")).line
    assert line == "context settings: window 1M tokens, compaction off, tool results whole, only the latest 3 tool results kept"
    assert text.show(event(1, ev.CONTEXT)).line == "context settings: {}"


def test_a_compaction_in_parts_says_so_and_its_start_line_stays_until_the_last_part() -> None:
    events = [
        event(1, ev.COMPACTION_STARTED, keep=2, reason="trigger"),
        event(2, ev.COMPACTION, summary="part one", messages=40, final=False),
        event(3, ev.COMPACTION, summary="part two", messages=12, final=True),
        event(4, ev.COMPACTION_STARTED, keep=3, reason="too_long"),  # never finished (a crash)
    ]
    assert "40 earlier messages summarised (one part of a longer compaction)" in html.event_html(events[1])
    assert superseded_starts(events) == {0: 2}
    page = html.transcript_html(events)
    assert "summarising all but the latest 2" not in page and "part one" in page and "part two" in page
    assert "summarising all but the latest 3 messages (the API said the prompt is too long)" in page


def test_the_static_transcript_replaces_the_in_progress_line_by_the_entry() -> None:
    page = html.transcript_html(session_events(), title="t", status="done")
    assert_safe(page)
    assert STARTED_WORDS not in page and LOCAL_WORDS in page and SERVER_WORDS in page
    shown = text.transcript_text(session_events())
    assert STARTED_WORDS in shown and LOCAL_WORDS in shown  # the text log view shows every step


def test_the_replay_shows_the_in_progress_line_until_the_compaction_lands() -> None:
    timeline = Timeline(session_events(), source="s.jsonl")
    started, done = 4, 5  # indexes of compaction_started and compaction
    assert STARTED_WORDS in timeline.transcript_at(started) and LOCAL_WORDS not in timeline.transcript_at(started)
    assert STARTED_WORDS not in timeline.transcript_at(done) and LOCAL_WORDS in timeline.transcript_at(done)
    assert timeline.statuses[started].startswith("compacting the context")
    assert timeline.statuses[done - 2] == "done · this request: 143,000 tokens in · 400 out · cost unknown; context 143k / 200k"
    # known again at the next reply
    assert timeline.statuses[done] == "done · this request: 143,000 tokens in · 400 out · cost unknown; context compacted"


@pytest.mark.parametrize(
    ("kind", "payload", "words"),
    [
        (ev.COMPACTION_STARTED, {"keep": 2}, "compacting the context"),
        (ev.COMPACTION, {"summary": "s", "messages": 3, "final": False}, "compacting the context"),
        (ev.CONTEXT, {"window": 1000}, None),  # leaves the status as it was
    ],
)
def test_status_lines(kind: str, payload: dict[str, object], words: str | None) -> None:
    state = fold([event(1, ev.SESSION_START, session_id="x"), event(2, ev.COMPACTION_STARTED, keep=2)])
    assert status(event(3, kind, **payload), state) == words


# Context use ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("count", "short"),
    [(0, "0"), (950, "950"), (1000, "1k"), (8_200, "8.2k"), (9_999, "10k"), (12_892, "12.9k"), (99_960, "100k"), (143_456, "143k"),
     (1_000_000, "1M"), (1_250_000, "1.2M")],
)  # fmt: skip
def test_short_tokens(count: int, short: str) -> None:
    assert short_tokens(count) == short


@pytest.mark.parametrize(
    ("tokens", "window", "shown"),
    [(0, 200_000, ""), (143_000, 200_000, "context 143k / 200k"), (5_000, 0, "context 5k / 200k"), (700, 1_000_000, "context 700 / 1M"),
     ("bad", 10, ""), (True, 10, "")],
)  # fmt: skip
def test_context_text(tokens: object, window: object, shown: str) -> None:
    assert context_text(tokens, window) == shown


def test_the_panel_header_and_its_static_transcript_show_context_use() -> None:
    panel = Panel("mean")
    panel.begin(Start(ToolNames(), Asides(), (143_000, 200_000)))
    panel(session_events()[2])
    assert "context 143k / 200k" in panel.header.value  # from where the session stood, before any reply
    panel(session_events()[3])
    assert "; context 143k / 200k" in panel.header.value
    bundle = panel.static_bundle()
    assert "context 143k / 200k" in bundle["text/html"] and "context 143k / 200k" in bundle["text/plain"]
    panel.close()
    static = StaticPanel("mean")
    for item in session_events():
        static(item)
    assert "context compacted" in static.static_bundle()["text/html"]


def test_sessions_show_context_use_from_the_log_and_from_a_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb" / "s1.jsonl"
    path.parent.mkdir()
    with Session.open(path) as session:
        for item in session_events()[1:4]:
            session.append(str(item["type"]), **{k: v for k, v in item.items() if k not in ("v", "seq", "ts", "type")})
    summary = history.summarize(path)
    assert (summary.context_tokens, summary.window, history.summary.context_shown(summary)) == (143_400, 200_000, "143k / 200k")
    assert summary.source == "snapshot"  # closing wrote one: the header alone answers
    data = history.json_row(summary)
    assert (data["context_tokens"], data["window"], data["context"]) == (143_400, 200_000, "143k / 200k")
    from io import StringIO

    out = StringIO()
    history.write_table([summary], out)
    header, row = out.getvalue().splitlines()
    assert header.split()[8] == "CONTEXT" and "  143k / 200k  " in row


# Secrets: the log keeps thinking and compaction blocks verbatim; nothing shown or exported does ----
def test_no_view_and_no_export_shows_a_secret_from_a_thinking_or_compaction_block() -> None:
    events = session_events()
    assert SECRET in json.dumps(events)  # (the log keeps it: the API needs these blocks back as they were)
    timeline = Timeline(events, source="s.jsonl")
    shown = [
        html.transcript_html(events, title="t"),
        text.transcript_text(events),
        export.to_markdown(events),
        nbformat.writes(export.to_notebook(events)),
        *timeline.htmls,
        *(t.text for t in timeline.texts),
        *timeline.static(),
        *(timeline.frame(i, times=True) for i in range(len(events))),
    ]
    for output in shown:
        assert SECRET not in output and SECRET[:30] not in output
    markdown = export.to_markdown(events)
    assert "_[thinking (" in markdown and "characters): not exported]_" in markdown  # the text left out, even redacted
    assert "The key in the env is" not in markdown
    assert "_[(redacted thinking): not exported]_" in markdown and "ENCRYPTED-THOUGHTS" not in markdown
    assert f"**Compaction:** {LOCAL_WORDS}" in markdown and SUMMARY in markdown
    assert "compacted 2 time(s)" in markdown and "After the last reply" not in markdown  # unknown until the next reply


def test_the_notebook_export_labels_thinking_and_compactions() -> None:
    notebook = export.to_notebook(session_events())
    kinds = [cell.metadata.get("nbagent", {}).get("kind") for cell in notebook.cells]
    assert kinds == [None, "request", "compaction", "thinking", "thinking", "reply", "compaction"]
    assert all(cell.cell_type == "markdown" for cell in notebook.cells)
