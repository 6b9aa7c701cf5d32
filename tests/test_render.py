"""Safe rendering: hostile model output through the real rendering path never yields script."""

from __future__ import annotations

import base64
import re
from urllib.parse import urlsplit

import pytest

from nbagent.notebook.panel import Panel
from nbagent.render import html as render
from nbagent.render.text import transcript_text
from reliability.payloads import MARKDOWN, start_tags

SAFE_TAGS = set(render.ALLOWED_TAGS) | {"div", "span", "details", "summary", "img"}  # the last: our own markup
OUR_STYLE = re.compile(r"^[a-z0-9#%:;. -]*$")  # the panel's own inline styles: no url(), quotes or expressions


def assert_safe(fragment: str) -> None:
    """Parse as a browser would; every tag and attribute must be on the allow-list."""
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
    assert_safe(render.markdown_html(payload))


@pytest.mark.parametrize("payload", MARKDOWN)
def test_sanitize_strips_hostile_html_even_when_raw_html_reaches_it(payload: str) -> None:
    assert_safe(render.sanitize(payload))


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
    html = render.markdown_html(
        "# Title\n\n**bold** `code` ~~gone~~ [site](https://example.org)\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nx = 1\n```"
    )
    for expected in ("<h1>Title</h1>", "<strong>bold</strong>", "<code>code</code>", "<s>gone</s>", "<table>", "<pre><code>x = 1"):
        assert expected in html
    assert 'href="https://example.org"' in html and 'rel="noopener noreferrer nofollow"' in html


def test_markdown_images_become_links_not_fetched_images() -> None:
    html = render.markdown_html("![chart](https://example.org/c.png)")
    assert "<img" not in html and 'href="https://example.org/c.png"' in html and "[image: chart]" in html


def test_tool_result_images_are_shown_from_checked_base64_only() -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
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
    assert '    -> ls({"path": "."})' in text and "error from ls:\n    boom" in text and "    It failed." in text
    html = render.transcript_html(events)
    assert "error from <b>ls</b>" in html and "<details" in html and "It failed." in html


def test_long_tool_results_are_cut_in_the_view() -> None:
    html = render.tool_result_html("cat", "x" * (render.MAX_TOOL_TEXT + 500))
    assert "500 more characters in the log" in html
