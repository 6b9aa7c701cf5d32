"""Cost and budgets in a notebook: the Agent settings, the stop said plainly under the panel, the next %agent going on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from traitlets import TraitError

from nbagent.notebook.magics import magics_for
from nbagent.record import events as ev
from nbagent.record.log_reader import read_events
from nbagent.state import budget as budgets
from nbagent.state import prices
from nbagent.stores import folders as store
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use

DIME = {"input_tokens": 50_000, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 0}  # $0.10 on Sonnet 5.5


def usage_error(ip: Any, code: str) -> str:
    result = ip.run_cell(code)
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    return str(result.error_in_exec)


def notes(folder: Path, kind: str) -> list[dict[str, Any]]:
    [found] = store.list_sessions(folder)
    return [e for e in read_events(found.path) if e["type"] == ev.NOTE and e.get("kind") == kind]


def test_max_turns_stops_the_cell_plainly_and_the_next_request_goes_on(
    shell: Any, fake: FakeAnthropic, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.script(*(tool_use("python", {"code": f"x{i} = {i}"}, usage=DIME) for i in range(3)), text("all done", usage=DIME))
    shell.run_cell("%config Agent.max_turns = 2")
    result = shell.run_cell("%agent set three variables")
    assert result.success  # a stop at a budget the user set is an outcome, not an error (issue 35 item 6): no UsageError
    shown = capsys.readouterr().out
    assert "stopped: this request reached its budget of 2 model calls" in shown  # the note, in the cell's transcript
    calm = shown[shown.index("nbagent: this request stopped at its budget") :]  # printed plainly under the panel
    assert "To continue this request, set Agent.max_turns to more model calls, or to None for no limit, and run again" in calm
    assert "note: budget: 2 model calls a request" in shown
    assert len(fake.requests) == 2 and shell.user_ns["x1"] == 1 and "x2" not in shell.user_ns
    folder = tmp_path / ".nbagent" / "untitled"
    assert [n.get("max_turns") for n in notes(folder, budgets.BUDGET)] == [2]
    # a new request in the same session starts the per-request budget again
    assert shell.run_cell("%agent go on").success
    assert "all done" in capsys.readouterr().out
    assert len(fake.requests) == 4
    assert shell.run_cell("%agent_sessions").success
    listing = capsys.readouterr().out
    assert "COST" in listing and "$0.40" in listing  # four replies at a dime


def test_a_dollar_budget_on_a_model_with_no_price_names_the_setting(shell: Any, fake: FakeAnthropic, tmp_path: Path) -> None:
    fake.script(text("never"))
    shell.run_cell("%config Agent.max_session_cost = 1")
    said = usage_error(shell, "%agent --model claude-test hello")
    assert said.startswith("Agent.max_session_cost is a budget in dollars, but nbagent has no price for claude-test: nothing was sent.")
    assert not fake.requests
    try:  # priced now: it runs, and the listing says what it cost
        shell.run_cell(
            "%config Agent.prices = {'claude-test': {'input': 1, 'output': 1, 'cache_write_5m': 1, 'cache_write_1h': 1, 'cache_read': 1}}"
        )
        assert shell.run_cell("%agent --model claude-test hello").success
        assert len(fake.requests) == 1
    finally:
        prices.configure(None)


def test_bad_budget_and_price_settings_say_what_to_give(shell: Any, caplog: pytest.LogCaptureFixture) -> None:
    settings = magics_for(shell).settings  # type: ignore[union-attr]
    shell.run_cell("%config Agent.max_turns = 0")  # %config logs a setting's error and keeps the value
    shell.run_cell("%config Agent.prices = {'claude-x': {'input': 1}}")
    assert settings.max_turns is None and settings.prices == {}
    assert "Agent.max_turns=0 is not a budget: give a whole number of model calls, 1 or more, or None for no limit." in caplog.text
    assert "Agent.prices: the price of 'claude-x' needs exactly input, cache_write_5m" in caplog.text
    with pytest.raises(TraitError, match=r"Agent.max_cost=-1.0 is not a budget: give a number of dollars above 0"):
        settings.max_cost = -1
