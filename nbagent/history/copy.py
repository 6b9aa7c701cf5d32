"""``nbagent copy SRC DST``: move a session between stores (files and PostgreSQL), byte for byte.

Each line is copied as it is (seq, timestamps, signatures and checksums kept), so the copy
verifies exactly like the original and its trust is the same.  The destination must be a
new session; its one-writer lock is held while copying.  The snapshot is not copied: the
copy is opened once after, which replays it and writes its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import HistoryError
from ..record.log_reader import scan, whole_lines
from ..stores import FILES, Store, get_store, is_url, locate, session_url
from ..stores import folders as store
from .find import read_bytes, session_name
from .resolve import resolve_session


@dataclass(frozen=True)
class Copied:
    """What :func:`copy` did."""

    source: str
    target: str
    events: int
    note: str = ""


def destination(spec: str, source: Store, path: Path) -> tuple[Store, Path]:
    """Where a copy of the session at ``path`` goes (see docs/postgres.md, Moving sessions).

    ``postgresql://.../db#<notebook>/<session>`` is that session; a bare database URL keeps the
    notebook and name; a ``.jsonl`` path is that file; a notebook (``.ipynb``) is its log folder
    (``.nbagent/<notebook>/<session>.jsonl`` beside it); an existing folder gets ``<session>.jsonl``.
    """
    name = session_name(path)
    if is_url(spec):
        if "#" in spec:
            found, target = locate(spec)
            assert found is not None
            return found, target
        return get_store(spec), path
    target = Path(spec).expanduser()
    if target.name.endswith(store.LOG_SUFFIX):
        return FILES, target.absolute()
    if target.suffix == ".ipynb":
        return FILES, store.log_path(store.log_dir_for(target), name)
    if target.is_dir():
        return FILES, target.absolute() / (name + store.LOG_SUFFIX)
    raise HistoryError(f"{spec}: give a .jsonl file, a notebook, a folder, or a postgresql:// URL to copy the session to.")


def copy(source_spec: str, target_spec: str) -> Copied:
    """Copy a session to a new one in another store (or file), line for line; the source is only read."""
    source, path = resolve_session(source_spec)
    target_store, target = destination(target_spec, source, path)
    source_name, target_name = session_url(source, path), session_url(target_store, target)
    if source_name == target_name:
        raise HistoryError(f"{source_name} is both the source and the destination; nothing was copied.")
    data = read_bytes(path, source)
    found = scan(data, path=source_name)  # damage raises; a torn tail is left behind, as opening would cut it
    if not found.events:
        raise HistoryError(f"{source_name} has no events; nothing was copied.")
    log = target_store.open_log(target)
    try:
        if log.size:
            raise HistoryError(f"{target_name} already holds a session; copy into a new one (nothing was changed).")
        for _offset, line in whole_lines(data[: found.end]):
            log.append(line + b"\n", durable=False)
        log.sync()
    finally:
        log.close()
    from ..agent.session import Session

    with Session.open(target, store=target_store):  # closing writes its snapshot (and a database's listing summary)
        pass
    note = f"a torn last line of {len(found.torn)} bytes was not copied" if found.torn else ""
    return Copied(source_name, target_name, len(found.events), note)
