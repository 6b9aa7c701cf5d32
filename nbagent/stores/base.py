"""The store seam: where a session's events live (a file beside the notebook, or a PostgreSQL table).

A store keeps each session's log as its sealed lines in order; their bytes, one after the
other with a newline each, are the log exactly as the file store writes it, so offsets,
checksums, signatures, snapshots and trust checks mean the same on every store.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..record import events as ev
from ..record.log_reader import Scan
from ..state import prices
from ..state.fold import State
from ..state.lineage import Lineage
from ..state.tokens import Tokens
from .snapshot import Snapshot
from .writer import FsyncPolicy, Repair


@dataclass
class Listed:
    """One session in a listing: what its store's index knows (without reading its events), then what a listing shows of it.

    A store fills the first part; :mod:`nbagent.history.summary` the second, from the index's ``summary`` or a fold.
    """

    name: str
    path: str  # what `nbagent show` takes: a file path, or a store URL with #<notebook>/<session>
    notebook: str = ""
    session_id: str = ""
    title: str = ""
    created: float = 0.0
    last_ts: float = 0.0
    turns: int = 0
    events: int = 0
    owner: str = ""  # the database role that created it (file store: '')
    signer: str = ""  # the nbagent key id that signed its first line
    summary: dict[str, Any] = field(default_factory=dict)  # as a snapshot header's (snapshot.summary), with its seq
    lineage: Lineage | None = None  # where it was forked from (None: it was not, or the index does not know yet)
    state: State | None = None  # the folded state, when the listing had to fold the log (the file store)
    source: str = "index"  # what it was described from: index (a database's row), snapshot (header + tail) or log (a fold)
    problem: str = ""  # why it cannot be read (damaged, not a log, unreadable); '' when it can
    # What a listing shows
    usage: dict[str, int] = field(default_factory=dict)
    complete: bool = False
    pending: str = ""  # what an unfinished session waits for, or why it cannot be read
    trust: str = ""  # who wrote the lines: yours | unsigned | other key | altered | mixed | unchecked (an index row) | '' unreadable
    context_tokens: int = 0  # tokens the last reply's request and reply took (0: no reply yet)
    window: int = 0  # the model's context window in tokens (0: not recorded; shown against the default)
    compacted: bool = False  # compacted locally since the last reply (the context is known again at the next one)
    spend: dict[str, list[int]] | None = None  # tokens by price key (prices.py); None: not recorded (an older header)

    @property
    def parent(self) -> str:
        """A fork's parent session id ('' if it is not a fork)."""
        return self.lineage.parent if self.lineage is not None else ""

    @property
    def parent_name(self) -> str:
        """The parent's session name when the fork was made."""
        return self.lineage.name if self.lineage is not None else ""

    @property
    def forked_at(self) -> int:
        """The parent's event the fork keeps events up to (0 if it is not a fork)."""
        return self.lineage.at if self.lineage is not None else 0

    @property
    def figures(self) -> Tokens:
        """The session's token figures, as every view shows them (:class:`~nbagent.state.tokens.Tokens`)."""
        return Tokens.of(self.usage, context=self.context_tokens, window=self.window, compacted=self.compacted, cost=self.cost)

    @property
    def cost(self) -> prices.Cost:
        """What the session cost in dollars at the prices in force (unknown where a model has no price, or not recorded)."""
        if self.spend is None:
            return prices.Cost(0.0) if not any(self.usage.values()) else prices.Cost(None)
        return prices.cost(self.spend)

    @property
    def tokens(self) -> int:
        """Input plus output tokens (cache reads and writes included in input)."""
        return self.figures.total

    @property
    def status(self) -> str:
        """``complete``, or ``unfinished: <what is pending>``."""
        if self.complete:
            return "complete"
        return f"unfinished: {self.pending}" if self.pending else "unfinished"


class Log(Protocol):
    """One session's log, held by its one writer: the lock is taken on open and released by :meth:`close`."""

    path: Path  # the session's file path (the file store) or the path it was opened under
    size: int  # bytes of whole lines so far (the offset of the next line)
    fsync_policy: FsyncPolicy

    @property
    def where(self) -> str:
        """How messages name it: the file's path, or the store URL with ``#<notebook>/<session>``."""

    @property
    def failed(self) -> BaseException | None:
        """The write error that made this log refuse writes, if any."""

    @property
    def repair(self) -> Repair | None:
        """The torn tail cut off on opening, if any."""

    def read(self, start: int = 0, stop: int | None = None) -> bytes:
        """The log's bytes from ``start`` to ``stop`` (default: the end); works after :meth:`close` too."""

    def recover(self, start: int = 0, first_seq: int = 1) -> Scan:
        """Check the log from ``start`` (the line of ``first_seq``), repairing a torn tail; offsets in the result are absolute."""

    def append(self, line: bytes, *, durable: bool) -> None:
        """Append one sealed line; durable by the fsync policy when ``durable`` (raises LogWriteError)."""

    def refresh(self) -> None:
        """Learn :attr:`size` again from storage (after an append was cut short in memory)."""

    def sync(self) -> None:
        """Make everything appended so far durable."""

    def close(self) -> None:
        """Sync and release the one-writer lock."""

    def load_snapshot(self) -> tuple[Snapshot | None, str]:
        """The stored snapshot if its header is sound, else None and why."""

    def write_snapshot(self, state: State, **fields: Any) -> str:
        """Store a snapshot of ``state`` (fields as :func:`nbagent.stores.snapshot.write` takes them); returns where."""


class Store(Protocol):
    """Where sessions live: open one for writing (the lock), read or follow one, list them."""

    url: str  # '' for the file store

    def open_log(self, path: Path, *, fsync: FsyncPolicy = "turn", ops: Any = None) -> Log:
        """Open (creating if needed) the session at ``path`` as its one writer; a second writer is refused at once."""

    def read(self, path: Path, since: int = 0) -> Iterator[ev.Event]:
        """Events with ``seq > since`` as they are now, without the lock (a torn tail is left out)."""

    def follow(self, path: Path, since: int = 0, *, idle_timeout: float | None = None) -> Iterator[ev.Event]:
        """Events with ``seq > since``, then each new one as its writer commits it, with no gap and no duplicate."""

    def list(self, *, notebook: str = "", under: str = "", owner: str = "", text: str = "", limit: int | None = None) -> list[Listed]:
        """Sessions, most recently active last, filtered by notebook, folder (``under``: its notebooks'), owner and title/request text."""

    def family(self, session_id: str, *, under: str = "") -> builtins.list[Listed]:
        """The sessions of ``session_id``'s family (its forks' tree: ancestors, itself, descendants), oldest activity first."""
