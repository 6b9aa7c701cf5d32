"""Private keys and key-shaped secrets on their way from a real kernel to the API and the log (issue 33, items 2 and 4).

Item 2: a key written with escaped line breaks (a ``repr()`` in ``Out[n]``, a service-account JSON file read by
``read_file``, a saved notebook's output read by ``read_notebook``) and the automatic context note.  Item 4: ``{x}``
redacts a string whole before it clips it, and checks all of it, not only its first 10,000 characters.
"""

from __future__ import annotations

import json
import os
import random
import string
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from tests.notebook.test_interpolate_kernel import count_of, log_text, request_text, sent
from tests.support.fake_anthropic import FakeAnthropic, text, tool_uses
from tests.support.kernels import Kernel

pytestmark = [pytest.mark.kernel, pytest.mark.slow]

R = random.Random(3302)
B64 = string.ascii_letters + string.digits + "+/"
LINES = ["".join(R.choice(B64) for _ in range(64)) for _ in range(26)] + ["".join(R.choice(B64) for _ in range(30)) + "=="]
KEY = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(LINES) + "\n-----END PRIVATE KEY-----\n"
SERVICE_ACCOUNT = {"type": "service_account", "project_id": "demo", "private_key": KEY, "client_email": "bot@demo.iam.gserviceaccount.com"}
TOKEN = "sk-ant-api03-" + "".join(R.choice(string.ascii_letters + string.digits) for _ in range(93)) + "AA"
WINDOW = 12


def leaks(data: str) -> list[str]:
    """Pieces of the key's body (or of the token after its prefix) in ``data``."""
    pieces = [line[i : i + WINDOW] for line in LINES for i in range(0, len(line) - WINDOW + 1, 4)]
    pieces += [TOKEN[i : i + WINDOW] for i in range(13, len(TOKEN) - WINDOW + 1, 4)]
    return [p for p in pieces if p in data]


@pytest.fixture
def kernel(tmp_path: Path, fake: FakeAnthropic) -> Iterator[Kernel]:
    """A real kernel for ``work.ipynb`` in ``tmp_path``, nbagent loaded with the tools that read cells and files."""
    env = {
        **os.environ,
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "JPY_SESSION_NAME": str(tmp_path / "work.ipynb"),
    }
    with Kernel(tmp_path, env) as started:
        started.run(
            "%load_ext nbagent\n%config Agent.tools = ['python', 'read_file', 'notebook_history', 'read_notebook']\n"
            "%config Agent.approval = 'auto'",
            "setup",
        )
        yield started


def test_a_key_with_escaped_line_breaks_reaches_neither_the_request_nor_the_log(
    kernel: Kernel, fake: FakeAnthropic, tmp_path: Path
) -> None:
    (tmp_path / "service-account.json").write_text(json.dumps(SERVICE_ACCOUNT, indent=2))
    notebook = nbformat.v4.new_notebook()
    output = nbformat.v4.new_output("execute_result", {"text/plain": repr(KEY)}, execution_count=1)
    notebook.cells.append(nbformat.v4.new_code_cell("key", outputs=[output], execution_count=1))
    nbformat.write(notebook, tmp_path / "work.ipynb")
    kernel.run(f"pem = {KEY!r}")  # the key as a string literal in a cell
    out = count_of(kernel, "pem")  # Out[n] is its repr(): every line break a backslash-n
    assert leaks(kernel.run(f"print(repr(Out[{out}]))"))  # the kernel does hold it, escaped
    calls = [("read_file", {"path": "service-account.json"}), ("notebook_history", {"first": 1}), ("read_notebook", {})]
    fake.script(tool_uses(calls), text("done"))
    kernel.run(f"%agent what is in {{Out[{out}]}}?")
    said = request_text(fake.requests[0])
    assert f"Out[{out}]:" in said and "[REDACTED]" in said
    results = [b for b in fake.requests[1].body["messages"][-1]["content"] if b.get("type") == "tool_result"]
    assert len(results) == 3 and all("[REDACTED]" in json.dumps(r["content"]) for r in results), results
    assert leaks(sent(fake)) == [] and leaks(log_text(tmp_path)) == []


def test_a_field_redacts_a_string_whole_before_it_clips_it(kernel: Kernel, fake: FakeAnthropic, tmp_path: Path) -> None:
    # The clip keeps 1,000 characters at each end: the tail starts right after the token's prefix, and the
    # whole value is longer than the 10,000 characters the variable check reads.
    kernel.run(f"straddle = 'a' * 12_000 + {TOKEN!r} + 'b' * {1_000 - len(TOKEN) + 13}")
    kernel.run(f"far = 'c' * 20_000 + {KEY!r}")  # a key beyond 10,000 characters, its head clipped away
    kernel.run(f"far_escaped = 'd' * 20_000 + {repr(KEY)!r}")  # the same as a repr() shows it
    fake.script(text("ok"))
    kernel.run("%agent compare {straddle}, {far} and {far_escaped}")
    said = request_text(fake.requests[0])
    assert said.startswith("compare straddle (") and "far (" in said and "far_escaped (" in said
    assert leaks(sent(fake)) == [] and leaks(log_text(tmp_path)) == []
