"""This user's key and the signatures of lines: a per-user secret, and an HMAC chain over the lines this user writes.

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
Snapshot headers are signed with the same key under another domain tag, bound to the
session and to the last line they cover (see snapshot.py).  How far a whole log is
trusted: :mod:`nbagent.record.trust`.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path
from typing import Any, Literal

from . import redact
from .line_codec import CRC_SUFFIX_LEN

SECRET_FILE = "secret"
SECRET_BYTES = 32
KEY_ID_LEN = 8
MAC_LEN = 32
SIG_PREFIX = b',"sig":"'
SIG_SUFFIX_LEN = len(SIG_PREFIX) + KEY_ID_LEN + 1 + MAC_LEN + 1  # ,"sig":"kkkkkkkk:mmmm…"
LOG_V1 = b"nbagent-log-v1\0"
LOG_V2 = b"nbagent-log-v2\0"
SNAPSHOT = b"nbagent-snapshot-v3\0"

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
        redact.register(secret)  # its hex and base64 forms never reach a log or an export
        found = _signers[path] = Signer(secret)
    return found


def body_of(line: bytes) -> bytes:
    """A whole line's bytes without its ``crc`` key (the line as it is if it has none): what its ``sig`` ends."""
    return line[:-CRC_SUFFIX_LEN] + b"}" if line[-CRC_SUFFIX_LEN:].startswith(b',"crc":"') else line


def mac_of(line: bytes) -> bytes:
    """The mac part of a whole line's ``sig`` (b'' if it has none)."""
    sig = split_sig(body_of(line))[1]
    return sig[KEY_ID_LEN + 1 :] if sig is not None else b""
