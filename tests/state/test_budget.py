"""Budgets: the pure rules (budget.py, table tests) and the loop stopping a scripted tool loop at them (real SDK, fake API)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import pytest

import nbagent
from nbagent.record import events as ev
from nbagent.render.parts import tokens_line
from nbagent.state import budget as budgets
from nbagent.state import prices
from nbagent.state.budget import Budget, BudgetError, BudgetReached
from nbagent.state.tokens import Tokens
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use

FREE = prices.Cost(0.0)


# (budget, replies so far, this request's cost, the session's, which is reached or None)
REACHED = [
    (Budget(), 99, prices.Cost(9.0), prices.Cost(99.0), None),
    (Budget(max_turns=3), 2, FREE, FREE, None),
    (Budget(max_turns=3), 3, FREE, FREE, "max_turns"),
    (Budget(max_cost=0.5), 0, prices.Cost(0.49), prices.Cost(5.0), None),
    (Budget(max_cost=0.5), 0, prices.Cost(0.5), prices.Cost(5.0), "max_cost"),
    (Budget(max_session_cost=2.0), 0, prices.Cost(0.1), prices.Cost(1.99), None),
    (Budget(max_session_cost=2.0), 0, prices.Cost(0.1), prices.Cost(2.01), "max_session_cost"),
    (Budget(max_turns=1, max_cost=0.5), 1, prices.Cost(0.6), FREE, "max_turns"),  # the first that applies
    # a dollar budget whose figure became unknown can no longer be kept: stop rather than guess
    (Budget(max_cost=0.5), 0, prices.Cost(None, ("claude-x",)), FREE, "max_cost"),
    (Budget(max_turns=5), 1, prices.Cost(None, ("claude-x",)), FREE, None),  # no dollar budget: the price is not needed
]


@pytest.mark.parametrize(("budget", "replies", "turn", "session", "expected"), REACHED)
def test_reached(budget: Budget, replies: int, turn: prices.Cost, session: prices.Cost, expected: str | None) -> None:
    hit = budgets.reached(budget, replies, turn, session)
    assert (hit.name if hit else None) == expected
    if hit is not None:
        assert hit.text.startswith("stopped: ") and f"({expected})" in hit.text


# (recorded, options given, chosen): an option left out keeps the recorded budget, None lifts it
CHOSEN = [
    (Budget(), {}, Budget()),
    (Budget(max_turns=3, max_cost=1.0), {}, Budget(max_turns=3, max_cost=1.0)),
    (Budget(max_turns=3, max_cost=1.0), {"max_turns": None}, Budget(max_cost=1.0)),
    (Budget(max_turns=3), {"max_turns": 5, "max_session_cost": 2}, Budget(max_turns=5, max_session_cost=2)),
    (Budget(), {"max_turns": 2.0}, Budget(max_turns=2)),
]


@pytest.mark.parametrize(("recorded", "given", "expected"), CHOSEN)
def test_chosen(recorded: Budget, given: dict[str, Any], expected: Budget) -> None:
    assert budgets.chosen(recorded, **given) == expected


@pytest.mark.parametrize(
    "given",
    [{"max_turns": 0}, {"max_turns": 1.5}, {"max_turns": True}, {"max_cost": 0}, {"max_cost": -1}, {"max_session_cost": float("inf")}],
)
def test_bad_budget_says_what_to_give(given: dict[str, Any]) -> None:
    with pytest.raises(BudgetError, match="is not a budget: give "):
        budgets.chosen(Budget(), **given)


ADVICE = [
    ("max_turns", "{name}", "The session is saved. To continue this request, set max_turns to more model calls, or to None for no limit, and run again; or make a new request."),
    ("max_cost", "Agent.{name}", "The session is saved. To continue this request, set Agent.max_cost to a higher amount, or to None for no limit, and run again; or make a new request."),
    ("max_session_cost", "Agent.{name}", "The session is saved. To continue it, set Agent.max_session_cost to a higher amount, or to None for no limit, and run again."),
]  # fmt: skip


@pytest.mark.parametrize(("name", "setting", "expected"), ADVICE)
def test_advice_says_in_words_what_to_set(name: str, setting: str, expected: str) -> None:
    assert budgets.advice(budgets.Reached(name, "stopped"), setting=setting) == expected


def test_refusal_names_the_setting() -> None:
    assert budgets.refusal(Budget(max_turns=3), "claude-test", prices.PRICES) == ""  # no dollars: no price needed
    assert budgets.refusal(Budget(max_cost=1.0), "claude-sonnet-5-5", prices.PRICES) == ""
    said = budgets.refusal(Budget(max_session_cost=1.0), "claude-test", prices.PRICES, setting="Agent.{name}")
    assert said.startswith("Agent.max_session_cost is a budget in dollars, but nbagent has no price for claude-test")


def test_budget_note_round_trips() -> None:
    budget = Budget(max_turns=4, max_cost=0.25)
    event = budget.event()
    assert event["text"] == "budget: 4 model calls a request, $0.25 a request"
    assert budgets.of_state(budgets.recorded(event)) == budget
    assert budgets.recorded({"max_turns": -3, "max_cost": "1"}) == {}  # a hostile log's values are no budget


# The loop -----------------------------------------------------------------------------------------------
MODEL = "claude-sonnet-5-5"  # priced: $2 per million input tokens
DIME = {"input_tokens": 50_000, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 0}  # $0.10


@nbagent.tool(effect="read")
def lookup(name: str) -> str:
    """Look up a value by name.

    Args:
        name: The name to look up.
    """
    return f"value of {name}"


def kinds(path: Path, kind: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [e for e in lines if e["type"] == ev.NOTE and e.get("kind") == kind]


def tool_loop(fake: FakeAnthropic, n: int) -> None:
    """``n`` replies that each call lookup, then a final answer; each reply costs a dime."""
    fake.script(*(tool_use("lookup", {"name": f"x{i}"}, usage=DIME) for i in range(n)), text("done", usage=DIME))


@pytest.mark.sdk
def test_max_turns_stops_a_tool_loop_and_a_raised_budget_continues(
    fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path
) -> None:
    tool_loop(fake, 3)
    with nbagent.Session.open(log_path) as session:
        with pytest.raises(
            BudgetReached, match=r"reached its budget of 2 model calls \(max_turns\).*set max_turns to more model calls, or to None"
        ) as stop:
            nbagent.run(session, "look up three things", tools=[lookup], client=client, model=MODEL, approval="auto", max_turns=2)
        assert stop.value.reached == "max_turns"
        assert len(fake.requests) == 2
        assert not session.state.open_calls  # a safe point: the second reply's call has its result
        # the same budget again (kept from the log): nothing sent, the stop not logged twice
        with pytest.raises(BudgetReached):
            nbagent.run(session, tools=[lookup], client=client, model=MODEL, approval="auto")
        assert len(fake.requests) == 2
        assert len(kinds(log_path, budgets.REACHED)) == 1
        # raised: the same request goes on to its answer
        final = nbagent.run(session, tools=[lookup], client=client, model=MODEL, approval="auto", max_turns=10)
    assert final == "done"
    assert len(fake.requests) == 4
    assert [n.get("max_turns") for n in kinds(log_path, budgets.BUDGET)] == [2, 10]


@pytest.mark.sdk
def test_max_cost_stops_and_a_new_request_starts_again(fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path) -> None:
    tool_loop(fake, 5)
    with nbagent.Session.open(log_path) as session:
        with pytest.raises(BudgetReached, match=r"this request cost \$0.30, its budget is \$0.25 \(max_cost\)"):
            nbagent.run(session, "look up", tools=[lookup], client=client, model=MODEL, approval="auto", max_cost=0.25)
        assert len(fake.requests) == 3  # $0.00, $0.10, $0.20 before each call: the third still went; $0.30 stopped the fourth
        assert tokens_line(Tokens.of_state(session.state)).startswith("this request: 150,000 tokens in · 0 out · $0.30; context ")
        # a new request: its own budget starts again (the calls left open are settled, as for any new request)
        fake.clear_script()
        fake.script(text("fine", usage=DIME))
        assert nbagent.run(session, "something else", tools=[lookup], client=client, model=MODEL, approval="auto") == "fine"
        # the session's budget counts every request
        fake.script(text("never", usage=DIME))
        with pytest.raises(BudgetReached, match=r"the session cost \$0.40, its budget is \$0.35 \(max_session_cost\)"):
            nbagent.run(session, "more", client=client, model=MODEL, approval="auto", max_cost=None, max_session_cost=0.35)
    assert len(fake.requests) == 4


FREE_PRICES = json.dumps({MODEL: dict.fromkeys(prices.PARTS, 0)})


@nbagent.tool(effect="write")
def free_prices() -> str:
    """Make every token of the model free, as a tool call (or the python tool) could."""
    os.environ[prices.ENV] = FREE_PRICES
    return "prices set to zero"


@pytest.mark.sdk
def test_a_tool_that_zeroes_the_prices_cannot_lift_the_runs_budget(
    fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 33 item 8: the run keeps the price table it started with; the next run uses the new one."""
    monkeypatch.setenv(prices.ENV, "")  # restored after the test, whatever the tool sets
    fake.script(tool_use("free_prices", {}, usage=DIME), *(tool_use("lookup", {"name": f"x{i}"}, usage=DIME) for i in range(4)))
    fake.script(text("done", usage=DIME))
    tools = [free_prices, lookup]
    with nbagent.Session.open(log_path) as session:
        with pytest.raises(BudgetReached, match=r"this request cost \$0.30, its budget is \$0.25 \(max_cost\)"):
            nbagent.run(session, "look up", tools=tools, client=client, model=MODEL, approval="auto", max_cost=0.25)
        assert os.environ[prices.ENV] == FREE_PRICES  # the tool ran: the table in force is free now
        assert len(fake.requests) == 3  # priced as at the start: $0.30 stopped the fourth call
        # the next run reads the new table: this request's $0.30 is now $0.00, so it goes on to its answer
        assert nbagent.run(session, tools=tools, client=client, model=MODEL, approval="auto") == "done"
    assert len(fake.requests) == 6


@pytest.mark.sdk
def test_cost_budget_without_a_price_is_refused_before_anything_is_sent(
    fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path
) -> None:
    fake.script(text("never"))
    with nbagent.Session.open(log_path) as session:
        before = session.seq
        with pytest.raises(
            BudgetError, match="max_cost is a budget in dollars, but nbagent has no price for claude-test: nothing was sent"
        ):
            nbagent.run(session, "hi", client=client, model="claude-test", max_cost=1.0)
        assert session.seq == before
        # a budget in model calls needs no price
        assert nbagent.run(session, "hi", client=client, model="claude-test", max_turns=1) == "never"
    assert len(fake.requests) == 1


@pytest.mark.slow
@pytest.mark.sdk
@pytest.mark.parametrize("kill_at", ["tool_result:2", "note:budget_reached"])
def test_crash_at_the_stop_resumes_without_running_past_it(
    fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path, kill_at: str
) -> None:
    """SIGKILLed just before the stop is logged, or just after: the resume honours the logged budget and sends nothing more."""
    tool_loop(fake, 3)
    root = Path(__file__).resolve().parents[2]
    child = subprocess.run(
        [sys.executable, "-m", "tests.support.budget_child", str(log_path), fake.base_url, kill_at],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert len(fake.requests) == 2
    with nbagent.Session.open(log_path) as session:
        with pytest.raises(BudgetReached, match=r"max_turns"):
            nbagent.run(session, tools=[lookup], client=client, model=MODEL, approval="auto")  # no budget given: the logged one
    assert len(fake.requests) == 2
    assert len(kinds(log_path, budgets.REACHED)) == 1
    assert [n.get("max_turns") for n in kinds(log_path, budgets.BUDGET)] == [2]


def test_a_clouds_replies_need_the_clouds_price() -> None:
    """On Bedrock the replies are priced under bedrock:<model>, which the table lacks: a dollar budget is refused there."""
    assert budgets.refusal(Budget(max_cost=1.0), "claude-sonnet-5-5", prices.PRICES) == ""
    said = budgets.refusal(Budget(max_cost=1.0), "claude-sonnet-5-5", prices.PRICES, provider="bedrock")
    assert "no price for bedrock:claude-sonnet-5-5" in said


def test_budget_notes_have_the_declared_shape() -> None:
    """The notes the loop writes pass the reader's shape check (events.Note declares their fields)."""
    for payload in (
        Budget(max_turns=3, max_cost=1, max_session_cost=2.5).event(),
        {"kind": budgets.REACHED, "reached": "max_cost", "text": "t"},
    ):
        assert ev.shape_problem(ev.make(2, ev.NOTE, payload)) == ""
    assert ev.shape_problem(ev.make(2, ev.NOTE, {"kind": budgets.BUDGET, "max_turns": "3"})) != ""
