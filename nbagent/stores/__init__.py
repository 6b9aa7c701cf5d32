"""Where sessions live, named once (:class:`Store`, :class:`Log`): files beside the notebook (the default) or PostgreSQL.

Chosen by ``Session.open(..., store=...)``, ``Agent.store`` or ``NBAGENT_STORE`` (a
``postgresql://`` URL); a session in a database is named ``postgresql://.../db#<notebook>/<session>``.

May import: ``state``, ``record`` and the leaves; ``psycopg`` only in the PostgreSQL modules, when a database is named.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..errors import NbagentError
from .base import Listed, Log, Store
from .files import FileLog, FileStore

ENV = "NBAGENT_STORE"
URL_SCHEMES = ("postgresql://", "postgres://")
FILES = FileStore()
_stores: dict[str, Store] = {}
_stores_lock = threading.Lock()

__all__ = ["ENV", "FILES", "FileLog", "FileStore", "Listed", "Log", "Store", "get_store", "is_url", "locate", "session_url"]


def is_url(spec: object) -> bool:
    """Whether ``spec`` names a database store (a ``postgresql://`` URL)."""
    return isinstance(spec, str) and spec.startswith(URL_SCHEMES)


def get_store(spec: Store | str | None = None) -> Store:
    """The store ``spec`` names: a store, a ``postgresql://`` URL, '' or None for ``NBAGENT_STORE`` (unset: the files)."""
    if spec is None or spec == "":
        spec = os.environ.get(ENV, "").strip()
    if not isinstance(spec, str):
        return spec
    if spec in ("", "files", "file"):
        return FILES
    if not is_url(spec):
        raise NbagentError(
            f"{spec!r} is not a session store: give a postgresql:// URL (e.g. postgresql://user@host/db), "
            "or leave it empty for the log files beside the notebook."
        )
    url = spec.split("#", 1)[0]
    with _stores_lock:
        if url not in _stores:
            from .postgres import PostgresStore

            _stores[url] = PostgresStore(url)
        return _stores[url]


def locate(target: str | os.PathLike[str]) -> tuple[Store | None, Path]:
    """A session named by a store URL with ``#<notebook>/<session>``: its store and its path there; a path: (None, it)."""
    if not is_url(target):
        return None, Path(target)
    assert isinstance(target, str)
    url, _, fragment = target.partition("#")
    notebook, _, name = fragment.rpartition("/")
    if not notebook or not name:
        raise NbagentError(
            f"{target!r} names a database but not a session in it: add #<notebook>/<session>, e.g. {url}#/home/me/analysis.ipynb/20261203-101500-a1b2"
        )
    from .postgres import key_path

    return get_store(url), key_path(notebook, name)


def session_url(store: Store, path: Path) -> str:
    """How a session of ``store`` is named on a command line: its file path, or ``<url>#<notebook>/<session>``."""
    if not store.url:
        return str(path)
    from .postgres import key_of

    notebook, name = key_of(path)
    return f"{store.url}#{notebook}/{name}"
