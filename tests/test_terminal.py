"""No terminal escapes: text from a log reaches the terminal visibly escaped, never as a control sequence.

Every human and JSON output of the real ``nbagent`` command (run as a subprocess, raw bytes
checked) and the terminal IPython view, on a log whose every text field carries hostile
payloads (``TERMINAL`` of reliability/payloads.py): OSC 52 clipboard writes, window titles,
OSC 8 hidden links, concealed text, C1 controls, CR, BEL, backspace, DEL, NUL and bidi overrides.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import nbagent
from nbagent.record import events as ev
from reliability.payloads import ESCAPES, NAME, NAME_SHOWN, TERMINAL, controls


def assert_no_controls(data: bytes, what: str) -> str:
    """The output as text; fails on any C0 control but newline and tab, DEL, C1 control, bidi override or non-UTF-8 byte."""
    bad = controls(data)
    assert not bad, f"{what}: raw control characters {bad} in {data[:2000]!r}"
    return data.decode("utf-8")


def hostile_log(path: Path) -> None:
    """Every payload in the title, requests, replies, streamed text, tool names, inputs and results, notes and model errors."""
    with nbagent.Session.open(path, fsync="never") as session:
        session.append(ev.USER_MSG, content=f"needle {ESCAPES}")  # the session title
        for number, (payload, _shown) in enumerate(TERMINAL):
            tool_id = f"toolu_{number}"
            session.append(ev.USER_MSG, content=f"needle {payload} request")
            session.append(ev.MODEL_CALL, model="claude-test", attempt=1)
            session.append(ev.DELTA, text=f"streamed {payload} text")
            session.append(
                ev.ASSISTANT_MSG,
                message_id=f"msg_{number}",
                model="claude-test",
                stop_reason="tool_use",
                usage={"input_tokens": 1, "output_tokens": 1},
                content=[
                    {"type": "text", "text": f"needle {payload} reply"},
                    {"type": "tool_use", "id": tool_id, "name": f"tool{payload}", "input": {"q": f"needle {payload}"}},
                ],
            )
            session.append(ev.TOOL_STARTED, tool_use_id=tool_id, name=f"tool{payload}", effect="read", attempt=1)
            session.append(ev.TOOL_RESULT, tool_use_id=tool_id, content=[{"type": "text", "text": f"needle {payload} result"}])
            session.append(ev.NOTE, kind="remark", text=f"note {payload}")
            session.append(ev.MODEL_ERROR, message=f"model error {payload}", status=500, kind="api", retryable=False, attempt=1)


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A hostile log with a hostile file name, a private data folder and a working folder."""
    root = tmp_path_factory.mktemp("terminal")
    data, work = root / "data", root / "work"
    work.mkdir()
    old = os.environ["NBAGENT_DATA_DIR"]
    os.environ["NBAGENT_DATA_DIR"] = str(data)
    try:
        log = root / "logs" / (NAME + ".jsonl")
        log.parent.mkdir()
        hostile_log(log)
    finally:
        os.environ["NBAGENT_DATA_DIR"] = old
    return {"log": log, "data": data, "work": work}


def run(place: dict[str, Path], *argv: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "NBAGENT_DATA_DIR": str(place["data"]), "PYTHONIOENCODING": "utf-8"}
    env.pop("NO_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "nbagent", *argv], cwd=place["work"], env=env, capture_output=True, timeout=120, check=False
    )


HUMAN = {
    "show": ("show", "{log}"),
    "show --full": ("show", "{log}", "--full"),
    "tail": ("tail", "{log}"),
    "tail -f": ("tail", "{log}", "-f", "--idle-exit", "0.5"),
    "sessions": ("sessions", "{log}"),
    "sessions --grep": ("sessions", "{log}", "--grep", "needle"),
    "verify": ("verify", "{log}"),
}
MACHINE = {
    "tail --json": ("tail", "{log}", "--json"),
    "sessions --json": ("sessions", "{log}", "--json"),
    "sessions --grep --json": ("sessions", "{log}", "--grep", "needle", "--json"),
    "verify --json": ("verify", "{log}", "--json"),
}


def run_clean(place: dict[str, Path], command: str, template: tuple[str, ...]) -> str:
    """Run ``nbagent`` with these arguments ({log}: the hostile log); it must succeed with no raw control in stdout or stderr."""
    result = run(place, *[a.format(log=place["log"]) for a in template])
    assert result.returncode == 0, result.stderr
    assert_no_controls(result.stderr, f"{command} stderr")
    return assert_no_controls(result.stdout, f"{command} stdout")


@pytest.mark.parametrize("command", list(HUMAN))
def test_human_output_shows_control_characters_escaped(place: dict[str, Path], command: str) -> None:
    stdout = run_clean(place, command, HUMAN[command])
    assert NAME_SHOWN in stdout or command.startswith("tail"), stdout  # tail prints no file name
    if command in ("sessions", "verify"):
        return  # they show the file name (above), not the contents
    # (a search result shows its snippet on one line: there "a\rb" is "a b", like any whitespace)
    expected = [shown for payload, shown in TERMINAL if command != "sessions --grep" or payload.split() == [payload]]
    missing = [shown for shown in expected if shown not in stdout]
    assert not missing, (missing, stdout)
    if command != "sessions --grep":
        assert "request:\n    needle" in stdout  # newlines are still layout


@pytest.mark.parametrize("command", list(MACHINE))
def test_json_output_has_no_raw_controls_and_keeps_the_data(place: dict[str, Path], command: str) -> None:
    stdout = run_clean(place, command, MACHINE[command])
    log, events = place["log"], list(nbagent.read_events(place["log"]))
    if command == "tail --json":
        assert [json.loads(line) for line in stdout.splitlines()] == events  # the very same strings, escaped as JSON
    elif command == "sessions --json":
        (entry,) = json.loads(stdout)
        assert entry["path"] == str(log) and entry["title"] == " ".join(events[1]["content"].split())[:80]
    elif command == "sessions --grep --json":
        matches = json.loads(stdout)
        assert {m["name"] for m in matches} == {NAME}
        found = " ".join(m["snippet"] for m in matches)
        assert all(" ".join(p.split()) in found for p, _ in TERMINAL)
    else:
        assert json.loads(stdout)["path"] == str(log)


def test_error_messages_show_control_characters_escaped(place: dict[str, Path], tmp_path: Path) -> None:
    # A damaged log under a hostile name: the one-line error on stderr names it.
    damaged = tmp_path / (NAME + "-damaged.jsonl")
    lines = place["log"].read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b"needle", b"NEEDLE")  # checksum no longer matches
    damaged.write_bytes(b"".join(lines))
    for argv in (("show", str(damaged)), ("tail", str(damaged)), ("export", str(damaged), "-o", str(tmp_path / "x.md"))):
        result = run(place, *argv)
        assert result.returncode == 1, (argv, result)
        assert_no_controls(result.stdout, f"{argv[0]} stdout")
        stderr = assert_no_controls(result.stderr, f"{argv[0]} stderr")
        assert NAME_SHOWN.replace("\\r", " ") in stderr, (argv, stderr)  # (one line: its whitespace is collapsed)


def test_the_terminal_ipython_view_shows_control_characters_escaped(place: dict[str, Path]) -> None:
    from nbagent.notebook.panel import TextView

    for streamed in (True, False):
        stream = io.StringIO()
        view = TextView(stream)
        for event in nbagent.read_events(place["log"]):
            if streamed or event["type"] != ev.DELTA:
                view(event)
        text = stream.getvalue()
        assert_no_controls(text.encode("utf-8"), "TextView")
        missing = [shown for _payload, shown in TERMINAL if shown not in text]
        assert not missing, (missing, text)


def test_safe_escapes_exactly_the_dangerous_characters() -> None:
    from nbagent.terminal import SafeWriter, json_dumps, safe

    for payload, shown in TERMINAL:
        assert safe(payload) == shown
        assert json.loads(json_dumps({"k": payload})) == {"k": payload}
        assert_no_controls(json_dumps(payload).encode(), "json_dumps")
    ordinary = "plain text, tabs\tand\nnewlines, accents é, CJK 漢字, emoji 🎉, arrows → ‹›, a backslash \\x1b"
    assert safe(ordinary) is ordinary
    assert safe("\ud800") == "\\ud800"  # a lone surrogate (from a JSON log) is shown, not a crash
    assert safe("\x00\x1f\x85\u2068") == "\\x00\\x1f\\x85\\u2068"
    stream = io.StringIO()
    writer = SafeWriter(stream)
    assert writer.write("\x1b[31mred") == len("\x1b[31mred")
    writer.control("\x1b[0m")  # the program's own sequences go only to a terminal
    assert stream.getvalue() == "\\x1b[31mred"


# text -> what visible() shows: every character of Unicode categories Cc, Cf, Cs, Zl, Zp escaped (\n and \t kept)
VISIBLE = [
    pytest.param("x = 1\n\tprint(x)", "x = 1\n\tprint(x)", id="plain code, layout kept"),
    pytest.param("é 漢字 🎉 →", "é 漢字 🎉 →", id="letters, symbols and emoji are not hidden"),
    pytest.param("a\u202eb", "a\\u202eb", id="right-to-left override (Cf)"),
    pytest.param("\u2066\u2067\u2068\u2069", "\\u2066\\u2067\\u2068\\u2069", id="bidi isolates (Cf)"),
    pytest.param("a\u200bb\u200c\u200d\u2060\ufeff", "a\\u200bb\\u200c\\u200d\\u2060\\ufeff", id="zero-width characters (Cf)"),
    pytest.param("\u200e\u200f\u061c", "\\u200e\\u200f\\u061c", id="direction marks (Cf)"),
    pytest.param("a\u2028b\u2029", "a\\u2028b\\u2029", id="line and paragraph separators (Zl, Zp)"),
    pytest.param("\x1b[2J\r\x00\x7f\x85", "\\x1b[2J\\r\\x00\\x7f\\x85", id="controls (Cc)"),
    pytest.param("\U000e0041\U000e007f", "\\U000e0041\\U000e007f", id="tag characters (Cf, beyond the BMP)"),
    pytest.param("\ud800", "\\ud800", id="a lone surrogate (Cs)"),
    pytest.param("a\u00a0b", "a\u00a0b", id="a no-break space is a space (Zs), not hidden"),
]


@pytest.mark.parametrize(("text", "shown"), VISIBLE)
def test_visible_escapes_every_invisible_and_direction_changing_character(text: str, shown: str) -> None:
    from nbagent.terminal import hidden_chars, hidden_words, visible

    assert visible(text) == shown
    assert bool(hidden_chars(text)) == (text != shown) == bool(hidden_words(text))


def test_hidden_words_name_each_character_once() -> None:
    from nbagent.terminal import hidden_words

    said = hidden_words("if x\u202e:\u2066 # \u202e\x1b")
    assert said.count("U+202E RIGHT-TO-LEFT OVERRIDE") == 1 and "U+2066 LEFT-TO-RIGHT ISOLATE" in said
    assert "\\x1b (U+001B control character)" in said and "\u202e" not in said
