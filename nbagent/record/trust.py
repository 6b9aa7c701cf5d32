"""Who wrote a log: a per-user secret, an HMAC chain over the lines this user writes, and trust events.

In the spirit of Jupyter's notebook trust: a log arriving from elsewhere (cloned
with a notebook, downloaded, edited by hand) carries no valid signature by this
user's key, so nothing it recorded runs without the user's approval.

A signed line ends in ``...,"sig":"<key id>:<mac>","crc":"<crc32>"}``.  The mac is
HMAC-SHA256 (first 128 bits, hex) keyed by the user's secret over a domain tag, the
session id, the previous line's mac (schema v2: a chain) and the line's bytes before
``sig`` (closed with ``}``).  So a line verifies only in its own session, in its own
place, after its own predecessors; the key id names the key without revealing it.
Schema v1 lines were signed without the chain: they still read as "yours (v1)", but
nothing they recorded runs unasked until ``nbagent trust`` vouches for them.

A log is trusted up to line N when every line up to N is this user's (v2, chained),
or a ``trust`` event of this user's at line N vouches for the lines before it by
their SHA-256.  Snapshot headers are signed with the same key under another domain
tag, bound to the session and to the last line they cover (see snapshot.py).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from .log_reader import whole_lines

SECRET_FILE = "secret"
SECRET_BYTES = 32
KEY_ID_LEN = 8
MAC_LEN = 32
SIG_PREFIX = b',"sig":"'
SIG_SUFFIX_LEN = len(SIG_PREFIX) + KEY_ID_LEN + 1 + MAC_LEN + 1  # ,"sig":"kkkkkkkk:mmmm…"
LOG_V1 = b"nbagent-log-v1\0"
LOG_V2 = b"nbagent-log-v2\0"
SNAPSHOT = b"nbagent-snapshot-v3\0"
_TRUST_TYPE = b'"type":"trust"'
_CRC_SUFFIX_LEN = len(',"crc":"00000000"}')

LineTrust = Literal["mine", "legacy", "foreign", "altered", "unsigned"]


def data_dir() -> Path:
    """Where nbagent keeps per-user data: ``$NBAGENT_DATA_DIR``, else where a secret already is, else the platform's user data folder."""
    configured = os.environ.get("NBAGENT_DATA_DIR")
    if configured:
        return Path(configured).expanduser()
    # Before platformdirs the folder was always the XDG one: a secret there stays in use, or its logs would read as "other key".
    xdg = os.environ.get("XDG_DATA_HOME")
    for old in ([Path(xdg).expanduser()] if xdg else []) + [Path.home() / ".local" / "share"]:
        if os.path.lexists(old / "nbagent" / SECRET_FILE):
            return old / "nbagent"
    import platformdirs

    return Path(platformdirs.user_data_dir("nbagent", appauthor=False))


def secret_path() -> Path:
    """The secret file of this user."""
    return data_dir() / SECRET_FILE


def _read_secret(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path} is not a regular file")
        if info.st_mode & 0o077 and info.st_uid == os.getuid():
            os.fchmod(fd, 0o600)  # readable by others: take that back (Jupyter's notebook_secret does the same)
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    if len(data) < 16:
        raise OSError(f"{path} holds only {len(data)} bytes; delete it and nbagent makes a new one")
    return data


def load_secret(*, create: bool = True) -> bytes | None:
    """This user's secret, made on first use (32 random bytes, owner-only); None if absent and ``create`` is false."""
    path = secret_path()
    try:
        return _read_secret(path)
    except FileNotFoundError:
        if not create:
            return None
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Write a complete file under a private name, then link it into place: a concurrent
    # first use either wins the link or reads the winner's complete file.
    temp = path.with_name(f".{SECRET_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, secrets.token_bytes(SECRET_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(temp, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(temp)
    return _read_secret(path)


def key_id(secret: bytes) -> str:
    """A short public name of a key (not enough to recover it)."""
    return hashlib.sha256(b"nbagent key id\0" + secret).hexdigest()[:KEY_ID_LEN]


class Signer:
    """Signs and checks with one user's secret."""

    def __init__(self, secret: bytes) -> None:
        self.key_id = key_id(secret)
        # HMAC-SHA256 written out with pre-keyed hash states: copying two hashlib objects per
        # line costs about half of copying an hmac.HMAC (same result as hmac.new(secret, ...); a test pins it).
        block = secret.ljust(64, b"\0") if len(secret) <= 64 else hashlib.sha256(secret).digest().ljust(64, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in block))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in block))
        self._tag = b'"sig":"' + self.key_id.encode() + b":"

    def keyed(self, domain: bytes, session_id: str) -> LineSigner:
        """The signer of one kind of record (``LOG_V2``, ``LOG_V1``, ``SNAPSHOT``) of one session."""
        inner = self._inner.copy()
        inner.update(domain + session_id.encode("ascii", "replace") + b"\0")
        return LineSigner(self.key_id, inner, self._outer, self._tag, chained=domain == LOG_V2)

    def for_session(self, session_id: str) -> LineSigner:
        """The signer of one session's log lines (schema v2, chained)."""
        return self.keyed(LOG_V2, session_id)


class LineSigner:
    """Signs and checks records of one kind in one session; a chained signer also covers the previous line's mac."""

    def __init__(self, key_id: str, inner: Any, outer: Any, tag: bytes, *, chained: bool) -> None:
        self.key_id = key_id
        self._inner = inner
        self._outer = outer
        self._tag = tag
        self.chained = chained
        self.prev = b""  # the mac of the line the next signed line follows (chained signers)
        self.pending = b""  # the mac of the line signed last, until the caller commits it

    def mac(self, body: bytes, prev: bytes = b"") -> bytes:
        """The hex mac of a JSON object's bytes (after the line whose mac is ``prev``, if chained)."""
        inner = self._inner.copy()
        if self.chained:
            inner.update(prev + b"\0")
        inner.update(body)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest()[:MAC_LEN].encode()

    def sign(self, body: bytes) -> bytes:
        """``body`` (a JSON object without ``sig`` and ``crc``) with a ``sig`` key added last; chained after ``prev``."""
        self.pending = self.mac(body, self.prev)
        return body[:-1] + b"," + self._tag + self.pending + b'"}'

    def commit(self) -> None:
        """The line signed last was written: the next one follows it."""
        self.prev = self.pending

    def check(self, body: bytes, prev: bytes = b"") -> LineTrust:
        """Who signed a record (``body`` is it without its ``crc``; ``prev`` the previous line's mac)."""
        unsigned, sig = split_sig(body)
        if sig is None:
            return "unsigned"
        if not sig.startswith(self._tag[7:]):
            return "foreign"
        return "mine" if hmac.compare_digest(sig[KEY_ID_LEN + 1 :], self.mac(unsigned, prev)) else "altered"


def split_sig(body: bytes) -> tuple[bytes, bytes | None]:
    """A JSON object's bytes without a trailing ``sig`` key, and the sig (``None`` if there is none)."""
    if len(body) > SIG_SUFFIX_LEN and body[-SIG_SUFFIX_LEN - 1 : -SIG_SUFFIX_LEN - 1 + len(SIG_PREFIX)] == SIG_PREFIX:
        return body[: -SIG_SUFFIX_LEN - 1] + b"}", body[-SIG_SUFFIX_LEN - 1 + len(SIG_PREFIX) : -2]
    return body, None


_signers: dict[Path, Signer] = {}


def signer(*, create: bool = True) -> Signer | None:
    """This user's signer (the secret is read once per process); None if there is no secret and ``create`` is false."""
    path = secret_path()
    found = _signers.get(path)
    if found is None:
        secret = load_secret(create=create)
        if secret is None:
            return None
        from .redact import register

        register(secret)  # noqa: E702 - its hex and base64 forms never reach a log or an export
        found = _signers[path] = Signer(secret)
    return found


# Whole logs ----------------------------------------------------------------------------------------
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
    from . import events as ev

    try:
        value = ev.decode(first_line).get("session_id")
    except (ev.BadLine, ValueError):
        return ""
    return value if isinstance(value, str) else ""


def _start_id(line: bytes) -> str:
    """The session id of a ``session_start`` line ('' for a line of another type)."""
    from . import events as ev

    try:
        event = ev.decode(line)
    except (ev.BadLine, ValueError):
        return ""
    value = event.get("session_id")
    return value if event.get("type") == ev.SESSION_START and isinstance(value, str) else ""


def mac_of(line: bytes) -> bytes:
    """The mac part of a whole line's ``sig`` (b'' if it has none)."""
    body = line[:-_CRC_SUFFIX_LEN] + b"}" if line[-_CRC_SUFFIX_LEN:].startswith(b',"crc":"') else line
    sig = split_sig(body)[1]
    return sig[KEY_ID_LEN + 1 :] if sig is not None else b""


def _vouched_digest(line: bytes) -> str | None:
    """The prefix digest a trust line vouches for, if it is a well-formed trust event."""
    from . import events as ev

    try:
        event = ev.decode(line)
    except ev.BadLine:
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
    start = start or Chain()
    report = Report() if before is None else Report(**{**asdict(before), "foreign_keys": set(before.foreign_keys)})
    if session_id is None or start.line == 0:  # from the first line: a fork's first lines are its parent's, of their own id
        session_id = session_id_of(data.split(b"\n", 1)[0]) or session_id or ""
    chained = user.for_session(session_id) if user is not None else None
    legacy = user.keyed(LOG_V1, session_id) if user is not None else None
    if prefix_sha256 is None:
        base = start.offset

        def prefix_sha256(end: int) -> str:
            return hashlib.sha256(memoryview(data)[: end - base]).hexdigest()

    prev = start.prev
    unbroken = report.trusted_upto == start.line  # every line so far is trusted
    for number, (pos, line) in enumerate(whole_lines(data), start=start.line + 1):
        report.lines += 1
        body = line[:-_CRC_SUFFIX_LEN] + b"}" if line[-_CRC_SUFFIX_LEN:].startswith(b',"crc":"') else line
        sig = split_sig(body)[1]
        verdict: LineTrust
        if sig is None:
            verdict = "unsigned"
        elif chained is None or legacy is None:
            verdict = "foreign"
        elif line.startswith(b'{"v":1,'):
            verdict = legacy.check(body)
            verdict = "legacy" if verdict == "mine" else verdict
        else:
            verdict = chained.check(body, prev)
            if verdict == "altered" and user is not None and number > 1 and (fork_id := _start_id(line)):
                # A fork's own session_start: its lines, from this one on, are signed for its own session id.
                session_id = fork_id
                chained, legacy = user.for_session(session_id), user.keyed(LOG_V1, session_id)
                verdict = chained.check(body, prev)
        prev = sig[KEY_ID_LEN + 1 :] if sig is not None else b""
        if verdict == "mine":
            report.mine += 1
            if _TRUST_TYPE in line:
                digest = _vouched_digest(line)
                if digest is not None and hmac.compare_digest(digest, prefix_sha256(start.offset + pos)):
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
    return report


def user_signer_or_none() -> Signer | None:
    """This user's signer for reading (never creates a secret); None if there is none or it cannot be read."""
    try:
        return signer(create=False)
    except OSError:
        return None
