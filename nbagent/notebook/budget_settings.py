"""The ``Agent`` settings for cost and budgets (a mixin of notebook/settings.py's ``Agent``), and what a run takes of them."""

from __future__ import annotations

from typing import Any

from traitlets import Dict, Float, HasTraits, Int, TraitError, observe, validate

from ..state import budget as budgets
from ..state import prices

NAMES = budgets.NAMES


class BudgetSettings(HasTraits):
    """``Agent.max_turns``, ``Agent.max_cost``, ``Agent.max_session_cost`` (None: no limit) and ``Agent.prices``."""

    max_turns = Int(None, allow_none=True, help="Model calls one request may make before the agent stops (None, default: no limit).").tag(
        config=True
    )
    max_cost = Float(
        None, allow_none=True, help="Dollars one request may cost before the agent stops, at the prices nbagent knows (None: no limit)."
    ).tag(config=True)
    max_session_cost = Float(
        None, allow_none=True, help="Dollars the whole session may cost before the agent stops (None, default: no limit)."
    ).tag(config=True)
    prices = Dict(
        {},
        help="Prices in $ per million tokens that override or add to nbagent's table, by model: {'claude-x': {'input': 3, "
        "'output': 15, 'cache_write_5m': 3.75, 'cache_write_1h': 6, 'cache_read': 0.3}} (NBAGENT_PRICES in a terminal).",
    ).tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        self.budgets_set: set[str] = set()  # the budgets set in this kernel, even to what they were (a resume takes only these)
        super().__init__(**kwargs)

    @validate(*NAMES)
    def _budget(self, proposal: Any) -> Any:
        name, value = proposal["trait"].name, proposal["value"]
        try:
            budgets.chosen(budgets.Budget(), **{name: value})
        except budgets.BudgetError as exc:
            raise TraitError(f"Agent.{exc}") from None
        self.budgets_set.add(name)
        return value

    @validate("prices")
    def _prices(self, proposal: Any) -> dict[str, Any]:
        try:
            prices.parse(proposal["value"], where="Agent.prices")
        except prices.PriceError as exc:
            raise TraitError(str(exc)) from None
        return dict(proposal["value"])

    @observe("prices")
    def _use_prices(self, change: Any) -> None:
        prices.configure(change["new"])  # every view in this kernel prices with them from now on


def options(agent: BudgetSettings, *, resume: bool) -> dict[str, Any]:
    """The budget options of a run: a new request takes every ``Agent`` budget; a resume only those set in this kernel.

    A resume after a restart or a crash otherwise keeps the budgets its log recorded (budget.KEEP), so it never runs
    past the budget the run had.
    """
    return {name: getattr(agent, name) for name in NAMES if not resume or name in agent.budgets_set}
