"""Session history, read from the logs on disk: finding, summarising, resolving, searching, verifying.

Everything here only reads, except :func:`compact` (which writes a snapshot
through :class:`~nbagent.session.Session`).  No IPython.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import HistoryError
from ..render.text import Printer, clip, shorten, transcript, when
from .find import NOTEBOOK_SUFFIX, find_logs, notebook_of, read_all, read_log, session_name
from .resolve import resolve
from .search import Match, grep, searchable
from .summary import Summary, list_summaries, summarize, trust_of, write_table
from .verify import Problem, Report, verify

__all__ = [
    "NOTEBOOK_SUFFIX",
    "HistoryError",
    "Match",
    "Printer",
    "Problem",
    "Report",
    "Summary",
    "clip",
    "compact",
    "find_logs",
    "grep",
    "list_summaries",
    "notebook_of",
    "read_all",
    "read_log",
    "resolve",
    "searchable",
    "session_name",
    "shorten",
    "summarize",
    "transcript",
    "trust_of",
    "verify",
    "when",
    "write_table",
]


def compact(path: Path) -> tuple[Path, int]:
    """Write a fresh snapshot of a log (opening it as the writer: a torn tail is repaired); returns it and the seq."""
    from ..session import Session

    with Session.open(path, snapshot_every=0) as session:
        written = session.snapshot()
        return written, session.seq
