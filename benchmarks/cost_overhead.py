"""The cost and budget rules' overhead per request: ``python -m benchmarks.cost_overhead [--requests N] [--runs N]``.

A request here is what the engine does once per model call: fold the reply's ``assistant_msg`` into the state
(issue 25 adds pricing it by key into the session's and the request's spend) and, before the next call, apply the
budget rule (price both spends at the table in force, compare with the budgets). Timed side by side in one process,
in turns (CPU time, median of ``--runs``):

* fold: ``fold.apply`` of a realistic reply (tool_use content, usage with a cache split and a server compaction's
  iteration) with the spend rule, and with it switched off (``fold._spent`` replaced by a no-op): the difference is
  the cost rule's share of the fold;
* check: ``budget.check`` with all three budgets set on a session of a few price keys (the loop's call before each
  model call), and with no budget (its fast path);
* the status line's pricing (``usage.Tokens.of_state``), which every view recomputes after an event.

The target (issue 25): the rules' overhead per request under 0.05 ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from nbagent.record import events as ev
from nbagent.state import budget, fold
from nbagent.state.tokens import Tokens

TARGET_MS = 0.05
USAGE = {
    "input_tokens": 1_200,
    "cache_creation_input_tokens": 3_000,
    "cache_creation": {"ephemeral_5m_input_tokens": 3_000, "ephemeral_1h_input_tokens": 0},
    "cache_read_input_tokens": 48_000,
    "output_tokens": 700,
    "iterations": [
        {"type": "compaction", "input_tokens": 150_000, "output_tokens": 3_000},
        {"type": "message", "input_tokens": 1_200, "output_tokens": 700},
    ],
}
CONTENT = [{"type": "text", "text": "Let me look."}, {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"name": "x"}}]
BUDGETS = {"max_turns": 500, "max_cost": 1_000.0, "max_session_cost": 10_000.0}


def _state() -> fold.State:
    """A session mid-request: one request, replies from three models so far (three price keys), the budgets logged."""
    state = fold.State()
    fold.apply(state, ev.make(1, ev.USER_MSG, {"content": "go"}))
    for seq, model in enumerate(("claude-sonnet-5-5", "claude-haiku-5-5", "claude-opus-5-5"), 2):
        fold.apply(state, ev.make(seq, ev.ASSISTANT_MSG, {"content": [{"type": "text", "text": "."}], "model": model, "usage": USAGE}))
    state.budget = dict(BUDGETS)
    return state


def _timed(action: Callable[[], Any], requests: int) -> float:
    """CPU milliseconds per call of ``action`` over ``requests`` calls."""
    start = time.process_time()
    for _ in range(requests):
        action()
    return (time.process_time() - start) * 1000 / requests


def measure(requests: int = 20_000, runs: int = 5) -> dict[str, float]:
    """Median milliseconds per request of each part, and the rules' overhead (fold's share + check)."""
    reply = ev.make(10, ev.ASSISTANT_MSG, {"content": CONTENT, "model": "claude-sonnet-5-5", "usage": USAGE})
    state = _state()
    open_calls = dict(state.open_calls)
    spent = fold._spent

    def apply_reply() -> None:
        state.messages = state.messages[:4] if isinstance(state.messages, list) else state.messages
        state.open_calls = dict(open_calls)
        fold.apply(state, reply)

    def check_budgets() -> None:
        budget.check(state.budget, state.turn_replies, state.turn_spend, state.spend)

    def check_none() -> None:
        budget.check({}, state.turn_replies, state.turn_spend, state.spend)

    def status_figures() -> None:
        Tokens.of_state(state)

    samples: dict[str, list[float]] = {"fold_with_cost": [], "fold_without_cost": [], "check": [], "check_no_budget": [], "tokens_line": []}
    for _ in range(runs):  # in turns, so load on the machine falls on both sides alike
        samples["fold_with_cost"].append(_timed(apply_reply, requests))
        fold._spent = lambda state, event: None  # type: ignore[assignment]
        try:
            samples["fold_without_cost"].append(_timed(apply_reply, requests))
        finally:
            fold._spent = spent
        samples["check"].append(_timed(check_budgets, requests))
        samples["check_no_budget"].append(_timed(check_none, requests))
        samples["tokens_line"].append(_timed(status_figures, requests))
    result = {name: statistics.median(values) for name, values in samples.items()}
    result["overhead"] = max(0.0, result["fold_with_cost"] - result["fold_without_cost"]) + result["check"]
    return result


def report(result: dict[str, float]) -> str:
    """The figures as a Markdown table, with the target's verdict."""
    rows = [
        ("fold of one reply, with the cost rule", result["fold_with_cost"]),
        ("fold of one reply, without it", result["fold_without_cost"]),
        ("budget check before a model call (three budgets)", result["check"]),
        ("budget check, no budget set", result["check_no_budget"]),
        ("a view's figures with the cost (Tokens.of_state)", result["tokens_line"]),
    ]
    lines = ["| per request | ms |", "|---|---|", *(f"| {name} | {ms:.4f} |" for name, ms in rows)]
    verdict = "passes" if result["overhead"] < TARGET_MS else "FAILS"
    lines.append(
        f"\nThe rules' overhead per request (the fold's share + the check): {result['overhead']:.4f} ms; target < {TARGET_MS} ms: {verdict}."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    print(report(measure(args.requests, args.runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
