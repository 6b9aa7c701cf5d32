"""Issue 35 item 3, the rules: a proposed edit's question, ``{Err}`` once an error is fixed, the ``--fix`` panel's title.

Pure rules, and the CellLog on IPython's real in-process shell (the kernel side is test_cell_edit_kernel.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from nbagent.notebook import cells_protocol, edit_view, interpolate
from nbagent.notebook.cells import CellLog, CellRun
from nbagent.render import html as render
from nbagent.render import style

OLD = "df = load('sales.csv')\ntotal = df.units.sum()\nprint(totl)"
NEW = "df = load('sales.csv')\ntotal = df.units.sum()\nprint(total)"


# The question of a proposed edit -------------------------------------------------------------------------------------
def test_the_question_names_the_cell_by_position_and_first_line_and_shows_the_change_once() -> None:
    shown = edit_view.question_html(4, OLD, NEW)
    assert "Change cell 4 (<code>df = load(&#x27;sales.csv&#x27;)</code>) as shown below?" in shown
    assert shown.count("print(total)") == 1 and shown.count("print(totl)") == 1  # once: no JSON arguments beside the diff
    assert "new_source" not in shown and "cell_id" not in shown
    assert '<span class="nbagent-diff-del">-print(totl)</span>' in shown and '<span class="nbagent-diff-add">+print(total)</span>' in shown
    assert '<span class="nbagent-diff-ctx"> total = df.units.sum()</span>' in shown and "nbagent-diff-hunk" in shown
    assert "---" not in shown and "+++" not in shown  # the file headers of a unified diff say nothing here
    assert "Ctrl+Z in the cell undoes" in shown and "may not be undone" not in shown  # as docs/cells.md says


@pytest.mark.parametrize(
    ("source", "named"),
    [
        ("\n\n   x = 1\ny", "cell 2 (<code>x = 1</code>)"),
        ("", "cell 2 (empty)"),
        ("y = '" + "a" * 100 + "'", "cell 2 (<code>y = &#x27;" + "a" * 54 + "…</code>)"),  # 60 characters
        ("s = 'a\u202eb'", 'cell 2 (<code>s = &#x27;a<span class="nbagent-hidden" title="U+202E RIGHT-TO-LEFT OVERRIDE">\\u202e</span>b'),
    ],
)
def test_the_cell_is_named_by_its_first_line_clipped_and_marked(source: str, named: str) -> None:
    assert named in edit_view.cell_html(2, source)


def test_the_diff_is_coloured_by_the_stylesheet_with_theme_colours() -> None:
    for kind, colour in (("add", "--jp-success-color1"), ("del", "--jp-error-color1")):
        rule = style.CSS.split(f".nbagent-diff-{kind}{{", 1)[1].split("}", 1)[0]
        assert "background-color:color-mix(" in rule and colour in rule
    assert ".nbagent-diff>span{display:inline-block;min-width:100%" in style.CSS  # a band a line, and a line a line without CSS


def test_a_logged_cell_edit_shows_its_new_source_once_and_says_it_can_be_undone() -> None:
    """The static transcript (and a re-rendered turn) has no diff: the new source as code, not the JSON of the arguments."""
    shown = render.approval_html("propose_cell_edit", {"cell_id": "c1", "new_source": NEW}, "irreversible")
    assert "Change cell c1 to this source?" in shown and "Ctrl+Z in the cell undoes" in shown
    assert "may not be undone" not in shown and "new_source" not in shown and shown.count("print") == 1
    untrusted = render.approval_html("propose_cell_edit", {"cell_id": "c1", "new_source": NEW}, "untrusted")
    assert "was not written by you" in untrusted  # another reason keeps its own words
    assert "may not be undone" in render.approval_html("drop_table", {"name": "t"}, "irreversible")  # other tools unchanged


def test_approval_waiting_carries_the_edit_only_within_the_protocol_s_limits() -> None:
    edit = cells_protocol.edit("c2", "<pre>diff</pre>")
    message = cells_protocol.approval_waiting("s1", "toolu_1", "<div>q</div>", "c1", edit)
    assert message["edit"] == {"cell_id": "c2", "diff_html": "<pre>diff</pre>"} and message["cell_id"] == "c1"
    too_long = cells_protocol.edit("c2", "x" * (cells_protocol.MAX_HTML + 1))
    assert "edit" not in cells_protocol.approval_waiting("s1", "toolu_1", "<div>q</div>", "c1", too_long)
    assert "edit" not in cells_protocol.approval_waiting("s1", "toolu_1", "<div>q</div>", None)


# {Err}: the latest error still standing ------------------------------------------------------------------------------
@pytest.fixture
def log() -> Iterator[tuple[Any, CellLog]]:
    """IPython's in-process shell and a CellLog listening to it."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    cell_log = CellLog(shell)
    cell_log.register()
    yield shell, cell_log
    cell_log.unregister()


def run(shell: Any, code: str, cell_id: str) -> int:
    """Run a cell as JupyterLab does (with its cell id); its execution count."""
    count = int(shell.execution_count)
    shell.run_cell(code, store_history=True, cell_id=cell_id)
    return count


def test_a_cell_that_ran_again_is_no_longer_the_latest_error(log: tuple[Any, CellLog]) -> None:
    shell, cells = log
    first = run(shell, "1 / 0", "cell-a")
    second = run(shell, "undefined_b", "cell-b")
    assert cells.last_error() == cells.get(second) and cells.get(second).cell_id == "cell-b"  # type: ignore[union-attr]
    run(shell, "b = 1", "cell-b")  # fixed by hand and run again
    assert cells.last_error() == cells.get(first)  # the error still standing, not the one fixed
    run(shell, "a = 1", "cell-c")  # another cell that ran fine changes nothing
    assert cells.last_error() == cells.get(first)
    again = run(shell, "undefined_b_again", "cell-b")
    assert cells.last_error() == cells.get(again)  # it raised again: that is the latest


def test_an_applied_edit_fixes_its_cell_s_error_and_a_fix_s_own_error(log: tuple[Any, CellLog]) -> None:
    shell, cells = log
    first = run(shell, "1 / 0", "cell-a")
    second = run(shell, "undefined_b", "cell-b")
    cells.edited("cell-b")  # an approved edit of cell b was applied
    assert cells.last_error() == cells.get(first)
    cells.edited("cell-z", fixing=cells.get(first))  # a --fix about cell a's error changed another cell (its cause)
    older = cells.last_error()  # (the shell is shared: an error of an earlier test may stand)
    assert older is None or older.count < first
    assert cells.get(second) is not None  # {Err[n]} still reads it
    later = run(shell, "1 / 0", "cell-a")
    assert cells.last_error() == cells.get(later)  # a new error of the same cell is new


# The --fix panel's title ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("words", "propose", "error", "title"),
    [
        ("", False, CellRun(7, "1/0", None, "ZeroDivisionError"), "Fix the error in cell [7]"),
        ("", True, CellRun(7, "1/0", None, "ZeroDivisionError"), "Fix the error in cell [7]"),
        ("  keep the column names ", True, CellRun(7, "1/0", None, "E"), "keep the column names"),
        ("use {df}", False, None, "use {df}"),
        ("", False, CellRun(0, "?", None, "E"), "Fix the most recent error"),  # an error from before nbagent was loaded
        ("", False, None, "Fix the most recent error"),  # a recorded --fix turn shown again
    ],
)
def test_the_fix_title_is_the_user_s_words_or_a_short_line(words: str, propose: bool, error: CellRun | None, title: str) -> None:
    request = interpolate.fix_request(words, propose=propose)
    assert interpolate.panel_title(request, error) == title
    assert interpolate.panel_title("plot {df}") == "plot {df}"  # any other request is its own title
