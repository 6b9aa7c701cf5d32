"""``nbagent fork SESSION [--at SEQ | --turn N] [--name NAME]``: a new session whose history is SESSION's up to a point."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from .. import history
from ..agent.fork import fork
from ..agent.session import Session
from ..state import lineage


def add_parser(commands: Any) -> None:
    """The ``fork`` subcommand."""
    parser = commands.add_parser(
        "fork", help="make a new session whose history is a session's up to a turn or event (the original is only read)"
    )
    parser.add_argument(
        "session", help="the session to fork: a log, a notebook, a session name or id, or postgresql://...#<notebook>/<session>"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--at", type=int, metavar="SEQ", help="keep events 1 to SEQ (a point between turns)")
    where.add_argument("--turn", type=int, metavar="N", help="keep turns 1 to N (0: none)")
    parser.add_argument("--name", metavar="NAME", help="the fork's session name (default: a new timestamped name)")


def cmd_fork(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent fork``: exit 2 for a fork point inside a turn (the message names the nearest valid points)."""
    source, path = history.resolve_session(args.session)
    try:
        made = fork(path, at=args.at, turn=args.turn, name=args.name, store_spec=source)
    except lineage.ForkPointError as exc:
        raise history.HistoryError(f"cannot fork {history.session_name(path)} there: {exc}.", usage=True) from None
    with Session.open(made.path, store=source):  # closing writes its snapshot (and a database's listing summary)
        pass
    kept = lineage.turn_span(1, made.turns)
    out.write(
        f"forked {history.session_name(path)} {lineage.after_turn(made.turns)} (it keeps {kept}: events 1-{made.lineage.at}) "
        f'into {made.where}, titled "{made.lineage.title}"\n'
    )
    return 0
