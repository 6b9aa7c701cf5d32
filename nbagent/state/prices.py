"""What a session cost in dollars: the price table by model, and the one rule that prices a reply's ``usage``.

The fold keeps each reply's tokens by *price key* (:func:`key`: the model, and where a price depends on more than the
model, what it depends on), never dollars; views price those counts with the table in force (:func:`table`), so a
price set later (``NBAGENT_PRICES``, ``Agent.prices``) applies to every session already logged. A key the table has
no price for makes the figure "cost unknown": never a wrong number. Table tests: tests/state/test_prices.py.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import NbagentError

__all__ = ["Cost", "Price", "PriceError", "cost", "key", "record", "table"]

# The five counts a price key holds, in this order: uncached input, cache writes of 5 minutes and of 1 hour, cache
# reads, output (the "Prompt caching" page prices writes by their duration: usage.cache_creation splits them).
PARTS = ("input", "cache_write_5m", "cache_write_1h", "cache_read", "output")
ENV = "NBAGENT_PRICES"  # a JSON object, or the path of a file holding one: {"model": {"input": 3, ...}} in $ per million tokens


class PriceError(NbagentError):
    """A price override that cannot be used: what is wrong and how it should look."""


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens of each kind; ``above``: (prompt tokens, the price of a request whose prompt is longer).

    A prompt is every input token of the request (uncached, cache writes, cache reads), as the pricing pages count it.
    ``above`` with a price of None: requests past that length are not priced here (their cost is unknown).
    """

    input: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    output: float
    above: tuple[int, Price | None] | None = None

    def dollars(self, counts: Sequence[int]) -> float:
        """The price of ``counts`` (the five of :data:`PARTS`)."""
        i, w5, w1, r, o = counts
        return (self.input * i + self.cache_write_5m * w5 + self.cache_write_1h * w1 + self.cache_read * r + self.output * o) / 1_000_000


# Prices in USD per million tokens, as the platform docs gave them on 2026-12-04 (checked for this table that day):
#   https://platform.claude.com/docs/en/about-claude/pricing ("Model pricing": Fable 5.1 / Mythos 5.1, Fable 5 /
#   Mythos 5, Opus 5, 4.8, 4.7, 4.6, 4.5), and each model's overview page where the pricing page's rows were not
#   at hand: https://platform.claude.com/docs/zh-CN/models/opus-5-5/overview (Opus 5.5),
#   https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/overview (Sonnet 5.5: its cache read is $0.20 there; the
#   pricing page itself is not in the docs index at hand (searched 2026-12: only model pages and third parties come back),
#   and trackers that re-read it after 2026-10-07 report $0.10: not confirmed here, so the model page's figure stands;
#   set NBAGENT_PRICES if your bill says $0.10), https://platform.claude.com/docs/zh-CN/models/sonnet-5/overview (Sonnet 5),
#   https://platform.claude.com/docs/zh-TW/models/haiku-5-5/overview (Haiku 5.5: priced by the prompt's length,
#   over 100,000 tokens every token of the request at the higher rates), and for Fable 5.2 / Mythos 5.2: $8 input, $40
#   output (https://platform.claude.com/docs/en/models/fable-5-2/whats-new-fable-5-2, "Pricing"; the comparison table
#   of https://platform.claude.com/docs/id/models/sonnet-5/overview.md: "$8 / $40"); their cache writes are the
#   standard 1.25x and 2x of input ("Prompt caching", https://platform.claude.com/docs/en/build-with-claude/prompt-caching)
#   and their cache read $0.20, a quarter of the usual 0.1x as for Fable 5.1 (its migration guide): that read price is
#   not on a page seen here (third-party price lists give $0.20), so it is the one figure of this table without one.
# Sonnet 4.6 and 4.5 are priced up to a 200,000-token prompt only: past it the docs seen disagree (a long-context
# premium, or none), so such a request's cost is unknown. Not priced at all (cost unknown until NBAGENT_PRICES or
# Agent.prices gives one): Mythos Preview (only input and output prices were found).
_FABLE_5_2 = Price(8, 10, 16, 0.2, 40)
_FABLE_5_1 = Price(10, 12.5, 20, 0.25, 50)
_FABLE_5 = Price(10, 12.5, 20, 1, 50)
_OPUS_5_5 = Price(4, 5, 8, 0.2, 20)
_OPUS = Price(5, 6.25, 10, 0.5, 25)  # Opus 4.5 to Opus 5
_SONNET_5 = Price(2, 2.5, 4, 0.2, 10)  # Sonnet 5 and 5.5
_SONNET_4 = Price(3, 3.75, 6, 0.3, 15, above=(200_000, None))
_HAIKU_4_5 = Price(1, 1.25, 2, 0.1, 5)
_HAIKU_5_5 = Price(0.1, 0.125, 0.2, 0.01, 0.5, above=(100_000, Price(0.5, 0.625, 1, 0.05, 2.5)))

PRICES: dict[str, Price] = {
    "claude-fable-5-2": _FABLE_5_2,
    "claude-mythos-5-2": _FABLE_5_2,
    "claude-fable-5-1": _FABLE_5_1,
    "claude-mythos-5-1": _FABLE_5_1,
    "claude-fable-5": _FABLE_5,
    "claude-mythos-5": _FABLE_5,
    "claude-opus-5-5": _OPUS_5_5,
    "claude-opus-5": _OPUS,
    "claude-opus-4-8": _OPUS,
    "claude-opus-4-7": _OPUS,
    "claude-opus-4-6": _OPUS,
    "claude-opus-4-5": _OPUS,
    "claude-opus-4-5-20251101": _OPUS,
    "claude-sonnet-5-5": _SONNET_5,
    "claude-sonnet-5": _SONNET_5,
    "claude-sonnet-4-6": _SONNET_4,
    "claude-sonnet-4-5": _SONNET_4,
    "claude-sonnet-4-5-20250929": _SONNET_4,
    "claude-haiku-5-5": _HAIKU_5_5,
    "claude-haiku-4-5": _HAIKU_4_5,
    "claude-haiku-4-5-20251001": _HAIKU_4_5,
    "nbagent-demo (offline, not Claude)": Price(0, 0, 0, 0, 0),  # model.DemoModel: nothing is billed
}

_DATED = re.compile(r"^(.*)-\d{8}$")
_GLOBAL_GEOS = (None, "", "global", "not_available")  # usage.inference_geo of a request priced at the table's rates


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def counts(usage: Mapping[str, Any]) -> list[int]:
    """The five counts of one sampling step's usage; cache writes by duration (usage.cache_creation), else all 5-minute."""
    written = _int(usage.get("cache_creation_input_tokens"))
    split = usage.get("cache_creation")
    one_hour = _int(split.get("ephemeral_1h_input_tokens")) if isinstance(split, Mapping) else 0
    five = _int(split.get("ephemeral_5m_input_tokens")) if isinstance(split, Mapping) else written
    if isinstance(split, Mapping) and five + one_hour < written:  # a split that does not add up: the rest at 5 minutes
        five = written - one_hour
    return [_int(usage.get("input_tokens")), five, one_hour, _int(usage.get("cache_read_input_tokens")), _int(usage.get("output_tokens"))]


def model_key(model: str | None, prices: Mapping[str, Price] = PRICES) -> str:
    """A model id as the table names it: a dated id whose undated name has a price is priced as that name."""
    name = str(model or "unknown")
    if name not in prices:
        dated = _DATED.match(name)
        if dated and dated.group(1) in prices:
            return dated.group(1)
    return name


def key(model: str | None, usage: Mapping[str, Any], prices: Mapping[str, Price] = PRICES, c: Sequence[int] | None = None) -> str:
    """The price key of one sampling step: its model, '@<geo>' for inference outside the global pool, '>N' for a long prompt.

    Keys with a qualifier are not in the table unless an override names them: their cost is unknown, never guessed.
    ``c``: the step's :func:`counts`, if already made.
    """
    name = model_key(model, prices)
    geo = usage.get("inference_geo")
    if geo not in _GLOBAL_GEOS:
        name = f"{name}@{geo}"
    price = prices.get(name)
    if price is not None and price.above is not None:
        c = counts(usage) if c is None else c
        if c[0] + c[1] + c[2] + c[3] > price.above[0]:
            name = f"{name}>{price.above[0]}"
    return name


def record(spend: MutableMapping[str, list[int]], model: str | None, usage: Any, *more: MutableMapping[str, list[int]]) -> None:
    """Add one reply's tokens to ``spend`` (and each of ``more``) by price key: its top-level usage and each server compaction step."""
    if not isinstance(usage, Mapping):
        return
    iterations = usage.get("iterations")
    steps = [usage]
    if iterations:
        steps += [e for e in iterations if isinstance(e, Mapping) and e.get("type") == "compaction"]
    for step in steps:
        c = counts(step)
        if not any(c):
            continue
        name = key(model, step, PRICES, c)
        for target in (spend, *more):
            held = target.get(name)
            if held is None:
                target[name] = list(c)
            else:
                held[0] += c[0]
                held[1] += c[1]
                held[2] += c[2]
                held[3] += c[3]
                held[4] += c[4]


def price_of(name: str, prices: Mapping[str, Price]) -> Price | None:
    """The price of a key (None: not priced); a '>N' key is its model's price past N tokens."""
    if name in prices:
        return prices[name]
    base, sep, _n = name.rpartition(">")
    found = prices.get(base) if sep else None
    return found.above[1] if found is not None and found.above is not None else None


@dataclass(frozen=True)
class Cost:
    """Dollars spent (None: unknown), and the price keys with tokens but no price (why it is unknown)."""

    dollars: float | None
    unpriced: tuple[str, ...] = ()
    problem: str = ""  # the price overrides could not be read (their error): nothing is priced until they are mended

    @property
    def known(self) -> bool:
        """Whether the figure is a number."""
        return self.dollars is not None

    def words(self) -> str:
        """'$0.42', or 'cost unknown' (:meth:`why` says why)."""
        return dollars(self.dollars) if self.dollars is not None else "cost unknown"

    def why(self) -> str:
        """Why the figure is unknown: 'no price for claude-x', or the overrides' error ('' when it is known)."""
        return self.problem or (f"no price for {', '.join(self.unpriced)}" if self.unpriced else "")


def dollars(amount: float) -> str:
    """An amount the way every view says it: '$12.30', '$0.42', '$0.0042' (four places below a cent), '$0.00'."""
    return f"${amount:,.4f}" if 0 < amount < 0.01 else f"${amount:,.2f}"


def cost(spend: Mapping[str, Sequence[int]] | None, prices: Mapping[str, Price] | None = None) -> Cost:
    """The dollars of ``spend`` (price key -> the five counts) at ``prices`` (default: :func:`table`).

    With the default, overrides that cannot be read make the cost unknown (saying why) rather than fail a view.
    """
    if prices is None:
        try:
            prices = table()
        except PriceError as err:
            return Cost(None, problem=str(err)) if any(any(held) for held in (spend or {}).values()) else Cost(0.0)
    total, unpriced = 0.0, []
    for name, held in (spend or {}).items():
        price = price_of(name, prices)
        if price is None:
            if any(held):
                unpriced.append(name)
            continue
        total += price.dollars(held)
    return Cost(None, tuple(sorted(unpriced))) if unpriced else Cost(total)


def parse(overrides: Any, *, where: str = ENV) -> dict[str, Price]:
    """Price overrides from a mapping {model or key: {input, output, cache_write_5m, cache_write_1h, cache_read}}; PriceError if malformed."""
    if not isinstance(overrides, Mapping):
        raise PriceError(f"{where} must be a JSON object of model -> prices, e.g. {EXAMPLE}")
    parsed: dict[str, Price] = {}
    for name, given in overrides.items():
        if not isinstance(given, Mapping) or set(given) != set(PARTS):
            raise PriceError(f"{where}: the price of {name!r} needs exactly {', '.join(PARTS)} ($ per million tokens), e.g. {EXAMPLE}")
        rates = [given[part] for part in PARTS]
        if not all(isinstance(r, (int, float)) and not isinstance(r, bool) and r >= 0 for r in rates):
            raise PriceError(f"{where}: the prices of {name!r} must be numbers of dollars per million tokens, 0 or more.")
        i, w5, w1, r, o = (float(rate) for rate in rates)
        parsed[str(name)] = Price(i, w5, w1, r, o)
    return parsed


EXAMPLE = '{"claude-fable-5-2": {"input": 8, "output": 40, "cache_write_5m": 10, "cache_write_1h": 16, "cache_read": 0.2}}'
_settings: dict[str, Price] = {}  # Agent.prices in a kernel (configure); the environment's are read per call (cached)
_env_cache: tuple[str, dict[str, Price]] = ("", {})


def _from_env() -> dict[str, Price]:
    global _env_cache
    raw = os.environ.get(ENV, "").strip()
    if raw == _env_cache[0]:
        return _env_cache[1]
    text = raw
    if raw and raw[0] not in "{[":  # else the path of a file
        try:
            text = Path(raw).expanduser().read_text(encoding="utf-8")
        except OSError as err:
            raise PriceError(f"{ENV}={raw}: cannot read it ({err.strerror or err}); give a JSON object or a readable file.") from None
    try:
        parsed = parse(json.loads(text), where=ENV) if text else {}
    except json.JSONDecodeError as err:
        raise PriceError(f"{ENV} is not valid JSON ({err.msg}); e.g. {EXAMPLE}") from None
    _env_cache = (raw, parsed)
    return parsed


def configure(overrides: Mapping[str, Any] | None) -> None:
    """Set this process's own overrides (``Agent.prices``); None or {} clears them. PriceError if malformed."""
    global _settings
    _settings = parse(overrides or {}, where="Agent.prices")


def table() -> dict[str, Price]:
    """The prices in force: the table, then ``NBAGENT_PRICES``, then this process's ``Agent.prices`` (later wins)."""
    extra = _from_env()
    if not extra and not _settings:
        return PRICES
    return {**PRICES, **extra, **_settings}


def priced(model: str | None, prices: Mapping[str, Price] | None = None) -> bool:
    """Whether requests to ``model`` have a known price (the budget rules refuse a cost budget on one that has none)."""
    prices = table() if prices is None else prices
    return model_key(model, prices) in prices
