"""What nbagent captures of the notebook for the model: the cells run (CellLog) and the variables changed (VariableWatch).

The rules run in-process against IPython's real InteractiveShell; one test reads both through a real kernel.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from typing import Any

import pytest

from nbagent.notebook import cells as cells_mod
from nbagent.notebook.cells import CellLog, error_text, is_agent_cell
from nbagent.notebook.variables import VariableWatch, hidden, secret_name
from nbagent.record import redact

KEY_SHAPED = "sk-ant-api03-" + "Zq7" * 8  # an Anthropic key's shape: redaction knows it


class Counted:
    """A value that counts the calls of its repr and str."""

    calls = 0

    def __repr__(self) -> str:
        Counted.calls += 1
        return "Counted()"

    __str__ = __repr__


class Hostile:
    """A value whose repr and str must never be called by nbagent."""

    called = False

    def __repr__(self) -> str:
        Hostile.called = True
        raise RuntimeError("repr called")

    __str__ = __repr__


@pytest.fixture
def ip() -> Iterator[Any]:
    """IPython's in-process shell, with the names a test adds removed afterwards."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    before = set(shell.user_ns)
    yield shell
    for name in set(shell.user_ns) - before:
        del shell.user_ns[name]


@pytest.fixture
def log(ip: Any) -> Iterator[CellLog]:
    """A CellLog listening to the shell."""
    cell_log = CellLog(ip)
    cell_log.register()
    yield cell_log
    cell_log.unregister()


def run(ip: Any, code: str) -> int:
    """Run a cell as a front end does; its execution count."""
    count = int(ip.execution_count)
    ip.run_cell(code, store_history=True)
    return count


# CellLog ---------------------------------------------------------------------------------------------------
def test_a_cell_its_result_and_an_error(ip: Any, log: CellLog) -> None:
    ok = run(ip, "x = 20\nx + 1")
    bad = run(ip, "def f():\n    return {}['missing']\nf()")
    assert log.get(ok) == cells_mod.CellRun(ok, "x = 20\nx + 1", "21", None)
    failed = log.get(bad)
    assert failed is not None and failed.result is None and failed.error is not None
    lines = failed.error.splitlines()
    assert lines[0] == "KeyError: 'missing'"
    assert lines[-2:] == [f"  In[{bad}], line 3, in <module>: f()", f"  In[{bad}], line 2, in f: return {{}}['missing']"]
    assert "interactiveshell" not in failed.error  # IPython's own frame is left out, as in IPython's tracebacks
    assert [r.count for r in log.since(ok - 1)] == [ok, bad] and log.since(bad) == []
    assert log.between(bad, bad) == [failed] and log.last_error() == failed and log.count == bad


def test_a_syntax_error_is_a_cell_error(ip: Any, log: CellLog) -> None:
    count = run(ip, "1 +")
    run_ = log.get(count)
    assert run_ is not None and run_.error is not None and run_.error.startswith("  File") is False
    assert "SyntaxError" in run_.error


def test_the_result_is_the_text_ipython_made(ip: Any, log: CellLog) -> None:
    Counted.calls = 0
    ip.user_ns["Counted"] = Counted
    count = run(ip, "Counted()")
    assert Counted.calls == 1  # IPython's formatter; CellLog reads the text it stored
    assert log.get(count) == cells_mod.CellRun(count, "Counted()", "Counted()", None)


def test_agent_runs_and_agent_cells_are_not_user_cells(ip: Any) -> None:
    paused = [False]
    log = CellLog(ip, paused=lambda: paused[0])
    log.register()
    try:
        first = run(ip, "%agent what is x?")
        run(ip, "%%agent\nexplain")
        ip.run_cell("hidden_run = 1", store_history=False)  # the python tool's way
        ip.run_cell("silent_run = 1", silent=True)
        paused[0] = True
        run(ip, "while_paused = 1")
        paused[0] = False
        last = run(ip, "user_cell = 1")
    finally:
        log.unregister()
    assert [r.source for r in log.since(first - 1)] == ["user_cell = 1"]
    assert log.count == last


@pytest.mark.parametrize(
    ("source", "agent"),
    [
        ("%agent hi", True),
        ("  %%agent\nbody", True),
        ("\n%agent", True),
        ("%agents = 1", False),
        ("x = 1\n%agent hi", False),
        ("# %agent", False),
    ],
)
def test_is_agent_cell(source: str, agent: bool) -> None:
    assert is_agent_cell(source) is agent


def test_bounded_cells_and_texts(ip: Any) -> None:
    log = CellLog(ip, keep=3)
    log.register()
    try:
        counts = [run(ip, f"{i}") for i in range(5)]
        long = run(ip, "'" + "y" * 10_000 + "'")
    finally:
        log.unregister()
    assert [r.count for r in log.since(0)] == counts[3:] + [long]
    kept = log.get(long)
    assert kept is not None and len(kept.source) < cells_mod.SOURCE_LIMIT + 40 and kept.result is not None
    assert len(kept.result) < cells_mod.RESULT_LIMIT + 40 and kept.result.endswith("more characters]")


def test_error_text_is_bounded_and_never_fails() -> None:
    def deep(n: int) -> None:
        deep(n + 1)

    try:
        deep(0)
    except RecursionError as e:
        text = error_text(e)
    assert text.startswith("RecursionError: maximum recursion depth exceeded") and len(text) <= cells_mod.ERROR_LIMIT
    assert text.count("in deep") <= cells_mod.FRAMES

    class BadStr(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert "str() failed" in error_text(BadStr())
    assert len(error_text(ValueError("z" * 100_000))) <= cells_mod.ERROR_LIMIT


def test_cells_run_before_the_log_come_from_history(ip: Any) -> None:
    earlier = run(ip, "40 + 2")
    failed = run(ip, "1 / 0")
    log = CellLog(ip)
    got = log.get(earlier)
    assert got is not None and got.result == "42" and got.source == "40 + 2"
    err = log.get(failed)
    assert err is not None and err.error is not None and err.error.startswith("ZeroDivisionError: division by zero")
    assert "before nbagent was loaded" in err.error and log.last_error() == err


# VariableWatch ---------------------------------------------------------------------------------------------
def names(found: tuple[list[Any], list[str]]) -> tuple[dict[str, str], list[str]]:
    return {v.name: v.summary for v in found[0]}, found[1]


def test_new_rebound_changed_and_gone(ip: Any) -> None:
    ns = ip.user_ns
    ns.update(kept=1, grows=[1], rebound="a", dropped=2.5)
    watch = VariableWatch(ip)
    changed, gone = names(watch.changes())
    assert {k: changed[k] for k in ("kept", "grows", "rebound", "dropped")} == {
        "kept": "int 1",
        "grows": "list, 1 item of int",
        "rebound": "str 'a'",
        "dropped": "float 2.5",
    }
    watch.mark()
    assert watch.changes() == ([], [])
    ns["grows"].append(2)  # same object, a different summary
    ns["rebound"] = "b"
    ns["new"] = {"k": 1}
    del ns["dropped"]
    changed, gone = names(watch.changes())
    assert changed == {"grows": "list, 2 items of int", "rebound": "str 'b'", "new": "dict, 1 item: keys 'k'"}
    assert gone == ["dropped"]
    watch.mark()
    assert watch.changes() == ([], [])
    for n in range(50):  # an immutable value's summary is reused only for the very same object (ids may be reused)
        big = ns["big"] = int("9" * 30) + n
        assert names(watch.changes())[0]["big"] == f"int {big}"
        watch.mark()
        assert watch.changes() == ([], [])


def test_left_out_names(ip: Any) -> None:
    import json as a_module

    import nbagent

    @nbagent.tool
    def my_tool(x: int) -> int:
        """A tool."""
        return x

    ip.user_ns.update(_private=1, a_module=a_module, my_tool=my_tool, skip_me=1, user_var=1, In2=1)
    watch = VariableWatch(ip, exclude=["skip_*"])
    changed, _ = names(watch.changes())
    assert "user_var" in changed and "In2" in changed
    for name in ("_private", "a_module", "my_tool", "skip_me", "In", "Out", "get_ipython", "exit", "quit"):
        assert name not in changed
        with pytest.raises(KeyError):
            watch.get(name)
    assert watch.get("user_var") == 1


def test_secrets_never_show(ip: Any) -> None:
    held = "hunter2-correct-horse"
    ip.user_ns.update(api_key=held, DB_PASSWORD=b"12345678", hf_token=3, innocent=KEY_SHAPED, config={KEY_SHAPED: 1}, author="Ann")
    watch = VariableWatch(ip)
    changed, _ = names(watch.changes())
    assert changed["api_key"] == "str (value hidden)"
    assert changed["DB_PASSWORD"] == "bytes (value hidden)"
    assert changed["hf_token"] == "int (value hidden)"
    assert changed["innocent"] == "str (value hidden)"  # key-shaped, whatever its name
    assert changed["config"] == "dict (value hidden)"
    assert changed["author"] == "str 'Ann'"
    assert held not in json.dumps(changed) and KEY_SHAPED not in json.dumps(changed)
    assert redact.text(f"x = {held!r}") == f"x = '{redact.REDACTED}'"  # registered: a cell's source is redacted too
    assert hidden("api_key", "v") and hidden("x", KEY_SHAPED) and not hidden("x", "plain")


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("api_key", True),
        ("OPENAI_API_KEY", True),
        ("apikey", True),
        ("db_password", True),
        ("hf_token", True),
        ("client_secret", True),
        ("auth_header", True),
        ("tokenizer", False),
        ("author", False),
        ("df", False),
        ("monkey", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert secret_name(name) is secret


def test_unknown_values_show_their_type_only(ip: Any) -> None:
    Hostile.called = False
    ip.user_ns["thing"] = Hostile()
    changed, _ = names(VariableWatch(ip).changes())
    assert changed["thing"] == "tests.notebook.test_notebook_capture.Hostile" and not Hostile.called


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas is not installed (not in the test extra)")
def test_a_dataframe_column_added_is_a_change(ip: Any) -> None:
    import pandas as pd

    ip.user_ns["df"] = df = pd.DataFrame({"a": range(3)})
    watch = VariableWatch(ip)
    watch.mark()
    df["b"] = 1.5
    changed, _ = names(watch.changes())
    assert changed == {"df": "pandas.DataFrame, 3 rows × 2 columns: 'a' int64, 'b' float64"}


# A real kernel --------------------------------------------------------------------------------------------
SETUP = """
from nbagent.notebook.cells import CellLog
from nbagent.notebook.variables import VariableWatch
_log = CellLog(get_ipython())
_log.register()
_watch = VariableWatch(get_ipython())
"""

READ = """
import json as _json
from nbagent.record import redact as _redact
_vars, _gone = _watch.changes()
print(_redact.text(_json.dumps({"cells": [c.__dict__ for c in _log.since(0)], "vars": {v.name: v.summary for v in _vars}, "gone": _gone})))
"""


@pytest.mark.kernel
def test_in_a_real_kernel(tmp_path: Any) -> None:
    from tests.support.kernels import Kernel

    pandas = importlib.util.find_spec("pandas") is not None
    data = "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})\ndf.shape" if pandas else "df = [1, 2]\nlen(df)"
    with Kernel(tmp_path) as k:
        k.run("before = 1")
        k.run(SETUP)
        k.run(data)
        k.run("api_key = 'hunter2-kernel-secret'")
        status, _ = k.try_run("def g():\n    raise ValueError('bad value')\ng()")
        assert status == "error"
        seen = json.loads(k.run(READ).strip().splitlines()[-1])
    sources = [c["source"] for c in seen["cells"]]
    assert sources[0] == "before = 1" and sources[2] == data
    assert seen["cells"][2]["result"] == ("(2, 2)" if pandas else "2")
    error = seen["cells"][4]["error"]
    assert error.startswith("ValueError: bad value") and "in g: raise ValueError('bad value')" in error
    # the secret's value is not shown, and it is registered, so the log's redaction removes it from the cell's source too
    assert seen["vars"]["api_key"] == "str (value hidden)" and "hunter2" not in json.dumps(seen)
    assert sources[3] == "api_key = '[REDACTED]'"
    assert seen["vars"]["before"] == "int 1"
    if pandas:
        assert seen["vars"]["df"] == "pandas.DataFrame, 2 rows × 2 columns: 'a' int64, 'b' str"
    assert "_log" not in seen["vars"] and "pd" not in seen["vars"]


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas is not installed (not in the test extra)")
def test_the_benchmark_runs_on_tiny_sizes() -> None:
    from benchmarks import notebook_context as bench

    turns, what = bench.bench(runs=3, cells=12, variables=20, rows=100, elements=100)
    assert [len(t.big) for t in turns] == [3, 3] and [len(t.small) for t in turns] == [3, 3] and what
    table = bench.report(turns, what, 3)
    assert table.count("\n| ") == 3  # the header and two turns; no time is asserted
