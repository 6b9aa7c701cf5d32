"""Shared fixtures: a fake Anthropic server on 127.0.0.1 and a real SDK client pointed at it."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from tests.fake_anthropic import FakeAnthropic

# Tests never talk to the real API: drop any real key and base URL from the environment.
for _name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
    os.environ.pop(_name, None)

# Tests never touch the real signing secret: every test (and every child process or kernel
# it starts, which inherit os.environ) uses a throwaway per-user data folder.
_DATA_DIR = tempfile.mkdtemp(prefix="nbagent-test-data-")
os.environ["NBAGENT_DATA_DIR"] = _DATA_DIR


@pytest.fixture(autouse=True, scope="session")
def _private_data_dir() -> Iterator[None]:
    """The throwaway NBAGENT_DATA_DIR, removed after the run."""
    yield
    shutil.rmtree(_DATA_DIR, ignore_errors=True)


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


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeAnthropic) -> Iterator[Any]:
    """An in-process IPython shell in a fresh folder with nbagent loaded and the fake server as the API."""
    from IPython.core.interactiveshell import InteractiveShell

    import nbagent

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    ip = InteractiveShell.instance()
    ip.run_cell("%load_ext nbagent")
    yield ip
    ip.run_cell("%unload_ext nbagent")
    for name in [n for n, v in ip.user_ns.items() if isinstance(v, nbagent.Tool)]:
        del ip.user_ns[name]
    ip.config.pop("Agent", None)
