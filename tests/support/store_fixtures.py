"""The store a test runs on: the file store, or a fresh database on the throwaway PostgreSQL cluster (tests/support/pg_harness.py)."""

from __future__ import annotations

import pytest

from tests.support import pg_harness

STORES = ["file", pytest.param("postgres", marks=pytest.mark.postgres)]
_databases: dict[str, str] = {}


def database(name: str = "shared") -> str:
    """A database URL of the shared cluster, made once per ``name`` in this process."""
    if name not in _databases:
        _databases[name] = pg_harness.shared().new_database()
    return _databases[name]


def use_store(kind: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Make ``Session.open`` use ``kind`` (through NBAGENT_STORE, as a user would); returns the store URL ('' for files)."""
    if kind == "postgres":
        url = database()
        monkeypatch.setenv("NBAGENT_STORE", url)
        return url
    monkeypatch.delenv("NBAGENT_STORE", raising=False)
    return ""
