"""The price table and the cost rule against hand-computed usage (prices.py), and the fold's spend by request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nbagent.record import events as ev
from nbagent.render.parts import tokens_line
from nbagent.state import prices
from nbagent.state.fold import fold
from nbagent.state.tokens import Tokens

SPLIT = {"ephemeral_5m_input_tokens": 500, "ephemeral_1h_input_tokens": 1500}


def priced(model: str, usage: dict[str, Any], table: dict[str, prices.Price] | None = None) -> prices.Cost:
    spend: dict[str, list[int]] = {}
    prices.record(spend, model, usage)
    return prices.cost(spend, prices.PRICES if table is None else table)


# (model, usage, dollars by hand: each count times its $/MTok, over a million; None: unknown)
CASES = [
    # Opus 4.6: 1,000 in at $5, 500 written for 5 minutes at $6.25 and 1,500 for an hour at $10, 10,000 read at $0.50, 300 out at $25
    (
        "claude-opus-4-6",
        {
            "input_tokens": 1000,
            "cache_creation_input_tokens": 2000,
            "cache_creation": SPLIT,
            "cache_read_input_tokens": 10000,
            "output_tokens": 300,
        },
        (1000 * 5 + 500 * 6.25 + 1500 * 10 + 10000 * 0.5 + 300 * 25) / 1e6,
    ),
    # no split given: every cache write is a 5-minute one (nbagent asks for no other)
    ("claude-opus-4-6", {"input_tokens": 0, "cache_creation_input_tokens": 2000, "output_tokens": 0}, 2000 * 6.25 / 1e6),
    # a dated id is priced as its model
    ("claude-opus-4-6-20260101", {"input_tokens": 1000, "output_tokens": 1000}, (1000 * 5 + 1000 * 25) / 1e6),
    # Fable 5.1's cache reads are a quarter of Fable 5's
    ("claude-fable-5-1", {"cache_read_input_tokens": 1_000_000}, 0.25),
    ("claude-fable-5", {"cache_read_input_tokens": 1_000_000}, 1.0),
    # Fable 5.2 / Mythos 5.2: $8 in, $40 out (whats-new-fable-5-2), writes at 1.25x / 2x, reads at $0.20
    (
        "claude-fable-5-2",
        {"input_tokens": 1000, "cache_creation_input_tokens": 2000, "cache_creation": SPLIT, "output_tokens": 100},
        (1000 * 8 + 500 * 10 + 1500 * 16 + 100 * 40) / 1e6,
    ),
    ("claude-mythos-5-2", {"cache_read_input_tokens": 1_000_000}, 0.2),
    # Haiku 5.5, a prompt of 90,000 tokens (up to 100,000): the lower rates
    (
        "claude-haiku-5-5",
        {"input_tokens": 50_000, "cache_read_input_tokens": 40_000, "output_tokens": 1000},
        (50_000 * 0.1 + 40_000 * 0.01 + 1000 * 0.5) / 1e6,
    ),
    # Haiku 5.5, a prompt of 110,000 tokens: every token of the request, output too, at the higher rates
    (
        "claude-haiku-5-5",
        {"input_tokens": 60_000, "cache_read_input_tokens": 50_000, "output_tokens": 1000},
        (60_000 * 0.5 + 50_000 * 0.05 + 1000 * 2.5) / 1e6,
    ),
    # a server compaction's step is billed beside the reply's own counts (usage.iterations)
    (
        "claude-sonnet-5-5",
        {
            "input_tokens": 500,
            "output_tokens": 100,
            "iterations": [
                {"type": "compaction", "input_tokens": 100_000, "output_tokens": 2000},
                {"type": "message", "input_tokens": 500, "output_tokens": 100},
            ],
        },
        (500 * 2 + 100 * 10 + 100_000 * 2 + 2000 * 10) / 1e6,
    ),
    # unknown: a model with no price, inference kept in one geography, Sonnet 4.6 past a 200,000-token prompt
    ("claude-test", {"input_tokens": 10, "output_tokens": 10}, None),
    ("claude-opus-4-6", {"input_tokens": 10, "output_tokens": 10, "inference_geo": "us"}, None),
    ("claude-sonnet-4-6", {"input_tokens": 150_000, "cache_read_input_tokens": 60_000, "output_tokens": 10}, None),
    # global inference is priced as the table says; a model with no price but no tokens costs nothing
    ("claude-sonnet-4-6", {"input_tokens": 1000, "output_tokens": 10, "inference_geo": "global"}, (1000 * 3 + 10 * 15) / 1e6),
    ("claude-test", {"input_tokens": 0, "output_tokens": 0}, 0.0),
    ("nbagent-demo (offline, not Claude)", {"input_tokens": 10_000, "output_tokens": 10_000}, 0.0),  # the offline demo bills nothing
]


@pytest.mark.parametrize(("model", "usage", "expected"), CASES)
def test_cost_by_hand(model: str, usage: dict[str, Any], expected: float | None) -> None:
    cost = priced(model, usage)
    if expected is None:
        assert cost.dollars is None and cost.unpriced and cost.words() == "cost unknown" and cost.why().startswith("no price for ")
    else:
        assert cost.dollars == pytest.approx(expected, abs=1e-12)


def test_unknown_is_never_a_number() -> None:
    spend: dict[str, list[int]] = {}
    prices.record(spend, "claude-opus-4-6", {"input_tokens": 1_000_000})
    prices.record(spend, "claude-mystery", {"input_tokens": 1})
    cost = prices.cost(spend, prices.PRICES)
    assert cost == prices.Cost(None, ("claude-mystery",))
    assert (cost.words(), cost.why()) == ("cost unknown", "no price for claude-mystery")


@pytest.mark.parametrize(
    ("amount", "words"), [(0.0, "$0.00"), (0.0042, "$0.0042"), (0.42, "$0.42"), (12.3, "$12.30"), (1234.5, "$1,234.50")]
)
def test_dollars_in_words(amount: float, words: str) -> None:
    assert prices.dollars(amount) == words


def test_override_from_environment_and_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    rates = {"input": 8, "output": 40, "cache_write_5m": 10, "cache_write_1h": 16, "cache_read": 0.2}
    monkeypatch.setenv(prices.ENV, json.dumps({"claude-fable-5-2": dict(rates, input=9)}))
    assert priced("claude-fable-5-2", {"input_tokens": 1_000_000}, prices.table()).dollars == 9  # the override wins
    file = tmp_path / "prices.json"
    file.write_text(json.dumps({"claude-opus-4-6@us": dict(rates, input=5.5)}))
    monkeypatch.setenv(prices.ENV, str(file))
    assert priced("claude-opus-4-6", {"input_tokens": 1_000_000, "inference_geo": "us"}, prices.table()).dollars == 5.5
    monkeypatch.delenv(prices.ENV)
    try:
        prices.configure({"claude-test": rates})
        assert prices.priced("claude-test")
        assert priced("claude-test", {"output_tokens": 1_000_000}, prices.table()).dollars == 40
    finally:
        prices.configure(None)
    assert not prices.priced("claude-test")


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("[1, 2]", "must be a JSON object"),
        ('{"m": {"input": 1}}', "needs exactly input, cache_write_5m"),
        ('{"m": {"input": -1, "output": 1, "cache_write_5m": 1, "cache_write_1h": 1, "cache_read": 1}}', "0 or more"),
        ("{not json", "not valid JSON"),
        ("/no/such/prices.json", "cannot read it"),
    ],
)
def test_bad_override_says_what_to_do(monkeypatch: pytest.MonkeyPatch, raw: str, says: str) -> None:
    monkeypatch.setenv(prices.ENV, raw)
    with pytest.raises(prices.PriceError, match=says):
        prices.table()


def _events(*payloads: tuple[str, dict[str, Any]]) -> list[ev.Event]:
    return [ev.make(seq, kind, payload) for seq, (kind, payload) in enumerate(payloads, 1)]


def test_fold_prices_replies_and_summaries_by_request() -> None:
    usage = {"input_tokens": 1_000_000, "output_tokens": 0}
    events = _events(
        (ev.SESSION_START, {"session_id": "s"}),
        (ev.USER_MSG, {"content": "one"}),
        (ev.ASSISTANT_MSG, {"content": [{"type": "text", "text": "a"}], "model": "claude-opus-4-6", "usage": usage}),
        (ev.COMPACTION_STARTED, {"keep": 1}),
        (ev.COMPACTION, {"summary": "s", "messages": 1, "model": "claude-haiku-4-5", "usage": usage}),
        (ev.USER_MSG, {"content": "two"}),
        (ev.ASSISTANT_MSG, {"content": [{"type": "text", "text": "b"}], "model": "claude-sonnet-5-5", "usage": usage}),
    )
    state = fold(events)
    tokens = Tokens.of_state(state)
    assert tokens.cost == prices.Cost(5 + 1 + 2)  # Opus 4.6 and Haiku 4.5's summary in the first request, Sonnet 5.5 in the second
    assert tokens.turn_cost == prices.Cost(2)
    assert state.turn_replies == 1
    # each scope's tokens beside its own dollars (the summary's tokens are on its compaction entry; its dollars count)
    assert (
        tokens_line(tokens)
        == "this request: 1,000,000 tokens in · 0 out · $2.00; session: 2,000,000 tokens in · 0 out · $8.00; context 1M / 200k"
    )


def test_the_overhead_benchmark_runs_at_a_tiny_size() -> None:
    """benchmarks/cost_overhead.py measures each part and reports the target's verdict (timings are not asserted)."""
    from benchmarks import cost_overhead

    result = cost_overhead.measure(requests=20, runs=1)
    assert set(result) >= {"fold_with_cost", "fold_without_cost", "check", "check_no_budget", "tokens_line", "overhead"}
    assert "target < 0.05 ms" in cost_overhead.report(result)


def test_unreadable_overrides_make_views_say_cost_unknown_and_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """A view never fails on a bad NBAGENT_PRICES: the cost is unknown and says why; asking for the table raises."""
    monkeypatch.setenv(prices.ENV, "{not json")
    spend = {"claude-opus-4-6": [1, 0, 0, 0, 0]}
    cost = prices.cost(spend)
    assert cost.words() == "cost unknown" and cost.why().startswith("NBAGENT_PRICES is not valid JSON")
    assert prices.cost({}) == prices.Cost(0.0)
    with pytest.raises(prices.PriceError):
        prices.table()
