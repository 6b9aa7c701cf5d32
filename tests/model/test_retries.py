"""The retry rules as pure functions: how long the API asks to wait, how long the loop waits, what a stopped run says."""

from __future__ import annotations

import datetime

import pytest

from nbagent.errors import ModelError
from nbagent.model.retries import MAX_SLEEP, retry_after, should_retry, wait_for, waited_too_long

NOW = datetime.datetime(2026, 12, 2, 12, 0, tzinfo=datetime.timezone.utc).timestamp()


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "120"}, 120.0),  # past the old 60 s ceiling: the API's word holds (docs: api/rate-limits)
        ({"retry-after": "3600"}, 3600.0),
        ({"retry-after": "0"}, 0.0),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),  # the precise header wins, as in the SDK
        ({"retry-after": "Wed, 02 Dec 2026 12:02:00 GMT"}, 120.0),  # an HTTP date
        ({"retry-after": "-5"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "1e12"}, MAX_SLEEP),  # the SDK's ceiling: time.sleep raises beyond it on some platforms
        ({}, None),
    ],
)
def test_how_long_the_api_asks_to_wait(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after(headers, NOW) == seconds


@pytest.mark.parametrize(
    ("attempt", "asked", "cap", "wait"),
    [
        (1, 120.0, None, 120.0),  # no cap: the whole wait the API asks for
        (4, 120.0, None, 120.0),  # whatever the attempt
        (1, 120.0, 300.0, 120.0),  # under the cap
        (1, 120.0, 120.0, 120.0),  # at the cap
        (1, 120.0, 30.0, None),  # over the cap: not waited for (the run stops and says when to try again)
        (1, 0.001, 30.0, 0.001),
        (1, 0.0, 0.5, 0.0),
    ],
)
def test_how_long_the_loop_waits(attempt: int, asked: float, cap: float | None, wait: float | None) -> None:
    assert wait_for(attempt, asked, cap) == wait


@pytest.mark.parametrize(("attempt", "low", "high"), [(1, 0.375, 0.5), (2, 0.75, 1.0), (5, 6.0, 8.0), (9, 6.0, 8.0)])
def test_without_a_retry_after_the_wait_backs_off_with_jitter(attempt: int, low: float, high: float) -> None:
    for cap in (None, 0.1):  # a cap applies to what the API asks, never to the loop's own back-off
        wait = wait_for(attempt, None, cap)
        assert wait is not None and low <= wait <= high


def test_a_wait_past_the_cap_ends_with_when_to_try_again() -> None:
    err = ModelError("Anthropic API error (429 rate_limit_error): Rate limited.", status=429, kind="rate_limit_error", retry_after=120.0)
    stopped = waited_too_long(err, 30.0, NOW, "Agent.max_retry_wait")
    assert str(stopped).startswith("Anthropic API error (429 rate_limit_error): Rate limited. The API asks to wait 120 s")
    assert "more than Agent.max_retry_wait (30 s): try again after 2026-12-02 12:02:00 UTC" in str(stopped)
    assert (stopped.status, stopped.kind, stopped.retryable, stopped.retry_after) == (429, "rate_limit_error", True, 120.0)


@pytest.mark.parametrize(
    ("kind", "status", "header", "retry"),
    [
        ("invalid_request_error", 400, None, False),
        ("invalid_request_error", 400, "true", False),  # never a 400, whatever the header says
        ("rate_limit_error", 429, None, True),
        ("rate_limit_error", 429, "false", False),  # the API's header decides over the status
        ("api_error", 409, "true", True),
        ("overloaded_error", None, None, True),  # mid-stream: the kind decides
        ("authentication_error", 401, None, False),
        ("api_error", 503, None, True),
    ],
)
def test_which_failures_are_retried(kind: str, status: int | None, header: str | None, retry: bool) -> None:
    assert should_retry(kind, status, header) is retry
