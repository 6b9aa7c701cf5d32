"""Fenced blocks in a request's "You:" line (nbagent/render/code.py ``fenced``, ``request_html``), as tables."""

from __future__ import annotations

import pytest

from nbagent.notebook.interpolate import block
from nbagent.record import events as ev
from nbagent.render import html
from nbagent.render.code import fenced, request_html

FIELD = block("In[3]", "df = load()\nprint(df)", "python")  # what {In[3]} becomes, fences and all


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("plain words", [("plain words", None)]),
        ("see\n```python\nx = 1\n```\nthen", [("see", None), ("x = 1", "python"), ("then", None)]),
        ("```\nonly\n```", [("only", "")]),
        ("a\n````\nhas ``` inside\n````", [("a", None), ("has ``` inside", "")]),  # a longer fence holds shorter ones
        ("a\n```python\nnever closed", [("a\n```python\nnever closed", None)]),  # an unclosed fence is words
        ("x ``` y\n```", [("x ``` y\n```", None)]),  # backticks inside a line open nothing
        ("```\n```", [("", "")]),
        ("a\n```\n1\n```\n```\n2\n```", [("a", None), ("1", ""), ("2", "")]),
        (f"explain {FIELD}please", [("explain In[3]:", None), ("df = load()\nprint(df)", "python"), ("please", None)]),
    ],
)
def test_fenced(text: str, parts: list[tuple[str, str | None]]) -> None:
    assert fenced(text) == parts


def test_request_html_shows_a_fields_block_without_fences_and_escaped() -> None:
    hostile = "<b>bold</b> & \u202etxt.exe"
    shown = request_html(f"explain {block('Out[4]', hostile)} please")
    assert "```" not in shown
    assert '<pre class="nbagent-request-block">' in shown and "&lt;b&gt;bold&lt;/b&gt; &amp;" in shown and "<b>bold" not in shown
    assert 'class="nbagent-hidden"' in shown  # a direction-changing character in a field is shown, not obeyed
    assert shown.startswith('<span class="nbagent-request">explain Out[4]:</span>') and shown.endswith("please</span>")
    assert request_html("no <fences> here\n") == '<span class="nbagent-request">no &lt;fences&gt; here\n</span>'  # as before


def test_the_you_line_of_an_expanded_request() -> None:
    content = f"explain {FIELD}please"
    event = ev.make(
        2, ev.USER_MSG, {"content": content, "meta": {"template": "explain {In[3]}please", "expanded": [["{In[3]}", "the code"]]}}
    )
    shown = html.transcript_html([ev.make(1, ev.SESSION_START, {"session_id": "s" * 32, "meta": {}}), event])
    you = shown[shown.index("<b>You:</b>") :]
    assert "```" not in you and '<pre class="nbagent-request-block">df = load()\nprint(df)</pre>' in you
    assert "expanded</span> {In[3]} → the code" in you
