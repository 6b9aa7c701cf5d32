"""What ``%load_ext nbagent`` and a re-rendered ``%agent`` cell import, in real kernels: not the SDK, which a real turn loads."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.fake_anthropic import text
from tests.support.kernels import Kernel

pytestmark = [pytest.mark.kernel, pytest.mark.slow]

# Neither is needed until the model is called: the SDK (and its HTTP stack), the live panel's widgets, the Markdown parser.
NOT_NEEDED = ("anthropic", "httpx", "httpx2", "pydantic", "ipywidgets", "markdown_it")
LOADED = f"import sys, json; print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(NOT_NEEDED)!r})))"
REQUEST = "%agent Summarize table 1 in one line"


def loaded(kernel: Kernel) -> list[str]:
    """The packages of NOT_NEEDED the kernel has imported."""
    return list(json.loads(kernel.run(LOADED).strip().splitlines()[-1]))


def test_load_ext_and_a_re_rendered_cell_import_no_sdk_and_a_real_turn_still_works(kernels: Any, fake: Any) -> None:
    fake.script(text("The first answer."), text("The second answer."))
    first = kernels()
    first.run("%load_ext nbagent", "setup")
    assert loaded(first) == []
    assert "The first answer." in first.run(REQUEST, "ask")  # a real turn: the SDK is loaded for it
    assert "anthropic" in loaded(first) and len(fake.requests) == 1
    first.shutdown()

    second = kernels()  # after a restart, Run All: the cell shows its recorded turn
    second.run("%load_ext nbagent", "setup")
    shown = second.run(REQUEST, "ask")
    assert "The first answer." in shown and len(fake.requests) == 1  # shown from the log: no model request
    assert loaded(second) == []
    assert "The second answer." in second.run("%agent And table 2?", "next")  # a new request in that kernel goes to the model
    assert "anthropic" in loaded(second) and len(fake.requests) == 2
