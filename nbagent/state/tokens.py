"""The tokens a session or a reply cost, from the API's ``usage``: one definition of each figure every view shows.

Source: the platform docs' "Prompt caching" page (https://platform.claude.com/docs/en/build-with-claude/prompt-caching,
"Tracking cache performance"): ``input_tokens`` counts only the input after the last cache breakpoint, and
"total input tokens = cache_read_input_tokens + cache_creation_input_tokens + input_tokens". So the input a view
shows is that total: a reply read wholly from the cache has ``input_tokens`` 0 and yet had all its input.

The "Compaction" page (https://platform.claude.com/docs/en/build-with-claude/compaction, "usage" of a compacting
reply) and the SDK's ``BetaIterationsUsage``: a reply that compacted on the server carries ``usage.iterations``,
one entry per sampling step; "A `compaction` entry's tokens are not included in the top-level `usage` fields"
(they are billed), while the ``message`` entries are. So a session's totals add the compaction entries to the
top-level counts; the context in use stays the top-level counts alone (context.py's ``context_tokens``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..record.events import USAGE_KEYS
from . import prices
from .model_table import DEFAULT_WINDOW

__all__ = ["Tokens", "totals"]


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def totals(usage: Any) -> dict[str, int]:
    """Each of :data:`USAGE_KEYS` for one reply: its top-level count plus those of its compaction iterations."""
    usage = usage if isinstance(usage, Mapping) else {}
    out = {key: _count(usage.get(key)) for key in USAGE_KEYS}
    iterations = usage.get("iterations")
    for entry in iterations if isinstance(iterations, list) else ():
        if isinstance(entry, Mapping) and entry.get("type") == "compaction":
            for key in USAGE_KEYS:
                out[key] += _count(entry.get(key))
    return out


@dataclass(frozen=True)
class Tokens:
    """The token figures of a session (or one reply), as every view shows them (render/parts.py says them in words).

    ``input``: every input token, cached or not (uncached + written to the cache + read from it);
    ``from_cache`` and ``to_cache``: the parts of ``input`` read from and written to the cache; ``output``: the
    replies' tokens; ``context``: what the conversation takes of the model's ``window`` after the last reply (that
    reply's whole input and the reply itself; 0 before any reply, or after a local compaction: ``compacted``);
    ``cost`` and ``turn_cost``: the session's and the current request's dollars (prices.py; None: not shown);
    ``turn``: the current request's own figures (None: a view of the whole session, or no request yet).
    """

    input: int = 0
    output: int = 0
    from_cache: int = 0
    to_cache: int = 0
    context: int = 0
    window: int = DEFAULT_WINDOW
    compacted: bool = False
    cost: prices.Cost | None = None
    turn_cost: prices.Cost | None = None
    turn: Tokens | None = None

    @classmethod
    def of(
        cls,
        usage: Any,
        *,
        context: Any = 0,
        window: Any = 0,
        compacted: bool = False,
        cost: prices.Cost | None = None,
        turn_cost: prices.Cost | None = None,
        turn: Tokens | None = None,
    ) -> Tokens:
        """The figures from a ``usage`` (a reply's, or a session's summed counts), the context in use and the window (0: the default)."""
        counts = totals(usage)
        read, written = counts["cache_read_input_tokens"], counts["cache_creation_input_tokens"]
        return cls(
            input=counts["input_tokens"] + read + written,
            output=counts["output_tokens"],
            from_cache=read,
            to_cache=written,
            context=_count(context),
            window=_count(window) or DEFAULT_WINDOW,
            compacted=compacted and not _count(context),
            cost=cost,
            turn_cost=turn_cost,
            turn=turn,
        )

    @classmethod
    def of_state(cls, state: Any) -> Tokens:
        """The figures of a folded session (fold.State): its summed usage, its context after the last reply, its window and cost.

        ``turn`` holds the current request's own tokens and cost (none before its first reply); :meth:`whole` leaves it out.
        """
        turn_cost = prices.cost(state.turn_spend) if state.turn_replies or state.turn_spend else None
        turn = cls.of(state.turn_usage, cost=turn_cost)
        return cls.of(
            state.usage,
            context=state.context_tokens,
            window=state.window,
            compacted=bool(state.compactions),
            cost=prices.cost(state.spend),
            turn_cost=turn_cost,
            turn=turn,
        )

    def whole(self) -> Tokens:
        """The session's figures alone, for a view of the whole session (no request of its own)."""
        return replace(self, turn=None, turn_cost=None)

    @property
    def total(self) -> int:
        """Input plus output."""
        return self.input + self.output

    @property
    def used(self) -> bool:
        """Whether any token was counted yet."""
        return bool(self.input or self.output)
