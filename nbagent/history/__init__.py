"""Session history, read from the logs on disk: finding, summarising, resolving, searching, verifying.

Everything here only reads, except :func:`compact` (which writes a snapshot
through :class:`~nbagent.agent.session.Session`).

May import: ``render``, ``agent`` and every floor below them; never IPython or the Jupyter server.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import HistoryError
from ..render.text import Printer, clip, shorten, transcript, when
from ..stores import FILES, Store
from .copy import Copied, copy
from .find import NOTEBOOK_SUFFIX, find_logs, notebook_of, read_all, read_bytes, read_log, session_name
from .resolve import resolve, resolve_session
from .search import Match, grep, searchable
from .summary import checked, json_row, list_summaries, store_summaries, summarize, trust_of, write_table
from .verify import Problem, Report, verify

__all__ = [
    "NOTEBOOK_SUFFIX",
    "Copied",
    "HistoryError",
    "Match",
    "Printer",
    "Problem",
    "Report",
    "checked",
    "clip",
    "compact",
    "copy",
    "find_logs",
    "grep",
    "json_row",
    "list_summaries",
    "notebook_of",
    "read_all",
    "read_bytes",
    "read_log",
    "resolve",
    "resolve_session",
    "searchable",
    "session_name",
    "shorten",
    "store_summaries",
    "summarize",
    "transcript",
    "trust_of",
    "verify",
    "when",
    "write_table",
]


def compact(path: Path, source: Store = FILES) -> tuple[Path, int]:
    """Write a fresh snapshot of a log (opening it as the writer: a torn tail is repaired); returns it and the seq.

    ``source`` is the session's store (from :func:`resolve_session`); the default is the file at ``path``,
    whatever ``NBAGENT_STORE`` says.
    """
    from ..agent.session import Session

    with Session.open(path, snapshot_every=0, store=source) as session:
        written = session.snapshot()
        return written, session.seq
