"""The note to the model about the notebook (nbagent.notebook.notebook_context.compose), as tables."""

from __future__ import annotations

import re

import pytest

from nbagent.notebook.cells import CellRun
from nbagent.notebook.notebook_context import KIND, cell_ranges, compose, counts, excluded
from nbagent.notebook.variables import Variable
from nbagent.render.parts import note_summary, note_words


def cell(count: int, source: str = "x = 1", result: str | None = None, error: str | None = None) -> CellRun:
    return CellRun(count, source, result, error)


DF = Variable("df", "DataFrame 366×4: region object, units int64, price float64, day datetime64[ns]")
KEYERR = "KeyError: 'x'\n  File <cell 14>, line 1\n    df['x']"


@pytest.mark.parametrize(
    ("cells", "variables", "gone", "restarted", "says", "never"),
    [
        # A cell with a result, by execution count.
        (
            [cell(12, "df.shape", "(366, 4)")],
            [],
            [],
            False,
            ["since your last turn: 1 cell.", "In [12]: df.shape", "Out[12]: (366, 4)"],
            [],
        ),
        # A cell that raised: its error (type, message, frames), counted.
        ([cell(14, "df['x']", error=KEYERR)], [], [], False, ["1 cell (1 error)", "Error in [14]: KeyError: 'x'", "df['x']"], ["Out["]),
        # Variables new or changed, and names gone.
        (
            [],
            [DF],
            ["old", "a"],
            False,
            ["1 variable, 2 names gone", "Variables new or changed:\n- df: DataFrame 366×4", "Names gone: a, old"],
            ["Cells"],
        ),
        # After a restart: what the kernel holds now; the restart note already says the old names are gone.
        (
            [cell(1, "import pandas as pd")],
            [DF],
            ["old"],
            True,
            ["since the kernel restarted", "Variables in the kernel now:"],
            ["gone", "old"],
        ),
        # Ranges of cells in the heading.
        ([cell(3), cell(4), cell(5), cell(9)], [], [], False, ["Cells the user ran (cells 3-5, 9):"], []),
    ],
)
def test_what_the_note_says(cells, variables, gone, restarted, says, never):
    note = compose(cells, variables, gone, restarted=restarted, budget=4000)
    assert note is not None
    assert note.to_model.startswith("[nbagent note: what the notebook did ") and note.to_model.endswith("]")
    for words in says:
        assert words in note.to_model
    for words in never:
        assert words not in note.to_model
    assert note.left_out == {} and note.budget == 4000 and "Left out" not in note.to_model
    assert note.event() == {"kind": KIND, "to_model": note.to_model, "text": note.text, "budget": 4000, "left_out": {}}


@pytest.mark.parametrize("restarted", [False, True])
def test_nothing_happened_no_note(restarted):
    assert compose([], [], [], restarted=restarted, budget=4000) is None
    assert compose([], [], ["gone_after_restart"], restarted=True, budget=4000) is None  # the restart note says it


@pytest.mark.parametrize("budget", [1000, 2500, 4000, 20_000])
def test_bounded_by_the_budget_with_what_was_left_out(budget):
    cells = [cell(n, f"step_{n} = compute({n})\n" * 20, f"result {n}") for n in range(1, 201)]
    cells[50] = cell(51, "df['x']", error=KEYERR)  # an old error is told before newer cells without one
    variables = [Variable(f"v{n}", f"int {n}") for n in range(1000)]
    gone = [f"gone_{n}" for n in range(300)]
    note = compose(cells, variables, gone, restarted=False, budget=budget)
    assert note is not None and len(note.to_model) <= budget
    assert "Error in [51]: KeyError" in note.to_model
    told_cells = note.to_model.count("\nIn [")
    told_vars = note.to_model.count("\n- v")
    assert note.left_out["cells"] == 200 - told_cells and note.left_out["variables"] == 1000 - told_vars
    assert note.left_out.get("gone", 0) == 300 - sum(f"gone_{n}" in note.to_model for n in range(300))
    assert f"Left out to keep this note under {budget:,} characters: {note.left_out['cells']} cells" in note.to_model
    assert told_cells >= 1 and told_vars >= 1  # neither kind crowds the other out
    assert "200 cells (1 error), 1000 variables, 300 names gone" in note.text


def test_one_huge_cell_is_clipped_not_dropped():
    source = "x = [\n" + "1,\n" * 50_000 + "]"
    note = compose([cell(7, source, "[" + "1, " * 100_000 + "]", None)], [], [], restarted=False, budget=4000)
    assert note is not None and len(note.to_model) < 2000 and note.left_out == {}
    assert "In [7]: x = [" in note.to_model and "more characters]" in note.to_model


def test_a_long_traceback_keeps_its_end():
    error = "ValueError: bad\n" + "".join(f"  frame {n}\n" for n in range(500)) + "ValueError: the last line says it"
    note = compose([cell(2, "f()", error=error)], [], [], restarted=False, budget=4000)
    assert note is not None and "the last line says it" in note.to_model and "characters before]" in note.to_model


@pytest.mark.parametrize(
    ("numbers", "words"),
    [([3], "cell 3"), ([12, 13, 14, 15], "cells 12-15"), ([1, 3, 4, 9], "cells 1, 3-4, 9"), ([5, 5, 4], "cells 4-5")],
)
def test_cell_ranges(numbers, words):
    assert cell_ranges(numbers) == words


@pytest.mark.parametrize(
    ("cells", "variables", "gone", "words"),
    [
        ([cell(1)], [], [], "1 cell"),
        ([cell(1), cell(2, error="E: e")], [DF], [], "2 cells (1 error), 1 variable"),
        ([], [DF, DF], ["a"], "2 variables, 1 name gone"),
    ],
)
def test_counts(cells, variables, gone, words):
    assert counts(cells, variables, gone) == words


@pytest.mark.parametrize(
    ("name", "patterns", "out"),
    [("tmp_1", ["tmp_*"], True), ("df", ["tmp_*"], False), ("raw", ["x", "raw"], True), ("Raw", ["raw"], False), ("a", [], False)],
)
def test_excluded(name, patterns, out):
    assert excluded(name, patterns) is out


def test_views_show_its_first_line_as_the_summary():
    note = compose([cell(3), cell(4, error=KEYERR), cell(5)], [DF, Variable("n", "int 3")], [], restarted=False, budget=4000)
    assert note is not None
    summary, rest = note_summary(note_words(note.to_model))
    assert summary == "what the notebook did since your last turn: 3 cells (1 error), 2 variables."
    assert rest.startswith("Cells the user ran (cells 3-5):") and "- n: int 3" in rest
    assert note_summary("the Jupyter kernel was restarted") == ("the Jupyter kernel was restarted", "")


@pytest.mark.parametrize(
    ("trait", "value", "takes", "error"),
    [
        ("notebook_context", "off", "off", None),
        ("notebook_context", "always", None, "expected any of ['auto', 'off']"),
        ("notebook_context_budget", 1000, 1000, None),
        ("notebook_context_budget", 999, None, "must be from 1,000 to 100,000, not 999"),
        ("notebook_context_budget", 100_001, None, "must be from 1,000 to 100,000, not 100001"),
        ("notebook_context_exclude", ["tmp_*", "raw"], ["tmp_*", "raw"], None),
        ("notebook_context_exclude", ["tmp_*", " "], None, "an empty pattern matches nothing"),
    ],
)
def test_settings(trait, value, takes, error):
    from traitlets import TraitError

    from nbagent.notebook.settings import Agent

    agent = Agent()
    assert (agent.notebook_context, agent.notebook_context_budget, agent.notebook_context_exclude) == ("auto", 4000, [])
    if error is None:
        setattr(agent, trait, value)
        assert getattr(agent, trait) == takes
    else:
        with pytest.raises(TraitError, match=re.escape(error)):
            setattr(agent, trait, value)


@pytest.mark.parametrize(
    ("source", "own"),
    [
        ("%load_ext nbagent", True),
        ("%load_ext nbagent\n%config Agent.tools = ['python']\n", True),
        ("# setup\n%reload_ext nbagent", True),
        ("%load_ext nbagent\nimport pandas as pd", False),
        ("%config InlineBackend.figure_format = 'svg'", False),
        ("", False),
    ],
)
def test_nbagent_own_cells_are_not_news(source, own):
    from nbagent.notebook.notebook_context import nbagent_own

    assert nbagent_own(cell(1, source)) is own


def test_every_view_shows_it_collapsed(tmp_path):
    import io

    import nbagent
    from nbagent.cli import export
    from nbagent.record import events as ev
    from nbagent.render import html, text

    note = compose([cell(3, "1 / 0", error="ZeroDivisionError: division by zero")], [DF], [], restarted=False, budget=4000)
    assert note is not None
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        session.append(ev.NOTE, **note.event())
        session.append(ev.USER_MSG, content="why?")
        session.append(ev.ASSISTANT_MSG, content=[{"type": "text", "text": "You divided by zero."}], stop_reason="end_turn", usage={})
    events = list(nbagent.read_events(tmp_path / "s.jsonl"))
    summary = "what the notebook did since your last turn: 1 cell (1 error), 1 variable."

    page = html.transcript_html(events)
    assert f'<details class="nbagent-note"><summary><span class="nbagent-label">note to the model</span> {summary}</summary>' in page
    assert "Error in [3]: ZeroDivisionError: division by zero" in page and page.count(summary) == 1

    out = io.StringIO()
    text.transcript(events, out, stamps=False)
    assert f"note to the model: {summary}\n    Cells the user ran (cell 3):\n    In [3]: 1 / 0\n" in out.getvalue()

    markdown = export.to_markdown(events)
    assert f"<details><summary>Note to the model: {summary}</summary>\n\n```text\nCells the user ran (cell 3):" in markdown
    cells = [c.source for c in export.to_notebook(events).cells if c.source.startswith("<details>")]
    assert len(cells) == 1 and "- df: DataFrame 366×4" in cells[0]
