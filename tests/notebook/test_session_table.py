"""``%agent_sessions`` as an HTML table in a notebook (nbagent/notebook/session_table.py), text in a terminal; everything escaped."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from nbagent.history import write_table
from nbagent.notebook.session_table import SessionTable
from nbagent.state.lineage import Lineage
from nbagent.stores import Listed
from tests.support.fake_anthropic import FakeAnthropic, text
from tests.support.kernels import Kernel, kernel_env

HOSTILE = '<img src=x onerror="alert(1)"> & </td></table><script>alert(2)</script> costs $5 and $6'


def rows() -> list[Listed]:
    kid = Listed(
        "kid",
        "/n/.nbagent/nb.ipynb/kid.jsonl",
        "nb.ipynb",
        session_id="k" * 32,
        title=HOSTILE + " (fork after turn 1)",
        turns=2,
        source="log",
    )
    kid.lineage = Lineage("p" * 32, 4, "x", 10, "parent", 1, kid.title)
    parent = Listed("parent", "/n/.nbagent/nb.ipynb/parent.jsonl", "nb.ipynb", session_id="p" * 32, title=HOSTILE, turns=3, source="log")
    return [parent, kid]


def test_the_html_table_escapes_every_cell_and_keeps_math_away() -> None:
    shown = SessionTable("Sessions in <folder> (* = current):", rows(), "/n/.nbagent/nb.ipynb/kid.jsonl")._repr_html_()
    assert "<script" not in shown and "<img" not in shown and "</td></table><script>" not in shown
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; &lt;/td&gt;&lt;/table&gt;&lt;script&gt;" in shown
    assert "Sessions in &lt;folder&gt;" in shown
    assert "mathjax_ignore" in shown  # "$5 and $6" is money, not math
    assert shown.count("<tr") == 3 and shown.count("<table>") == 1  # the header and two sessions
    assert '<tr class="nbagent-current"><td class="nbagent-nowrap">* kid</td>' in shown and "<th></th>" not in shown
    assert "(fork after turn 1)</td>" in shown  # a long title is cut in its parent's part, never in where it forked


def test_the_text_beside_it_is_the_terminals_table() -> None:
    table = SessionTable("Sessions in f (* = current):", rows(), "")
    out = io.StringIO()
    write_table(rows(), out, current="")
    assert repr(table) == "Sessions in f (* = current):\n" + out.getvalue().rstrip("\n")
    header = repr(table).splitlines()[1]
    assert header.split() == ["SESSION", "TITLE", "CREATED", "LAST", "ACTIVITY", "TURNS", "TOKENS", "COST", "CONTEXT", "TRUST", "STATUS"]


@pytest.mark.kernel
@pytest.mark.slow
def test_agent_sessions_in_a_kernel_is_an_html_table_with_text_beside_it(tmp_path: Path, fake: FakeAnthropic) -> None:
    env = kernel_env(fake.base_url, JPY_SESSION_NAME=str(tmp_path / "t.ipynb"))
    fake.script(text("Done."))
    with Kernel(tmp_path, env) as kernel:
        kernel.run("%load_ext nbagent")
        kernel.run("%agent sum <b>x</b> & $5 then $6")
        messages, reply = kernel.execute("%agent_sessions")
    assert reply["content"]["status"] == "ok"
    [listing] = [m["content"]["data"] for m in messages if m["msg_type"] == "display_data"]
    html, plain = listing["text/html"], listing["text/plain"]
    assert "<table>" in html and "<th>TITLE</th>" in html and "sum &lt;b&gt;x&lt;/b&gt; &amp; $5 then $6" in html
    assert "<b>x</b>" not in html and "mathjax_ignore" in html
    assert plain.startswith("Sessions in ") and "SESSION" in plain and "sum <b>x</b> & $5 then $6" in plain
    printed = "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")
    assert "SESSION" not in printed and "in the browser" in printed.lower()  # the table is displayed; the link line is printed
