"""Fields in a request (nbagent/notebook/interpolate.py): the parsing rule as a table, and expansion in an in-process shell."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from nbagent.notebook import interpolate
from nbagent.notebook.cells import CellRun
from nbagent.notebook.interpolate import Field, Notebook, expand, parse

N = Field("name", "df")

PARSED: list[tuple[str, list[Any]]] = [
    ("explain {df}", ["explain ", N]),
    ("{df}{df}", [N, N]),
    ("cost $5 and $x", ["cost $5 and $x"]),  # IPython's $ expansion is off; nbagent has none
    ("{In[3]} and {Out[12]}", [Field("In", "In", 3), " and ", Field("Out", "Out", 12)]),
    ("why {Err}?", ["why ", Field("Err", "Err"), "?"]),
    ("{Err[4]}", [Field("Err", "Err", 4)]),
    ("{In[007]}", [Field("In", "In", 7)]),
    ("{dé_2}", [Field("name", "dé_2")]),
    # {{ is a literal {, and a }} after it a literal }
    ("{{df}}", ["{df}"]),
    ("{{", ["{"]),
    ("{{{df}}}", ["{", N, "}"]),
    ("}}", ["}}"]),  # no {{ before it: as written
    # Anything else in braces is left as written: nothing is evaluated
    ("d = {'a': {'b': 1}}", ["d = {'a': {'b': 1}}"]),
    ('{"k": [1, 2]}', ['{"k": [1, 2]}']),
    ("{x + 1}", ["{x + 1}"]),
    ("{ df }", ["{ df }"]),
    ("{df.shape}", ["{df.shape}"]),
    ("{df[0]}", ["{df[0]}"]),
    ("{df!r}", ["{df!r}"]),
    ("{df:>10}", ["{df:>10}"]),
    ("{In[-1]}", ["{In[-1]}"]),
    ("{In[x]}", ["{In[x]}"]),
    ("{2x}", ["{2x}"]),
    ("{if} {None}", ["{if} {None}"]),
    ("{}", ["{}"]),
    ("{df", ["{df"]),
    ("df}", ["df}"]),
    ("", []),
]


@pytest.mark.parametrize(("template", "pieces"), PARSED)
def test_parse(template: str, pieces: list[Any]) -> None:
    assert parse(template) == pieces


@pytest.mark.parametrize("template", ["{In}", "{Out} now"])
def test_in_or_out_without_a_count_is_a_usage_error(template: str) -> None:
    with pytest.raises(UsageError, match=r"needs an execution count"):
        parse(template)


# Expansion against a notebook given as tables -------------------------------------------------------------------
CELLS = {
    3: CellRun(3, "x = 1\ny = 2", None, None),
    4: CellRun(4, "x + y", "3", None),
    5: CellRun(5, "d['k']", None, "KeyError: 'k'\n  Cell In[5], line 1"),
    6: CellRun(6, "print('```')", None, None),
}
VALUES = {"poet": ("Walt Whitman", "str 'Walt Whitman'"), "df": ("df (pandas.DataFrame, 3 rows)", "pandas.DataFrame, 3 rows")}


def table_notebook(cells: dict[int, CellRun] = CELLS, last_error: CellRun | None = CELLS[5]) -> Notebook:
    def variable(name: str) -> tuple[str, str]:
        return VALUES[name]

    return Notebook(variable, cells.get, lambda: last_error)


EXPANDED = [
    ("write like {poet}", "write like Walt Whitman"),
    ("explain {df}", "explain df (pandas.DataFrame, 3 rows)"),
    ("compare {In[3]} and {In[4]}", "compare In[3]:\n```python\nx = 1\ny = 2\n```\n and In[4]:\n```python\nx + y\n```\n"),
    ("{Out[4]}", "Out[4]:\n```\n3\n```\n"),
    ("{In[6]}", "In[6]:\n````python\nprint('```')\n````\n"),  # the fence is longer than any run of backticks inside
    (
        "why {Err}?",
        "why In[5], which raised an error:\n```python\nd['k']\n```\nIts error:\n```\nKeyError: 'k'\n  Cell In[5], line 1\n```\n?",
    ),
    ("{{poet}} is {poet}", "{poet} is Walt Whitman"),
    ("cost $5 {x + 1}", "cost $5 {x + 1}"),
]


@pytest.mark.parametrize(("template", "text"), EXPANDED)
def test_expand(template: str, text: str) -> None:
    assert expand(template, table_notebook()).text == text


@pytest.mark.parametrize(
    ("template", "named"),
    [
        ("explain {frame}", r"\{frame\}: there is no variable frame"),
        ("{In[99]}", r"\{In\[99\]\}: there is no cell \[99\]"),
        ("{Out[3]}", r"\{Out\[3\]\}: cell \[3\] has no result"),
        ("{Err[4]}", r"\{Err\[4\]\}: cell \[4\] raised no error"),
        ("{poet} then {nope}", r"\{nope\}"),  # every field is checked before any is used
    ],
)
def test_an_unknown_field_is_a_usage_error_naming_it(template: str, named: str) -> None:
    with pytest.raises(UsageError, match=named) as raised:
        expand(template, table_notebook())
    assert "{{" in str(raised.value)  # says how to write a literal brace


def test_err_without_any_error_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="no cell has raised an error"):
        expand("why {Err}", table_notebook(last_error=None))
    prepared = interpolate.prepare(interpolate.fix_request(""), table_notebook(last_error=None), fix=True)
    assert prepared.problem is not None and str(prepared.problem) == interpolate.NO_ERROR and prepared.text == prepared.template


def test_meta_keeps_the_template_and_what_each_field_became() -> None:
    done = expand("explain {df} and {In[3]}", table_notebook())
    assert done.meta() == {
        "template": "explain {df} and {In[3]}",
        "expanded": [["{df}", "pandas.DataFrame, 3 rows"], ["{In[3]}", "the code of cell [3] (2 lines)"]],
    }
    assert expand("plain words", table_notebook()).meta() == {}
    assert expand("{{literal}}", table_notebook()).meta() == {"template": "{{literal}}"}


def test_the_panel_says_what_the_fields_became() -> None:
    from nbagent.render import html

    meta = {"request": "explain {df}", **expand("explain {df} and {In[3]}", table_notebook()).meta()}
    shown = html.event_html({"type": "user_msg", "seq": 1, "content": "explain df (...)", "meta": meta})
    assert "expanded</span> {df} → pandas.DataFrame, 3 rows, {In[3]} → the code of cell [3] (2 lines)</div>" in shown
    assert "expanded</span>" not in html.event_html({"type": "user_msg", "seq": 1, "content": "hi", "meta": {"request": "hi"}})
    hostile = {"type": "user_msg", "seq": 1, "content": "x", "meta": {"expanded": [["{x}", "<script>alert(1)</script>"], "odd"]}}
    assert "<script>" not in html.event_html(hostile)


def test_a_request_is_bounded() -> None:
    big = {n: CellRun(n, "x = 1\n" * 5_000, None, None) for n in range(1, 10)}
    done = expand(" ".join(f"{{In[{n}]}}" for n in big), table_notebook(big))
    assert len(done.text) <= interpolate.BUDGET + 9 * 100
    assert "more characters not shown" in done.text  # each cell clipped to CELL_LIMIT
    assert "left out, this request's fields are over 20,000 characters" in done.text


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [
        ("poet", "Walt Whitman", "Walt Whitman"),
        ("n", 3, "3"),
        ("rate", 0.25, "0.25"),
        ("ok", True, "True"),
        ("big", 2**200, "big (SUMMARY)"),
        ("items", [1, 2], "items (SUMMARY)"),
        ("api_key", "abcdef", "api_key (SUMMARY)"),  # secret: the summary only, which hides the value
    ],
)
def test_value_text(name: str, value: object, text: str) -> None:
    assert interpolate.value_text(name, value, "SUMMARY", name == "api_key")[0] == text


def test_a_long_string_is_clipped_and_says_so() -> None:
    text, _ = interpolate.value_text("essay", "word " * 10_000, "str, 50,000 chars", False)
    assert text.startswith("essay (str, 50,000 characters, clipped):\n") and len(text) < interpolate.VALUE_LIMIT + 200


def test_history_cell_reads_ipython_history(tmp_path: Path) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_cell("1 + 41", store_history=True)
    count = shell.execution_count - 1
    cell = interpolate.history_cell(shell, count)
    assert cell is not None and cell.source.strip() == "1 + 41" and cell.result == "42"
    assert interpolate.history_cell(shell, count + 5) is None and interpolate.history_cell(shell, 0) is None


# Expansion in an in-process shell, through the real CellLog and VariableWatch -----------------------------------
class Hostile:
    """A value whose repr must never be called: it would take ten seconds and then raise."""

    def __repr__(self) -> str:
        import time

        time.sleep(10)
        raise RuntimeError("repr called")

    __str__ = __repr__


@pytest.fixture
def kernel_like() -> Any:
    """An InteractiveShell with a CellLog and a VariableWatch following it, as the magics keep them."""
    from IPython.core.interactiveshell import InteractiveShell

    from nbagent.notebook.cells import CellLog
    from nbagent.notebook.variables import VariableWatch

    shell = InteractiveShell.instance()
    cells = CellLog(shell)
    cells.register()
    yield shell, interpolate.kernel_notebook(shell, cells, VariableWatch(shell))
    cells.unregister()
    for name in ("df", "poet", "api_key", "note", "odd", "n"):
        shell.user_ns.pop(name, None)


SECRET = "sk-ant-api03-" + "K" * 93 + "AA"


def test_expansion_in_a_shell(kernel_like: Any) -> None:
    shell, notebook = kernel_like
    shell.run_cell("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3], 'b': ['x', 'y', 'z']})", store_history=True)
    shell.run_cell(f"poet = 'Walt Whitman'\nn = 12\napi_key = {SECRET!r}\nnote = 'uses ' + api_key", store_history=True)
    shell.user_ns["odd"] = Hostile()
    failing = shell.execution_count
    assert not shell.run_cell("df['c']", store_history=True).success
    shell.run_cell("n * 2", store_history=True)
    done = expand("{df} {poet} {n} {odd} {api_key} {note} | {Err} | {Out[" + str(failing + 1) + "]}", notebook)
    assert done.text.startswith("df (pandas.DataFrame, 3 rows × 2 columns: 'a' int64, 'b' ")
    assert ") Walt Whitman 12 odd (tests.notebook.test_interpolate.Hostile) " in done.text  # its type only: no repr called
    assert "api_key (str (value hidden))" in done.text and "note (str (value hidden))" in done.text and SECRET not in done.text
    assert f"In[{failing}], which raised an error:\n```python\ndf['c']\n```\nIts error:\n```\nKeyError: 'c'" in done.text
    assert done.text.endswith(f"Out[{failing + 1}]:\n```\n24\n```\n")
    with pytest.raises(UsageError, match="there is no variable pd"):  # a module is not a variable
        expand("{pd}", notebook)
