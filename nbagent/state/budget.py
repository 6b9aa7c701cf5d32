"""Budgets: how many model calls one request may make and how many dollars a request or the session may cost.

Pure rules (table tests: tests/state/test_budget.py); the loop (loop.py) applies them before each model call, a safe
point (every call of the last reply has its result). Budgets are session settings logged as a note (kind
``budget``) when they change, so a resume after a crash honours the budget the run had; reaching one is logged
once (kind ``budget_reached``) and the run stops with :class:`BudgetReached`. The next run continues the same
session: a new request starts the per-request budgets again; a raised or lifted budget lets the request go on.
A run checks its dollar budgets at the prices in force when it started (the loop keeps that table): a tool call that
changes ``NBAGENT_PRICES`` or ``Agent.prices`` cannot lift the budget of the run it is part of, only the next run's.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import NbagentError
from ..record import events as ev
from . import prices
from .providers import price_key

BUDGET = ev.NOTE_BUDGET  # the note of the budgets from here on (max_turns, max_cost, max_session_cost; absent: none)
REACHED = ev.NOTE_BUDGET_REACHED  # the note that the loop stopped here at a budget (reached: which)
NAMES = ("max_turns", "max_cost", "max_session_cost")


class Keep(enum.Enum):
    """An option left as the session's log has it (:data:`KEEP`)."""

    KEEP = "keep"


KEEP = Keep.KEEP  # the default of Loop's and run's budget options: the budget last logged (none on a new session)


class BudgetError(NbagentError):
    """A budget that cannot be kept (a bad value, or dollars on a model with no price); nothing was sent."""


class BudgetReached(NbagentError):
    """The run stopped at a budget, at a safe point; the session is saved and the next run continues it."""

    def __init__(self, message: str, reached: str) -> None:
        super().__init__(message)
        self.reached = reached


@dataclass(frozen=True)
class Budget:
    """The budgets of a run (None: no limit)."""

    max_turns: int | None = None
    max_cost: float | None = None
    max_session_cost: float | None = None

    def event(self) -> dict[str, Any]:
        """The ``budget`` note's fields: the limits set, and a line for people."""
        limits = {name: value for name in NAMES if (value := getattr(self, name)) is not None}
        return {"kind": BUDGET, **limits, "text": self.words()}

    def words(self) -> str:
        """'budget: 5 model calls a request, $0.50 a request, $2.00 for the session', or 'no budget'."""
        parts = []
        if self.max_turns is not None:
            parts.append(f"{self.max_turns} model call{'s' if self.max_turns != 1 else ''} a request")
        if self.max_cost is not None:
            parts.append(f"{prices.dollars(self.max_cost)} a request")
        if self.max_session_cost is not None:
            parts.append(f"{prices.dollars(self.max_session_cost)} for the session")
        return "budget: " + ", ".join(parts) if parts else "no budget"

    @property
    def dollars(self) -> bool:
        """Whether a budget is in dollars (it needs the model's price)."""
        return self.max_cost is not None or self.max_session_cost is not None


def recorded(event: Mapping[str, Any]) -> dict[str, Any]:
    """The budgets a ``budget`` note holds, as the fold keeps them (only well-formed values; others: no limit)."""
    return {name: event[name] for name in NAMES if _valid(name, event.get(name)) and event.get(name) is not None}


def of_state(budget: Mapping[str, Any]) -> Budget:
    """A fold's recorded budgets as a :class:`Budget`."""
    return Budget(**{name: budget[name] for name in NAMES if name in budget})


def _valid(name: str, value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    return value >= 1 and value == int(value) if name == "max_turns" else value > 0


def chosen(recorded_budget: Budget, **given: Any) -> Budget:
    """The budgets of a run: each option given (None lifts it), else the one recorded; BudgetError for a bad value."""
    values = {}
    for name in NAMES:
        value = given.get(name, KEEP)
        if value is KEEP:
            value = getattr(recorded_budget, name)
        elif not _valid(name, value):
            kind = "a whole number of model calls, 1 or more" if name == "max_turns" else "a number of dollars above 0"
            raise BudgetError(f"{name}={value!r} is not a budget: give {kind}, or None for no limit.")
        values[name] = int(value) if name == "max_turns" and value is not None else value
    return Budget(**values)


def refusal(
    budget: Budget, model: str, table: Mapping[str, prices.Price] | None = None, *, setting: str = "{name}", provider: str | None = None
) -> str:
    """Why a budget cannot be kept on ``model`` ('' if it can): dollars on a model (on ``provider``'s cloud) with no price.

    ``table``: the prices (default: those in force, read only for a dollar budget; PriceError if they cannot be read).
    """
    model = price_key(model, provider) or model  # a cloud's replies are priced under its own key
    if not budget.dollars or prices.priced(model, prices.table() if table is None else table):
        return ""
    name = "max_cost" if budget.max_cost is not None else "max_session_cost"
    return (
        f"{setting.format(name=name)} is a budget in dollars, but nbagent has no price for {model}: nothing was sent. "
        f"Give its price in {prices.ENV} or Agent.prices, or lift the budget ({setting.format(name=name)} = None)."
    )


@dataclass(frozen=True)
class Reached:
    """A budget reached: which (its option name) and what people are told."""

    name: str
    text: str


def reached(budget: Budget, replies: int, turn: prices.Cost, session: prices.Cost) -> Reached | None:
    """The budget the next model call would exceed, if any: checked before each call, so a stop leaves no call running.

    ``replies``: the model's replies to this request so far; ``turn`` and ``session``: what this request and the
    session cost so far. A dollar budget whose figure became unknown (a reply from a model with no price) is reached:
    it can no longer be kept.
    """
    if budget.max_turns is not None and replies >= budget.max_turns:
        calls = f"{budget.max_turns} model call{'s' if budget.max_turns != 1 else ''}"
        return Reached("max_turns", f"stopped: this request reached its budget of {calls} (max_turns)")
    for name, limit, spent, what in (
        ("max_cost", budget.max_cost, turn, "this request"),
        ("max_session_cost", budget.max_session_cost, session, "the session"),
    ):
        if limit is None:
            continue
        if spent.dollars is None:
            return Reached(
                name,
                f"stopped: the cost of {what} is unknown ({spent.why()}), so its budget of {prices.dollars(limit)} ({name}) cannot be kept",
            )
        if spent.dollars >= limit:
            return Reached(name, f"stopped: {what} cost {prices.dollars(spent.dollars)}, its budget is {prices.dollars(limit)} ({name})")
    return None


def advice(hit: Reached, *, setting: str = "{name}") -> str:
    """What the user can do next, after the stop's own words (``setting``: how the option is named where the user sets it)."""
    name = setting.format(name=hit.name)
    if hit.name == "max_session_cost":
        return f"The session is saved. To continue it, set {name} to a higher amount, or to None for no limit, and run again."
    more = "more model calls" if hit.name == "max_turns" else "a higher amount"
    return f"The session is saved. To continue this request, set {name} to {more}, or to None for no limit, and run again; or make a new request."


def check(
    budget: Mapping[str, Any],
    replies: int,
    turn_spend: Mapping[str, Any],
    spend: Mapping[str, Any],
    table: Mapping[str, prices.Price] | None = None,
) -> Reached | None:
    """:func:`reached` for a fold's recorded budgets and spend (nothing priced when no dollar budget is set).

    ``table``: the prices the run read when it started (the loop's), so nothing the run does changes its budget;
    default: those in force now.
    """
    if not budget:
        return None
    limits = of_state(budget)
    if not limits.dollars:
        return reached(limits, replies, prices.Cost(0.0), prices.Cost(0.0))
    table = prices.table() if table is None else table
    return reached(limits, replies, prices.cost(turn_spend, table), prices.cost(spend, table))
