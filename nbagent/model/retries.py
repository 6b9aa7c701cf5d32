"""One retry budget, the loop's: which failed calls may be tried again, and how long to wait first.

The SDK client nbagent uses never retries on its own (``max_retries=0``), so these rules are the only ones:
the API's ``x-should-retry`` header decides over the status, a ``retry-after`` is waited for however long it is
(as the SDK does, and as https://platform.claude.com/docs/en/api/rate-limits says: the header says how long to
wait), up to an optional cap past which the run stops and says when to try again (:func:`wait_for`);
without one the wait grows exponentially with jitter (as the SDK's own retries do). Table tests:
tests/model/test_retries.py.
"""

from __future__ import annotations

import datetime
import email.utils
import random
import time
from typing import Any

from ..errors import ModelError

RETRYABLE_KINDS = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})
MAX_SLEEP = 4_294_967.0  # seconds: the SDK's ceiling too (time.sleep raises above about 2**32 ms on some platforms)


def should_retry(kind: str, status: int | None, header: str | None) -> bool:
    """Whether a failed call may be tried again: never a 400 (the same request is refused the same way), else the API's
    ``x-should-retry``, else the kind and status (the SDK's rule)."""
    if status == 400:
        return False
    if header == "true":
        return True
    if header == "false":
        return False
    return kind in RETRYABLE_KINDS or (status is not None and (status in (408, 409, 429) or status >= 500))


def retry_after(headers: Any, now: float | None = None) -> float | None:
    """Seconds the API asks to wait: ``retry-after-ms``, else ``retry-after`` (seconds or an HTTP date); None if unparsable or negative."""
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
    return min(seconds, MAX_SLEEP) if seconds is not None and seconds >= 0 else None


def back_off(attempt: int, asked: float | None = None) -> float:
    """Seconds to wait before retrying a model call: what the API asked (retry-after), else exponential, capped at 8 s, with jitter."""
    if asked is not None:
        return asked
    return min(8.0, 0.5 * 2 ** (attempt - 1)) * random.uniform(0.75, 1.0)


def wait_for(attempt: int, asked: float | None, cap: float | None) -> float | None:
    """Seconds to wait before retry ``attempt`` + 1: what the API asked (any length), else :func:`back_off`.

    None: the API asked for longer than ``cap`` (a setting; None: no cap), so the run stops instead and says when to
    try again (:func:`waited_too_long`), rather than retry before the API said it may.
    """
    if asked is not None and cap is not None and asked > cap:
        return None
    return back_off(attempt, asked)


def waited_too_long(err: ModelError, cap: float | None, now: float, setting: str) -> ModelError:
    """The error a run stops with where :func:`wait_for` would not wait: the API's message, and when to try again (UTC)."""
    asked = err.retry_after or 0.0
    when = datetime.datetime.fromtimestamp(now + asked, tz=datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    text = (
        f"{err} The API asks to wait {asked:,.0f} s before the next attempt, more than {setting} ({cap or 0:,.0f} s): "
        f"try again after {when} (the session is saved; run it again then, or raise {setting})."
    )
    return ModelError(text, status=err.status, kind=err.kind, retryable=True, retry_after=err.retry_after)
