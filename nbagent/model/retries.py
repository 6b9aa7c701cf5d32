"""One retry budget, the loop's: which failed calls may be tried again, and how long to wait first.

The SDK client nbagent uses never retries on its own (``max_retries=0``), so these rules are the only ones:
the API's ``x-should-retry`` header decides over the status, a ``retry-after`` of up to a minute is waited
for, and otherwise the wait grows exponentially with jitter (as the SDK's own retries do).
"""

from __future__ import annotations

import email.utils
import random
import time
from typing import Any

RETRYABLE_KINDS = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})
MAX_RETRY_AFTER = 60.0  # a longer (or unparsable) retry-after is not waited for: the loop's own back-off applies, as in the SDK


def should_retry(kind: str, status: int | None, header: str | None) -> bool:
    """Whether a failed call may be tried again: the API's ``x-should-retry`` wins, else the kind and status (the SDK's rule)."""
    if header == "true":
        return True
    if header == "false":
        return False
    return kind in RETRYABLE_KINDS or (status is not None and (status in (408, 409, 429) or status >= 500))


def retry_after(headers: Any, now: float | None = None) -> float | None:
    """Seconds the API asks to wait: ``retry-after-ms``, else ``retry-after`` (seconds or an HTTP date); None beyond 60 s or unparsable."""
    seconds: float | None = None
    try:
        if headers.get("retry-after-ms") is not None:
            seconds = float(headers["retry-after-ms"]) / 1000
        elif headers.get("retry-after") is not None:
            value = str(headers["retry-after"])
            try:
                seconds = float(value)
            except ValueError:
                when = email.utils.parsedate_to_datetime(value)
                seconds = when.timestamp() - (time.time() if now is None else now)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return seconds if seconds is not None and 0 <= seconds <= MAX_RETRY_AFTER else None


def back_off(attempt: int, asked: float | None = None) -> float:
    """Seconds to wait before retrying a model call: what the API asked (retry-after), else exponential, capped at 8 s, with jitter."""
    if asked is not None:
        return asked
    return min(8.0, 0.5 * 2 ** (attempt - 1)) * random.uniform(0.75, 1.0)
