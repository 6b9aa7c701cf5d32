"""Fields in a request and ``%agent --fix`` in real ipykernels (jupyter_client) against the fake API: what is sent and logged."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent.record import events as ev
from nbagent.stores import folders as store
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use
from tests.support.kernels import Kernel, kernel_env

pytestmark = [pytest.mark.kernel, pytest.mark.slow]

SETUP = "%load_ext nbagent\n%config Agent.tools = ['python']"
DATA = "import pandas as pd\ndf = pd.DataFrame({'region': ['north', 'south', 'east'], 'units': [3, 4, 5]})"
SECRET = "sk-ant-api03-" + "K" * 93 + "AA"  # key-shaped: redaction knows it
PLAIN_SECRET = "correct-horse-battery-staple"  # not key-shaped: only its name says it is a secret


@pytest.fixture
def kernel(tmp_path: Path, fake: FakeAnthropic) -> Iterator[Kernel]:
    """A real kernel in ``tmp_path`` for a notebook ``work.ipynb``, nbagent loaded, the API at the fake."""
    with Kernel(tmp_path, kernel_env(fake.base_url, JPY_SESSION_NAME=str(tmp_path / "work.ipynb"))) as started:
        started.run(SETUP, "setup")
        yield started


def request_text(request: Any) -> str:
    """The user's own words in a request's last message (after any notes nbagent puts in front)."""
    content = request.body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return [b["text"] for b in content if b.get("type") == "text"][-1]


def sent(fake: FakeAnthropic) -> str:
    """Every byte sent to the API so far."""
    return "".join(r.raw.decode() for r in fake.requests)


def user_msgs(tmp_path: Path) -> list[ev.Event]:
    [stored] = store.list_sessions(tmp_path / ".nbagent" / "work.ipynb")
    return [e for e in nbagent.read_events(stored.path) if e["type"] == ev.USER_MSG]


def log_text(tmp_path: Path) -> str:
    return "".join(p.read_text() for p in (tmp_path / ".nbagent").rglob("*.jsonl"))


def count_of(kernel: Kernel, code: str) -> int:
    """Run ``code`` in a cell and return that cell's execution count."""
    _, reply = kernel.execute(code)
    return int(reply["content"]["execution_count"])


def test_fields_are_expanded_and_dollars_are_kept(kernel: Kernel, fake: FakeAnthropic, tmp_path: Path) -> None:
    kernel.run(DATA)
    n = count_of(kernel, "x = 7\ntotal = df.units.sum()")
    out = count_of(kernel, "x * 6")
    fake.script(text("ok"), text("ok"))
    template = f"explain {{df}}: cost $5, $x, {{{{literal}}}} and {{x+1}}; see {{In[{n}]}} and {{Out[{out}]}}"
    messages, _ = kernel.execute("%agent " + template)
    said = request_text(fake.requests[-1])
    shown = [m["content"]["data"].get("text/html", "") for m in messages if m["msg_type"] == "update_display_data"]
    assert any("expanded</span> {df} → pandas.DataFrame, 3 rows × 2 columns" in html for html in shown)  # the panel says it
    assert said.startswith("explain df (pandas")
    for words in ("3 rows × 2 columns", "region", "units", "cost $5, $x, {literal} and {x+1}; see "):
        assert words in said, (words, said)
    assert f"In[{n}]:\n```python\nx = 7\ntotal = df.units.sum()\n```\n" in said
    assert f"Out[{out}]:\n```\n42\n```\n" in said
    [logged] = user_msgs(tmp_path)
    assert logged["content"] == said  # what is logged is what was sent
    meta = logged["meta"]
    assert meta["request"] == meta["template"] == template  # a rerun cell is matched by its own text
    assert [field for field, _ in meta["expanded"]] == ["{df}", f"{{In[{n}]}}", f"{{Out[{out}]}}"]
    # A %%agent cell: IPython expands neither its line nor its body; the body's fields are nbagent's
    kernel.run("%%agent cost $x\nfor {x} units, {{ok}}")
    assert request_text(fake.requests[-1]) == "cost $x\nfor 7 units, {ok}"


def test_an_unknown_field_is_a_usage_error_and_nothing_is_sent_or_logged(kernel: Kernel, fake: FakeAnthropic, tmp_path: Path) -> None:
    for cell in ("%agent explain {frame}", "%%agent\nexplain {frame}", "%agent see {In[99]}", "%agent why {Err}", "%agent {In}"):
        status, shown = kernel.try_run(cell)
        assert status == "error" and "UsageError" in shown, shown
        named = cell.split("{")[1].split("}")[0]
        assert "{" + named + "}" in shown
    assert fake.requests == [] and not (tmp_path / ".nbagent").exists()
    # Nor on a session that exists: nothing new is logged
    fake.script(text("ok"))
    kernel.run("%agent hello")
    before = user_msgs(tmp_path)
    assert kernel.try_run("%agent and {frame}")[0] == "error"
    assert user_msgs(tmp_path) == before and len(fake.requests) == 1


def test_a_secret_variable_never_reaches_the_request_or_the_log(kernel: Kernel, fake: FakeAnthropic, tmp_path: Path) -> None:
    kernel.run(f"api_key = {SECRET!r}\npassword = {PLAIN_SECRET!r}\nnote = 'uses ' + api_key")
    fake.script(text("ok"))
    kernel.run("%agent check {api_key}, {password} and {note}")
    said = request_text(fake.requests[-1])
    assert said.startswith("check api_key (") and "password (" in said
    for value in (SECRET, PLAIN_SECRET):
        assert value not in sent(fake) and value not in log_text(tmp_path)


def test_err_brings_the_failing_cell_and_its_error(kernel: Kernel, fake: FakeAnthropic) -> None:
    kernel.run(DATA)
    status, _ = kernel.try_run("df['price'].sum()")
    assert status == "error"
    fake.script(text("The column is 'units'."))
    kernel.run("%agent why did {Err} happen?")
    said = request_text(fake.requests[-1])
    assert said.startswith("why did In[") and "```python\ndf['price'].sum()\n```" in said and "KeyError" in said and "'price'" in said


def test_fix_sends_the_most_recent_error_and_the_users_words(kernel: Kernel, fake: FakeAnthropic, tmp_path: Path) -> None:
    status, shown = kernel.try_run("%agent --fix")
    assert status == "error" and "No cell has raised an error in this kernel yet" in shown
    assert fake.requests == [] and not (tmp_path / ".nbagent").exists()
    kernel.run("values = [1, 2, 3]")
    assert kernel.try_run("values[3] + 1")[0] == "error"
    kernel.run("fine = 1\n%config Agent.approval = 'auto'")  # a later cell that did not raise: the error is still the latest
    fake.script(tool_use("python", {"code": "fixed = values[2] + 1\nfixed"}), text("Index 3 is past the end; use values[2]."))
    assert "past the end" in kernel.run("%agent -f keep it short")
    said = request_text(fake.requests[0])
    assert said.startswith("Explain the error below and fix it")
    assert "```python\nvalues[3] + 1\n```" in said and "IndexError" in said and said.endswith("\nkeep it short")
    [logged] = user_msgs(tmp_path)
    assert logged["meta"]["request"].endswith("{Err}\nkeep it short")
    # The fix ran through the python tool, as any other code: its result went back to the model
    [result] = [b for b in fake.requests[1].body["messages"][-1]["content"] if b.get("type") == "tool_result"]
    assert "4" in str(result["content"]) and kernel.run("print(fixed)").strip() == "4"


def test_a_rerun_cell_after_a_restart_shows_its_turn_without_needing_its_fields(
    tmp_path: Path, fake: FakeAnthropic, kernel: Kernel
) -> None:
    assert kernel.try_run("1 / 0")[0] == "error"
    fake.script(text("Division by zero."))
    kernel.run("%agent why {Err}", "ask")
    kernel.shutdown()
    with Kernel(tmp_path, kernel_env(fake.base_url, JPY_SESSION_NAME=str(tmp_path / "work.ipynb"))) as again:
        again.run(SETUP, "setup")
        shown = again.run("%agent why {Err}", "ask")  # no error in this kernel: the recorded turn is shown, nothing asked
        assert "Division by zero." in shown
        assert len(fake.requests) == 1
        status, said = again.try_run("%agent why {Err} again")  # a new request does need it
        assert status == "error" and "no cell has raised an error" in said and len(fake.requests) == 1


def test_an_expanded_cell_shows_as_a_block_under_you_and_is_sent_with_its_fences(kernel: Kernel, fake: FakeAnthropic) -> None:
    n = count_of(kernel, "total = 3 + 4")
    fake.script(text("ok"))
    messages, _ = kernel.execute(f"%agent what does {{In[{n}]}} do?")
    said = request_text(fake.requests[-1])
    assert f"In[{n}]:\n```python\ntotal = 3 + 4\n```" in said  # the model reads the fenced block, as before
    shown = [m["content"]["data"].get("text/html", "") for m in messages if m["msg_type"] in ("display_data", "update_display_data")]
    last = shown[-1]
    you = last[last.index("<b>You:</b>") : last.index("</div>", last.index("<b>You:</b>"))]
    assert "```" not in you and '<pre class="nbagent-request-block">total = 3 + 4</pre>' in you, you
