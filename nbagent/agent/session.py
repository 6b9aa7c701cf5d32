"""A session: the event log, the state folded from it, and writing (who signed its lines: session_trust.py; reading: feed.py)."""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..errors import LogError
from ..record import events as ev
from ..record import line_codec, trust
from ..record.log_reader import HEADER_LIMIT, Scan, scan
from ..record.transcript import Transcript
from ..state import decide as rules
from ..state import fold, lineage
from ..stores import Log, Store, get_store, locate, snapshot
from ..stores.writer import FileOps, FsyncPolicy, Repair
from .feed import Feed, Subscriber
from .fork import fork
from .session_trust import Offer, SessionTrust, snapshot_problem, user_signer

logger = logging.getLogger("nbagent")


class Session:
    """A durable agent session: an append-only log on disk and the state folded from it."""

    def __init__(self, log: Log, base: snapshot.Snapshot | None, tail: Scan, snapshot_every: int) -> None:
        self.path = log.path
        self.where = log.where  # how messages name it: the file, or the store URL with #<notebook>/<session>
        self.snapshot_every = snapshot_every
        self._snapshot_note = ""
        self._log = log
        self._lock = threading.RLock()
        self._feed = Feed(log, self._lock, self.where, lambda: self._seq)  # reading and watching
        self._snapshot_cache = snapshot.MessageCache()
        self._base = base
        self._unfolded = tail.events
        self._state: fold.State | None = None if base is not None else fold.fold(tail.events)
        self._seq = tail.events[-1]["seq"] if tail.events else (base.seq if base else 0)
        self._snapshot_seq = base.seq if base else 0
        if base is not None:
            self._feed.marks.note(base.seq + 1, base.offset)  # where the tail that recover() just checked starts
        if tail.events:
            self._last_line = (tail.last_start, tail.events[-1]["crc"])
        else:
            self._last_line = (base.header["line_start"], base.header["line_crc"]) if base else (0, "")
        self._trust = SessionTrust(log, base, tail)  # who signed the lines; used only under self._lock
        self._session_id = base.header["summary"]["session_id"] if base else ""
        self._closed = False
        self._opened_seq = self._seq  # lines 1.._opened_seq were there before this Session: not written by it
        # Set while an append is half done; an exception (say a KeyboardInterrupt) escaping
        # from that window makes the next access re-read the log instead of trusting memory.
        self._dirty = False

    # Opening --------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        fsync: FsyncPolicy = "turn",
        snapshot_every: int = 1000,
        meta: dict[str, Any] | None = None,
        ops: FileOps | None = None,
        store: Store | str | None = None,
    ) -> Session:
        """Open the session log at ``path``, creating it if needed; repairs a torn tail and uses a snapshot if it agrees.

        ``store`` says where sessions live: a :class:`~nbagent.stores.Store`, a ``postgresql://`` URL,
        or None for ``NBAGENT_STORE`` (the files beside the notebook when it is unset).  ``path`` may
        also be a session in a database, ``postgresql://.../db#<notebook>/<session>``.
        A file that is not an nbagent log raises :class:`~nbagent.errors.NotALogError`
        before anything is written, beside it or to it.
        """
        where, key = locate(path)
        log = (where or get_store(store)).open_log(key, fsync=fsync, ops=ops)
        try:
            user = user_signer()
            base, note = log.load_snapshot()
            if base is not None:
                note = snapshot_problem(log, base, user)
                if note:
                    base = None
            tail = log.recover(base.offset, base.seq + 1) if base else log.recover(0, 1)
            session = cls(log, base, tail, snapshot_every)
            if base is None and note not in ("", "no snapshot"):
                session._snapshot_note = f"snapshot ignored ({note}); replayed the whole log"
                logger.warning("%s: %s", log.where, session._snapshot_note)
            if session._seq == 0:
                session._session_id = uuid.uuid4().hex
                session._trust.sign_as(user, session._session_id)
                session.append(ev.SESSION_START, session_id=session._session_id, meta=meta or {})
            else:
                if not session._session_id:
                    session._session_id = session.state.session_id
                session._trust.sign_as(user, session._session_id)
        except BaseException:
            log.close()
            raise
        if log.repair:
            logger.warning(
                "%s: cut off a torn last line (%d bytes at offset %d: %s); kept it in %s",
                log.where,
                log.repair.length,
                log.repair.offset,
                log.repair.reason,
                log.repair.kept,
            )
        return session

    # State -------------------------------------------------------------------------------------
    @property
    def state(self) -> fold.State:
        """The folded state (parsed from the snapshot on first use)."""
        with self._lock:
            if self._dirty:
                self._resync()
            if self._state is None:
                assert self._base is not None
                self._state = fold.fold(self._unfolded, self._snapshot_state(self._base))
                self._unfolded, self._base = [], None
            return self._state

    def _snapshot_state(self, base: snapshot.Snapshot) -> fold.State:
        """The snapshot's state (its messages decoded on first read); if it fails a check, the state folded from the log up to it.

        Only the small state line is checked here; the messages line is checked when the
        messages are first read, and if it fails then, they too come from the log.
        """
        try:
            return base.state(from_log=lambda why: self._ignore_snapshot(base, why))
        except (OSError, ValueError, TypeError, KeyError) as exc:
            return self._ignore_snapshot(base, str(exc))

    def _ignore_snapshot(self, base: snapshot.Snapshot, why: str) -> fold.State:
        """Say why the snapshot is not used (note and warning) and fold the log up to it instead.

        May run on whichever thread first reads the messages, so it takes no lock.
        """
        self._snapshot_note = f"snapshot ignored ({why}); replayed the whole log"
        logger.warning("%s: %s", self.where, self._snapshot_note)
        data = self._log.read(0, base.offset)  # the messages may be first read after closing: the log reads without its lock
        result = scan(data, path=self.where, mode="strict")  # the snapshot pointed at a whole line: a torn one is damage
        why_not = snapshot.disagreement(base.header, lambda start, end: data[start:end], len(data))
        if why_not:  # only possible if the log was changed after this session closed
            raise LogError(f"{self.where}: {why_not}; open the session again")
        self._snapshot_seq = 0  # so that closing writes a good one
        return fold.fold(result.events)

    @property
    def snapshot_note(self) -> str:
        """Why a snapshot was not used, if it was not ('' otherwise; its messages line is checked only once they are read)."""
        _ = self.state  # loading the state is what sets the note
        return self._snapshot_note

    @property
    def id(self) -> str:
        """The session's id (from its first event)."""
        return self._session_id

    @property
    def seq(self) -> int:
        """Seq of the last event."""
        return self._seq

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The Messages-API-shaped conversation, a plain list (read-only; a resumed session decodes it on first use)."""
        messages = self.state.messages
        return messages.as_list() if isinstance(messages, Transcript) else messages

    @property
    def usage(self) -> dict[str, int]:
        """Token totals over all model replies."""
        return self.state.usage

    @property
    def repair(self) -> Repair | None:
        """The torn tail cut off when the log was opened, if any."""
        return self._log.repair

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    # Forks -------------------------------------------------------------------------------------
    @property
    def lineage(self) -> lineage.Lineage | None:
        """Where this session was forked from (None: it was not)."""
        return lineage.of_meta(self.state.meta)

    def fork(self, *, at: int | None = None, turn: int | None = None, name: str | None = None, by: dict[str, Any] | None = None) -> Session:
        """A new session beside this one whose history is this one's up to event ``at`` or turns 1 to ``turn`` (default: all); opened.

        A point inside a turn raises :class:`~nbagent.state.lineage.ForkPointError` naming the nearest valid points
        (see :mod:`nbagent.agent.fork`).  ``by`` (JSON) says who made it, in the fork's lineage record.
        Close the returned session (or use it in a ``with`` block).
        """
        with self._lock:
            self._log.sync()
            source = getattr(self._log, "store", None)
        spec: Store | str = source if source is not None else "files"
        made = fork(self.path, at=at, turn=turn, name=name, store_spec=spec, by=by)
        with Session.open(made.path, store=spec):  # closing writes its snapshot (and a database's listing summary)
            pass
        return Session.open(made.path, store=spec, fsync=self._log.fsync_policy)

    # Trust -------------------------------------------------------------------------------------
    @property
    def trust(self) -> trust.Report:
        """Who signed each line of the log and how far it is trusted (checked on first use, then kept up to date)."""
        with self._lock:
            if self._dirty:
                self._resync()
            return self._trust.report

    def trust_offer(self) -> Offer:
        """The log read once, for ``nbagent trust`` to show: its state, who signed it, and the SHA-256 a trust event would vouch with."""
        with self._lock:
            if self._dirty:
                self._resync()
            return self._trust.offer()

    def trust_log(self, offer: Offer | None = None) -> ev.Event:
        """Vouch for exactly the bytes of ``offer`` (default: the log as it is now): append this user's signed ``trust`` event.

        LogError, and nothing written, if the log is no longer those bytes.  The state and the
        trust report are then read again from the log, so they are what the event vouched for.
        """
        with self._lock:
            event = self.append(ev.TRUST, **self._trust.vouching(offer or self.trust_offer(), self._seq))
            self._resync()
            return event

    def continue_refusal(self) -> str:
        """Why this user must not continue the session ('' if they may): lines they did not write, and no trust of theirs covers."""
        report = self.trust
        why = rules.refuse_continuing(
            opened=self._opened_seq,
            trusted_upto=report.trusted_upto,
            broken_trust=report.broken_trust,
            keyed=self._trust.signer is not None,
        )
        return rules.continue_refusal_text(why, self.where, report.describe()) if why else ""

    @property
    def trusted(self) -> bool:
        """Whether every line of the log was written (signed) by this user."""
        return self.trust.trusted

    def call_trusted(self, tool_use_id: str) -> bool:
        """Whether an open tool call was requested by an ``assistant_msg`` line signed by this user.

        Checked against the line's bytes, and the call in the state must match it
        exactly, so neither an unsigned line nor a forged snapshot can vouch for a call.
        """
        with self._lock:
            call = self.state.open_calls.get(tool_use_id)  # the state is fresh, so the trust report is too
            if call is None:
                return False
            check = self._trust.call_check(tool_use_id, call)
        return check()

    # Writing -----------------------------------------------------------------------------------
    def append(self, event_type: str, **payload: Any) -> ev.Event:
        """Write an event (fsynced if it must be durable), fold it, and hand it to every subscriber."""
        with self._lock:
            if self._closed:
                raise LogError(f"session {self.where} is closed; open it again to continue")
            if self._dirty:
                self._resync()
            event = ev.make(self._seq + 1, event_type, payload)
            line, event = line_codec.encode(event, self._trust.signer)
            limit = HEADER_LIMIT if event_type == ev.SESSION_START else ev.MAX_LINE
            if len(line) > limit:
                raise LogError(
                    f"a {event_type} event of {len(line)} bytes is over the {limit}-byte line limit; it was not written "
                    "(clip what goes into it: a reader refuses longer lines)"
                )
            start = self._log.size
            self._dirty = True
            self._log.append(line, durable=ev.is_durable(event_type, payload))
            self._seq = event["seq"]
            self._last_line = (start, event["crc"])
            self._feed.note(self._seq, start, event_type)
            self._trust.note_written(event)
            if self._state is None:
                self._unfolded.append(event)
            else:
                fold.apply(self._state, event)
            self._dirty = False
            self._feed.publish(event)
            if self.snapshot_every and event_type in (ev.ASSISTANT_MSG, ev.TOOL_RESULT, ev.USER_MSG):
                if self._seq - self._snapshot_seq >= self.snapshot_every:
                    self._snapshot_quietly()
            return event

    def _resync(self) -> None:
        """Rebuild everything from the log after an append was cut short in memory."""
        self._log.refresh()
        result = self._log.recover(0, 1)
        self._feed.forget()  # the tail may have been cut: forget every offset learned before
        self._state, self._base, self._unfolded = fold.fold(result.events), None, []
        self._seq = result.events[-1]["seq"] if result.events else 0
        self._last_line = (result.last_start, result.events[-1]["crc"] if result.events else "")
        self._trust.restart(result)
        self._dirty = False

    def snapshot(self) -> Path:
        """Write a snapshot of the current state now (atomically)."""
        with self._lock:
            self._log.sync()
            start, crc = self._last_line
            size = self._log.size
            written = self._log.write_snapshot(
                self.state,
                line_start=start,
                offset=size,
                line_crc=crc,
                line_sig=self._trust.last_mac,
                report=self.trust,
                sign=self._trust.snapshot_signer(),
                prefix_sha256=lambda: self._trust.prefix_sha256(size),
                cache=self._snapshot_cache,
            )
            self._snapshot_seq = self._seq
            return Path(written)

    def _snapshot_quietly(self) -> None:
        """An automatic snapshot: failing to write one (a full disk) loses nothing, so it is logged, not raised."""
        try:
            self.snapshot()
        except OSError as exc:
            logger.warning("%s: could not write a snapshot (%s); the log is intact and opening replays it", self.where, exc)

    def close(self) -> None:
        """Snapshot if anything changed, then close the log and release its lock."""
        with self._lock:
            if self._closed:
                return
            try:
                if self.snapshot_every and self._seq > self._snapshot_seq and self._log.failed is None:
                    self._snapshot_quietly()
            finally:
                self._closed = True
                self._feed.close()
                self._log.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<nbagent.Session {self.id[:8]} {self.where!r} seq={self._seq}>"

    # Reading and watching -------------------------------------------------------------------
    def events(self, since: int = 0) -> Iterator[ev.Event]:
        """Events with ``seq > since``, read from the log (from the nearest known line at or before ``since + 1``)."""
        with self._lock:
            if self._read_all(since):
                return
            read = self._feed.events(since)
        yield from read

    def sized_events(self, since: int = 0) -> Iterator[tuple[ev.Event, int]]:
        """:meth:`events`, each with the length of its line in bytes (for a reader that keeps some of them, to bound what it keeps)."""
        with self._lock:
            if self._read_all(since):
                return
            read = self._feed.sized_events(since)
        yield from read

    def _read_all(self, since: int) -> bool:
        """Whether nothing comes after ``since``: the last line this session wrote or read (it holds the writer's lock)."""
        return since >= self._seq and not self._dirty

    def subscribe(self, callback: Subscriber, since: int = 0) -> Callable[[], None]:
        """Deliver every event with ``seq > since``: first from the log, then live; returns an unsubscribe function.

        No event is missed or repeated even while another thread appends.  A
        subscriber that raises is detached (and logged); it never breaks the writer.
        """
        return self._feed.subscribe(callback, since)
