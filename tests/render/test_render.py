"""Safe rendering: hostile model output through the real rendering path never yields script."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent.notebook.panel import Panel
from nbagent.render import html as render
from nbagent.render import safe_html, style
from nbagent.render.text import transcript_text
from reliability.payloads import MARKDOWN, PNG, start_tags

SAFE_TAGS = set(safe_html.ALLOWED_TAGS) | {"div", "span", "details", "summary", "img"}  # the last: our own markup
OUR_STYLE = re.compile(r"^[a-z0-9#%:;. -]*$")  # the panel's own inline styles: no url(), quotes or expressions


OUR_STYLES = re.compile(f"{re.escape(style.STYLE)}|{re.escape(style.sibling_style('KEY')).replace('KEY', '[0-9a-f]+')}")


def without_our_styles(fragment: str) -> str:
    """The fragment without nbagent's own stylesheets (constants, put around the sanitized content by nbagent)."""
    return OUR_STYLES.sub("", fragment)


def assert_safe(fragment: str) -> None:
    """Parse as a browser would; every tag and attribute must be on the allow-list (nbagent's own stylesheets aside)."""
    fragment = without_our_styles(fragment)
    for tag, attrs in start_tags(fragment):
        assert tag in SAFE_TAGS, (tag, fragment)
        for name, value in attrs:
            assert not name.startswith("on") and name not in ("id", "name", "srcdoc", "action", "formaction"), (name, fragment)
            if name == "href":
                assert urlsplit(value).scheme.lower() in ("http", "https", "mailto"), (value, fragment)
            if name == "src":
                assert tag == "img" and re.match(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=]*$", value), (value, fragment)
            if name == "style":
                assert OUR_STYLE.match(value), (value, fragment)
    assert "<script" not in fragment.lower()


@pytest.mark.parametrize("payload", MARKDOWN)
def test_markdown_html_neutralizes_hostile_payloads(payload: str) -> None:
    assert_safe(safe_html.markdown_html(payload))


@pytest.mark.parametrize("payload", MARKDOWN)
def test_sanitize_strips_hostile_html_even_when_raw_html_reaches_it(payload: str) -> None:
    assert_safe(safe_html.sanitize(payload))


@pytest.mark.parametrize("payload", MARKDOWN)
def test_every_event_type_and_the_transcript_are_safe(payload: str) -> None:
    events = [
        {"type": "user_msg", "content": payload},
        {
            "type": "assistant_msg",
            "content": [
                {"type": "text", "text": payload},
                {"type": "tool_use", "id": "t1", "name": payload, "input": {"q": payload}},
            ],
        },
        {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": payload}], "is_error": True},
        {"type": "model_error", "message": payload},
        {"type": "approval", "decision": "pending", "question": payload},
        {"type": "approval", "decision": "declined", "by": payload, "note": payload},
        {"type": "interrupted", "during": payload},
        {"type": "note", "text": payload},
    ]
    for event in events:
        assert_safe(render.event_html(event))
    assert_safe(render.transcript_html(events, title=payload, status=payload))


def test_hostile_payload_in_the_panel_widgets_and_static_fallback() -> None:
    payload = "<img src=x onerror=alert(1)> [x](javascript:alert(1)) <script>alert(2)</script>"
    panel = Panel(payload)
    panel({"type": "user_msg", "seq": 1, "content": payload})
    panel({"type": "model_call", "seq": 2, "attempt": 1})
    for i, piece in enumerate(payload):
        panel({"type": "delta", "seq": 3 + i, "index": 0, "text": piece})
    panel._flush()
    streamed = panel._stream_widget.value
    assert_safe(streamed)
    panel({"type": "assistant_msg", "seq": 999, "content": [{"type": "text", "text": payload}], "usage": {}})
    panel.finish()
    for child in panel.items.children:
        assert_safe(child.value)
    assert_safe(panel.header.value)
    assert_safe(panel.bundle()["text/html"])


def test_markdown_renders_what_a_model_writes() -> None:
    html = safe_html.markdown_html(
        "# Title\n\n**bold** `code` ~~gone~~ [site](https://example.org)\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nx = 1\n```"
    )
    for expected in (
        "<h1>Title</h1>",
        "<strong>bold</strong>",
        "<code>code</code>",
        "<s>gone</s>",
        "<table>",
        '<pre class="nbagent-code"><code><span class="pg-n">x</span>',
    ):
        assert expected in html
    assert 'href="https://example.org"' in html and 'rel="noopener noreferrer nofollow"' in html


def test_markdown_images_become_links_not_fetched_images() -> None:
    html = safe_html.markdown_html("![chart](https://example.org/c.png)")
    assert "<img" not in html and 'href="https://example.org/c.png"' in html and "[image: chart]" in html


def test_tool_result_images_are_shown_from_checked_base64_only() -> None:
    png = PNG  # a real 1x1 PNG: a view reads the header of every image it shows
    good = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}
    html = render.tool_result_html("plot", [good])
    assert f'src="data:image/png;base64,{png}"' in html
    for bad in (
        {"type": "image", "source": {"type": "base64", "media_type": "image/svg+xml", "data": png}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": '"><script>alert(1)</script>'}},
        {"type": "image", "source": {"type": "url", "url": "javascript:alert(1)"}},
    ):
        out = render.tool_result_html("plot", [bad])
        assert "<img" not in out and "<script" not in out and "javascript:" not in out


def test_transcript_text_and_html_name_tools_and_mark_errors() -> None:
    events = [
        {"type": "session_start", "session_id": "s"},
        {"type": "user_msg", "content": "list files"},
        {"type": "assistant_msg", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {"path": "."}}]},
        {"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": True},
        {"type": "assistant_msg", "content": [{"type": "text", "text": "It failed."}]},
    ]
    text = transcript_text(events, title="T", status="done")
    assert text.splitlines()[0] == "T — done"
    assert '    -> ls({"path": "."})' in text and "called ls(path='.') · error: boom\n    boom" in text and "    It failed." in text
    html = render.transcript_html(events)
    assert "<code>ls(path=&#x27;.&#x27;)</code> · error: boom" in html and "nbagent-result-error" in html and "It failed." in html


def test_long_tool_results_are_cut_in_the_view() -> None:
    html = render.tool_result_html("cat", "x" * (render.MAX_TOOL_TEXT + 500))
    assert "500 more characters in the log" in html


# What people see: notes, approvals, python code, glyphs, colours -------------------------------------------
RESTART = "[nbagent note: the Jupyter kernel was restarted since the previous turn.]"
SESSION = [
    {"type": "session_start", "session_id": "s"},
    {"type": "user_msg", "content": "first"},
    {"type": "model_call", "attempt": 1},
    {"type": "interrupted", "during": "model"},
    {"type": "note", "kind": "kernel_restarted", "to_model": RESTART},
    {"type": "user_msg", "content": "second"},
    {"type": "assistant_msg", "content": [{"type": "tool_use", "id": "t1", "name": "python", "input": {"code": "x = '<b>'"}}]},
    {"type": "approval", "tool_use_id": "t1", "decision": "pending", "question": "Run python?"},
    {"type": "approval", "tool_use_id": "t1", "decision": "approved", "by": "panel"},
    {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
    {"type": "assistant_msg", "content": [{"type": "tool_use", "id": "t2", "name": "shell", "input": {"command": "ls"}}]},
    {"type": "interrupted", "during": "tools", "open_calls": ["t2"]},
    {"type": "tool_result", "tool_use_id": "t2", "content": "Not run", "is_error": True, "abandoned": "not_started"},
    {"type": "user_msg", "content": "third"},
    {"type": "model_error", "message": "overloaded"},
]


def test_notes_to_the_model_show_as_notes_with_their_request_never_as_the_users_words() -> None:
    html = render.transcript_html(SESSION)
    text = transcript_text(SESSION)
    interrupted = "the previous request was interrupted before it was answered."
    restarted = "the Jupyter kernel was restarted since the previous turn."
    for shown in (html, text):
        assert shown.count(interrupted) == 1 and shown.count(restarted) == 1  # each note once, no "[nbagent note:"
        assert "[nbagent note" not in shown
        assert shown.index(interrupted) < shown.index(restarted) < shown.index("second")  # before the request they went with
    assert '<span class="nbagent-request">second</span>' in html  # the user's words alone
    assert f"note to the model: {interrupted}\nnote to the model: {restarted}\nrequest:\n    second" in text


def test_a_restart_note_inside_an_old_request_shows_as_a_note() -> None:
    """Before v3 the note was the request's first text block: a display rule (the fold still sends it, as before)."""
    old = {"type": "user_msg", "content": [{"type": "text", "text": RESTART}, {"type": "text", "text": "make z"}]}
    html, text = render.event_html(old), transcript_text([old])
    assert "note to the model</span> the Jupyter kernel" in html and '<span class="nbagent-request">make z</span>' in html
    assert text == "note to the model: the Jupyter kernel was restarted since the previous turn.\nrequest:\n    make z"
    typed = {"type": "user_msg", "content": "[nbagent note: typed by the user]"}  # a request the user typed stays theirs
    assert '<span class="nbagent-request">[nbagent note: typed by the user]</span>' in render.event_html(typed)


def test_an_abandoned_call_is_a_note_naming_its_tool_and_the_approval_is_drawn_once() -> None:
    html = render.transcript_html(SESSION)
    assert "the call to shell from the request before was not run: a new request came first" in html
    assert "error from" not in html
    assert html.count("Run this Python code?") == 1 and "approved</span> by you in the panel" in html
    assert "note: the call to shell from the request before was not run" in transcript_text(SESSION)
    started = {**SESSION[12], "abandoned": "unknown_outcome"}
    assert "was interrupted while it ran: its outcome is unknown" in render.event_html(started, tool_names={"t2": "shell"})


def test_python_input_is_highlighted_code_and_other_tools_keep_json() -> None:
    python = render.tool_call_html("python", {"code": "import os\nx = '<b>' # </pre><script>"})
    assert '<pre class="nbagent-code">' in python and '<span class="pg-kn">import</span>' in python
    assert "&lt;/pre&gt;&lt;script&gt;" in python and "<script" not in python and "<b>'" not in python
    assert_safe(python)
    shell = render.tool_call_html("shell", {"command": "ls <dir>"})
    assert "&quot;command&quot;: &quot;ls &lt;dir&gt;&quot;" in shell and "pg-" not in shell


GLYPHS = set("·—…→")  # the only characters beyond ASCII nbagent itself writes: DejaVu Sans and Liberation Sans have them


def test_no_label_needs_an_emoji_font() -> None:
    from nbagent.notebook.replay import Replay

    shown = render.transcript_html(SESSION, title="t", status="done") + transcript_text(SESSION, title="t", status="done")
    replay = Replay(SESSION, source="s.jsonl")
    shown += "".join(b.description + b.tooltip for b in (replay.play_button, replay.prev_button, replay.next_button, replay.reload_button))
    shown += replay.static_bundle()["text/html"] + replay.position.value + replay.header.value
    assert {c for c in shown if ord(c) > 127} <= GLYPHS


def _contrast(hex_colour: str, background: str = "#ffffff") -> float:
    def luminance(value: str) -> float:
        value = value.lstrip("#")
        value = "".join(c * 2 for c in value) if len(value) == 3 else value
        channels = [int(value[i : i + 2], 16) / 255 for i in (0, 2, 4)]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    high, low = sorted((luminance(hex_colour), luminance(background)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_every_colour_is_a_theme_variable_and_every_text_fallback_reads_on_white() -> None:
    theirs = re.sub(r"var\(--jp-[a-z0-9-]+,#[0-9a-f]{3,6}\)", "THEME", style.CSS)
    assert "THEME" in theirs and not re.search(
        r"#[0-9a-fA-F]{3,6}|rgba?\(|hsla?\(|(?<![-\w])(red|gr[ae]y|black|white|blue|green)(?![-\w])", theirs
    )
    fallbacks = re.findall(r"(?<![-a-z])color:var\(--jp-[a-z0-9-]+,(#[0-9a-f]{3,6})\)", style.CSS)
    assert len(fallbacks) > 10
    for fallback in fallbacks:  # outside JupyterLab (a page without its variables) the text is on white
        assert _contrast(fallback) >= 4.5, fallback
    assert _contrast("#888") < 4.5  # (the check can fail: the grey the views used before)
    assert "style=" not in render.transcript_html(SESSION, title="t", status="s")  # no inline colours either


def test_a_stream_cut_off_stays_in_the_static_transcripts_and_a_finished_one_is_shown_once() -> None:
    cut = [
        {"type": "user_msg", "content": "go"},
        {"type": "model_call", "attempt": 1},
        {"type": "delta", "index": 0, "text": "Half an "},
        {"type": "delta", "index": 0, "text": "**ans**"},
        {"type": "interrupted", "during": "model"},
    ]
    assert "<p>Half an <strong>ans</strong></p>" in render.transcript_html(cut)
    assert "assistant (cut off)> Half an **ans**\ninterrupted (during model)" in transcript_text(cut)
    finished = [*cut[:4], {"type": "assistant_msg", "content": [{"type": "text", "text": "Half an **answer**"}]}]
    assert render.transcript_html(finished).count("Half an") == 1 and "cut off" not in transcript_text(finished)


PROSE = ["Done: the column sums to 42.", "a 'quoted' (3%) x=1 / y?", "Ünïcode wörds, 1.5 + 2 = 3.5", "see http://example.org or a@b.c"]
NOT_PROSE = ["1. a list", "- item", "two\nlines", "  indented", "a *word*", "a_b", "x < y", "R&D", 'say "hi"', "ends with space ", "# no"]


@pytest.mark.parametrize("text", PROSE + NOT_PROSE)
def test_prose_is_rendered_as_markdown_it_renders_it(text: str) -> None:
    """The plain-prose shortcut gives markdown-it's own output, and is taken only for prose."""
    assert safe_html.markdown_html(text) == safe_html.sanitize(safe_html._markdown().render(text))
    assert bool(safe_html._PROSE_LINE.fullmatch(text)) == (text in PROSE)


def test_the_shortcut_gives_what_the_sanitizer_gives_for_every_code_point() -> None:
    """The prose shortcut skips the sanitizer: for every character it lets through, the sanitizer's output is the same."""
    checked = 0
    for point in range(0x20, 0x110000):
        line = f"a{chr(point)}b"
        if safe_html._PROSE_LINE.fullmatch(line):
            checked += 1
            assert safe_html.markdown_html(line) == safe_html.sanitize(f"<p>{line}</p>\n"), hex(point)
    assert checked > 1_000_000 and not safe_html._PROSE_LINE.fullmatch("a\ud800b")  # a lone surrogate takes the long way


@settings(max_examples=400, deadline=None)
@given(st.from_regex(safe_html._PROSE_LINE, fullmatch=True))
def test_any_line_the_shortcut_takes_is_one_markdown_it_paragraph(text: str) -> None:
    assert safe_html._markdown().render(text) == f"<p>{text}</p>\n"


TROJAN = 'if access != "user\u202e \u2066# admin\u2069 \u2066":\u200b'  # Trojan Source: reads as a comment, runs as code


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        pytest.param("python", {"code": TROJAN}, id="python code (highlighted)"),
        pytest.param("shell", {"command": f"echo {TROJAN}"}, id="a shell command"),
        pytest.param("propose_cell_edit", {"cell_id": "c1", "new_source": TROJAN}, id="any tool's arguments (JSON)"),
    ],
)
def test_every_approval_shows_hidden_characters_escaped_and_marked(name: str, arguments: dict[str, str]) -> None:
    """Issue 33 item 9: no bidi control or zero-width character reaches an approval raw; each is escaped, marked and named."""
    from nbagent.render.code import mark_hidden

    shown = render.approval_html(name, arguments, "irreversible")
    assert not any(c in shown for c in "\u202e\u2066\u2069\u200b"), shown
    assert '<span class="nbagent-hidden" title="U+202E RIGHT-TO-LEFT OVERRIDE">\\u202e</span>' in shown
    assert '<span class="nbagent-hidden" title="U+200B ZERO WIDTH SPACE">\\u200b</span>' in shown
    assert "hidden characters" in shown and "\\u2069 (U+2069 POP DIRECTIONAL ISOLATE)" in shown
    assert "hidden characters" not in render.approval_html(name, {k: "plain" for k in arguments}, "irreversible")
    assert mark_hidden("a &amp; b") == "a &amp; b"
