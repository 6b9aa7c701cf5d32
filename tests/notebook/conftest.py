"""Fixtures of the notebook tests that start real kernels."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.fake_anthropic import FakeAnthropic
from tests.support.kernels import Kernel, notebook_kernels


@pytest.fixture
def kernels(tmp_path: Path, fake: FakeAnthropic) -> Iterator[Callable[[], Kernel]]:
    """Start kernels for the notebook ``work.ipynb`` in ``tmp_path``, their API the fake one; each is shut down after."""
    with notebook_kernels(tmp_path, fake.base_url) as start:
        yield start
