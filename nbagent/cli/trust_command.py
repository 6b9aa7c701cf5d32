"""``nbagent trust SESSION [--yes]``: vouch for a session you did not write, after seeing what continuing it would run."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from .. import history
from .exit_codes import EXIT_DATA, EXIT_OK


def add_parser(commands: Any, session_help: str) -> None:
    """The ``trust`` subcommand (``session_help``: how every command says which session it takes)."""
    trust = commands.add_parser(
        "trust", help="vouch for a session you did not write (e.g. from a cloned notebook), so continuing it may run its calls"
    )
    trust.add_argument("session", help=session_help)
    trust.add_argument("--yes", action="store_true", help="do not ask for confirmation (for scripts)")


def cmd_trust(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent trust``: show what trusting would let run, ask, then append a signed ``trust`` event."""
    from ..agent.session import Session
    from ..history.vouch import write_history
    from ..record.transcript import Transcript

    source, path = history.resolve_session(args.session, write=True)
    # snapshot_every=0: no snapshot of a state read before the question; the next open checks the log itself.
    with Session.open(path, store=source, snapshot_every=0) as session:
        offer = session.trust_offer()  # read once: what is shown is exactly what the trust event vouches for
        report, state = offer.report, offer.state
        if report.trusted:
            out.write(f"{session.where}: already trusted ({report.describe()}); nothing was changed\n")
            return EXIT_OK
        out.write(f"session {history.session_name(path)}  ({session.where})\n  {report.describe()}\n")
        messages = state.messages.as_list() if isinstance(state.messages, Transcript) else state.messages
        out.write(f"  {state.turns} turn(s); continuing it sends this history of {len(messages)} message(s) to the model:\n")
        write_history(messages, out)
        if state.open_calls:
            out.write("  Trusted, continuing it runs these recorded calls without asking you:\n")
            for tool_use_id, call in state.open_calls.items():
                arguments = json.dumps(call["input"], ensure_ascii=False, indent=2, sort_keys=True)
                out.write(f"    {call['name']} ({tool_use_id}), started {call['started']} time(s) before, with\n")
                out.write("\n".join("      " + line for line in arguments.splitlines()) + "\n")
        else:
            out.write("  It has no unfinished tool call; its recorded calls are not run again either way.\n")
        if not args.yes:
            if sys.stdin is None or not sys.stdin.isatty():
                raise history.HistoryError("not trusted: nobody can confirm here (no terminal); run it in a terminal, or pass --yes")
            out.flush()
            if input("Trust this session? [y/N] ").strip().lower() not in ("y", "yes"):
                out.write("not trusted; nothing was changed\n")
                return EXIT_DATA
        event = session.trust_log(offer)
    out.write(f"trusted: appended your signed trust event (event {event['seq']}), vouching for events 1-{event['vouches']}\n")
    return EXIT_OK
