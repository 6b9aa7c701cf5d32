"""The notebook tools (notebook_history, inspect_variable, read_notebook): their answers in an in-process shell, offering
them beside the built-in tools, an older session continued with them, and a real kernel whose model calls each one."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import nbformat
import pytest
from IPython.core.interactiveshell import InteractiveShell

import nbagent
from nbagent.notebook import build
from nbagent.notebook import notebook_tools as nt
from nbagent.notebook.cells import CellLog
from nbagent.notebook.notebook_context import NotebookContext
from nbagent.notebook.settings import Agent
from nbagent.notebook.variables import BUDGET, UNREAD, VariableWatch, _changed
from nbagent.record import events as ev
from nbagent.state import binding
from nbagent.tools.decorator import Tool
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use
from tests.support.kernels import Kernel, kernel_env

SONNET = "claude-sonnet-5-5"
KEY = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8" * 5 + "-abcdefAA"  # key-shaped: redaction finds it by its shape


@pytest.fixture
def ip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    """An in-process shell with a fresh namespace in its own folder, its notebook path unknown."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    shell = InteractiveShell.instance()
    saved = dict(shell.user_ns)
    for name in [n for n in shell.user_ns if not n.startswith("_") and n not in ("In", "Out", "get_ipython", "exit", "quit")]:
        del shell.user_ns[name]
    shell.user_ns.pop("__session__", None)
    yield shell
    shell.user_ns.clear()
    shell.user_ns.update(saved)


@pytest.fixture
def tools(ip: InteractiveShell) -> Iterator[dict[str, Tool]]:
    """The three tools bound to ``ip``, with a CellLog following its cells from now on."""
    cells = CellLog(ip)
    cells.register()
    try:
        yield {t.name: t for t in nt.notebook_tools(ip, cells, VariableWatch(ip))}
    finally:
        cells.unregister()


def call(tool: Tool, **arguments: Any) -> tuple[str, bool]:
    """What the model gets from a call: the result's text and whether it is an error (as the loop invokes tools)."""
    content, is_error = tool.invoke(arguments, "key")
    assert isinstance(content, str)
    return content, is_error


def cell(ip: InteractiveShell, code: str) -> int:
    """Run a user cell (stored in the history, as a notebook runs it); its execution count."""
    count = ip.execution_count
    ip.run_cell(code, store_history=True)
    return count


# notebook_history ---------------------------------------------------------------------------------------------
def test_history_shows_each_cell_with_its_result_and_error(ip: InteractiveShell, tools: dict[str, Tool]) -> None:
    first = cell(ip, "x = 41")
    cell(ip, "x + 1")
    failed = cell(ip, "{}['missing']")
    out, is_error = call(tools[nt.HISTORY], first=first)
    assert not is_error
    assert f"In [{first}]:\nx = 41" in out
    assert f"In [{first + 1}]:\nx + 1\nOut[{first + 1}]:\n42" in out
    assert f"Error in In [{failed}]:" in out and "KeyError: 'missing'" in out
    only, _ = call(tools[nt.HISTORY], first=first + 1, last=first + 1)
    assert "x + 1" in only and "x = 41" not in only and "missing" not in only


def test_history_is_bounded_and_says_what_it_left_out(ip: InteractiveShell, tools: dict[str, Tool]) -> None:
    first = cell(ip, "'a' * 3000")
    for n in range(nt.MAX_CELLS + 10):
        cell(ip, f"y{n} = {n}")
    out, _ = call(tools[nt.HISTORY], first=first)
    assert len(out) <= nt.MAX_CHARS + 500
    assert len(re.findall(r"^In \[\d+\]:$", out, re.MULTILINE)) == nt.MAX_CELLS
    assert "more cells, from In [" in out and f"call notebook_history(first={first + nt.MAX_CELLS})" in out


def test_history_names_the_latest_count_for_a_range_past_it(ip: InteractiveShell, tools: dict[str, Tool]) -> None:
    latest = cell(ip, "z = 1")
    out, is_error = call(tools[nt.HISTORY], first=latest + 50)
    assert is_error and f"No cell has execution count {latest + 50} yet: the latest is {latest}." in out
    out, is_error = call(tools[nt.HISTORY], first=5, last=2)
    assert is_error and "first <= last" in out


def test_history_redacts_a_key_in_a_cell(ip: InteractiveShell, tools: dict[str, Tool]) -> None:
    first = cell(ip, f"print('{KEY}')")
    out, _ = call(tools[nt.HISTORY], first=first)
    assert KEY not in out and "[REDACTED]" in out


# inspect_variable ---------------------------------------------------------------------------------------------
def test_inspect_a_million_row_dataframe_is_bounded(ip: InteractiveShell, tools: dict[str, Tool]) -> None:
    pd = pytest.importorskip("pandas")
    np = pytest.importorskip("numpy")
    rows = 1_000_000
    values = np.arange(rows, dtype=float)
    values[::10] = np.nan
    ip.user_ns["df"] = pd.DataFrame({"price": values, "qty": np.arange(rows) % 7, "city": ["Oslo", "Lima"] * (rows // 2)})
    started = time.perf_counter()
    out, is_error = call(tools[nt.INSPECT], name="df")
    print(f"\ninspect_variable on a {rows:,}-row DataFrame: {(time.perf_counter() - started) * 1000:.0f} ms, {len(out):,} characters")
    assert not is_error and len(out) <= nt.MAX_CHARS + 100
    assert out.startswith("df: ") and "1,000,000 rows" in out
    assert "'price'  float64  100,000" in out  # dtypes and null counts
    assert "describe():" in out and "mean" in out and "first 5 rows:" in out and "Oslo" in out


def test_inspect_never_calls_the_repr_of_an_unknown_type(ip: InteractiveShell, tools: dict[str, Tool]) -> None:
    called: list[str] = []

    class Slow:
        def __init__(self) -> None:
            self.size = 3

        def __repr__(self) -> str:
            called.append("repr")
            time.sleep(10)
            raise RuntimeError("never")

        __str__ = __repr__

    ip.user_ns["thing"] = Slow()
    ip.user_ns["things"] = [Slow(), Slow()]
    out, is_error = call(tools[nt.INSPECT], name="thing")
    assert not is_error and "Slow" in out and "size: int 3" in out, out
    out, is_error = call(tools[nt.INSPECT], name="things")
    assert not is_error and "list, 2 items" in out
    assert called == []


def test_inspect_an_unknown_name_is_an_error_naming_close_ones(ip: InteractiveShell, tools: dict[str, Tool]) -> None:
    ip.user_ns.update(sales=1, sales2=2, _sales=3, other=4)
    out, is_error = call(tools[nt.INSPECT], name="sale")
    assert is_error and "No user variable named 'sale'" in out
    assert "Close names: sales, sales2." in out  # never a private name
    out, is_error = call(tools[nt.INSPECT], name="json")  # a module is not a user variable
    ip.user_ns["json"] = json
    out, is_error = call(tools[nt.INSPECT], name="json")
    assert is_error and "No user variable named 'json'" in out


def test_inspect_hides_a_secret(ip: InteractiveShell, tools: dict[str, Tool]) -> None:
    ip.user_ns.update(api_key="hunter2-is-my-password", note=f"my key is {KEY}", config={"token": KEY})
    out, is_error = call(tools[nt.INSPECT], name="api_key")
    assert not is_error and "hunter2" not in out and "hidden" in out
    out, _ = call(tools[nt.INSPECT], name="note")
    assert KEY not in out
    out, _ = call(tools[nt.INSPECT], name="config")
    assert KEY not in out


def test_inspect_leaves_out_the_names_the_user_excluded(ip: InteractiveShell) -> None:
    ip.user_ns.update(raw_data=[1, 2], data=[3])
    inspect = {t.name: t for t in nt.notebook_tools(ip, CellLog(ip), VariableWatch(ip), ["raw_*"])}[nt.INSPECT]
    out, is_error = call(inspect, name="raw_data")
    assert is_error and "Agent.notebook_context_exclude" in out
    out, is_error = call(inspect, name="rawdata")
    assert is_error and "raw_data" not in out


def test_inspect_hides_values_under_secret_names_inside_a_value(ip: InteractiveShell, tools: dict[str, Tool]) -> None:
    class Conn:
        def __init__(self) -> None:
            self.host, self.password = "db.internal", "hunter2-conn"

    ip.user_ns.update(cfg={"host": "db.internal", "db_password": "hunter2-cfg"}, conn=Conn())
    for name in ("cfg", "conn"):
        out, is_error = call(tools[nt.INSPECT], name=name)
        assert not is_error and "db.internal" in out and "(value hidden)" in out and "hunter2" not in out, out


# The variables' summaries: a time budget per snapshot (issue 33, item 11) -----------------------------------------
@pytest.mark.parametrize(
    ("before", "now", "news"),
    [
        (None, (1, "int 1"), True),  # new
        ((1, "int 1"), (2, "int 1"), True),  # bound to another object
        ((1, "list, 1 item"), (1, "list, 2 items"), True),  # the same object, changed
        ((1, "list, 1 item"), (1, "list, 1 item"), False),
        ((1, f"list {UNREAD}"), (1, "list, 2 items"), False),  # not summarised then: can't tell, not told
        ((1, "list, 1 item"), (1, f"list {UNREAD}"), False),
        ((1, f"list {UNREAD}"), (2, f"list {UNREAD}"), True),
    ],
)
def test_what_counts_as_a_change(before: tuple[int, str] | None, now: tuple[int, str], news: bool) -> None:
    assert _changed(before, now) is news


def test_summaries_stop_at_the_time_budget_and_the_note_says_so(ip: InteractiveShell) -> None:
    context = NotebookContext(ip)
    ip.user_ns.update({f"v{i}": [i] * i for i in range(30)})
    context.variables.budget = -1.0  # spent before the first summary
    note = context.gather(Agent(), restarted=False)
    assert note is not None and "list, " not in note.to_model
    # the note may leave some out to keep under its size (the shared shell holds other tests' cells): those it shows are unread
    assert note.to_model.count(f"list {UNREAD}") + note.left_out.get("variables", 0) == 30
    context.variables.budget = BUDGET
    context.mark()
    ip.user_ns["v1"].append(1)
    ip.user_ns["late"] = 1
    note = context.gather(Agent(), restarted=False)
    assert note is not None and "- v1: list, 2 items of int" in note.to_model and "- late: int 1" in note.to_model
    assert "v2" not in note.to_model


# read_notebook ------------------------------------------------------------------------------------------------
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()


def saved_notebook(path: Path) -> Path:
    """A notebook as Jupyter saves it: markdown, a cell run with a stream, a result, an image and an error, a cell never run."""
    v4 = nbformat.v4
    nb = v4.new_notebook(
        cells=[
            v4.new_markdown_cell("# Sales in 2024\nWhere the *money* went."),
            v4.new_code_cell(
                "import pandas as pd\nprint('loaded')\ndf",
                execution_count=3,
                outputs=[
                    v4.new_output("stream", name="stdout", text="loaded\n"),
                    v4.new_output("execute_result", data={"text/plain": "   a\n0  1", "text/html": "<table/>"}, execution_count=3),
                    v4.new_output("display_data", data={"image/png": PNG, "text/plain": "<Figure size 640x480 with 1 Axes>"}),
                    v4.new_output("error", ename="KeyError", evalue="'region'", traceback=["\x1b[31mKeyError\x1b[0m: 'region'"]),
                ],
            ),
            v4.new_code_cell(f"plot(df)  # {KEY}"),
        ]
    )
    nbformat.write(nb, path)
    return path


def test_read_notebook_shows_the_saved_document(ip: InteractiveShell, tools: dict[str, Tool], tmp_path: Path) -> None:
    ip.user_ns["__session__"] = str(saved_notebook(tmp_path / "sales.ipynb"))
    out, is_error = call(tools[nt.READ])
    assert not is_error
    assert out.startswith("Notebook sales.ipynb, as last saved at ")
    assert "[cell 1 · markdown]\n# Sales in 2024\nWhere the *money* went." in out
    assert "[cell 2 · code · In [3]]\nimport pandas as pd" in out
    assert "loaded\n   a\n0  1\n<Figure size 640x480 with 1 Axes>\n[image/png]\nKeyError: 'region'" in out
    assert "[cell 3 · code · never run]\nplot(df)" in out
    assert KEY not in out and "<table/>" not in out and "\x1b" not in out


def test_read_notebook_without_a_known_path_says_so(ip: InteractiveShell, tools: dict[str, Tool]) -> None:
    out, is_error = call(tools[nt.READ])
    assert not is_error and out == nt.NO_PATH


def test_read_notebook_follows_no_link_and_is_bounded(ip: InteractiveShell, tools: dict[str, Tool], tmp_path: Path) -> None:
    target = saved_notebook(tmp_path / "real.ipynb")
    (tmp_path / "link.ipynb").symlink_to(target)
    ip.user_ns["__session__"] = str(tmp_path / "link.ipynb")
    out, is_error = call(tools[nt.READ])
    assert is_error and "symbolic link" in out
    big = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"section {n}\n" + "text " * 400) for n in range(200)])
    nbformat.write(big, tmp_path / "big.ipynb")
    ip.user_ns["__session__"] = str(tmp_path / "big.ipynb")
    out, _ = call(tools[nt.READ])
    assert len(out) <= nt.MAX_CHARS + 200 and "left out: over 20,000 characters]" in out and "200 cells" in out


# Offered beside the built-in tools ------------------------------------------------------------------------------
def test_offered_with_the_builtin_tools_in_a_notebook_only(ip: InteractiveShell) -> None:
    context = NotebookContext(ip)
    offered = {t.name: t for t in build.tools(ip, Agent(), context)}
    assert set(nt.NAMES) <= set(offered) and all(offered[n].effect == "read" for n in nt.NAMES)
    assert not set(nt.NAMES) & {t.name for t in build.tools(ip, Agent())}  # no notebook context: not offered
    assert not set(nt.NAMES) & {t.name for t in build.tools(ip, Agent(tools=["python"]), context)}
    for name in nt.NAMES:
        assert len(offered[name].to_dict()["description"]) > 200  # what the model reads to choose a tool


def look(n: int = 0) -> str:
    """Look at something."""
    return f"result {n}"


def test_an_older_session_continues_with_more_tools(fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path) -> None:
    """A session whose thinking was bound to fewer tools (before an upgrade added the notebook tools) goes on: its thinking
    blocks are left out, with a note, where the request can't ask the API to drop them (Sonnet 5.5, thinking "off")."""
    path = tmp_path / "s.jsonl"
    fake.script(tool_use("look", {"n": 1}), text("first"), text("second"))
    with nbagent.Session.open(path) as session:
        nbagent.run(session, "look", tools=[look], client=client, model=SONNET, thinking="off")
        assert binding.has_thinking(session.messages)
    with nbagent.Session.open(path) as session:
        more = [look, Tool(nt.read, effect="read", name=nt.READ, description=nt.READ_DESCRIPTION)]
        assert nbagent.run(session, "go on", tools=more, client=client, model=SONNET, thinking="off") == "second"
        assert [e for e in session.events() if e["type"] == ev.MODEL_ERROR] == []
        assert [e["kind"] for e in session.events() if e["type"] == ev.NOTE] == [binding.NOTE_KIND]
        contexts = [e for e in session.events() if e["type"] == ev.CONTEXT]
        assert contexts[0]["prefix"] != contexts[-1]["prefix"]
    with nbagent.Session.open(path) as session:  # the same tools again: nothing more is left out
        fake.script(text("third"))
        assert nbagent.run(session, "again", tools=more, client=client, model=SONNET, thinking="off") == "third"
        assert len([e for e in session.events() if e["type"] == ev.CONTEXT]) == 2


@pytest.mark.parametrize(
    ("old_model", "recorded", "new", "carried", "drops"),
    [
        (SONNET, "aaaa", "bbbb", False, True),  # tools changed, between_tools: the fold leaves the blocks out
        (SONNET, "", "bbbb", False, True),  # never recorded (an older session): its tools may have differed
        (SONNET, "aaaa", "aaaa", False, False),
        (SONNET, "aaaa", "bbbb", True, False),  # the request asks the API to drop what no longer fits
        ("claude-haiku-4-5", "aaaa", "bbbb", False, False),  # the model does not bind its thinking
        ("", "", "bbbb", False, False),  # the first request
    ],
)
def test_a_changed_start_drops_bound_thinking_only_where_needed(
    old_model: str, recorded: str, new: str, carried: bool, drops: bool
) -> None:
    assert binding.prefix_drops(old_model, recorded, new, carried) is drops


def test_the_fingerprint_follows_the_system_prompt_and_tools() -> None:
    tools = [Tool(look).to_dict()]
    assert binding.prefix("be brief", tools) == binding.prefix("be brief", [dict(reversed(list(tools[0].items())))])
    assert binding.prefix("be brief", tools) != binding.prefix("be kind", tools)
    assert binding.prefix("be brief", tools) != binding.prefix("be brief", [*tools, Tool(nt.read, name=nt.READ).to_dict()])


# A real kernel ----------------------------------------------------------------------------------------------------
@pytest.mark.kernel
@pytest.mark.slow
def test_the_model_calls_each_tool_in_a_real_kernel(fake: FakeAnthropic, tmp_path: Path) -> None:
    notebook = saved_notebook(tmp_path / "sales.ipynb")
    fake.script(
        tool_use(nt.HISTORY, {"first": 1}),
        tool_use(nt.INSPECT, {"name": "df"}),
        tool_use(nt.INSPECT, {"name": "dff"}),
        tool_use(nt.READ, {}),
        text("Looked."),
    )
    with Kernel(tmp_path, kernel_env(fake.base_url, JPY_SESSION_NAME=str(notebook))) as kernel:
        kernel.run("%load_ext nbagent")
        kernel.run("import pandas as pd\ndf = pd.DataFrame({'price': [1.5, None, 3.0], 'city': ['Oslo', 'Lima', 'Rome']})")
        status, _ = kernel.try_run("df['region']")
        assert status == "error"
        kernel.run("%agent what is going on?")
    results = {
        block["tool_use_id"]: block
        for message in fake.requests[-1].body["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    }
    calls = [
        block
        for message in fake.requests[-1].body["messages"]
        if message["role"] == "assistant"
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]
    history, inspected, unknown, read = (results[c["id"]] for c in calls)
    text_of = lambda r: r["content"] if isinstance(r["content"], str) else "".join(b.get("text", "") for b in r["content"])  # noqa: E731
    assert "df = pd.DataFrame(" in text_of(history) and "KeyError: 'region'" in text_of(history)
    assert "3 rows × 2 columns" in text_of(inspected) and "'price'  float64  1" in text_of(inspected)
    assert unknown.get("is_error") and "Close names: df." in text_of(unknown)
    assert "Notebook sales.ipynb, as last saved at" in text_of(read) and "# Sales in 2024" in text_of(read)
    tools = {t["name"] for t in fake.requests[-1].body["tools"]}
    assert set(nt.NAMES) <= tools
