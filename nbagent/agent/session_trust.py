"""Who signed a session's lines and how far this user can trust them: the signer, the chain, the trust report, the snapshot."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import LogError
from ..record import events as ev
from ..record import line_codec, signing, trust
from ..record.log_reader import Scan, scan
from ..state import fold, lineage
from ..stores import Log, snapshot

logger = logging.getLogger("nbagent")


@dataclass(frozen=True)
class Offer:
    """What ``nbagent trust`` shows and vouches for, all from one read of the log: its state, signers and SHA-256."""

    seq: int  # the last line's seq
    size: int  # bytes read
    prefix_sha256: str  # of exactly those bytes: the trust event vouches for these, not for a later read
    state: fold.State
    report: trust.Report


class SessionTrust:
    """A session's line signatures and trust report, kept up to date as the session writes (one per Session).

    Takes no lock: its Session calls every method under the session's RLock, and the
    ``prefix_sha256`` it hands to ``trust.check_log`` and ``write_snapshot`` runs within
    those calls.  Only the check :meth:`call_check` returns runs after the lock is
    released, on bytes and a report taken under it.
    """

    def __init__(self, log: Log, base: snapshot.Snapshot | None, tail: Scan) -> None:
        self._log = log
        self._user: signing.Signer | None = None
        self._session_id = ""
        self.signer: signing.LineSigner | None = None  # signs this session's lines; None: this user has no key
        self.last_mac = _last_mac(log, tail, base)  # the mac of the log's last line, which the next line chains to
        self._report: trust.Report | None = None
        # Who signed the lines up to the snapshot (from its signed header): only the lines after it are checked.
        self._base: tuple[trust.Report, trust.Chain] | None = None
        self._base_prefix = ""
        if base is not None:
            chain = trust.Chain(base.seq, base.offset, base.header["line_sig"].encode("ascii"))
            self._base = (trust.Report.from_dict(base.header["trust"]), chain)
            self._base_prefix = str(base.header.get("prefix_sha256", ""))
        self._own_calls: set[str] = set()  # tool_use ids of assistant messages this object wrote (and signed)
        self._digest, self._digest_end = hashlib.sha256(), 0  # the SHA-256 of the log's first _digest_end bytes, so far

    def sign_as(self, user: signing.Signer | None, session_id: str) -> None:
        """Sign the lines written from now on as ``user`` (None: unsigned) in session ``session_id``, after the last line."""
        self._user, self._session_id = user, session_id
        self.signer = user.for_session(session_id) if user is not None else None
        if self.signer is not None:
            self.signer.prev = self.last_mac

    def snapshot_signer(self) -> signing.LineSigner | None:
        """This user's signer of the session's snapshot headers (None: no key, so a snapshot is never used)."""
        return self._user.keyed(signing.SNAPSHOT, self._session_id) if self._user is not None else None

    def note_written(self, event: ev.Event) -> None:
        """Keep the chain and the trust report up to date after the session wrote a line (signed by :attr:`signer`)."""
        if self.signer is None:
            self.last_mac = b""
            if self._report is not None:
                self._report.lines += 1
                self._report.unsigned += 1
            return
        self.signer.commit()
        self.last_mac = self.signer.prev
        if self._report is not None:
            report = self._report
            report.lines += 1
            report.mine += 1
            if event["type"] == ev.TRUST:
                report.trust_events += 1
                report.trusted_upto = report.lines
            elif report.trusted_upto == report.lines - 1:
                report.trusted_upto = report.lines
        if event["type"] == ev.ASSISTANT_MSG:
            self._own_calls = {b["id"] for b in event.get("content") or [] if b.get("type") == "tool_use"}

    def restart(self, tail: Scan) -> None:
        """Forget the report and the snapshot's record after the log was read again from the start (``tail``: all of it)."""
        self._report, self._base = None, None
        self.last_mac = _last_mac(self._log, tail, None)
        if self.signer is not None:
            self.signer.prev = self.last_mac

    @property
    def report(self) -> trust.Report:
        """Who signed each line of the log and how far it is trusted (checked on first use, then kept up to date)."""
        if self._report is None:
            if self._base is not None and not self._prefix_unchanged():
                self._base = None  # a line before the snapshot was changed since: check every line
            if self._base is not None:
                before, chain = self._base
                self._report = trust.check_log(
                    self._log.read(chain.offset, self._log.size),
                    user=self._user,
                    session_id=self._session_id,
                    start=chain,
                    before=before,
                    prefix_sha256=self.prefix_sha256,
                )
            else:
                self._report = trust.check_log(self._log.read(0, self._log.size), user=self._user, session_id=self._session_id)
        return self._report

    def _prefix_unchanged(self) -> bool:
        """Whether the log before the snapshot is the one its trust record was made from (one hash, no signature checks)."""
        assert self._base is not None
        return self.prefix_sha256(self._base[1].offset) == self._base_prefix

    def prefix_sha256(self, end: int) -> str:
        """SHA-256 of the log's first ``end`` bytes: each byte is read and hashed once, so a snapshot costs what came since the last."""
        if end < self._digest_end:  # an earlier point than hashed so far (never the case for snapshots): from the start
            return hashlib.sha256(self._log.read(0, end)).hexdigest()
        if end > self._digest_end:
            self._digest.update(self._log.read(self._digest_end, end))
            self._digest_end = end
        return self._digest.hexdigest()

    def offer(self) -> Offer:
        """The whole log read once: what it holds and who signed it, to show, and the hash a ``trust`` event vouches with."""
        if self.signer is None:
            raise LogError(f"cannot trust {self._log.where}: this user has no signing key ({signing.secret_path()} is unreadable)")
        self._log.sync()
        data = self._log.read(0, self._log.size)
        events = scan(data, path=self._log.where, mode="strict").events
        return Offer(
            seq=events[-1]["seq"] if events else 0,
            size=len(data),
            prefix_sha256=hashlib.sha256(data).hexdigest(),
            state=fold.fold(events),
            report=trust.check_log(data, user=self._user, session_id=self._session_id),
        )

    def vouching(self, offer: Offer, seq: int) -> dict[str, Any]:
        """The payload of a ``trust`` event vouching for exactly the bytes of ``offer`` (LogError if the log is not those bytes now)."""
        self._log.sync()
        size = self._log.size
        if offer.seq != seq or offer.size != size or hashlib.sha256(self._log.read(0, size)).hexdigest() != offer.prefix_sha256:
            raise LogError(
                f"{self._log.where} changed since it was shown to you (someone else wrote to it); nothing was trusted. "
                "Find out who can write there, then run `nbagent trust` again and read what it shows"
            )
        return {"vouches": offer.seq, "prefix_sha256": offer.prefix_sha256}

    def call_check(self, tool_use_id: str, call: dict[str, Any]) -> Callable[[], bool]:
        """Whether open call ``call`` was requested by an ``assistant_msg`` line this user signed, as a check to run outside the lock."""
        if self.signer is None:
            return lambda: False
        if tool_use_id in self._own_calls:
            return lambda: True
        report, data = self.report, self._log.read(0, self._log.size)
        return lambda: _signed_call(data, report, tool_use_id, call)


def _signed_call(data: bytes, report: trust.Report, tool_use_id: str, call: dict[str, Any]) -> bool:
    """Whether the log's last ``assistant_msg`` line is trusted and requested exactly ``call`` as ``tool_use_id``."""
    end = len(data)
    while end > 0:
        start = data.rfind(b"\n", 0, end - 1) + 1
        line = data[start : end - 1]
        end = start
        try:
            body, _crc = line_codec.unseal(line)
            event = line_codec.decode(line)
        except line_codec.BadLine:
            return False
        if event["type"] != ev.ASSISTANT_MSG:
            continue
        if not report.is_trusted(event["seq"]):
            return False
        for block in event.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("id") == tool_use_id:
                return block.get("name") == call["name"] and (block.get("input") or {}) == call["input"]
        return False
    return False


def _last_mac(log: Log, tail: Scan, base: snapshot.Snapshot | None) -> bytes:
    """The mac of the log's last line: the tail's last line, else the snapshot's (b'' for an empty log)."""
    if tail.events:
        return signing.mac_of(log.read(tail.last_start, tail.end - 1))
    return base.header["line_sig"].encode("ascii") if base else b""


def _fork_start(summary: object) -> int:
    """Where the session_start line that names a snapshot's session begins: 0, or a fork's (its lineage's ``offset``)."""
    found = lineage.of_dict(summary.get("fork")) if isinstance(summary, dict) else None
    return found.offset if found is not None else 0


def snapshot_problem(log: Log, base: snapshot.Snapshot, user: signing.Signer | None) -> str:
    """Why a snapshot cannot stand in for the lines of this log it covers ('' if it can): it disagrees, or this user did not sign it."""
    why = snapshot.disagreement(base.header, log.read, log.size) or snapshot.unauthentic(base.header, base.header_body, user, log.read)
    if why:
        return why
    # The body is checked when the state is first needed (Session._snapshot_state).
    # The header's session id seeds idempotency keys, and a snapshot copied from another log can still
    # pass its own checksum: check the id against line 1.
    summary = base.header.get("summary")
    start = _fork_start(summary)  # a fork's id is on its own session_start line, after the inherited ones
    first = log.read(start, min(log.size, start + (1 << 16))).split(b"\n", 1)[0]
    try:
        session_id = line_codec.decode(first).get("session_id")
    except line_codec.BadLine:
        return "the log's first line could not be checked against the snapshot"
    if not isinstance(summary, dict) or summary.get("session_id") != session_id:
        return "the snapshot names another session than the log"
    return ""


def user_signer() -> signing.Signer | None:
    """This user's signer for writing (the secret is made on first use); None (and a warning) if it cannot be read or made."""
    try:
        return signing.signer()
    except OSError as exc:
        logger.warning(
            "nbagent: cannot use the signing secret %s (%s); this session's lines are not signed, "
            "so its tool calls will need approval when resumed",
            signing.secret_path(),
            exc,
        )
        return None
