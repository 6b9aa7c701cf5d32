"""The tokens a reply cost, from the API's ``usage``: the top-level counts plus each server compaction's.

Source: the platform docs' "Compaction" page (https://platform.claude.com/docs/en/build-with-claude/compaction,
"usage" of a compacting reply) and the SDK's ``BetaIterationsUsage``: a reply that compacted on the server
carries ``usage.iterations``, one entry per sampling step; "A `compaction` entry's tokens are not included in
the top-level `usage` fields" (they are billed), while the ``message`` entries are. So a session's totals add
the compaction entries to the top-level counts; the context in use stays the top-level counts alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .events import USAGE_KEYS

__all__ = ["totals"]


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
