"""Families of forks in listings: ``nbagent sessions --tree`` (its rows, as text and as JSON) and a log's own lineage."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from ..record import events as ev
from ..render.text import when
from ..state import lineage
from ..stores import Listed
from .summary import json_row


def of_events(events: Iterable[ev.Event]) -> lineage.Lineage | None:
    """The lineage of the session whose events these are: its own (last) session_start's."""
    found = None
    for event in events:
        if event["type"] == ev.SESSION_START:
            found = lineage.of_meta(event.get("meta"))
    return found


def tree_rows(summaries: Sequence[Listed]) -> list[tuple[int, Listed]]:
    """The summaries in family order (each fork below its parent, indented by depth); a fork whose parent is not listed is a root."""
    members = [lineage.Member(s.session_id or s.path, s.parent, s) for s in summaries]
    return [(depth, member.item) for depth, member in lineage.tree(members)]


def write_tree(summaries: Sequence[Listed], out: TextIO) -> None:
    """``nbagent sessions --tree``: one row per session, forks indented below the session they were forked from."""
    rows = [
        [
            ("   " * (depth - 1) + "└─ " if depth else "") + s.name,
            s.lineage.point_words if s.lineage is not None else "-",
            str(s.turns),
            when(s.last_ts),
            s.trust or "?",
            s.status,
            lineage.short_title(s.title, 40) if s.title else "-",
        ]
        for depth, s in tree_rows(summaries)
    ]
    header = ["SESSION", "FORKED AT", "TURNS", "LAST ACTIVITY", "TRUST", "STATUS", "TITLE"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    for cells in [header, *rows]:
        out.write("  ".join(c.ljust(w) if i < len(cells) - 1 else c for i, (c, w) in enumerate(zip(cells, widths))) + "\n")


def tree_json(summaries: Sequence[Listed]) -> list[dict[str, Any]]:
    """``--tree --json``: each summary's dict with its ``depth`` in the family tree, in tree order."""
    return [{**json_row(s), "depth": depth} for depth, s in tree_rows(summaries)]
