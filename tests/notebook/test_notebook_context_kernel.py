"""What the model is told about the notebook at each new turn, in a real ipykernel (jupyter_client, nbclient)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import nbformat
import pytest

import nbagent
from nbagent.notebook.notebook_context import KIND
from nbagent.record import events as ev
from nbagent.render import html
from nbagent.stores import folders as store
from tests.support.fake_anthropic import text, tool_use
from tests.support.kernels import wait_for

pytestmark = [pytest.mark.kernel, pytest.mark.slow]  # real ipykernels, one SIGKILLed

SETUP = "%load_ext nbagent\n%config Agent.tools = ['python']"
SECRET = "sk-ant-api03-" + "K" * 93 + "AA"  # the shape of an Anthropic key: redaction knows it
DATA = "import pandas as pd\nsales = pd.DataFrame({'region': ['north', 'south', 'east'], 'units': [3, 4, 5]})"
NOTE_START = "[nbagent note: what the notebook did"


def notes(request: Any) -> list[str]:
    """The notes to the model in front of a request's last user message."""
    content = request.body["messages"][-1]["content"]
    if isinstance(content, str):
        return []
    return [b["text"] for b in content if b.get("type") == "text" and b["text"].startswith("[nbagent note:")]


def context_of(request: Any) -> str | None:
    found = [n for n in notes(request) if n.startswith(NOTE_START)]
    assert len(found) <= 1
    return found[0] if found else None


def context_events(tmp_path: Path, folder: str = "work.ipynb") -> list[ev.Event]:
    [stored] = store.list_sessions(tmp_path / ".nbagent" / folder)
    events = list(nbagent.read_events(stored.path))
    for i, event in enumerate(events):
        if event["type"] == ev.NOTE and event.get("kind") == KIND:
            after = [e["type"] for e in events[i + 1 :] if e["type"] != ev.CONTEXT]  # the settings may be written between
            assert after[0] == ev.USER_MSG  # logged just before the request it goes with
    return [e for e in events if e["type"] == ev.NOTE and e.get("kind") == KIND]


def test_the_model_is_told_what_the_user_did_and_then_only_what_changed(kernels, fake, tmp_path: Path):
    kernel = kernels()
    kernel.run(SETUP, "setup")
    kernel.run(DATA, "data")
    kernel.run(f'api_key = "{SECRET}"', "key")
    status, shown = kernel.try_run("sales['price']", "oops")
    assert status == "error" and "KeyError" in shown
    fake.script(tool_use("python", {"code": "made_by_agent = sales.units.sum()"}), text("The column is 'units', not 'price'."))
    assert "not 'price'" in kernel.run("%agent why did my cell fail?", "ask")

    first = context_of(fake.requests[0])
    assert first is not None
    for words in ("sales", "(3, 2)" if "(3, 2)" in first else "3", "region", "units", "int64", "KeyError", "'price'", "sales['price']"):
        assert words in first, (words, first)
    assert "api_key" in first and SECRET not in first and SECRET.encode() not in fake.requests[0].raw
    assert "%load_ext" not in first and "%agent" not in first  # nbagent's own cells are not news
    assert context_of(fake.requests[1]) is None  # told once: the tool results' request carries no new note

    # The next turn: only what changed since (the agent's own variable is not news; the old error is not told again).
    kernel.run("sales = sales.head(2)\ndel api_key", "edit")
    fake.script(text("Two rows now."))
    kernel.run("%agent and now?", "ask2")
    second = context_of(fake.requests[2])
    assert second is not None
    assert "sales" in second and "Names gone: api_key" in second
    assert "KeyError" not in second and "made_by_agent" not in second and "In [" in second

    # Nothing new: no note, and no event.
    fake.script(text("Same as before."))
    kernel.run("%agent anything else?", "ask3")
    assert context_of(fake.requests[3]) is None
    events = context_events(tmp_path)
    assert len(events) == 2
    assert (
        events[0]["budget"] == 4000
        and events[0]["left_out"] == {}
        and events[0]["text"].startswith("what the notebook did since the last turn")
    )
    # The static transcript shows it collapsed: the first line is the summary of a <details>.
    [stored] = store.list_sessions(tmp_path / ".nbagent" / "work.ipynb")
    page = html.transcript_html(list(nbagent.read_events(stored.path)))
    assert page.count('<summary><span class="nbagent-label">note to the model</span> what the notebook did since your last turn') == 2


def test_off_tells_nothing(kernels, fake, tmp_path: Path):
    kernel = kernels()
    kernel.run(SETUP + "\n%config Agent.notebook_context = 'off'", "setup")
    kernel.run(DATA, "data")
    fake.script(text("Hello."))
    kernel.run("%agent hi", "ask")
    assert fake.requests[0].body["messages"][-1]["content"] == "hi"
    assert context_events(tmp_path) == []


def test_a_kernel_killed_after_the_note_resumes_with_the_same_request_bytes(kernels, fake, tmp_path: Path):
    fake.script(text("never delivered", hang_after=0), text("Here is the answer."))
    first = kernels()
    first.run(SETUP, "setup")
    first.run(DATA, "data")
    first.send("%agent describe sales", "ask")
    wait_for(lambda: len(fake.requests) == 1)  # the note and the request are durable before the model is called
    first.kill()
    assert len(context_events(tmp_path)) == 1

    second = kernels()
    second.run(SETUP, "setup")
    second.run(DATA + "\nextra = 1", "data")  # Run All: the new kernel's cells are not what the first request saw
    assert "Here is the answer." in second.run("%agent describe sales", "ask")
    assert len(fake.requests) == 2
    assert fake.requests[1].raw == fake.requests[0].raw
    assert len(context_events(tmp_path)) == 1  # the resume did not gather again

    # A new turn after the restart: the restart note, then what the kernel holds now (said once: no names gone).
    fake.script(text("Noted."))
    second.run("%agent what is defined?", "ask2")
    restart, context = notes(fake.requests[2])
    assert restart.startswith("[nbagent note: the Jupyter kernel was restarted")
    assert context.startswith(NOTE_START + " since the kernel restarted")
    assert "Variables in the kernel now:" in context and "extra" in context and "gone" not in context


def test_nbclient_run_all(fake, tmp_path: Path):
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(SETUP),
        nbformat.v4.new_code_cell(DATA),
        nbformat.v4.new_code_cell("1 / 0"),
        nbformat.v4.new_code_cell("%agent why the error?"),
    ]
    env = {
        **os.environ,
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "JPY_SESSION_NAME": str(tmp_path / "run.ipynb"),
    }
    fake.script(text("Division by zero."))
    client = NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        allow_errors=True,
        shutdown_kernel="immediate",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute(env=env)
    context = context_of(fake.requests[0])
    assert context is not None and "ZeroDivisionError" in context and "In [3]: 1 / 0" in context and "sales" in context
    assert len(context_events(tmp_path, "run.ipynb")) == 1
