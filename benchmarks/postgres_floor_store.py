"""The real-path floor of the PostgreSQL store: a minimal store doing one plain committed INSERT per event (benchmarks only).

The issue's floor inserts a session's lines in a tight loop; a user's turn interleaves each
append with engine and SDK work, and on a loaded machine a round trip after CPU work costs
scheduling the tight loop never pays.  This store makes exactly the issue's floor statement,
``INSERT INTO t VALUES (session, seq, line)`` with ``synchronous_commit`` on, one transaction
each, at the same points of the same ``nbagent.run`` loop, and nothing else: no index row, no
lock, no NOTIFY, no unique keys but the primary key; the log is kept in memory for reads and
snapshots are written as the file store writes them with fsync "never" (so store work, this
minus the file store with fsync "never", is the INSERTs alone).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg

from nbagent.record import events as ev
from nbagent.record.log_reader import Scan, scan
from nbagent.stores import snapshot
from nbagent.stores.base import Listed

TABLE = "nbagent_floor"


class FloorLog:
    """One session appended as plain committed INSERTs; its bytes also kept in memory for the session's reads."""

    def __init__(self, url: str, path: Path, fsync: Any, scratch: Path) -> None:
        self.path = Path(path)
        self.where = f"floor#{self.path}"
        self.fsync_policy = fsync
        self.size = 0
        self.repair = None
        self.failed: BaseException | None = None
        self._data = bytearray()
        self._seq = 0
        self._session = random.getrandbits(62)
        self._scratch = scratch / "session.jsonl"
        self._conn = psycopg.connect(url, autocommit=True)
        self._conn.execute("SET synchronous_commit = on")
        self._conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (session bigint, seq integer, line text, PRIMARY KEY (session, seq))")

    def read(self, start: int = 0, stop: int | None = None) -> bytes:
        """The log's bytes from memory."""
        return bytes(self._data[start : self.size if stop is None else stop])

    def recover(self, start: int = 0, first_seq: int = 1) -> Scan:
        """Scan what is in memory (nothing, for a new session)."""
        result = scan(self.read(start), path=self.where, first_seq=first_seq, base_offset=start)
        result.end += start
        result.last_start += start
        return result

    def append(self, line: bytes, *, durable: bool) -> None:
        """The issue's floor statement: one plain INSERT, committed with synchronous_commit on."""
        self._seq += 1
        self._conn.execute(f"INSERT INTO {TABLE} VALUES (%s, %s, %s)", (self._session, self._seq, line.rstrip(b"\n").decode("ascii")))
        self._data += line
        self.size += len(line)

    def refresh(self) -> None:
        """Nothing to learn: every append either committed or raised."""

    def sync(self) -> None:
        """Every commit is synchronous already."""

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    def load_snapshot(self) -> tuple[snapshot.Snapshot | None, str]:
        """A new session: no snapshot."""
        return None, "no snapshot"

    def write_snapshot(self, state: Any, **fields: Any) -> str:
        """The snapshot the file store writes with fsync "never", to a scratch file (so store work leaves it out)."""
        return str(snapshot.write(self._scratch, state, durable=False, **fields))


class FloorStore:
    """Opens :class:`FloorLog` sessions; reading, following and listing are not part of a turn, so not implemented."""

    url = "floor"

    def __init__(self, url: str, scratch: Path) -> None:
        self._url, self._scratch = url, scratch

    def open_log(self, path: Path, *, fsync: Any = "turn", ops: Any = None) -> FloorLog:
        """A new session on its own connection."""
        return FloorLog(self._url, path, fsync, self._scratch)

    def read(self, path: Path, since: int = 0) -> Iterator[ev.Event]:
        """Not part of a turn."""
        raise NotImplementedError("the floor store only appends")

    def follow(self, path: Path, since: int = 0, *, idle_timeout: float | None = None) -> Iterator[ev.Event]:
        """Not part of a turn."""
        raise NotImplementedError("the floor store only appends")

    def list(self, **_filters: Any) -> list[Listed]:
        """Not part of a turn."""
        raise NotImplementedError("the floor store only appends")

    def family(self, session_id: str, *, under: str = "") -> list[Listed]:
        """Not part of a turn."""
        raise NotImplementedError("the floor store only appends")
