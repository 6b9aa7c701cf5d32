"""Forking a session: a new session whose history is its parent's up to a point (``Session.fork``, ``nbagent fork``).

The fork's log is the parent's lines up to the fork point, byte for byte (their seqs,
times and signatures kept: each is signed for the parent's session id, in its place),
then the fork's own ``session_start``, signed for the fork's new id, chained after
them, whose ``meta.fork`` names the parent and the SHA-256 of exactly those bytes.
The rules of where a fork may start are :mod:`nbagent.state.lineage`'s.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import LogError, NbagentError
from ..record import events as ev
from ..record import line_codec, signing
from ..record.log_reader import HEADER_LIMIT, scan, whole_lines
from ..state import lineage
from ..stores import Store, get_store, locate, session_url
from ..stores import folders as store
from .session_trust import user_signer


@dataclass(frozen=True)
class Forked:
    """What :func:`fork` made: the new session's path in its store, how to name it, its id, and its lineage."""

    path: Path
    where: str
    session_id: str
    lineage: lineage.Lineage
    turns: int


def start_line(
    prefix: bytes,
    at: int,
    parent_meta: dict[str, Any],
    found: lineage.Lineage,
    user: signing.Signer | None,
    by: dict[str, Any] | None = None,
) -> tuple[bytes, str]:
    """The fork's own session_start line (seq ``at + 1``), signed for a new session id after the prefix's last line; and that id.

    ``by``: who made the fork (e.g. the notebook cell), kept in ``meta.fork.by`` for listings.
    """
    session_id = uuid.uuid4().hex
    meta = {k: v for k, v in parent_meta.items() if k != lineage.FORK_KEY}
    meta[lineage.FORK_KEY] = {**found.to_dict(), **({"by": by} if by else {})}
    signer = user.for_session(session_id) if user is not None else None
    if signer is not None:
        last = prefix[: len(prefix) - 1].rsplit(b"\n", 1)[-1]
        signer.prev = signing.mac_of(last)
    line, _event = line_codec.encode(ev.make(at + 1, ev.SESSION_START, {"session_id": session_id, "meta": meta}), signer)
    if len(line) > HEADER_LIMIT:
        raise LogError(f"the fork's first line would be {len(line)} bytes, over the {HEADER_LIMIT}-byte limit of a session_start")
    return line, session_id


def fork(
    parent: str | os.PathLike[str],
    *,
    at: int | None = None,
    turn: int | None = None,
    name: str | None = None,
    store_spec: Store | str | None = None,
    by: dict[str, Any] | None = None,
) -> Forked:
    """Make a fork of the session at ``parent`` beside it (same store, same notebook), keeping events up to ``at`` or turns 1 to ``turn``.

    The parent is only read (it may be open in another process).  A point inside a turn is
    refused with :class:`~nbagent.state.lineage.ForkPointError` naming the nearest valid points.
    The fork is not opened here (a Session opens forks): the caller opens and closes it once, which writes its snapshot
    (and a database's listing summary), as ``Session.fork`` and ``nbagent fork`` do.
    """
    found_store, path = locate(parent)
    source = found_store or get_store(store_spec)
    where = session_url(source, path)
    data = read_bytes(source, path)
    read = scan(data, path=where)  # damage raises; a torn tail is left out, as opening would cut it
    if not read.events:
        raise NbagentError(f"{where} has no events to fork")
    valid, turns = lineage.survey(read.events)
    point = lineage.choose(valid, read.events[-1]["seq"], at=at, turn=turn, turns=turns)
    end = 0
    for number, (offset, line) in enumerate(whole_lines(data), start=1):
        if number == point.seq:
            end = offset + len(line) + 1
            break
    prefix = data[:end]
    parent_id, parent_meta = "", {}
    for event in read.events[: point.seq]:
        if event["type"] == ev.SESSION_START:
            parent_id, parent_meta = event["session_id"], dict(event.get("meta") or {})
    # its own title, not three sessions under one (before the first turn: the parent's title as it is now)
    title = lineage.fork_title(point.title or (valid[-1].title if valid else ""), point.turns)
    found = lineage.Lineage(
        parent_id, point.seq, hashlib.sha256(prefix).hexdigest(), len(prefix), store.check_name(path.stem), point.turns, title
    )
    target = path.with_name(store.check_name(name or store.new_name()) + store.LOG_SUFFIX)
    target_where = session_url(source, target)
    first, session_id = start_line(prefix, point.seq, parent_meta, found, trust_signer(), by)
    log = source.open_log(target)
    try:
        if log.size:
            raise NbagentError(f"{target_where} already holds a session; give the fork another name (nothing was changed)")
        for _offset, line in whole_lines(prefix):
            log.append(line + b"\n", durable=False)
        log.append(first, durable=True)  # the last line: until it is there, the copy is nobody's fork
    finally:
        log.close()
    return Forked(target, target_where, session_id, found, point.turns)


def read_bytes(source: Store, path: Path) -> bytes:
    """A session's whole log, read without its lock."""
    if source.url:
        reader = getattr(source, "read_bytes", None)
        if reader is None:
            raise NbagentError(f"{source.url} cannot give a session's bytes to fork it")
        return bytes(reader(path))
    from ..record.readfile import read_log_bytes

    try:
        return read_log_bytes(path)
    except FileNotFoundError:
        raise NbagentError(f"{path}: no such session log") from None


def trust_signer() -> signing.Signer | None:
    """This user's signer (a fork's own lines are signed like any session's); None if there is no usable key."""
    return user_signer()
