"""The replay built around turns, as tables: frames laid out by turns, where the cursor stands, search snippets, the first frame."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent.notebook.replay import Replay, trust_word
from nbagent.render.matches import parts_of, search, snippet
from nbagent.render.parts import when
from nbagent.render.timeline import Timeline
from tests.render.test_timeline import START, TURN, log

T0 = 1_790_000_000.0
EVENTS = log({**START, "meta": {"notebook": "work/analysis.ipynb"}}, *TURN[1:])
# TURN's events by index: 0 start, 1 request "add 2 and 3", 2 model_call, 3-4 deltas, 5 reply + call, 6 tool_started,
# 7 result, 8 model_call, 9 delta, 10 answer, 11 request "and now?", 12 model_call, 13 delta "Half an ans", 14 interrupted.


def visible(frame: str) -> str:
    """A frame's words, tags dropped (what a reader sees, roughly)."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", frame)).strip()


def headings(frame: str) -> list[str]:
    return re.findall(r'<div class="nbagent-turn-heading">(.*?)</div>', frame)


def cursor(frame: str) -> str:
    [line] = re.findall(r'<div class="nbagent-cursor">(.*?)</div>', frame)
    return visible(line)


FRAMES = [
    # (event, the turn headings shown, the cursor's words, words shown, words not shown yet)
    (0, [], "now the start of the session · 2 turns to replay", "Session add 2 and 3", "You:"),
    (1, ["Turn 1 · add 2 and 3"], "now waiting for the model", "You: add 2 and 3", "Let me"),
    (3, ["Turn 1 · add 2 and 3"], "now streaming", "Let me", "add."),  # the text streamed so far
    (4, ["Turn 1 · add 2 and 3"], "now streaming", "Let me add.", "The sum"),
    (6, ["Turn 1 · add 2 and 3"], "now running tool add", "Let me add.", "The sum"),
    (10, ["Turn 1 · add 2 and 3"], "now done · 0 tokens in · 7 out · context 7 / 200k · cost unknown", "The sum is 5", "and now?"),
    (11, ["Turn 1 · add 2 and 3", "Turn 2 · and now?"], "now waiting for the model", "You: and now?", "Half"),
    (12, ["Turn 1 · add 2 and 3", "Turn 2 · and now?"], "now streaming", "You: and now?", "Half"),
    (13, ["Turn 1 · add 2 and 3", "Turn 2 · and now?"], "now streaming", "Half an ans", "interrupted"),
    (14, ["Turn 1 · add 2 and 3", "Turn 2 · and now?"], "now interrupted · 0 tokens in · 7 out · context 7 / 200k · cost unknown", "interrupted", "#"),
]  # fmt: skip


@pytest.mark.parametrize(("index", "turns", "now", "shown", "not_yet"), FRAMES, ids=[f"event-{f[0]}" for f in FRAMES])
def test_frames_are_laid_out_by_turns_with_the_cursor_at_the_end(index: int, turns: list[str], now: str, shown: str, not_yet: str) -> None:
    timeline = Timeline(EVENTS, trust="yours")
    frame = timeline.frame(index)
    words = visible(frame)
    assert headings(frame) == turns
    assert cursor(frame).startswith(now.split(" · 0 tokens")[0]) and words.endswith(cursor(frame))  # the cursor is the last line
    assert shown in words and not_yet not in words
    assert words.startswith("Session add 2 and 3 notebook: work/analysis.ipynb")  # the session's cover stays on top
    assert "#" not in words and when(T0 + 2, date=False, ms=True) not in words  # no event numbers or times unless asked
    assert frame.startswith('<div class="nbagent-replay-scroll">')  # the box that keeps its end (the cursor) in sight


def test_the_current_entry_is_marked_and_times_come_on_demand() -> None:
    timeline = Timeline(EVENTS)
    assert timeline.frame(5).count(
        "nbagent-current"
    ) == 1 and 'nbagent-current"><div class="nbagent-text mathjax_process tex2jax_process"><p>Let me add.' in timeline.frame(5)
    assert 'nbagent-current"><p>Let me</p>' in timeline.frame(3)  # mid-stream: the streamed entry is the current one
    assert "nbagent-current" not in timeline.frame(6)  # a status-only event marks no entry; the cursor says it
    timed = timeline.frame(6, times=True)
    assert f"#2 · {when(T0 + 2, date=False, ms=True)} · +1.0 s" in timed  # each entry's event number, time and gap
    assert f"#7 · {when(T0 + 7, date=False, ms=True)} · +1.0 s" in cursor(timed)  # and the cursor's
    assert timeline.position_text(6) == "turn 1 of 2"
    assert timeline.position_text(6, times=True).startswith("turn 1 of 2 · event 7 of 15 · tool_started · ")


def test_turn_index_jumps_and_headings() -> None:
    timeline = Timeline(EVENTS)
    assert timeline.turn_of == [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2]
    assert [timeline.turn_start(t) for t in (0, 1, 2, 3)] == [0, 1, 11, 0]
    long = Timeline(log(START, {"type": "user_msg", "content": "word " * 40}))
    assert long.turn_heading(1) == "Turn 1 · " + ("word " * 16).strip()[:79] + "…" and len(long.turn_heading(1)) == 9 + 80


COVERS = [
    # (the first event's meta, the notebook the widget knows, trust, the lines about the session)
    ({"notebook": "work/analysis.ipynb"}, "", "yours", ["notebook: work/analysis.ipynb", "written by: yours"]),
    ({}, "/home/u/other.ipynb", "other key", ["notebook: /home/u/other.ipynb", "written by: other key"]),
    ({"notebook": 7}, "", "", ["notebook: not recorded", "written by: ?"]),  # a malformed meta is not shown
]


@pytest.mark.parametrize(("meta", "notebook", "trust", "lines"), COVERS)
def test_the_first_frame_says_what_the_session_was(meta: dict[str, Any], notebook: str, trust: str, lines: list[str]) -> None:
    timeline = Timeline(log({**START, "meta": meta}, *TURN[1:]), notebook=notebook, trust=trust)
    cover = visible(timeline.cover_html())
    assert cover.startswith("Session add 2 and 3 ")
    for line in lines:
        assert line in cover
    assert f"when: {when(T0 + 1)} → {when(T0 + 15)} (local time)" in cover and "size: 2 turns · 15 events" in cover
    assert "s1" not in cover and "started" not in cover  # not the raw "session <id> started" line


SNIPPETS = [
    # (text, the match's start and end, width, the snippet's three parts)
    ("the cat sat", 4, 7, 120, ("the ", "cat", " sat")),
    ("a\n\nb   MATCH\tc", 7, 12, 120, ("a b ", "MATCH", " c")),  # whitespace squashed
    ("x" * 50 + "hit" + "y" * 50, 50, 53, 13, ("…xxxxx", "hit", "yyyyy…")),  # cut around the match
    ("hit" + "y" * 50, 0, 3, 13, ("", "hit", "yyyyyyyyyy…")),  # at the start: the room goes after
    ("x" * 50 + "hit", 50, 53, 13, ("…xxxxxxxxxx", "hit", "")),  # at the end: the room goes before
    ("bell\x07 hit", 6, 9, 120, ("bell\\x07 ", "hit", "")),  # control characters shown, not sent
]


@pytest.mark.parametrize(("text", "start", "end", "width", "parts"), SNIPPETS)
def test_snippets_show_the_match_in_context(text: str, start: int, end: int, width: int, parts: tuple[str, str, str]) -> None:
    assert snippet(text, start, end, width) == parts


SEARCHES = [
    # (query, [(event, turn, where, the snippet as text)])
    ("SUM", [(10, 1, "reply", "reply: The [sum] is **5**.")]),
    ("and", [(1, 1, "request", "request: add 2 [and] 3"), (11, 2, "request", "request: [and] now?")]),
    ('"b": 3', [(5, 1, "tool call", 'tool call: add {"a": 2, ["b": 3]}')]),  # a call's name and input
    ("5", [(7, 1, "result of add", "result of add: [5]"), (10, 1, "reply", "reply: The sum is **[5]**.")]),
    ("ans", [(13, 2, "reply (cut off)", "reply (cut off): Half an [ans]")]),  # a cut-off stream, at its last delta
    ("claude-test", []),  # a model call is a status, not words
    ("s1", []),  # nor is the session's start
    ("   ", []),
]


@pytest.mark.parametrize(("query", "expected"), SEARCHES, ids=[q.strip() or "blank" for q, _ in SEARCHES])
def test_search_finds_words_with_their_turn_and_context(query: str, expected: list[tuple[int, int, str, str]]) -> None:
    found = Timeline(EVENTS).find(query)
    assert [(f.index, f.turn, f.where, f.text()) for f in found] == expected


def test_a_match_is_shown_escaped_with_the_match_marked() -> None:
    events = log(START, {"type": "user_msg", "content": "find <script>alert(1)</script> & <b>me</b>"})
    timeline = Timeline(events)
    [found] = timeline.find("<b>ME")
    assert timeline.match_html(found) == (
        '<span class="nbagent-replay-hit"><span class="nbagent-hit-turn">Turn 1</span> <span class="nbagent-dim">request:</span> '
        'find &lt;script&gt;alert(1)&lt;/script&gt; &amp; <mark class="nbagent-hit">&lt;b&gt;me</mark>&lt;/b&gt;</span>'
    )
    assert parts_of(events[0]) == [] and search([[("note", "x")]], [0], "X")[0].turn == 0


def test_the_widget_lists_matches_jumps_to_turns_and_toggles_times(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with nbagent.Session.open(path) as session:  # a real (signed) log, then the replay of it
        for record in EVENTS[1:]:
            session.append(record["type"], **{k: v for k, v in record.items() if k not in ("v", "seq", "ts", "type")})
    replay = Replay.from_path(path)
    assert "written by: yours" in visible(replay.transcript.value) and trust_word(nbagent.stores.FILES, path) == "yours"
    assert [label for label, _ in replay.turns.options] == ["Turn 1 · add 2 and 3", "Turn 2 · and now?"]
    assert replay.turns.value is None  # before the first turn
    replay.turns.value = 2
    assert replay.index == 11 and cursor(replay.transcript.value).startswith("now waiting for the model")
    replay.go(3)
    assert replay.turns.value == 1  # the turn list follows the cursor (and does not move it back)
    replay.search.value = "and"
    assert replay.match_count.value == "2 matching events" and [r.layout.display for r in replay.matches.rows[:3]] == [None, None, "none"]
    assert '<mark class="nbagent-hit">and</mark> now?' in replay.matches.snippets[1].value
    replay.matches.buttons[1].click()
    assert replay.index == 11 and replay.turns.value == 2
    assert "#" not in visible(replay.transcript.value)
    replay.times.value = True
    assert "#12 · " in replay.transcript.value and "event 12 of 15" in replay.position.value


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("/home/ana/work/.nbagent/a.ipynb/s1.jsonl", ".nbagent/a.ipynb/s1.jsonl"),  # beside the notebook: from its folder
        ("/home/ana/other/s1.jsonl", "~/other/s1.jsonl"),
        ("/srv/logs/s1.jsonl", "/srv/logs/s1.jsonl"),
        ("relative/s1.jsonl", "relative/s1.jsonl"),
        ("postgresql://db.example/nb#a.ipynb/s1", "postgresql://db.example/nb#a.ipynb/s1"),  # a database session, as named
        ("", ""),
    ],
)
def test_a_replay_names_its_log_shortly(source: str, shown: str) -> None:
    from nbagent.render.timeline import short_source

    assert short_source(source, Path("/home/ana/work"), Path("/home/ana")) == shown


def test_the_replay_header_shows_the_short_name_and_errors_the_whole_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / ".nbagent" / "nb.ipynb" / "s1.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(nbagent.record.line_codec.encode(e, None)[0].decode() for e in EVENTS))
    replay = Replay.from_path(path)
    assert replay.source == str(path) and replay.name == ".nbagent/nb.ipynb/s1.jsonl"
    assert str(tmp_path) not in replay.header.value and ".nbagent/nb.ipynb/s1.jsonl" in replay.header.value
    assert str(tmp_path) not in replay.static_bundle()["text/html"]
    replay.close()
