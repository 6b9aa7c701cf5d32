"""The SESSION argument: a log path, a notebook (its latest session), or a session name or id prefix."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from ..errors import HistoryError, LogError, NotALogError
from ..record.log_reader import check_start
from ..stores import FILES, Store, is_url, locate, session_url
from ..stores import folders as store
from .database import env_store, places, stored_under
from .find import NOTEBOOK_SUFFIX, find_logs, session_name
from .summary import list_summaries, notebook_key, notebook_sessions, summarize

T = TypeVar("T")


def resolve(spec: str, *, root: str | os.PathLike[str] = ".", folder: Path | None = None, write: bool = False) -> Path:
    """The one session resolver: turn a SESSION argument into the path of a log (``write``: to continue it).

    From a terminal (``root``): an existing ``.jsonl`` file is that log; an existing
    notebook means its most recently active session; anything else is a session name,
    a unique prefix of one, or a unique prefix (4+ characters) of a session id, searched
    for in every log folder under ``root``.  From a notebook (``folder``, its log
    folder): a name is the session of that name there, which may not exist yet; a
    path is continued only if it leads into ``folder``, and read (replayed) only if it
    is a valid log.  Whatever exists must begin like an nbagent log
    (:func:`nbagent.record.log_reader.check_start`): nothing else is read further or written.
    """
    path = _resolve(spec, root) if folder is None else _in_folder(spec, folder, write)
    check_start(path)
    if write and folder is None and path.stat().st_size == 0:
        raise NotALogError(str(path), "it is empty")
    return path


def resolve_session(spec: str, *, write: bool = False, root: str | os.PathLike[str] = ".") -> tuple[Store, Path]:
    """A SESSION argument's store and path: ``postgresql://.../db#<notebook>/<session>`` names one in a database, anything else a file (:func:`resolve`).

    When no session file matches and ``NBAGENT_STORE`` names a database, the same rules are
    tried there: a notebook means its most recently active session in the database, anything
    else a session name, a unique prefix of one, or a unique prefix (4+ characters) of a
    session id, among the database sessions of the notebooks under ``root``.
    """
    if is_url(spec):
        found, path = locate(spec)
        assert found is not None
        return found, path
    try:
        return FILES, resolve(spec, root=root, write=write)
    except _NoFile as missing:
        source = env_store()
        if source is None:
            raise
        try:
            return source, _in_store(spec, source, root, missing)
        except LogError as exc:
            raise LogError(f"no session file matches {spec!r}, and the database NBAGENT_STORE names could not be asked: {exc}") from None


def resolve_in_notebook(spec: str, *, folder: Path, source: Store, write: bool = False) -> tuple[Store, Path]:
    """A SESSION argument in a notebook whose sessions are in ``source`` under ``folder``: an existing session's store and path.

    A name (or a path into ``folder``) is this notebook's session of that name in ``source``: the
    log file, or the database's session keyed by this notebook.  A store URL with
    ``#<notebook>/<session>`` is that session, continued (``write``) only if it is this notebook's in
    ``source``; a log file elsewhere is only read (as :func:`resolve` says).
    """
    if is_url(spec):
        found, path = locate(spec)
        assert found is not None
        if write and (found.url != source.url or path.parent != folder):
            named = session_url(found, path)  # without a password the URL may hold
            raise HistoryError(
                f"{named} is not a session of this notebook in {source.url or 'its log folder'}, so it cannot be continued "
                f"here. To look at it without running anything: %agent_replay {named}"
            )
    else:
        found, path = source, _in_folder(spec, folder, write)
        if path.parent != folder:
            found = FILES  # a log file elsewhere, read only
    if found.url or path.parent == folder:
        known = notebook_sessions(found, path.parent)
        name = path.name.removesuffix(store.LOG_SUFFIX)
        if not any(s.name == name for s in known):
            names = ", ".join(s.name for s in known) or "none"
            where = f"of {notebook_key(path.parent)} in {found.url}" if found.url else f"in {path.parent}"
            raise HistoryError(f"No session named {name!r} {where} (sessions: {names}).")
    if not found.url:
        check_start(path)
    return found, path


def _in_folder(spec: str, folder: Path, write: bool) -> Path:
    if "/" not in spec and not spec.startswith("~") and not (spec.endswith(store.LOG_SUFFIX) and Path(spec).is_file()):
        return store.log_path(folder, spec.removesuffix(store.LOG_SUFFIX))
    candidate = Path(spec).expanduser().absolute()
    if candidate.name.endswith(store.LOG_SUFFIX) and os.path.realpath(candidate.parent) == os.path.realpath(folder):
        return store.log_path(folder, candidate.name.removesuffix(store.LOG_SUFFIX))
    if write:
        raise HistoryError(
            f"{spec} is not in this notebook's log folder {folder}, so it cannot be continued here; a session is "
            f"continued only from its own folder. To look at it without running anything: %agent_replay {spec} "
            f"(or `nbagent show {spec}` in a terminal)."
        )
    if not candidate.is_file():
        raise HistoryError(f"No session log at {spec}.")
    return candidate


class _NoFile(HistoryError):
    """No session file matches a SESSION argument (a database, if one is configured, is asked next)."""


def _resolve(spec: str, root: str | os.PathLike[str]) -> Path:
    target = Path(spec).expanduser()
    if target.is_dir():
        raise HistoryError(f"{spec} is a folder; give a session log (.jsonl), a notebook, or a session name.")
    if target.exists():
        if target.name.endswith(store.LOG_SUFFIX):
            if not os.access(target, os.R_OK):
                raise HistoryError(f"{spec}: permission denied (cannot read this log).")
            return target
        if target.suffix == NOTEBOOK_SUFFIX:
            summaries = list_summaries(target)
            if not summaries:
                raise _NoFile(f"{spec} has no agent sessions (looked in {store.log_dir_for(target)}).")
            return Path(summaries[-1].path)
        raise HistoryError(f"{spec} is neither a notebook (.ipynb) nor a session log (.jsonl).")
    if spec.endswith(NOTEBOOK_SUFFIX):
        raise _NoFile(f"{spec}: no such file.")
    if "/" in spec or spec.endswith(store.LOG_SUFFIX):
        raise HistoryError(f"{spec}: no such file.")
    candidates = _named(spec, find_logs(root), session_name, lambda p: summarize(p).session_id)
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise _NoFile(
            f"unknown session {spec!r}: no session of that name or id under {Path(root).absolute()} "
            "(run `nbagent sessions` to list them, or give the log's path)."
        )
    raise HistoryError(f"session {spec!r} is ambiguous: it matches {_some(map(str, candidates))}; give the log's path.")


def _in_store(spec: str, source: Store, root: str | os.PathLike[str], missing: HistoryError) -> Path:
    """The database session a SESSION argument names when no file does (the file rules, on the store's index)."""
    from ..stores.postgres import key_path

    if spec.endswith(NOTEBOOK_SUFFIX):
        found = stored_under(source, places(spec))
        if not found:
            raise HistoryError(f"{missing} Nor has {source.url} a session of that notebook.")
        return key_path(found[-1].notebook, found[-1].name)
    candidates = _named(spec, stored_under(source, places(root)), lambda s: s.name, lambda s: s.session_id)
    if len(candidates) == 1:
        return key_path(candidates[0].notebook, candidates[0].name)
    if not candidates:
        raise HistoryError(
            f"unknown session {spec!r}: no session of that name or id under {Path(root).absolute()}, "
            f"in its files or in {source.url} (run `nbagent sessions` to list them, or give the log's path or full name)."
        )
    raise HistoryError(f"session {spec!r} is ambiguous: it matches {_some(s.path for s in candidates)}; give its full name.")


def _named(spec: str, sessions: Iterable[T], name: Callable[[T], str], session_id: Callable[[T], str]) -> list[T]:
    """The sessions ``spec`` names: the one of that name, else those whose name starts with it, else (4+ characters) whose id does."""
    sessions = list(sessions)
    found = [s for s in sessions if name(s) == spec] or [s for s in sessions if name(s).startswith(spec)]
    if not found and len(spec) >= 4:
        found = [s for s in sessions if session_id(s).startswith(spec)]
    return found


def _some(names: Iterable[str]) -> str:
    """The first five names, and '...' if there are more."""
    listed = list(names)
    return ", ".join(listed[:5]) + (" ..." if len(listed) > 5 else "")
