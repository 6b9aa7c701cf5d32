"""Database sessions found the way session files are: by the notebook or folder they belong to.

A database keys each session by its notebook's absolute path (see docs/postgres.md), so the
sessions "under" a folder are those of the notebooks below it, looked up in the store's index
(no event is read).  The CLI uses this for ``NBAGENT_STORE`` without ``--store``; the server
extension for its ``store`` setting.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from ..errors import HistoryError, LogCorruptError, LogError, LogVersionError
from ..stores import Listed, Store, get_store
from .find import NOTEBOOK_SUFFIX, find_logs
from .search import Match, matches_in
from .summary import checked, list_summaries, store_summaries

T = TypeVar("T")


def env_store() -> Store | None:
    """The database ``NBAGENT_STORE`` names, or None when it is unset or empty (the session files only)."""
    found = get_store("")
    return found if found.url else None


def places(path: str | os.PathLike[str]) -> list[str]:
    """How a database may key a notebook or folder: its absolute path, and its real path (links resolved) if that differs."""
    absolute = os.path.abspath(os.path.expanduser(path))
    return list(dict.fromkeys((absolute, os.path.realpath(absolute))))


def stored_under(source: Store, where: Iterable[str], *, limit: int | None = None) -> list[Listed]:
    """The sessions of a database's notebooks at ``where`` (absolute paths, as stored), from its index; oldest activity first.

    A path ending in ``.ipynb`` is a notebook (its sessions), any other a folder (the sessions of
    the notebooks below it); no path at all means every session.  ``limit`` keeps the most recent.
    """
    wanted = sorted({p.rstrip("/") or "/" for p in where})
    if not wanted:
        return store_summaries(source, limit=limit)
    books = [p for p in wanted if p.endswith(NOTEBOOK_SUFFIX)]
    tops = [p for p in wanted if not p.endswith(NOTEBOOK_SUFFIX)]
    found = {s.path: s for book in books for s in store_summaries(source, notebook=book) if s.notebook == book}
    found.update((s.path, s) for top in tops for s in store_summaries(source, under=top))  # filtered in the database
    ordered = sorted(found.values(), key=lambda s: (s.last_ts, s.name))
    return ordered[-limit:] if limit else ordered


def stored_at(source: Store, path: str | os.PathLike[str]) -> list[Listed]:
    """The database sessions ``nbagent sessions PATH`` shows: a notebook's, or a folder's notebooks' (a log file: none)."""
    target = Path(path).expanduser()
    if target.is_file() and target.suffix != NOTEBOOK_SUFFIX:
        return []
    return stored_under(source, places(target))


def sessions_under(path: str | os.PathLike[str], source: Store | None, *, check: bool = False) -> tuple[list[Listed], LogError | None]:
    """The listing of ``nbagent sessions PATH``: the session files under it and, ``source`` a database, its sessions there.

    One list, oldest activity first.  A database that cannot be asked leaves its part out, and
    the error comes back with the files' part (a folder missing here may still be a database's).
    The database's sessions are labelled ``unchecked``, or with ``check`` by their lines' signatures.
    """

    def label(database: Store, summaries: list[Listed]) -> list[Listed]:
        if check:
            checked(database, summaries)
        return summaries

    files, stored, failed = _files_then_stored(
        path,
        source,
        lambda: list_summaries(path),
        label,
        failed="the database sessions could not be listed",
        partial="only the session files are listed",
    )
    return sorted(files + stored, key=lambda s: (s.last_ts, s.name)), failed


def grep_stored(source: Store, summaries: Iterable[Listed], needle: str) -> Iterator[Match]:
    """Search the events of database sessions (read through the store) as :func:`~nbagent.history.grep` searches files.

    A damaged session is passed over, as a damaged file is; a database that cannot be asked raises.
    """
    from ..stores.postgres import key_path

    for summary in summaries:
        try:
            yield from matches_in(source.read(key_path(summary.notebook, summary.name)), summary.name, summary.path, needle)
        except (LogCorruptError, LogVersionError):
            continue


def grep_under(path: str | os.PathLike[str], needle: str, source: Store | None) -> tuple[list[Match], LogError | None]:
    """``nbagent sessions PATH --grep TEXT``: the matches in the session files under PATH, then in ``source``'s sessions there.

    A database that cannot be asked leaves its part out, and the error comes back with the files' matches.
    """
    from .search import grep

    files, stored, failed = _files_then_stored(
        path,
        source,
        lambda: list(grep(find_logs(path), needle)),
        lambda database, summaries: list(grep_stored(database, summaries, needle)),
        failed="the database sessions could not be searched",
        partial="only the session files were searched",
    )
    return files + stored, failed


def _files_then_stored(
    path: str | os.PathLike[str],
    source: Store | None,
    files: Callable[[], list[T]],
    stored: Callable[[Store, list[Listed]], list[T]],
    *,
    failed: str,
    partial: str,
) -> tuple[list[T], list[T], LogError | None]:
    """``files()`` for the session files under ``path``, then ``stored`` of ``source``'s sessions there (``source`` a database).

    A ``path`` missing here may still be a database's folder or notebook: an error only if it is
    neither.  A database that cannot be asked leaves its part empty, and the error comes back
    (``partial`` says what was done without it).
    """
    try:
        found, missing = files(), None
    except HistoryError as exc:
        if source is None or os.path.lexists(Path(path).expanduser()):
            raise
        found, missing = [], exc
    if source is None:
        return found, [], None
    try:
        summaries = stored_at(source, path)
        if missing is not None and not summaries:
            raise HistoryError(f"{missing} Nor has {source.url} a notebook there.")
        return found, stored(source, summaries), None
    except LogError as exc:
        if missing is not None:
            raise LogError(f"{missing} And {failed}: {exc}") from None
        return found, [], LogError(f"{exc} ({partial})")
