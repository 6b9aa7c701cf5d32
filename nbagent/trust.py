"""Who wrote a log: a per-user secret and an HMAC on every line this user writes.

In the spirit of Jupyter's notebook trust: a log arriving from elsewhere (cloned
with a notebook, downloaded, edited by hand) carries no valid signature by this
user's key, so nothing it recorded runs without the user's approval.

A signed line ends in ``...,"sig":"<key id>:<mac>","crc":"<crc32>"}``.  The mac is
HMAC-SHA256 (first 128 bits, hex) keyed by the user's secret over the session id
and the line's bytes before ``sig`` (closed with ``}``); the key id names the key
without revealing it, so a reader can tell "signed by another key" from "altered".
Binding the session id means a signed line cannot be spliced into another session.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

SECRET_FILE = "secret"
SECRET_BYTES = 32
KEY_ID_LEN = 8
MAC_LEN = 32
SIG_PREFIX = b',"sig":"'
SIG_SUFFIX_LEN = len(SIG_PREFIX) + KEY_ID_LEN + 1 + MAC_LEN + 1  # ,"sig":"kkkkkkkk:mmmm…"
_DOMAIN = b"nbagent-log-v1\0"
_CRC_SUFFIX_LEN = len(',"crc":"00000000"}')

LineTrust = Literal["mine", "foreign", "altered", "unsigned"]


def data_dir() -> Path:
    """Where nbagent keeps per-user data: ``$NBAGENT_DATA_DIR``, else ``$XDG_DATA_HOME/nbagent``, else ``~/.local/share/nbagent``."""
    configured = os.environ.get("NBAGENT_DATA_DIR")
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "nbagent"


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
    """Signs and checks lines with one user's secret."""

    def __init__(self, secret: bytes) -> None:
        self.key_id = key_id(secret)
        # HMAC-SHA256 written out with pre-keyed hash states: copying two hashlib objects per
        # line costs about half of copying an hmac.HMAC (same result as hmac.new(secret, ...)).
        block = secret.ljust(64, b"\0") if len(secret) <= 64 else hashlib.sha256(secret).digest().ljust(64, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in block) + _DOMAIN)
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in block))
        self._tag = b'"sig":"' + self.key_id.encode() + b":"

    def for_session(self, session_id: str) -> SessionSigner:
        """The signer of one session's lines."""
        inner = self._inner.copy()
        inner.update(session_id.encode("ascii", "replace") + b"\0")
        return SessionSigner(self.key_id, inner, self._outer, self._tag)


class SessionSigner:
    """Signs and checks the lines of one session."""

    def __init__(self, key_id: str, inner: Any, outer: Any, tag: bytes) -> None:
        self.key_id = key_id
        self._inner = inner
        self._outer = outer
        self._tag = tag

    def mac(self, body: bytes) -> bytes:
        """The hex mac of a JSON object's bytes."""
        inner = self._inner.copy()
        inner.update(body)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest()[:MAC_LEN].encode()

    def sign(self, body: bytes) -> bytes:
        """``body`` (a JSON object without ``sig`` and ``crc``) with a ``sig`` key added last."""
        return body[:-1] + b"," + self._tag + self.mac(body) + b'"}'

    def check(self, body: bytes) -> LineTrust:
        """Who signed a line (``body`` is the line without its ``crc``)."""
        unsigned, sig = split_sig(body)
        if sig is None:
            return "unsigned"
        if not sig.startswith(self._tag[7:]):
            return "foreign"
        return "mine" if hmac.compare_digest(sig[KEY_ID_LEN + 1 :], self.mac(unsigned)) else "altered"


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
        found = _signers[path] = Signer(secret)
    return found


# Whole logs ----------------------------------------------------------------------------------------
@dataclass
class Report:
    """Who signed the lines of a log."""

    lines: int = 0
    mine: int = 0
    foreign: int = 0
    altered: int = 0
    unsigned: int = 0
    foreign_keys: set[str] = field(default_factory=set)
    untrusted: list[int] = field(default_factory=list)  # line numbers (== seq) not signed by this user

    @property
    def trusted(self) -> bool:
        """Every line is signed by this user (an empty log is trusted)."""
        return self.mine == self.lines

    @property
    def verdict(self) -> str:
        """One short word for listings: ``yours``, ``unsigned``, ``other key``, ``altered`` or ``mixed``."""
        if self.trusted:
            return "yours"
        if self.altered:
            return "altered"
        if self.unsigned == self.lines:
            return "unsigned"
        if self.foreign == self.lines:
            return "other key"
        return "mixed"

    def describe(self) -> str:
        """A sentence for ``nbagent verify`` and the notebook."""
        if self.trusted:
            return f"signed by you (all {self.lines} lines)"
        parts = []
        if self.mine:
            parts.append(f"{self.mine} signed by you")
        if self.unsigned:
            parts.append(f"{self.unsigned} unsigned")
        if self.foreign:
            parts.append(f"{self.foreign} signed by another key ({', '.join(sorted(self.foreign_keys))})")
        if self.altered:
            parts.append(f"{self.altered} with your key id but a wrong signature (altered after signing)")
        return f"NOT written by you: of {self.lines} lines, " + ", ".join(parts)


def _lines(data: bytes) -> Iterator[bytes]:
    pos = 0
    while (nl := data.find(b"\n", pos)) >= 0:
        yield data[pos:nl]
        pos = nl + 1


def session_id_of(first_line: bytes) -> str:
    """The session id in a log's first line ('' if it has none)."""
    from . import events as ev

    try:
        value = ev.decode(first_line).get("session_id")
    except (ev.BadLine, ValueError):
        return ""
    return value if isinstance(value, str) else ""


def check_log(data: bytes, *, user: Signer | None, session_id: str | None = None, first_line: int = 1) -> Report:
    """Check every whole line of log bytes against ``user``'s key (None: no key, so no line is theirs); crcs are not checked here.

    ``data`` may start mid-log (at line ``first_line``) if ``session_id`` is given.
    """
    report = Report()
    if session_id is None:
        session_id = session_id_of(data.split(b"\n", 1)[0])
    session = user.for_session(session_id) if user is not None else None
    for number, line in enumerate(_lines(data), start=first_line):
        report.lines += 1
        body = line[: -_CRC_SUFFIX_LEN] + b"}" if line[-_CRC_SUFFIX_LEN:].startswith(b',"crc":"') else line
        sig = split_sig(body)[1]
        if sig is None:
            verdict: LineTrust = "unsigned"
        elif session is None:
            verdict = "foreign"
        else:
            verdict = session.check(body)
        if verdict == "mine":
            report.mine += 1
            continue
        report.untrusted.append(number)
        if verdict == "unsigned":
            report.unsigned += 1
        elif verdict == "foreign":
            report.foreign += 1
            report.foreign_keys.add((sig or b"")[:KEY_ID_LEN].decode("ascii", "replace"))
        else:
            report.altered += 1
    return report


def vouched_prefix(header: dict[str, Any], header_body: bytes, user: Signer | None) -> int:
    """How many leading log lines a snapshot header vouches were signed by this user (0 if it does not)."""
    session_id = (header.get("summary") or {}).get("session_id")
    if user is None or header.get("trusted_prefix") is not True or not isinstance(session_id, str):
        return 0
    return int(header["seq"]) if user.for_session(session_id).check(header_body) == "mine" else 0


def combine(prefix_lines: int, tail: Report) -> Report:
    """A report for a log whose first ``prefix_lines`` are this user's and whose tail is ``tail``."""
    tail.lines += prefix_lines
    tail.mine += prefix_lines
    return tail


def user_signer_or_none() -> Signer | None:
    """This user's signer for reading (never creates a secret); None if there is none or it cannot be read."""
    try:
        return signer(create=False)
    except OSError:
        return None
