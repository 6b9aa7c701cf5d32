"""How far a log is trusted: who signed its lines, and the ``trust`` events by which this user vouches for lines before them.

A log is trusted up to line N when every line up to N is this user's (v2, chained),
or a ``trust`` event of this user's at line N vouches for the lines before it by
their SHA-256.  :func:`check_log` is the one check; the key and the line signatures
it checks against are :mod:`nbagent.record.signing`'s.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from . import events as ev
from . import line_codec
from .log_reader import whole_lines
from .signing import KEY_ID_LEN, LOG_V1, LineTrust, Signer, body_of, signer, split_sig

_TRUST_TYPE = b'"type":"trust"'


@dataclass
class Report:
    """Who signed the lines of a log, and how far from the start it is trusted to run unasked."""

    lines: int = 0
    mine: int = 0  # this user's, schema v2, in the chain
    legacy: int = 0  # this user's, schema v1 (not chained)
    foreign: int = 0
    altered: int = 0
    unsigned: int = 0
    trust_events: int = 0  # this user's trust events that vouched for the lines before them
    broken_trust: int = 0  # this user's trust events whose lines before them changed after they were trusted
    trusted_upto: int = 0  # lines 1..trusted_upto are trusted
    foreign_keys: set[str] = field(default_factory=set)

    @property
    def trusted(self) -> bool:
        """Every line is trusted (an empty log is)."""
        return self.trusted_upto == self.lines

    def is_trusted(self, line: int) -> bool:
        """Whether line ``line`` (== its seq) is in the trusted prefix."""
        return line <= self.trusted_upto

    @property
    def verdict(self) -> str:
        """One short word for listings: yours, trusted, yours (v1), unsigned, other key, altered or mixed."""
        if self.trusted:
            return "trusted" if self.trust_events and self.mine < self.lines else "yours"
        if self.altered:
            return "altered"
        if self.legacy and self.mine + self.legacy == self.lines:
            return "yours (v1)"
        if self.unsigned == self.lines:
            return "unsigned"
        if self.foreign == self.lines:
            return "other key"
        return "mixed"

    def describe(self) -> str:
        """A sentence for ``nbagent verify`` and the notebook."""
        if self.trusted and not (self.trust_events and self.mine < self.lines):
            return f"signed by you (all {self.lines} lines)"
        parts = []
        if self.mine:
            parts.append(f"{self.mine} signed by you")
        if self.legacy:
            parts.append(f"{self.legacy} signed by you in the older unchained v1 format")
        if self.unsigned:
            parts.append(f"{self.unsigned} unsigned")
        if self.foreign:
            parts.append(f"{self.foreign} signed by another key ({', '.join(sorted(self.foreign_keys))})")
        if self.altered:
            parts.append(f"{self.altered} with your key id but a wrong signature (altered, moved or copied from elsewhere)")
        if self.broken_trust:
            parts.append(f"{self.broken_trust} trust event(s) of yours whose lines before them were changed after you trusted them")
        counts = ", ".join(parts)
        if self.trusted:
            return f"trusted by you with `nbagent trust` (of {self.lines} lines, {counts})"
        where = f"; lines 1-{self.trusted_upto} are trusted" if self.trusted_upto else ""
        return f"NOT trusted: of {self.lines} lines, {counts}{where}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (a snapshot header carries it)."""
        data = asdict(self)
        data["foreign_keys"] = sorted(self.foreign_keys)
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Report:
        """Rebuild from :meth:`to_dict` (ValueError if it is not one)."""
        if not isinstance(data, dict) or set(data) | {"broken_trust"} != set(cls.__dataclass_fields__):
            raise ValueError("not a trust report")  # broken_trust is missing from reports written before it was counted
        counts = {k: v for k, v in data.items() if k != "foreign_keys"}
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts.values()):
            raise ValueError("not a trust report")
        keys = data["foreign_keys"]
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise ValueError("not a trust report")
        return cls(**counts, foreign_keys=set(keys))


@dataclass
class Chain:
    """Where a check of a log's lines starts: after ``line`` lines ending at byte ``offset``, whose last mac is ``prev``."""

    line: int = 0
    offset: int = 0
    prev: bytes = b""


def session_id_of(first_line: bytes) -> str:
    """The session id in a log's first line ('' if it has none)."""
    try:
        value = line_codec.decode(first_line).get("session_id")
    except (line_codec.BadLine, ValueError):
        return ""
    return value if isinstance(value, str) else ""


def _start_id(line: bytes) -> str:
    """The session id of a ``session_start`` line ('' for a line of another type)."""
    try:
        event = line_codec.decode(line)
    except (line_codec.BadLine, ValueError):
        return ""
    value = event.get("session_id")
    return value if event.get("type") == ev.SESSION_START and isinstance(value, str) else ""


def _vouched_digest(line: bytes) -> str | None:
    """The prefix digest a trust line vouches for, if it is a well-formed trust event."""
    try:
        event = line_codec.decode(line)
    except line_codec.BadLine:
        return None
    digest = event.get("prefix_sha256")
    return digest if event.get("type") == ev.TRUST and isinstance(digest, str) else None


def check_log(
    data: bytes,
    *,
    user: Signer | None,
    session_id: str | None = None,
    start: Chain | None = None,
    before: Report | None = None,
    prefix_sha256: Callable[[int], str] | None = None,
) -> Report:
    """Check every whole line of log bytes against ``user``'s key (None: no key, so no line is theirs); crcs are not checked here.

    ``data`` may be the part of a log after ``start`` (then ``session_id`` must be given,
    ``before`` is the report of the lines before it, and ``prefix_sha256(end)`` must
    give the SHA-256 of the log's first ``end`` bytes for any trust event found).
    This is the one chain check: the session, the listing and ``verify`` use it.
    """
    checker = Checker(user=user, session_id=session_id, start=start, before=before, prefix_sha256=prefix_sha256)
    checker.feed(data)
    return checker.report


class Checker:
    """:func:`check_log` fed a piece at a time (each piece whole lines, in order): memory is one piece, whatever the log's length.

    Without ``prefix_sha256`` the SHA-256 of the bytes fed so far (from ``start``) is kept running for trust events.
    """

    def __init__(
        self,
        *,
        user: Signer | None,
        session_id: str | None = None,
        start: Chain | None = None,
        before: Report | None = None,
        prefix_sha256: Callable[[int], str] | None = None,
    ) -> None:
        self.user = user
        self.start = start or Chain()
        self.report = Report() if before is None else Report(**{**asdict(before), "foreign_keys": set(before.foreign_keys)})
        self.session_id = session_id
        self.line, self.offset, self.prev = self.start.line, self.start.offset, self.start.prev
        self.unbroken = self.report.trusted_upto == self.start.line  # every line so far is trusted
        self._prefix = prefix_sha256
        self._hash = hashlib.sha256() if prefix_sha256 is None else None  # the bytes fed so far
        self._chained: Any = None
        self._legacy: Any = None
        self._ready = False  # the keys are chosen when the first piece (with the first line) comes

    def _keys(self, session_id: str) -> None:
        self.session_id = session_id
        user = self.user
        self._chained = user.for_session(session_id) if user is not None else None
        self._legacy = user.keyed(LOG_V1, session_id) if user is not None else None

    def _digest(self, data: bytes, pos: int) -> str:
        """The SHA-256 of the log's first bytes up to ``pos`` in ``data`` (the piece being fed)."""
        if self._prefix is not None:
            return self._prefix(self.offset + pos)
        assert self._hash is not None
        running = self._hash.copy()
        running.update(memoryview(data)[:pos])
        return running.hexdigest()

    def feed(self, data: bytes) -> None:
        """Check the whole lines of ``data``, the log's bytes from where the last piece ended (a last unfinished line is not)."""
        if not self._ready:
            session_id = self.session_id
            if session_id is None or self.line == 0:  # from the first line: a fork's first lines are its parent's, of their own id
                session_id = session_id_of(data.split(b"\n", 1)[0]) or session_id or ""
            self._keys(session_id)
            self._ready = True
        report, user, prev, unbroken = self.report, self.user, self.prev, self.unbroken
        end, number = 0, self.line
        for number, (pos, line) in enumerate(whole_lines(data), start=self.line + 1):
            end = pos + len(line) + 1
            report.lines += 1
            body = body_of(line)
            sig = split_sig(body)[1]
            verdict: LineTrust
            if sig is None:
                verdict = "unsigned"
            elif self._chained is None or self._legacy is None:
                verdict = "foreign"
            elif line.startswith(b'{"v":1,'):
                verdict = self._legacy.check(body)
                verdict = "legacy" if verdict == "mine" else verdict
            else:
                verdict = self._chained.check(body, prev)
                if verdict == "altered" and user is not None and number > 1 and (fork_id := _start_id(line)):
                    # A fork's own session_start: its lines, from this one on, are signed for its own session id.
                    self._keys(fork_id)
                    verdict = self._chained.check(body, prev)
            prev = sig[KEY_ID_LEN + 1 :] if sig is not None else b""
            if verdict == "mine":
                report.mine += 1
                if _TRUST_TYPE in line:
                    digest = _vouched_digest(line)
                    if digest is not None and hmac.compare_digest(digest, self._digest(data, pos)):
                        report.trust_events += 1
                        unbroken = True
                    elif digest is not None:
                        report.broken_trust += 1
                if unbroken:
                    report.trusted_upto = number
                continue
            unbroken = False
            if verdict == "legacy":
                report.legacy += 1
            elif verdict == "unsigned":
                report.unsigned += 1
            elif verdict == "foreign":
                report.foreign += 1
                report.foreign_keys.add((sig or b"")[:KEY_ID_LEN].decode("ascii", "replace"))
            else:
                report.altered += 1
        self.line, self.prev, self.unbroken = number, prev, unbroken
        if self._hash is not None:
            self._hash.update(memoryview(data)[:end])
        self.offset += end


PIECE = 1 << 20  # bytes of a file checked at a time by :meth:`Checker.feed_file` (a longer line is read whole)


def feed_file(checker: Checker, handle: Any, *, lines: int | None = None) -> None:
    """Feed ``checker`` the whole lines of an open log file from ``checker.offset`` on, a piece at a time (at most ``lines`` lines in all)."""
    rest, at_byte = b"", checker.offset
    while lines is None or checker.line < lines:
        handle.seek(at_byte)  # each time: a trust event's digest reads the file too
        chunk = handle.read(PIECE)
        at_byte += len(chunk)
        if not chunk:
            return
        data = rest + chunk
        cut = data.rfind(b"\n") + 1
        if lines is not None:
            at, wanted = 0, lines - checker.line
            while wanted and (at := data.find(b"\n", at) + 1):
                wanted -= 1
            cut = at if not wanted else cut
        checker.feed(data[:cut])
        rest = data[cut:]


def file_sha256(handle: Any, end: int) -> str:
    """The SHA-256 of an open file's first ``end`` bytes, read a piece at a time."""
    digest = hashlib.sha256()
    handle.seek(0)
    while end > 0 and (chunk := handle.read(min(PIECE, end))):
        digest.update(chunk)
        end -= len(chunk)
    return digest.hexdigest()


def user_signer_or_none() -> Signer | None:
    """This user's signer for reading (never creates a secret); None if there is none or it cannot be read."""
    try:
        return signer(create=False)
    except OSError:
        return None
