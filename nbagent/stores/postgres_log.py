"""The PostgreSQL store's writer: one session's rows, appended under a session-level advisory lock on its own connection.

Each event is one transaction: one statement checks that it is the session's next event,
inserts it, updates the session's index row and sends NOTIFY; an event the file store would
fsync commits with ``synchronous_commit`` on, the others with it off (see :mod:`.postgres`).
The index row's ``last_ts`` (indexed, for listings) moves on durable events only, so the
update a delta makes changes no indexed column and stays a heap-only (HOT) update.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import LogCorruptError, LogError, LogLockedError, LogWriteError
from ..record import events as ev
from ..record import line_codec
from ..record.log_reader import Scan, scan
from ..state.fold import State
from ..state.lineage import of_meta
from . import snapshot
from .postgres_db import (
    cause_of,
    db_errors,
    disk_full,
    duplicate_of,
    key_of,
    lock_holder_state,
    log_bytes,
    message_of,
    need_psycopg,
    scratch_folder,
    todo_of,
)
from .writer import FSYNC_POLICIES, LOCKED, FsyncPolicy, Repair

if TYPE_CHECKING:
    from .postgres import PostgresStore

LOCK_CLASS = 0x6E62_6167  # 'nbag': the first key of every session's advisory lock (the second is its row id)
LOCK_WAIT = 2.0  # seconds an open retries a lock whose backend is busy (a killed writer finishing its commit)
LOCK_POLL = 0.05  # seconds between its tries
CACHE_BOUND = 8 << 20  # the log's last bytes a writer keeps in memory (at most twice this between trims)
REQUESTS_LIMIT = 1 << 16  # the request text kept per session for searching listings

APPEND = """
WITH upd AS (
    UPDATE nbagent_sessions SET
        last_seq = %(seq)s, last_ts = CASE WHEN %(durable)s THEN %(ts)s ELSE last_ts END, size = %(end)s, turns = turns + %(turn)s,
        session_id = CASE WHEN %(type)s = 'session_start' THEN %(session_id)s ELSE session_id END,
        signer = CASE WHEN %(type)s = 'session_start' THEN %(signer)s ELSE signer END,
        created = CASE WHEN %(type)s = 'session_start' THEN %(ts)s ELSE created END,
        title = CASE WHEN title = '' OR (%(type)s = 'session_start' AND %(title)s <> '') THEN %(title)s ELSE title END,
        requests = CASE WHEN %(request)s = '' OR length(requests) > %(limit)s THEN requests ELSE requests || %(request)s || E'\\n' END
    WHERE id = %(id)s AND last_seq = %(seq)s - 1
    RETURNING id
), ins AS (
    INSERT INTO nbagent_events (session, seq, start_at, ts, type, tool_use_id, attempt, signer, line)
    SELECT id, %(seq)s, %(start)s, %(ts)s, %(type)s, %(tool_use_id)s, %(attempt)s, %(signer)s, %(line)s FROM upd
    RETURNING seq
)
SELECT pg_notify(%(channel)s, ''), set_config('synchronous_commit', %(sync)s, true) FROM ins
"""

# Opening is one round trip (a pipeline): the lock, then the reads, each a statement of its own (so it sees every
# commit made before the lock was taken).  Under row_security_by_session names are per role: the tables' owner,
# who sees every role's, finds its own first.
SESSION_OF = (
    "(SELECT id FROM nbagent_sessions WHERE notebook = %(notebook)s AND name = %(name)s "
    "ORDER BY owner_role = current_user DESC, id LIMIT 1)"
)
OPEN_LOCK = (
    "SELECT id, channel, pg_try_advisory_lock(%s::integer, id::integer) FROM (SELECT id, channel FROM nbagent_sessions "
    "WHERE notebook = %s AND name = %s ORDER BY owner_role = current_user DESC, id LIMIT 1) AS found"
)
OPEN_ROWS = f"""
(SELECT 'head' AS kind, start_at, line FROM nbagent_events WHERE session = {SESSION_OF} AND start_at < %(head)s)
UNION ALL
(SELECT 'tail', start_at, line FROM nbagent_events WHERE session = {SESSION_OF} ORDER BY seq DESC LIMIT 1)
ORDER BY 1, 2
"""
OPEN_SNAPSHOT = f"SELECT seq, length(data), substring(data from 1 for %(size)s) FROM nbagent_snapshots WHERE session = {SESSION_OF}"
HEAD_BYTES = 1 << 16  # the log's first bytes read on opening: its first line is checked against a snapshot
SNAPSHOT_HEAD = 1 << 16  # a stored snapshot's first bytes read on opening: its header and (mostly) its state line


class PostgresLog:
    """One session's rows, held by its one writer (a session-level advisory lock on its own connection)."""

    def __init__(self, store: PostgresStore, path: Path, fsync: FsyncPolicy) -> None:
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync must be one of {', '.join(FSYNC_POLICIES)}; got {fsync!r}")
        self.store = store
        self.path = Path(path)
        self.where = store.where(self.path)
        self.fsync_policy = fsync
        self.repair: Repair | None = None
        self._failed: BaseException | None = None
        self._closed = False
        self._unsynced = False  # something committed with synchronous_commit off since the last sync
        self._lock = threading.RLock()
        self._scratch: Path | None = None
        pg = need_psycopg()
        self._conn = store.connect()
        self._appender = self._conn.cursor()  # one cursor for every append: a new one per statement costs ~25 us of client CPU
        self._head = b""  # the log's first bytes (read on opening, for the checks of its first line)
        self._snapshot: tuple[int, int, bytes] | None = None  # the stored snapshot's seq, size and first bytes, read on opening
        self._snapshot_known = False  # whether _snapshot is what the table held on opening (not yet used)
        try:
            self._open(store, pg)
        except pg.Error as exc:
            self._conn.close()
            raise LogError(f"opening {self.where} failed: {cause_of(exc)}") from None
        except BaseException:
            self._conn.close()
            raise

    def _open(self, store: PostgresStore, pg: Any) -> None:
        """Find (or make) the session's row and take its lock, then read its tail, first bytes and snapshot head: one round trip."""
        notebook, name = key_of(self.path)
        created, deadline, idle = False, time.monotonic() + LOCK_WAIT, 0
        while True:
            with self._conn.pipeline():
                # The lock first; the reads after it are statements of their own, so they see every commit made before it.
                found = self._conn.execute(OPEN_LOCK, (LOCK_CLASS, notebook, name))
                rows = self._conn.execute(OPEN_ROWS, {"notebook": notebook, "name": name, "head": HEAD_BYTES})
                snap = self._conn.execute(OPEN_SNAPSHOT, {"notebook": notebook, "name": name, "size": SNAPSHOT_HEAD})
            row = found.fetchone()
            if row is None:
                if created:
                    raise LogError(f"{self.where} exists but belongs to another database role; open a session of another name")
                store.session_id(self._conn, self.path, create=True)
                created = True
            elif row[2]:
                break
            else:  # a killed writer's backend may still be finishing its commit (busy); a live writer's waits for it (idle)
                idle = idle + 1 if lock_holder_state(self._conn, LOCK_CLASS, int(row[0])) == "idle" else 0
                if idle >= 2 or time.monotonic() >= deadline:
                    raise LogLockedError(LOCKED.format(where=self.where))
                time.sleep(LOCK_POLL)
        self._id: int = int(row[0])
        self._channel = str(row[1])
        lines = rows.fetchall()
        tail = lines.pop() if lines and lines[-1][0] == "tail" else None
        self._head = log_bytes(line for _kind, _start, line in lines)
        self.size = 0 if tail is None else int(tail[1]) + len(tail[2]) + 1
        stored = snap.fetchone()
        self._snapshot = None if stored is None else (int(stored[0]), int(stored[1]), bytes(stored[2]))
        self._snapshot_known = True
        self._cache_start, self._cache = self.size, bytearray()  # the log's bytes from _cache_start to size
        if tail is not None:
            self._cache_start, self._cache = int(tail[1]), bytearray(log_bytes([tail[2]]))

    @property
    def failed(self) -> BaseException | None:
        """The database error that made this log refuse writes, if any."""
        return self._failed

    def _tail(self) -> int:
        row = self._conn.execute(
            "SELECT start_at + length(line) + 1 FROM nbagent_events WHERE session = %s ORDER BY seq DESC LIMIT 1", (self._id,)
        ).fetchone()
        return 0 if row is None else int(row[0])

    def read(self, start: int = 0, stop: int | None = None) -> bytes:
        """The log's bytes from ``start`` to ``stop``: from memory for what this writer read or wrote, else from the table."""
        with self._lock:
            stop = self.size if stop is None else stop
            if stop <= start:
                return b""
            if self._cache_start <= start and stop <= self._cache_start + len(self._cache):
                return bytes(self._cache[start - self._cache_start : stop - self._cache_start])
            if stop <= len(self._head):
                return self._head[start:stop]
            with db_errors(f"reading {self.where}"):
                if self._closed:
                    with self.store.connect() as conn:
                        return _read_range(conn, self._id, start, stop)
                return _read_range(self._conn, self._id, start, stop)

    def recover(self, start: int = 0, first_seq: int = 1) -> Scan:
        """Check the rows from ``start`` (the line of ``first_seq``); damage raises (a transaction is never torn)."""
        data = self.read(start, self.size)
        result = scan(data, path=self.where, first_seq=first_seq, base_offset=start)
        if result.torn:
            raise LogCorruptError(
                self.where, first_seq + len(result.events), start + result.end, f"damaged last event: {result.torn_reason}"
            )
        with self._lock:
            self._cache_start, self._cache = start, bytearray(data)
            self._trim()
        result.end += start
        result.last_start += start
        return result

    def append(self, line: bytes, *, durable: bool) -> None:
        """Insert one sealed line as the session's next event, in its own transaction (committed before this returns)."""
        pg = need_psycopg()
        if self._failed is not None:
            raise LogWriteError(
                f"{self.where} refused a write because an earlier one failed ({cause_of(self._failed)}). "
                f"{todo_of(self._failed)}Close and reopen the session: it resumes from the last committed event."
            )
        event = json.loads(line)
        sig = event.get("sig")
        content = event.get("content") if event["type"] == ev.USER_MSG else None
        text = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or [] if isinstance(b, dict))
        sync = self.fsync_policy == "always" or (durable and self.fsync_policy == "turn")
        params = {
            "id": self._id,
            "seq": event["seq"],
            "ts": event["ts"],
            "start": self.size,
            "end": self.size + len(line),
            "type": event["type"],
            "tool_use_id": event.get("tool_use_id"),
            "attempt": event.get("attempt") if isinstance(event.get("attempt"), int) else None,
            "signer": sig.split(":", 1)[0] if isinstance(sig, str) else "",
            "session_id": event.get("session_id", ""),
            "turn": 1 if event["type"] == ev.USER_MSG else 0,
            "title": " ".join(text.split())[:80] if event["type"] == ev.USER_MSG else _fork_title(event),
            "request": text[:4096] if event["type"] == ev.USER_MSG else "",
            "limit": REQUESTS_LIMIT,
            "line": line.rstrip(b"\n").decode("ascii"),
            "channel": self._channel,
            "sync": "on" if sync else "off",
            "durable": durable,
        }
        with self._lock:
            try:
                row = self._appender.execute(APPEND, params, prepare=True).fetchone()
            except pg.errors.UniqueViolation as exc:
                raise LogWriteError(
                    f"{self.where} refused event {event['seq']} ({event['type']}): {duplicate_of(exc, event)}; nothing was written"
                ) from None
            except pg.Error as exc:
                self._failed = exc
                if disk_full(exc):
                    raise LogWriteError(
                        f"writing {self.where} failed: {cause_of(exc)}. Event {event['seq']} ({event['type']}) was not written; "
                        f"every event before it is committed. {todo_of(exc)}Then reopen the session: it resumes from the last "
                        "committed event."
                    ) from exc
                raise LogWriteError(
                    f"writing {self.where} failed: {message_of(exc)}. The session now refuses writes; reopen it "
                    "(it resumes from the last committed event)."
                ) from exc
            if row is None:
                self._failed = LogError("another writer")
                raise LogWriteError(
                    f"{self.where} refused event {event['seq']}: the database's last event is not {event['seq'] - 1} "
                    "(another writer went around the lock?); reopen the session."
                )
            self._cache += line
            self.size += len(line)
            self._unsynced = self._unsynced or not sync
            if len(self._cache) > 2 * CACHE_BOUND:
                self._trim()

    def _trim(self) -> None:
        """Keep only the log's last CACHE_BOUND bytes in memory (older ones are read from the table when asked for)."""
        cut = len(self._cache) - CACHE_BOUND
        if cut > 0:
            del self._cache[:cut]
            self._cache_start += cut

    def refresh(self) -> None:
        """Learn the size again from the table (after an append was cut short in memory)."""
        with self._lock, db_errors(f"reading {self.where}"):
            self.size = self._tail()
            self._cache_start, self._cache = self.size, bytearray()

    def sync(self) -> None:
        """Make events committed with ``synchronous_commit`` off durable: commit one transaction with it on."""
        if self._failed is None and self._unsynced and not self._closed:
            pg = need_psycopg()
            with self._lock:
                try:
                    self._conn.execute("SELECT pg_current_xact_id()")  # an xid, so its commit is flushed, and the WAL before it
                except pg.Error as exc:
                    self._failed = exc
                    raise LogWriteError(f"syncing {self.where} failed: {cause_of(exc)}; reopen the session") from exc
                self._unsynced = False

    def close(self) -> None:
        """Sync and release the lock (closing the connection releases it too; so does a crash)."""
        if self._closed:
            return
        try:
            self.sync()
        finally:
            self._closed = True
            try:
                if self._failed is None:
                    self._conn.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_CLASS, self._id))
            except Exception:  # the connection is gone, and the lock with it
                pass
            self._conn.close()

    def load_snapshot(self) -> tuple[snapshot.Snapshot | None, str]:
        """The stored snapshot, its header checked exactly like a snapshot file's; its other lines are read and checked when asked for."""
        with self._lock, db_errors(f"reading the snapshot of {self.where}"):
            stored, known = self._snapshot, self._snapshot_known  # read on opening; read again after that
            self._snapshot, self._snapshot_known = None, False
            if not known:
                row = self._conn.execute(
                    "SELECT seq, length(data), substring(data from 1 for %s) FROM nbagent_snapshots WHERE session = %s",
                    (SNAPSHOT_HEAD, self._id),
                ).fetchone()
                stored = None if row is None else (int(row[0]), int(row[1]), bytes(row[2]))
            if stored is None:
                return None, "no snapshot"
            seq, size, head = stored
            if b"\n" not in head and len(head) < size:  # a header longer than the bytes read on opening
                head = self._snapshot_slice(seq, 0, min(size, snapshot.MAX_HEADER + 1))
        line = head[: head.find(b"\n") + 1] if b"\n" in head else head[: snapshot.MAX_HEADER + 1]
        header, why = snapshot.check_header(line, size)
        if header is None:
            return None, why
        body = line_codec.unseal(line.rstrip(b"\n"))[0]
        return StoredSnapshot(header, snapshot.path_for(self.path), len(line), (seq,), body, head, self._snapshot_slice), ""

    def _snapshot_slice(self, seq: int, start: int, length: int) -> bytes:
        """Bytes of the stored snapshot ``seq`` (ValueError if another has replaced it); after closing, on a connection of its own."""
        query = "SELECT substring(data from %s for %s) FROM nbagent_snapshots WHERE session = %s AND seq = %s"
        with self._lock, db_errors(f"reading the snapshot of {self.where}"):
            if self._closed:
                with self.store.connect() as conn:
                    row = conn.execute(query, (start + 1, length, self._id, seq)).fetchone()
            else:
                row = self._conn.execute(query, (start + 1, length, self._id, seq)).fetchone()
        if row is None:
            raise ValueError("the snapshot was replaced since it was opened")
        return bytes(row[0])

    def write_snapshot(self, state: State, **fields: Any) -> str:
        """Store a snapshot (the same bytes as a snapshot file) and the session's summary for listings, in one transaction."""
        pg = need_psycopg()
        target = snapshot.write(self._scratch_log(), state, durable=False, **fields)
        data = target.read_bytes()
        summary = {**snapshot.summary(state), "seq": state.seq}
        with self._lock:
            try:
                self._conn.execute(
                    "WITH s AS (INSERT INTO nbagent_snapshots (session, seq, data) VALUES (%s, %s, %s) "
                    "ON CONFLICT (session) DO UPDATE SET seq = EXCLUDED.seq, data = EXCLUDED.data, role = current_user RETURNING session) "
                    "UPDATE nbagent_sessions SET summary = %s WHERE id IN (SELECT session FROM s)",
                    (self._id, state.seq, data, json.dumps(summary)),
                )
            except pg.Error as exc:
                raise OSError(f"storing the snapshot of {self.where} failed: {cause_of(exc)}") from exc
        return self.where + " (snapshot)"

    def _scratch_log(self) -> Path:
        if self._scratch is None:
            self._scratch = scratch_folder()
        return self._scratch / "session.jsonl"


@dataclass
class StoredSnapshot(snapshot.Snapshot):
    """A snapshot in the table: its first bytes read on opening, the rest (its messages line) read when first asked for."""

    head: bytes = b""  # the stored snapshot's first bytes
    fetch: Any = None  # (seq, start, length) -> bytes, from the table

    def _line(self, start: int, name: str) -> bytes:
        """The ``name`` line at ``start``, checked against the length and SHA-256 in the header (raises ValueError or LogError)."""
        size, digest = int(self.header[f"{name}_len"]), self.header[f"{name}_sha256"]
        data = self.head[start : start + size + 1] if start + size + 1 <= len(self.head) else self.fetch(self.seq, start, size + 1)
        if data[size:] != b"\n" or hashlib.sha256(memoryview(data)[:size]).hexdigest() != digest:
            raise ValueError(f"snapshot {name} line fails its checksum")
        return bytes(data[:size])


def _read_range(conn: Any, session: int, start: int, stop: int) -> bytes:
    """The log's bytes ``[start, stop)`` from the rows whose lines overlap it."""
    rows = conn.execute(
        "SELECT start_at, line FROM nbagent_events WHERE session = %s AND start_at < %s AND start_at >= "
        "COALESCE((SELECT max(start_at) FROM nbagent_events WHERE session = %s AND start_at <= %s), 0) ORDER BY start_at",
        (session, stop, session, start),
    ).fetchall()
    if not rows:
        return b""
    data = log_bytes(line for _start, line in rows)
    first = int(rows[0][0])
    return data[start - first : stop - first]


def _fork_title(event: dict[str, Any]) -> str:
    """A fork's own title, from its session_start (the index's title column, as the fold's state has it); '' for any other event."""
    if event.get("type") != ev.SESSION_START:
        return ""
    found = of_meta(event.get("meta") if isinstance(event.get("meta"), dict) else None)
    return " ".join(found.title.split())[:200] if found is not None else ""
