"""``%agent_sessions`` in a notebook: the session listing as an HTML table (a row per session, cells that wrap), text beside it.

A terminal keeps the text table (:func:`nbagent.history.write_table`); a notebook's output gets both, and a front end
shows the HTML. Every cell is escaped: titles are the user's and the model's words, names come from files.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from ..history import write_table
from ..history.summary import table
from ..render.parts import esc
from ..render.style import NO_MATH
from ..stores import Listed

# Scoped to the listing; the colours are JupyterLab's, with fallbacks for other front ends.
CSS = (
    ".nbagent-sessions{font-size:var(--jp-ui-font-size1,13px);overflow-x:auto}"
    ".nbagent-sessions table{border-collapse:collapse;margin:4px 0;font-size:0.88em}"
    ".nbagent.nbagent-sessions th,.nbagent.nbagent-sessions td{text-align:left;vertical-align:top;padding:2px 4px;"
    "border-bottom:1px solid var(--jp-border-color2,#e0e0e0)}"
    ".nbagent-sessions th{font-weight:600}"
    ".nbagent-sessions .nbagent-nowrap{white-space:nowrap}"
    ".nbagent-sessions td.nbagent-title{min-width:9em;max-width:32em}"
    ".nbagent-sessions td.nbagent-figures{min-width:6em}"
    ".nbagent-sessions .nbagent-current{font-weight:600}"
)
NOWRAP = frozenset({"SESSION", "TURNS", "TRUST", "COST"})  # the rest wraps
WORDS = frozenset({"LAST ACTIVITY"})  # wraps between its words only: a date and its time, never inside a date
KINDS = {"TITLE": "nbagent-title", "TOKENS": "nbagent-figures"}
LEFT_OUT = frozenset({"CREATED"})  # for room: LAST ACTIVITY says when; the text beside it keeps every column
TITLE_LIMIT = 120  # characters of a title in the HTML table (it wraps); the text table keeps 40


class SessionTable:
    """What ``%agent_sessions`` displays in a notebook: ``_repr_html_`` for the front end, ``__repr__`` the text table."""

    def __init__(self, caption: str, summaries: Sequence[Listed], current: str | None) -> None:
        self.caption, self.summaries, self.current = caption, list(summaries), current

    def __repr__(self) -> str:
        out = io.StringIO()
        out.write(self.caption + "\n")
        write_table(self.summaries, out, current=self.current)
        return out.getvalue().rstrip("\n")

    def _repr_pretty_(self, printer: object, cycle: bool) -> None:
        printer.text(repr(self))  # type: ignore[attr-defined]

    def _repr_html_(self) -> str:
        cells = table(self.summaries, current=self.current, title_limit=TITLE_LIMIT)
        starred = bool(cells.header) and cells.header[0] == ""  # the star goes into the session's own cell: one column less
        keep = [i for i, name in enumerate(cells.header) if name and name not in LEFT_OUT]
        header = [cells.header[i] for i in keep]
        parts = [f'<div class="nbagent nbagent-sessions {NO_MATH}"><style>{CSS}</style><div>{esc(self.caption)}</div>']
        for heading, rows in cells.groups:
            if heading:
                parts.append(f"<div><b>{esc(heading)}</b></div>")
            head = "".join(f"<th>{esc(h)}</th>" for h in header)
            body = "".join(_row(header, [row[i] for i in keep], current=starred and row[0] == "*") for row in rows)
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        parts.append("</div>")
        return "".join(parts)


def _row(header: Sequence[str], row: Sequence[str], *, current: bool) -> str:
    """One session's row; the current one starred and in bold."""
    cells = []
    for name, value in zip(header, row):
        shown = _words(value) if name in WORDS else esc(("* " if current else "") + value if name == "SESSION" else value)
        kind = "nbagent-nowrap" if name in NOWRAP else KINDS.get(name, "")
        cells.append(f'<td class="{kind}">{shown}</td>' if kind else f"<td>{shown}</td>")
    return f'<tr class="nbagent-current">{"".join(cells)}</tr>' if current else f"<tr>{''.join(cells)}</tr>"


def _words(value: str) -> str:
    """A cell that may wrap between its words but never inside one (``2026-12-05`` stays whole), escaped."""
    return " ".join(f'<span class="nbagent-nowrap">{esc(word)}</span>' for word in value.split(" "))
