"""Shared fixtures: a fake Anthropic server on 127.0.0.1 and a real SDK client pointed at it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest

from tests.fake_anthropic import FakeAnthropic

# Tests never talk to the real API: drop any real key and base URL from the environment.
for _name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
    os.environ.pop(_name, None)


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    """A running fake Messages API server."""
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def client(fake: FakeAnthropic) -> anthropic.Anthropic:
    """The real SDK client, talking HTTP to the fake server."""
    return anthropic.Anthropic(base_url=fake.base_url, api_key="test-key", max_retries=2)


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    """Where a test's session log goes."""
    return tmp_path / "session.jsonl"
