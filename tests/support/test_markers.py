"""The markers' part check (tests/conftest.py): a missing part skips with one line here, and fails under CI=true."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import conftest


def test_a_missing_part_skips_with_a_reason_here_and_fails_under_ci(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    item = request.node
    item.add_marker(pytest.mark.postgres)  # this very test, as if it needed PostgreSQL
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no initdb, no pg_ctl
    monkeypatch.delenv("NBAGENT_TEST_POSTGRES", raising=False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"^needs PostgreSQL: set NBAGENT_TEST_POSTGRES") as skipped:
        conftest.pytest_runtest_setup(item)
    assert "\n" not in str(skipped.value)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"^CI=true, so a postgres test may not be skipped: it needs PostgreSQL"):
        conftest.pytest_runtest_setup(item)
    monkeypatch.setenv("NBAGENT_TEST_POSTGRES", "postgresql://localhost/nbagent_test")
    conftest.pytest_runtest_setup(item)  # the part is there: the test runs, under CI or not


def test_only_marked_tests_are_checked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CI", "true")
    conftest.pytest_runtest_setup(request.node)  # no kernel, browser or postgres mark: nothing to check
    assert conftest.missing_part("postgres", {"PATH": str(tmp_path)}) is not None
    assert conftest.missing_part("slow", {"PATH": str(tmp_path)}) is None


def test_the_mcp_part_is_the_mcp_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    assert conftest.missing_part("mcp") is None  # the test extra installs it
    real = conftest.importlib.util.find_spec
    monkeypatch.setattr(conftest.importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a))
    assert conftest.missing_part("mcp") == "needs the mcp SDK: pip install -e '.[test]' (or 'nbagent[mcp]')"
