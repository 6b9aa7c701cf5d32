"""Session summaries for listings: a snapshot header plus the events after it, and who wrote the log.

A summary is a store's :class:`~nbagent.stores.Listed` row with what a listing shows filled in.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..errors import LogError
from ..record import signing, trust
from ..record.readfile import open_regular
from ..render.parts import context_figure, tokens_words
from ..render.text import when
from ..state import fold, lineage
from ..stores import FileStore, Listed, Store, file_index, snapshot
from ..stores import folders as store
from ..stores.file_index import snapshot_usable

# The keys of a listing's JSON row, in order, before the figures in words (see :func:`json_row`).
ROW = (
    "name",
    "path",
    "notebook",
    "session_id",
    "title",
    "created",
    "last_ts",
    "turns",
    "events",
    "usage",
    "complete",
    "pending",
    "source",
    "trust",
    "owner",
    "context_tokens",
    "window",
    "compacted",
    "spend",
    "parent",
    "parent_name",
    "forked_at",
)


def context_shown(summary: Listed) -> str:
    """How full the context window was after the last reply: ``143k / 200k`` ('-' before any reply)."""
    return context_figure(summary.figures) or "-"


def json_row(summary: Listed) -> dict[str, Any]:
    """A listing's JSON row: :data:`ROW`, then ``status``, ``tokens`` (input plus output), each figure (``tokens_in``...) and their words."""
    data = {key: copy.deepcopy(getattr(summary, key)) for key in ROW}
    figures = summary.figures
    data["status"], data["tokens"], data["context"] = summary.status, figures.total, context_shown(summary)
    data["tokens_in"], data["tokens_out"] = figures.input, figures.output
    data["tokens_from_cache"], data["tokens_to_cache"] = figures.from_cache, figures.to_cache
    data["tokens_text"] = tokens_words(figures)
    cost = summary.cost
    data["cost_usd"], data["cost_text"], data["cost_why"] = cost.dollars, cost.words() if figures.used else "", cost.why()
    data["forked_after_turn"] = summary.lineage.turns if summary.lineage is not None else None  # None: not a fork, or not recorded
    return data


def _pending(status: str, frontier: str, open_calls: int, model_errors: bool = False) -> tuple[bool, str]:
    if frontier == "done" and status != "interrupted":
        return True, ""
    if frontier == "empty":
        return False, "no request yet"
    waiting = f"{open_calls} tool call{'s' if open_calls != 1 else ''}" if frontier == "tools" else "model reply"
    if frontier == "done":
        waiting = ""
    if status == "interrupted":
        return False, "interrupted" + (f" ({waiting} pending)" if waiting else "")
    if status == "error" or model_errors:
        return False, f"{waiting} (last model call failed)"
    return False, waiting


def from_state(summary: Listed, state: fold.State) -> Listed:
    """``summary`` filled in from a folded state (what a listing shows)."""
    summary.session_id, summary.title, summary.created = state.session_id, state.title, state.created
    summary.last_ts, summary.turns, summary.events, summary.usage = state.last_ts, state.turns, state.seq, dict(state.usage)
    summary.complete, summary.pending = _pending(state.status, state.frontier, len(state.open_calls), state.status == "error")
    summary.context_tokens, summary.window, summary.compacted = state.context_tokens, state.window, bool(state.compactions)
    summary.spend = {key: list(counts) for key, counts in state.spend.items()}
    if state.budget_stopped and not summary.complete:
        summary.pending = "stopped at its budget"
    return summary


def _spend(head: Mapping[str, Any]) -> dict[str, list[int]] | None:
    """The tokens by price key a listing record holds (None: it has none: an older nbagent wrote it)."""
    spend = head.get("spend")
    if not isinstance(spend, dict):
        return None
    kept = {str(key): counts for key, counts in spend.items() if isinstance(counts, list)}
    return {key: [c if isinstance(c, int) else 0 for c in counts][:5] for key, counts in kept.items()}


_NO_USER = object()


def summarize(path: Path, *, user: signing.Signer | None | object = _NO_USER) -> Listed:
    """Summarise one session: snapshot header plus the events after it, or a full read without one; and who wrote it.

    A damaged or newer-schema log gives a summary that says so instead of raising.
    """
    if user is _NO_USER:
        user = trust.user_signer_or_none()
    assert user is None or isinstance(user, signing.Signer)
    summary = _summarize(path, user)
    if not summary.session_id:
        return summary  # not a readable log: nobody's
    try:
        summary.trust = trust_of(path, user=user).verdict
    except OSError:
        pass
    return summary


def trust_of(path: Path, *, user: signing.Signer | None | object = _NO_USER) -> trust.Report:
    """Who signed the lines of a log, for listings (checked against this user's key; no secret is created).

    A snapshot header signed by this user records who signed the lines before it, so
    only the lines after it are checked; ``verify`` checks every line.
    """
    if user is _NO_USER:
        user = trust.user_signer_or_none()
    assert user is None or isinstance(user, signing.Signer)
    found = snapshot.read_header_bytes(path)
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if found is not None and snapshot_usable(handle, *found, size, user) and _prefix_matches(handle, found[0]):
            header = found[0]
            checker = trust.Checker(
                user=user,
                session_id=header["summary"]["session_id"],
                start=trust.Chain(int(header["seq"]), int(header["offset"]), header["line_sig"].encode("ascii")),
                before=trust.Report.from_dict(header["trust"]),
                prefix_sha256=lambda end: trust.file_sha256(handle, end),
            )
        else:
            checker = trust.Checker(user=user)
        trust.feed_file(checker, handle)  # a piece at a time: memory stays small whatever the log's length
        return checker.report


def _prefix_matches(handle: Any, header: dict[str, Any]) -> bool:
    """Whether the log before the snapshot is the one its trust record was made from."""
    return trust.file_sha256(handle, int(header["offset"])) == header.get("prefix_sha256")


def _summarize(path: Path, user: signing.Signer | None) -> Listed:
    return from_listed(file_index.describe(path, user))


def from_listed(item: Listed) -> Listed:
    """A listing row of the file store (:func:`nbagent.stores.file_index.describe`) with what a listing shows filled in."""
    if item.problem:  # a log that cannot be read: its name and why, nothing a failed read may have left
        return Listed(item.name, item.path, item.notebook, source=item.source, pending=item.problem)
    if item.state is not None:
        return from_state(item, item.state)
    head = item.summary
    item.usage = dict(head.get("usage") or {})
    item.spend = _spend(head)
    item.context_tokens, item.window = int(head.get("context_tokens") or 0), int(head.get("window") or 0)
    item.complete, item.pending = _pending(head.get("status", ""), head.get("frontier", ""), head.get("open_calls", 0))
    if head.get("budget_stopped") is True and not item.complete:
        item.pending = "stopped at its budget"
    return item


def list_summaries(path: str | os.PathLike[str]) -> list[Listed]:
    """Summaries of every session under ``path``, oldest activity first (the file store's listing, with who signed each)."""
    user = trust.user_signer_or_none()
    summaries = []
    for item in FileStore(path).list():  # the store's listing; who signed each is checked here
        summary = from_listed(item)
        if summary.session_id:
            try:
                summary.trust = trust_of(Path(item.path), user=user).verdict
            except OSError:
                pass
        summaries.append(summary)
    return summaries


UNCHECKED = "unchecked"  # an index row's trust label: its owner and signer are whatever a client wrote there


def stored_trust(source: Store, summary: Listed, user: signing.Signer | None) -> str:
    """Who signed a listed session's lines, by the check opening it makes (every line is read); '' if it cannot be read."""
    from ..stores.postgres import PostgresStore, key_path

    try:
        if isinstance(source, PostgresStore):
            data = source.read_bytes(key_path(summary.notebook, summary.name))
            return trust.check_log(data, user=user).verdict if data else ""
        return trust_of(Path(summary.path), user=user).verdict
    except (LogError, OSError, ValueError):
        return ""


def checked(source: Store, summaries: Sequence[Listed]) -> None:
    """Label each of a store's listed sessions by who signed its lines, as opening it checks them (one read each)."""
    user = trust.user_signer_or_none()
    for summary in summaries:
        summary.trust = stored_trust(source, summary, user)


def store_summaries(
    source: Store, *, notebook: str = "", under: str = "", owner: str = "", text: str = "", limit: int | None = None
) -> list[Listed]:
    """Summaries from a store's index (no event is read): the database store answers from its sessions table.

    ``trust`` is ``unchecked``: the index row's owner and signer are whatever a client wrote there
    (:func:`checked` reads and checks each session's lines).
    """
    found = source.list(notebook=notebook, under=under, owner=owner, text=text, limit=limit)
    for item in found:
        item.source = "index"
        head = item.summary
        item.usage = {k: int(v) for k, v in (head.get("usage") or {}).items()}
        item.spend = _spend(head)
        item.context_tokens, item.window = int(head.get("context_tokens") or 0), int(head.get("window") or 0)
        if head.get("seq") == item.events:
            item.complete, item.pending = _pending(
                str(head.get("status", "")), str(head.get("frontier", "")), int(head.get("open_calls", 0))
            )
        else:
            item.pending = "open, or not closed cleanly"
        item.trust = UNCHECKED
    return found


def notebook_key(folder: Path) -> str:
    """The notebook a log folder (``<dir>/.nbagent/<notebook>``) stands for: how a database keys its sessions."""
    from ..stores.postgres import key_of

    return key_of(Path(folder) / ("key" + store.LOG_SUFFIX))[0]


def notebook_sessions(source: Store, folder: Path) -> list[store.StoredSession]:
    """One notebook's sessions, oldest activity first: its log folder's files, or a database's index filtered by the notebook.

    A session of a database has the path of the file it stands for, ``folder/<name>.jsonl``.
    """
    if not source.url:
        return store.list_sessions(folder)
    from ..stores.postgres import key_path

    notebook = notebook_key(folder)
    return [
        store.StoredSession(item.name, key_path(item.notebook, item.name), item.last_ts)
        for item in source.list(notebook=notebook)
        if item.notebook == notebook  # the filter also takes a bare file name; here only this very notebook
    ]


def notebook_summaries(source: Store, folder: Path, *, open_states: Mapping[str, fold.State] | None = None) -> list[Listed]:
    """The ``%agent_sessions`` rows of one notebook: each log file summarised, or (a database) its index rows.

    ``open_states``: the state of sessions this process holds open, by their name (``<url>#<notebook>/<session>``);
    the index knows a session's status and tokens only once it is closed, their state knows them now.
    """
    if not source.url:
        user = trust.user_signer_or_none()
        return [summarize(found.path, user=user) for found in store.list_sessions(folder)]
    notebook = notebook_key(folder)
    found = [s for s in store_summaries(source, notebook=notebook) if s.notebook == notebook]
    checked(source, found)  # one notebook's sessions: few, so each is checked
    for summary in found:
        state = (open_states or {}).get(summary.path)
        if state is not None:
            from_state(summary, state)
    return found


HEADER = ("SESSION", "TITLE", "CREATED", "LAST ACTIVITY", "TURNS", "TOKENS", "COST", "CONTEXT", "TRUST", "STATUS")


@dataclass(frozen=True)
class Table:
    """The session listing as cells of text: its header, then a group of rows per notebook (``heading`` '' when there is one)."""

    header: tuple[str, ...]
    groups: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...]


def title_cell(summary: Listed, limit: int = 40) -> str:
    """A listing's TITLE: the title (a fork's own says where it came from); a fork an older nbagent made, with its parent first."""
    title = lineage.short_title(summary.title, limit) if summary.title else "-"
    found = summary.lineage
    if found is None or found.title:
        return title
    return f"(fork of {found.name or found.parent[:8]} {found.point_words}) {title}"


def table(summaries: Sequence[Listed], *, current: str | None = None, title_limit: int = 40) -> Table:
    """The listing's cells: a row per session, grouped by notebook; with ``current`` a first column stars it."""
    by_notebook: dict[tuple[str, str], list[Listed]] = {}
    for summary in summaries:  # a database's sessions apart from the files' (their path is the store URL with #...)
        where = summary.path.partition("#")[0] if summary.source == "index" else ""
        by_notebook.setdefault((summary.notebook, where), []).append(summary)
    mixed = len({where for _notebook, where in by_notebook}) > 1

    def row(s: Listed) -> tuple[str, ...]:
        cells = (
            s.name,
            title_cell(s, title_limit),
            when(s.created),
            when(s.last_ts),
            str(s.turns),
            tokens_words(s.figures) or "-",
            s.cost.words() if s.figures.used else "-",
            context_shown(s),
            s.trust or "?",
            s.status,
        )
        return cells if current is None else ("*" if s.path == current else " ", *cells)

    groups = []
    for (notebook, where), group in by_notebook.items():
        heading = ""
        if len(by_notebook) > 1:
            heading = f"{notebook or group[0].path.rsplit('/', 1)[0]}" + (f"  (in {where})" if mixed and where else "")
        groups.append((heading, tuple(row(s) for s in group)))
    return Table(HEADER if current is None else ("", *HEADER), tuple(groups))


def write_table(summaries: Sequence[Listed], out: TextIO, *, current: str | None = None) -> None:
    """The session listing of the CLI and ``%agent_sessions`` in a terminal: a row per session, grouped by notebook; ``current`` is starred."""
    cells = table(summaries, current=current)
    rows = [row for _heading, group in cells.groups for row in group]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(cells.header)]

    def line(row: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i < len(row) - 1 else c for i, (c, w) in enumerate(zip(row, widths))) + "\n"

    for heading, group in cells.groups:
        if heading:
            out.write(heading + "\n")
        out.write(line(cells.header))
        for row in group:
            out.write(line(row))
        if len(cells.groups) > 1:
            out.write("\n")
