"""What the PostgreSQL store and its writer share: the driver, its errors in words, a session's NOTIFY channel, rows as log bytes.

The store (:mod:`.postgres`) reads and lists sessions; its writer (:mod:`.postgres_log`) appends one session's rows.
Both reach the database through these, and check stored snapshots as files in a private scratch folder.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..errors import LogError
from .folders import LOG_SUFFIX, STORE_DIR, check_name

try:
    import psycopg
except ImportError:  # pragma: no cover - the postgres extra is not installed
    psycopg = None  # type: ignore[assignment]

_NOT_ASCII = re.compile(r"[^\x00-\x7f]")


def key_of(path: Path) -> tuple[str, str]:
    """A session's key in the database, (notebook, name), from its file path ``<folder>/.nbagent/<notebook>/<name>.jsonl``."""
    path = Path(path).absolute()
    name = check_name(path.name.removesuffix(LOG_SUFFIX))
    folder = path.parent
    notebook = folder.parent.parent / folder.name if folder.parent.name == STORE_DIR else folder
    return str(notebook), name


def key_path(notebook: str, name: str) -> Path:
    """The file path a session of the database stands for (the inverse of :func:`key_of`)."""
    check_name(name)
    book = Path(notebook)
    if book.suffix == ".ipynb":
        return book.parent / STORE_DIR / book.name / (name + LOG_SUFFIX)
    return book / (name + LOG_SUFFIX)


def need_psycopg() -> Any:
    """The psycopg module; LogError if the postgres extra is not installed."""
    if psycopg is None:
        raise LogError("the PostgreSQL store needs psycopg 3: pip install 'nbagent[postgres]'")
    return psycopg


def channel_of(conn: Any, session: int) -> str:
    """The NOTIFY channel of a session: a random name in its row (no other role can read it under row-level security)."""
    row = conn.execute("SELECT channel FROM nbagent_sessions WHERE id = %s", (session,)).fetchone()
    return str(row[0]) if row else ""


def listen(conn: Any, name: str) -> None:
    """LISTEN on a channel named in a row (quoted: a row is data, never SQL)."""
    sql = need_psycopg().sql
    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(name)))


def lock_holder_state(conn: Any, key: int, session: int) -> str | None:
    """The state (``pg_stat_activity``) of the backend holding a session's advisory lock; None if unknown or released."""
    row = conn.execute(
        "SELECT a.state FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' "
        "AND l.granted AND l.classid = %s::integer::oid AND l.objid = %s::integer::oid AND l.objsubid = 2",
        (key, session),
    ).fetchone()
    return None if row is None else row[0]


def log_bytes(lines: Iterable[str]) -> bytes:
    """Rows' lines as the log's bytes, each with its newline.

    nbagent writes only ASCII lines.  A character that is not (a row changed by hand) becomes
    one NUL byte, which no valid line holds: the reader reports that line as damaged, like an
    altered line of a file, and every later line keeps the offset its writer gave it.
    """
    text = "".join(line + "\n" for line in lines)
    try:
        return text.encode("ascii")
    except UnicodeEncodeError:
        return _NOT_ASCII.sub("\0", text).encode("ascii")


def message_of(exc: BaseException) -> str:
    """A database error in one line of words."""
    return " ".join(str(exc).split()) or type(exc).__name__


@contextlib.contextmanager
def db_errors(what: str) -> Iterator[None]:
    """Turn a database error while doing ``what`` into one clear LogError (no psycopg traceback reaches a user)."""
    pg = need_psycopg()
    try:
        yield
    except pg.Error as exc:
        raise LogError(f"{what} failed: {message_of(exc)}") from None


_scratch_root: Path | None = None
_scratch_lock = threading.Lock()


def scratch_folder() -> Path:
    """A private folder (removed at exit) where snapshots are checked with the same code as snapshot files."""
    global _scratch_root
    with _scratch_lock:
        if _scratch_root is None:
            _scratch_root = Path(tempfile.mkdtemp(prefix="nbagent-pg-snapshots-"))
            atexit.register(shutil.rmtree, _scratch_root, True)
        folder = _scratch_root / uuid.uuid4().hex
        folder.mkdir(mode=0o700)
        return folder


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to a file only its owner can read (a stored snapshot, checked as a file)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def disk_full(exc: Any) -> bool:
    """Whether a database error is the server's disk (or a tablespace's volume) being full."""
    return getattr(exc, "sqlstate", None) == "53100" or "No space left on device" in str(exc)


def cause_of(exc: Any) -> str:
    """A database error in words; a full disk says so first (PostgreSQL's own text names only a file)."""
    if disk_full(exc):
        return f"the database server is out of disk space ({message_of(exc)})"
    return message_of(exc)


def todo_of(exc: Any) -> str:
    """What to do first about a database error before reopening (a full disk: free space)."""
    return "Free space on the database server (its data folder or the tablespace's volume). " if disk_full(exc) else ""


def duplicate_of(exc: Any, event: dict[str, Any]) -> str:
    """What a unique key refused, in words."""
    name = getattr(getattr(exc, "diag", None), "constraint_name", "") or ""
    if name == "nbagent_tool_started_once":
        return f"tool call {event.get('tool_use_id')} attempt {event.get('attempt')} was already started (dispatch is exactly-once)"
    if name == "nbagent_tool_result_once":
        return f"tool call {event.get('tool_use_id')} already has its result (a result is recorded once)"
    return f"the database already has this event ({name or 'a unique key'}): a second writer?"
