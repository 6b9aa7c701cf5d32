"""The demo model and Claude in one notebook, in real ipykernels: two sessions, and a Run All after a restart calls no model."""

from __future__ import annotations

from pathlib import Path

import pytest

import nbagent
from nbagent.notebook.model_kind import DEMO_NAME
from nbagent.record import events as ev
from nbagent.stores import folders as store
from tests.support.fake_anthropic import FakeAnthropic, text
from tests.support.kernels import Kernel, kernel_env

pytestmark = [pytest.mark.kernel, pytest.mark.slow]

CELLS = [
    ("setup", "%load_ext nbagent\n%config Agent.tools = ['list_files']"),
    ("demo-on", "%config Agent.demo = True"),
    ("ask-demo", "%agent what is in this folder"),
    ("demo-off", "%config Agent.demo = False"),
    ("ask-claude", "%agent now tell me properly"),
]


def test_a_notebook_that_used_both_keeps_two_sessions_and_reruns_without_a_model_call(tmp_path: Path, fake: FakeAnthropic) -> None:
    env = kernel_env(fake.base_url, JPY_SESSION_NAME=str(tmp_path / "mixed.ipynb"))
    fake.script(text("Claude's own answer"))
    with Kernel(tmp_path, env) as kernel:
        said = {cell: kernel.run(code, cell) for cell, code in CELLS}
    folder = tmp_path / ".nbagent" / "mixed.ipynb"
    demo, real = (s.path for s in store.list_sessions(folder))
    assert (
        f"{demo.stem} was written by the offline demo model, so this request to Claude goes to a new session, {real.stem}"
        in said["ask-claude"]
    )
    assert len(fake.requests) == 1 and "offline demo model" not in str(fake.requests[0].body["messages"])
    models = {p: {e.get("model") for e in nbagent.read_events(p) if e["type"] == ev.ASSISTANT_MSG} for p in (demo, real)}
    assert models[demo] == {DEMO_NAME} and DEMO_NAME not in models[real]

    with Kernel(tmp_path, env) as kernel:  # a restart, then Run All: each cell finds its turn in its own session
        again = {cell: kernel.run(code, cell) for cell, code in CELLS}
    assert len(fake.requests) == 1  # no model was called again
    assert "Claude's own answer" in again["ask-claude"] and "offline demo model" in again["ask-demo"]
    assert "goes to" not in again["ask-demo"] + again["ask-claude"]  # nothing was asked, so no session changed for it
    assert len(store.list_sessions(folder)) == 2
