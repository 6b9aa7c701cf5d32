"""The PostgreSQL store: each session's sealed lines as rows, the one-writer lock an advisory lock, live views by LISTEN/NOTIFY.

An event is durable when its transaction commits: an event the file store would fsync
commits with ``synchronous_commit`` on, the others with it off.  ``(session, seq)`` is the
primary key and a line is only inserted as the one after the session's last, so a second
writer cannot interleave; partial unique indexes make ``tool_started`` (per attempt) and
``tool_result`` exactly-once.  Each row keeps its line's exact bytes and where it starts in
the log, so the log read back from the table is byte for byte the file the file store writes.
"""

from __future__ import annotations

import builtins
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import LogCorruptError, LogError
from ..record import events as ev
from ..record.log_reader import Reader
from ..state import lineage
from . import migrations, snapshot
from .base import Listed
from .postgres_db import (  # noqa: F401 - key_of and key_path are imported from here
    channel_of,
    db_errors,
    key_of,
    key_path,
    listen,
    log_bytes,
    message_of,
    need_psycopg,
    scratch_folder,
    write_private,
)
from .postgres_log import PostgresLog
from .writer import FsyncPolicy

ROW_SECURITY = ("row_security", "row_security_by_session")  # applied in this order by enable_row_security
BATCH = 2000  # rows fetched at a time when reading a log
_PASSWORD = re.compile(r"(://[^:/@]+:)[^@]*@")


def redact_url(url: str) -> str:
    """The URL without its password (for messages and session names; put passwords in ~/.pgpass or PGPASSWORD)."""
    return _PASSWORD.sub(r"\1***@", url)


class PostgresStore:
    """Sessions in a PostgreSQL database (``postgresql://user@host/db``); its schema is created and migrated on first use."""

    def __init__(self, url: str) -> None:
        self._conninfo = url
        self.url = redact_url(url)
        self._migrated = False
        self._lock = threading.Lock()

    def connect(self) -> Any:
        """A new autocommit connection, the schema checked (and migrated) on the first one."""
        pg = need_psycopg()
        try:
            conn = pg.connect(self._conninfo, autocommit=True)
        except pg.Error as exc:
            raise LogError(f"cannot connect to {self.url}: {message_of(exc)}") from None
        try:
            with self._lock:
                if not self._migrated:
                    migrations.migrate(conn)
                    self._migrated = True
        except pg.Error as exc:
            conn.close()
            raise LogError(f"cannot set up nbagent's tables in {self.url}: {message_of(exc)}") from None
        except BaseException:
            conn.close()
            raise
        return conn

    def where(self, path: Path) -> str:
        """The session's name on a command line: ``<url>#<notebook>/<session>``."""
        notebook, name = key_of(path)
        return f"{self.url}#{notebook}/{name}"

    def open_log(self, path: Path, *, fsync: FsyncPolicy = "turn", ops: Any = None) -> PostgresLog:
        """Open the session at ``path`` as its one writer (a session-level advisory lock; a second one is refused)."""
        if ops is not None:
            raise ValueError("file operations (ops) apply to the file store only")
        return PostgresLog(self, path, fsync)

    def session_id(self, conn: Any, path: Path, *, create: bool = False) -> int | None:
        """The row id of the session at ``path`` (created if ``create``), or None."""
        notebook, name = key_of(path)
        if create:
            conn.execute("INSERT INTO nbagent_sessions (notebook, name) VALUES (%s, %s) ON CONFLICT DO NOTHING", (notebook, name))
        # Under row_security_by_session names are per role: the tables' owner, who sees every role's, finds its own first.
        row = conn.execute(
            "SELECT id FROM nbagent_sessions WHERE notebook = %s AND name = %s ORDER BY owner_role = current_user DESC, id LIMIT 1",
            (notebook, name),
        ).fetchone()
        if row is None and create:
            raise LogError(f"{self.where(path)} exists but belongs to another database role; open a session of another name")
        return None if row is None else int(row[0])

    def _rows(self, conn: Any, session: int, after: int) -> list[tuple[int, int, str]]:
        return list(
            conn.execute(
                "SELECT seq, start_at, line FROM nbagent_events WHERE session = %s AND seq > %s ORDER BY seq LIMIT %s",
                (session, after, BATCH),
            )
        )

    def _existing(self, conn: Any, path: Path) -> int:
        session = self.session_id(conn, path)
        if session is None:
            raise LogError(f"no session {self.where(path)} (list them with: nbagent sessions --store {self.url})")
        return session

    def read_bytes(self, path: Path) -> bytes:
        """The whole log as the file store would hold it (every line with its newline)."""
        with self.connect() as conn, db_errors(f"reading {self.where(path)}"):
            session = self._existing(conn, path)
            lines = [row[0] for row in conn.execute("SELECT line FROM nbagent_events WHERE session = %s ORDER BY seq", (session,))]
        return log_bytes(lines)

    def pieces(self, path: Path, upto: int | None = None) -> Iterator[bytes]:
        """The log's bytes (as :meth:`read_bytes` has them whole) a batch of rows at a time, up to the line of ``upto`` (None: all)."""
        with self.connect() as conn, db_errors(f"reading {self.where(path)}"):
            session, last = self._existing(conn, path), 0
            while (upto is None or last < upto) and (rows := self._rows(conn, session, last)):
                rows = [row for row in rows if upto is None or row[0] <= upto]
                if not rows:
                    return
                yield log_bytes(line for _seq, _start, line in rows)
                last = rows[-1][0]

    def last_seq(self, path: Path) -> int:
        """The seq of the session's last event (0: none), from the primary key's index."""
        with self.connect() as conn, db_errors(f"reading {self.where(path)}"):
            session = self._existing(conn, path)
            row = conn.execute("SELECT max(seq) FROM nbagent_events WHERE session = %s", (session,)).fetchone()
        return int(row[0] or 0) if row else 0

    def read(self, path: Path, since: int = 0) -> Iterator[ev.Event]:
        """Events with ``seq > since``, checked by the one reader, without the writer's lock."""
        where = self.where(path)
        with self.connect() as conn, db_errors(f"reading {where}"):
            session = self._existing(conn, path)
            reader: Reader | None = None
            last = since
            while rows := self._rows(conn, session, last):
                if reader is None:
                    reader = Reader(where, expected=rows[0][0] if since else 1, offset=rows[0][1], last_start=rows[0][1], since=since)
                yield from reader.feed(log_bytes(line for _seq, _start, line in rows))
                _raise_torn(reader)
                last = rows[-1][0]

    def follow(self, path: Path, since: int = 0, *, idle_timeout: float | None = None) -> Iterator[ev.Event]:
        """Catch up from the table, then wait for NOTIFY (no polling): every event with ``seq > since``, once, in order."""
        where = self.where(path)
        pg = need_psycopg()
        conn = self.connect()
        try:
            session = self._existing(conn, path)
            listen(conn, channel_of(conn, session))  # before reading: a commit after this point is always notified
            reader = Reader(where, "follow", since=since, expected=None)
            last = since
            while True:
                while rows := self._rows(conn, session, last):
                    if reader.expected is None:
                        reader.expected = rows[0][0] if since else 1
                        reader.offset = reader.last_start = rows[0][1]
                    yield from reader.feed(log_bytes(line for _seq, _start, line in rows))
                    _raise_torn(reader)
                    last = rows[-1][0]
                woken = False
                for _note in conn.notifies(timeout=idle_timeout, stop_after=1):
                    woken = True
                if not woken:
                    return  # idle for idle_timeout seconds
        except pg.Error as exc:
            raise LogError(f"following {where} stopped: {message_of(exc)}; run it again") from None
        finally:
            conn.close()

    def list(self, *, notebook: str = "", under: str = "", owner: str = "", text: str = "", limit: int | None = None) -> list[Listed]:
        """Sessions from the index table (no event is read), oldest activity first; ``limit`` keeps the most recent.

        ``notebook`` is a notebook's path or file name; ``under`` a folder, for the notebooks below it.
        """
        where, params = ["last_seq > 0"], list[Any]()
        if notebook:
            where.append("(notebook = %s OR notebook LIKE %s)")
            params += [notebook, "%/" + _like(notebook)]
        if under:  # the folder's notebooks, and sessions keyed by the folder itself (opened by name in it)
            folder = under.rstrip("/") or "/"
            where.append("(notebook = %s OR notebook LIKE %s)")
            params += [folder, _like(folder.rstrip("/")) + "/%"]
        if owner:
            where.append("owner_role = %s")
            params.append(owner)
        if text:
            where.append("(title ILIKE %s OR requests ILIKE %s)")
            params += ["%" + _like(text) + "%"] * 2
        query = (
            "SELECT name, notebook, session_id, title, created, last_ts, turns, last_seq, owner_role, signer, summary "
            f"FROM nbagent_sessions WHERE {' AND '.join(where)} ORDER BY last_ts DESC, name DESC"
        )
        if limit:
            query += " LIMIT %s"
            params.append(limit)
        with self.connect() as conn, db_errors(f"listing the sessions of {self.url}"):
            rows = conn.execute(query, params).fetchall()
        found = []
        for r in reversed(rows):
            summary = dict(r[10] or {})
            found.append(Listed(r[0], f"{self.url}#{r[1]}/{r[0]}", r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], summary))
            found[-1].lineage = lineage.of_dict(summary.get("fork"))  # a fork's lineage, from its summary (written with a snapshot)
        return found

    def family(self, session_id: str, *, under: str = "") -> builtins.list[Listed]:
        """The sessions (under the folder ``under``, if given) in ``session_id``'s family of forks, from the index."""
        return lineage.family_of(self.list(under=under), session_id)

    def snapshot_file(self, path: Path) -> Path | None:
        """The stored snapshot written to a private file beside a stand-in log path (for ``nbagent verify``); None if none."""
        with self.connect() as conn, db_errors(f"reading the snapshot of {self.where(path)}"):
            session = self._existing(conn, path)
            row = conn.execute("SELECT data FROM nbagent_snapshots WHERE session = %s", (session,)).fetchone()
        if row is None:
            return None
        log_path = scratch_folder() / "session.jsonl"
        write_private(snapshot.path_for(log_path), bytes(row[0]))
        return log_path

    def watch(self, path: Path) -> Watch:
        """A long-lived reader of one session that waits for NOTIFY (for a server's shared tail: see :class:`Watch`)."""
        return Watch(self, path)

    def enable_row_security(self) -> bool:
        """Apply the optional row-level security migrations (each role sees and writes only its own sessions); False if they were on already."""
        with self.connect() as conn:
            return any([migrations.apply_optional(conn, name) for name in ROW_SECURITY])


class Watch:
    """One session for a long-lived reader: :meth:`read` the events after a seq, :meth:`wait` for the next commit's NOTIFY.

    It listens from the moment it is made, on a connection of its own, so a commit after any
    read wakes the next wait; reading runs on a second connection.  Call :meth:`close` when done.
    """

    def __init__(self, store: PostgresStore, path: Path) -> None:
        self.store, self.path, self.where = store, Path(path), store.where(path)
        self._listen = store.connect()
        try:
            self._session = store._existing(self._listen, self.path)
            listen(self._listen, channel_of(self._listen, self._session))
            self._query = store.connect()
        except BaseException:
            self._listen.close()
            raise

    def read(self, since: int) -> list[ev.Event]:
        """The events with ``seq > since`` committed now, checked by the one reader (blocking; raises LogError on damage)."""
        found: list[ev.Event] = []
        reader: Reader | None = None
        last = since
        with db_errors(f"reading {self.where}"):
            while rows := self.store._rows(self._query, self._session, last):
                if reader is None:
                    first = rows[0][0] if since else 1
                    reader = Reader(self.where, since=since, expected=first, offset=rows[0][1], last_start=rows[0][1])
                found += reader.feed(log_bytes(line for _seq, _start, line in rows))
                _raise_torn(reader)
                last = rows[-1][0]
        return found

    def wait_blocking(self, timeout: float) -> bool:
        """Block until a commit to the session is notified (True) or ``timeout`` seconds pass (False)."""
        return any(True for _note in self._listen.notifies(timeout=timeout, stop_after=1))

    def fileno(self) -> int:
        """The listening connection's socket: readable when a NOTIFY (or the connection's end) came, for an event loop's reader."""
        return int(self._listen.fileno())

    async def wait(self, timeout: float) -> None:
        """Return when events after the last read may have come, or after ``timeout`` seconds at most."""
        import asyncio

        await asyncio.to_thread(self.wait_blocking, timeout)

    def close(self) -> None:
        """Close both connections."""
        self._listen.close()
        self._query.close()


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _raise_torn(reader: Reader) -> None:
    """A database holds whole transactions: a line that fails its checks at the end is damage, never a torn write."""
    if reader.torn:
        raise LogCorruptError(reader.path, reader.expected or 0, reader.offset, f"damaged last event: {reader.torn_reason}")
