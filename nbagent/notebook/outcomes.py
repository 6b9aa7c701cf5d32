"""Outcomes that are not mistakes: no API key, and a stop at a budget the user set, said calmly with how to go on.

A ``UsageError`` is for a real usage mistake (a bad option, an unknown ``{name}``, settings that do not fit): IPython
shows it as a red error block. A missing key (nothing was sent or logged) and a budget stop (the session is saved) are
printed as plain output instead, and the cell ends normally. Where nobody reads the cells as they run (a kernel no
front end told its notebook's path: nbclient, nbconvert, papermill) they stay a ``UsageError``, so that the run
fails at that cell rather than going on without the agent's work (docs/notebook.md, "Budget stops and a missing key").
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError

from ..state import budget as budgets
from .kernel import told_path

AFTER_NO_KEY = "Nothing was sent or logged; run this cell again once the key is set."


class NoKey(UsageError):
    """No API key for Claude (build.problem, build.model): said calmly where a person reads the notebook."""


def headless(shell: Any) -> bool:
    """Whether nobody reads this kernel's cells as they run: a kernel whose front end did not say its notebook's path."""
    return getattr(shell, "kernel", None) is not None and told_path(shell) is None


def words(outcome: NoKey | budgets.BudgetReached) -> str:
    """The calm words: what happened and how to go on."""
    if isinstance(outcome, NoKey):
        return f"nbagent: {outcome}\n{AFTER_NO_KEY}"
    advice = budgets.advice(budgets.Reached(outcome.reached, ""), setting="Agent.{name}")
    return f"nbagent: this request stopped at its budget, as set (the panel above says which and what it cost). {advice}"


def say(shell: Any, outcome: NoKey | budgets.BudgetReached) -> None:
    """Print ``outcome`` calmly, as plain output (the cell succeeds); where nobody reads the cells, raise it as a UsageError."""
    if headless(shell):
        raise UsageError(str(outcome)) from None
    print(words(outcome), flush=True)
