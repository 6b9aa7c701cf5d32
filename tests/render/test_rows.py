"""Show the work: what each tool row says, which part of a result is shown open, approvals in plain words (tables)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from nbagent.cli.export import to_markdown, to_notebook
from nbagent.render import html as render
from nbagent.render import rows, safe_html
from nbagent.render.rows import ToolCalls, Work, call_row, decision_words, question, result_row, work
from nbagent.render.text import transcript_text
from reliability.payloads import PNG
from tests.render.test_render import assert_safe

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def numbered(first: int, last: int) -> str:
    return "\n".join(f"{n:6}\tline {n}" for n in range(first, last + 1))


TRACEBACK = 'Traceback (most recent call last):\n  File "<agent>", line 1, in <module>\n    totals["march"]\nKeyError: \'march\''
DESCRIBE = "              sales\ncount    12.000000\nmean    140.250000\nstd      31.800000\nmin     101.000000\nmax     199.000000"

# name, input, result content, is_error -> the row a user reads
ROWS: list[tuple[str, Any, Any, bool, str]] = [
    ("read_file", {"path": "sales.csv"}, numbered(1, 366), False, "read sales.csv · 366 lines"),
    ("read_file", {"path": "one.txt"}, numbered(1, 1), False, "read one.txt · 1 line"),
    (
        "read_file",
        {"path": "big.csv"},
        numbered(1, 2000) + "\n[500 more lines; call again with offset=2000]",
        False,
        "read big.csv · lines 1 to 2,000 of 2,500",
    ),
    ("read_file", {"path": "big.csv", "offset": 10}, numbered(11, 12), False, "read big.csv · lines 11 to 12 of 12"),
    ("read_file", {"path": "chart.png"}, [text("chart.png (70 bytes, image/png):"), IMAGE], False, "read chart.png · 1 image"),
    ("read_file", {"path": "gone.csv"}, "FileNotFoundError: [Errno 2] No such file", True, "read gone.csv · failed: FileNotFoundError"),
    ("read_file", {}, "(x has no lines in that range; it has 3 lines)", False, "read a file · no lines in that range (it has 3)"),
    ("python", {"code": "df.plot()"}, [IMAGE, text("(no output)")], False, "ran python · 1 plot"),
    ("python", {"code": "df.describe()"}, [text(DESCRIBE)], False, "ran python · 6 lines of output"),
    ("python", {"code": "x = 1"}, [text("(no output)")], False, "ran python · no output"),
    ("python", {"code": "a; b"}, [text("hi"), IMAGE, IMAGE], False, "ran python · 2 plots · 1 line of output"),
    ("python", {"code": 'totals["march"]'}, [text(TRACEBACK)], True, "python raised KeyError"),
    (
        "python",
        {"code": "1 +"},
        [text("  File x, line 1\n    1 +\n       ^\nSyntaxError: invalid syntax")],
        True,
        "python raised SyntaxError",
    ),
    ("python", {"code": "?"}, [text("something odd")], True, "python raised an error"),
    ("shell", {"command": "ls -la"}, "exit code 0\nstdout:\na\nb\n", False, "ran ls -la · 2 lines of output"),
    ("shell", {"command": "false"}, "exit code 1", False, "ran false · exit code 1 · no output"),
    ("shell", {"command": "sleep 99"}, "TimeoutError: timed out after 1 s; killed\n", True, "ran sleep 99 · timed out after 1 s; killed"),
    ("shell", {"command": "rm -rf x"}, "The call was not approved. The user declined this tool call.", True, "shell rm -rf x · not run"),
    ("shell", {"command": "echo " + "y" * 200}, "exit code 0\nstdout:\nyy\n", False, f"ran echo {'y' * 74}… · 1 line of output"),
    ("write_file", {"path": "notes.md", "content": "a\n" * 12}, "Created notes.md (24 characters).", False, "wrote notes.md · 12 lines"),
    ("edit_file", {"path": "n.md", "old_text": "a\nb", "new_text": "c"}, "Edited n.md", False, "edited n.md · replaced 2 lines with 1"),
    ("list_files", {"path": "data"}, "a.csv\t10\nb/\n[3 more entries not shown]", False, "listed data · 5 entries"),
    (
        "list_files",
        {"pattern": "*.csv", "recursive": True},
        "(nothing in . matches '*.csv')",
        False,
        "listed . · nothing found · matching *.csv · recursive",
    ),
    ("word_count", {"path": "notes.txt"}, "42", False, "called word_count(path='notes.txt') · returned 42"),
    (
        "report",
        {"text": "x" * 300},
        "line\n" * 3,
        False,
        "called report(text='xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…') · 3 lines returned",
    ),
    ("send", {"to": "a"}, "ConnectionError: refused", True, "called send(to='a') · failed: ConnectionError"),
    ("send", {"to": "a"}, "Approval is set to 'deny', so this call was not run.", True, "send(to='a') · not run"),
    ("odd", "not a dict", None, False, "called odd()"),
]


@pytest.mark.parametrize(("name", "arguments", "content", "is_error", "words"), ROWS)
def test_each_row_says_what_the_call_did(name: str, arguments: Any, content: Any, is_error: bool, words: str) -> None:
    assert result_row(name, arguments, content, is_error=is_error).text == words


CALLS = [
    ("python", {"code": "\nimport pandas as pd\ndf = pd.read_csv('sales.csv')\n"}, "python import pandas as pd · 3 lines"),
    ("python", {"code": "1 + 1"}, "python 1 + 1"),
    ("shell", {"command": "ls   -la\n| head"}, "shell ls -la | head"),
    ("read_file", {"path": "sales.csv"}, "read_file(path='sales.csv')"),
    ("flags", {"on": True, "n": [1, 2]}, "flags(on=true, n=[1, 2])"),
    ("propose_cell_edit", {"cell_id": "c1", "new_source": "x = 1\nprint(x)"}, "propose an edit of cell c1 · 2 lines"),  # issue 35
]


@pytest.mark.parametrize(("name", "arguments", "words"), CALLS)
def test_each_call_row_says_what_it_asks_for(name: str, arguments: Any, words: str) -> None:
    assert call_row(name, arguments).text == words


LONG = "\n".join(f"row {n}" for n in range(100))
# name, content, is_error -> kinds of the blocks shown open, lines of text shown, lines left out, raw kept collapsed
WORK: list[tuple[str, Any, bool, list[str], int, int, bool]] = [
    ("python", [IMAGE, text("(no output)")], False, ["image"], 0, 0, False),  # a plot: shown, nothing to collapse
    ("python", [text(DESCRIBE)], False, ["text"], 6, 0, False),  # a describe() table: shown whole
    ("python", [text(LONG)], False, ["text"], rows.SHOWN_LINES, 100 - rows.SHOWN_LINES, True),  # long output: its head, the rest collapsed
    ("python", [text(TRACEBACK)], True, ["text"], 4, 0, False),  # an error: shown
    ("python", [text(LONG + "\n" + TRACEBACK)], True, ["text"], rows.SHOWN_LINES, 104 - rows.SHOWN_LINES, True),  # its end
    ("python", [text("(no output)")], False, [], 0, 0, False),
    ("shell", "exit code 0\nstdout:\nfile.txt\n", False, ["text"], 1, 0, False),  # printed output: shown
    ("shell", "exit code 0", False, [], 0, 0, False),
    ("read_file", numbered(1, 366), False, [], 0, 0, True),  # a file read: raw, collapsed
    ("read_file", [text("chart.png:"), IMAGE], False, ["image"], 0, 0, True),  # an image read: shown
    ("list_files", "a.csv\t10", False, [], 0, 0, True),
    ("word_count", '{"words": 42}', False, [], 0, 0, True),  # JSON: raw, collapsed
    ("word_count", [{"type": "document", "x": 1}], False, [], 0, 0, True),
    ("read_file", "FileNotFoundError: nope", True, ["text"], 1, 0, False),  # any error: shown
    ("python", [text("x" * (rows.SHOWN_CHARS + 10))], False, ["text"], 1, 1, True),  # one huge line: cut
]


@pytest.mark.parametrize(("name", "content", "is_error", "kinds", "lines", "more", "raw"), WORK)
def test_what_is_shown_open_and_what_stays_collapsed(
    name: str, content: Any, is_error: bool, kinds: list[str], lines: int, more: int, raw: bool
) -> None:
    shown = work(name, content, is_error=is_error)
    assert [b["type"] for b in shown.blocks] == kinds
    assert sum(len(str(b.get("text", "")).splitlines()) for b in shown.blocks) == lines
    assert (shown.more, shown.raw) == (more, raw)


def test_an_error_shows_its_last_lines() -> None:
    shown = work("python", [text(LONG + "\n" + TRACEBACK)], is_error=True)
    assert shown.blocks[0]["text"].endswith("KeyError: 'march'") and "row 0\n" not in shown.blocks[0]["text"]
    assert work("python", [text(LONG)]).blocks[0]["text"].startswith("row 0\nrow 1")


DECISIONS = [
    ("approved", "panel", "", "approved by you in the panel"),
    ("declined", "panel", "The user declined this tool call.", "declined by you in the panel"),
    ("approved", "console", "", "approved by you at the prompt"),
    ("approved", "auto", "", "approved by the approval policy (auto)"),
    (
        "declined",
        "auto",
        "Approval is 'auto', which approves only ...",
        "declined by the approval policy (auto) (Approval is 'auto', which approves only ...)",
    ),
    (
        "declined",
        "deny",
        "Approval is set to 'deny', so this call was not run.",
        "declined by the approval policy (deny) (Approval is set to 'deny', so this call was not run.)",
    ),
    ("approved", "callback", "", "approved by your approval function"),
    (
        "declined",
        "nobody",
        "Approval was needed but no person can answer here, so this call was not run.",
        "declined: Approval was needed but no person can answer here, so this call was not run.",
    ),
    ("declined", "nobody", "", "declined: nobody could answer here"),
    ("approved", "ci-bot", "", "approved by ci-bot"),
    ("approved", None, "", "approved (by whom is not recorded)"),
    ("maybe", ["x"], None, "decided (by whom is not recorded)"),
    ("interrupted", None, None, "unanswered (interrupted): the call was not run"),
]


@pytest.mark.parametrize(("decision", "by", "note", "words"), DECISIONS)
def test_an_approval_says_what_it_was_decided_with(decision: Any, by: Any, note: Any, words: str) -> None:
    assert decision_words(decision, by, note) == words


QUESTIONS = [
    ("shell", {"command": "rm -rf build"}, "irreversible", ("Run this shell command?", "rm -rf build", "shell", "")),
    ("shell", {"command": "make"}, "unknown_outcome", ("Run this shell command again?", "make", "shell", rows.WHY["unknown_outcome"])),
    ("python", {"code": "x = 1"}, "untrusted", ("Run this Python code?", "x = 1", "python", rows.WHY["untrusted"])),
    (
        "read_file",
        {"path": "/etc/passwd"},
        "outside_workspace",
        ("Call read_file?", '{\n  "path": "/etc/passwd"\n}', "json", rows.WHY["outside_workspace"]),
    ),
    ("send", {}, "irreversible", ("Call send?", "{}", "json", "send is marked irreversible: what it does may not be undone.")),
    ("send", None, "odd", ("Allow send?", "", "json", "")),
]


@pytest.mark.parametrize(("name", "arguments", "reason", "asked"), QUESTIONS)
def test_an_approval_asks_in_plain_words(name: str, arguments: Any, reason: str, asked: tuple[str, str, str, str]) -> None:
    assert tuple(question(name, arguments, reason, logged="Allow send?")) == asked


# The renderers --------------------------------------------------------------------------------------------------
def session(code: str = "df.plot()", content: Any = None, *, is_error: bool = False) -> list[dict[str, Any]]:
    """A turn whose python call made a plot, then a shell call that asked for approval."""
    return [
        {"type": "session_start", "seq": 1, "session_id": "s"},
        {"type": "user_msg", "seq": 2, "content": "plot the sales"},
        {"type": "assistant_msg", "seq": 3, "content": [{"type": "tool_use", "id": "t1", "name": "python", "input": {"code": code}}]},
        {"type": "tool_result", "seq": 4, "tool_use_id": "t1", "content": content or [IMAGE, text("(no output)")], "is_error": is_error},
        {"type": "assistant_msg", "seq": 5, "content": [{"type": "tool_use", "id": "t2", "name": "shell", "input": {"command": "ls <x>"}}]},
        {
            "type": "approval",
            "seq": 6,
            "tool_use_id": "t2",
            "reason": "irreversible",
            "decision": "pending",
            "question": "The agent wants...",
        },
        {"type": "approval", "seq": 7, "tool_use_id": "t2", "reason": "irreversible", "decision": "approved", "by": "panel"},
        {"type": "tool_result", "seq": 8, "tool_use_id": "t2", "content": "exit code 0\nstdout:\nsales.csv\n"},
        {"type": "assistant_msg", "seq": 9, "content": [{"type": "text", "text": "Done."}]},
    ]


def outside_details(fragment: str) -> str:
    """What is visible without a click: the fragment without the bodies of its <details> (their summaries stay)."""
    return re.sub(r"<details[^>]*><summary>(.*?)</summary>.*?</details>", r"\1", fragment, flags=re.S)


def test_the_transcript_shows_the_plot_and_printed_output_open_and_the_code_collapsed() -> None:
    html = render.transcript_html(session()).replace(render.STYLE, "")
    assert_safe(html)
    open_ = outside_details(html)
    assert f'src="data:image/png;base64,{PNG}"' in open_  # the plot, without a click
    assert "<b>ran python</b> · 1 plot" in open_ and "sales.csv</pre>" in open_  # the row, and the command's output
    assert "pg-" not in open_ and "pg-" in html  # the code is there, collapsed
    assert "Run this shell command?" in html and '<pre class="nbagent-code">ls &lt;x&gt;</pre>' in html
    assert "approved</span> by you in the panel" in html and "The agent wants" not in html


def test_an_error_is_shown_and_said() -> None:
    html = render.transcript_html(session('totals["march"]', [text(TRACEBACK)], is_error=True))
    assert "<b>python raised KeyError</b>" in html and "nbagent-result-error" in html
    assert "KeyError: &#x27;march&#x27;</pre>" in outside_details(html)


def test_the_live_panel_and_the_transcript_say_the_same_row() -> None:
    events = session()
    names = ToolCalls()
    live = []
    for event in events:
        names.learn(event)
        live.append(render.event_html(event, tool_names=names))
    assert "".join(live) in render.transcript_html(events)


def test_a_row_without_the_calls_input_still_says_what_it_can() -> None:
    result = session()[3]
    assert "<b>ran python</b> · 1 plot" in render.event_html(result, tool_names={"t1": "python"})
    pending = session()[5]
    assert "The agent wants..." in render.event_html(pending, tool_names={"t2": "shell"})  # the log's own question


def test_hostile_strings_in_rows_are_escaped_and_clipped() -> None:
    evil = "<script>alert(1)</script>" + "x" * 500
    html = render.tool_result_html("read_file", "FileNotFoundError: " + evil, is_error=True, arguments={"path": evil})
    assert_safe(html)
    assert "<script" not in html and "&lt;script&gt;" in html
    summary = re.search(r"<summary>(.*?)</summary>|<div class=\"nbagent-row\">(.*?)</div>", html)
    assert summary is not None and len(re.sub(r"<[^>]+>", "", summary.group(0))) < 220


def test_the_terminal_shows_the_row_and_the_printed_output() -> None:
    shown = transcript_text(session())
    assert "ran python · 1 plot\n    [image image/png]" in shown
    assert "ran ls <x> · 1 line of output\n    sales.csv" in shown
    assert "approval asked: Run this shell command?\n    ls <x>" in shown and "shell: approved by you in the panel" in shown


def test_exports_say_the_row_and_the_decision() -> None:
    markdown = to_markdown(session())
    assert "**ran python** · 1 plot" in markdown and f"![output image](data:image/png;base64,{PNG})" in markdown
    assert "**ran** ` ls <x> ` · 1 line of output" in markdown and "Approval of shell: approved by you in the panel" in markdown
    cells = to_notebook(session()).cells
    assert any(c.cell_type == "code" and c.outputs and "image/png" in c.outputs[0].get("data", {}) for c in cells)


# Answers: code highlighted as tool code is, table columns aligned ---------------------------------------------------
def test_code_in_answers_is_highlighted_and_stays_script_free() -> None:
    html = render.markdown_html("```python\nimport os  # </code><script>alert(1)</script>\n```\n\n```nosuchlanguage\n<b>x</b>\n```")
    assert '<pre class="nbagent-code"><code><span class="pg-kn">import</span>' in html
    assert "<script" not in html and "&lt;script&gt;" in html and "&lt;b&gt;x&lt;/b&gt;" in html
    assert_safe(html)


def test_only_our_classes_survive_the_sanitizer() -> None:
    cleaned = safe_html.sanitize('<span class="pg-k evil">a</span><pre class="nbagent-code x">b</pre><p class="pg-k">c</p>')
    assert cleaned == '<span class="pg-k">a</span><pre class="nbagent-code">b</pre><p>c</p>'


def test_right_and_centre_aligned_columns_keep_their_alignment() -> None:
    html = render.markdown_html("| month | total | note |\n|:--|--:|:-:|\n| Jan | 1,204 | ok |")
    assert '<th class="nbagent-right">total</th>' in html and '<td class="nbagent-right">1,204</td>' in html
    assert '<td class="nbagent-center">ok</td>' in html and "<td>Jan</td>" in html and "style" not in html
    assert ".nbagent-right{text-align:right" in render.STYLE


def test_the_live_view_link_does_not_wrap() -> None:
    header = render.header_html("t", "running", link="/nbagent/sessions?x")
    assert 'class="nbagent-origin nbagent-live-link"' in header and ".nbagent-live-link{white-space:nowrap}" in render.STYLE


def test_work_is_a_named_tuple_of_plain_values() -> None:
    assert work("python", [IMAGE]) == Work((IMAGE,), 0, False)
