"""The ``nbagent`` command: list, show, follow, export, verify and snapshot session logs, and run the demo.

Exit codes are :mod:`.exit_codes`' (0 success, 1 bad data, 2 a usage mistake).  Errors are one line on stderr,
never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from .. import history, terminal
from .._version import __version__
from ..errors import LogCorruptError, LogError, LogVersionError, ModelError, NbagentError
from ..history import database as stored
from ..history import family
from ..record import redact
from . import fork_command, trust_command
from . import mcp_command as mcp_command
from .exit_codes import EXIT_DATA, EXIT_OK, EXIT_USAGE

SESSION_HELP = (
    "a session log (.jsonl), a notebook (its most recent session), or a session name or id "
    "(a unique prefix will do) found under the current folder (its files, then the database NBAGENT_STORE names)"
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """One line and exit code 2, like every other usage mistake."""
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (try '{self.prog} --help')\n")


def _positive(text: str) -> int:
    """A whole number of at least 1 (``--limit 0`` would otherwise mean no limit at all)."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1 (got {text!r})")
    return number


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    parser = _Parser(prog="nbagent", description="Durable Claude agent sessions for Jupyter: inspect the logs, or run the demo.")
    parser.add_argument("--version", action="version", version=f"nbagent {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    sessions = commands.add_parser("sessions", help="list sessions under a notebook or folder")
    sessions.add_argument(
        "path",
        nargs="?",
        default=".",
        help="a notebook, a log folder, a log, or a folder with notebooks (default: .); with NBAGENT_STORE set, "
        "also the sessions of its notebooks in that database",
    )
    sessions.add_argument("--json", action="store_true", help="print JSON for machines")
    sessions.add_argument("--grep", metavar="TEXT", help="search requests, replies and tool input/output (case-insensitive)")
    sessions.add_argument(
        "--store",
        metavar="URL",
        help="list a database's sessions (postgresql://...) from its index; --grep then searches titles and requests",
    )
    sessions.add_argument(
        "--notebook", metavar="NOTEBOOK", default="", help="with --store: only this notebook's sessions (a path or a file name)"
    )
    sessions.add_argument("--owner", metavar="ROLE", default="", help="with --store: only sessions of this database role")
    sessions.add_argument("--limit", type=_positive, metavar="N", help="with --store: only the N most recently active (N >= 1)")
    sessions.add_argument("--tree", action="store_true", help="show each fork below the session it was forked from")
    sessions.add_argument(
        "--check", action="store_true", help="label database sessions by their lines' signatures (reads each; else TRUST says unchecked)"
    )

    copy = commands.add_parser("copy", help="copy a session to another store or file, line for line (seq, times and signatures kept)")
    copy.add_argument("src", metavar="SRC", help=SESSION_HELP + ", or postgresql://.../db#<notebook>/<session>")
    copy.add_argument(
        "dst",
        metavar="DST",
        help="a new .jsonl file, a notebook (its log folder), a folder, or a postgresql:// URL (with or without #<notebook>/<session>)",
    )

    show = commands.add_parser("show", help="print a session's transcript")
    show.add_argument("session", help=SESSION_HELP)
    show.add_argument("--full", action="store_true", help="do not shorten tool results")

    tail = commands.add_parser("tail", help="print a session's events from event N; -f follows it live")
    tail.add_argument("session", help=SESSION_HELP)
    tail.add_argument("-f", "--follow", action="store_true", help="keep printing events as another process writes them")
    tail.add_argument("--since", type=int, default=0, metavar="N", help="start after event N (default: 0, the beginning)")
    tail.add_argument("--json", action="store_true", help="print each event as its JSON line")
    tail.add_argument("--idle-exit", type=float, metavar="SECONDS", help="with -f: stop after SECONDS without a new event")

    export = commands.add_parser("export", help="write a session as a notebook (.ipynb) or Markdown (.md)")
    export.add_argument("session", help=SESSION_HELP)
    export.add_argument("-o", "--output", required=True, metavar="FILE", help="the file to write (.ipynb or .md)")
    export.add_argument("--format", choices=("ipynb", "md"), help="the format, if FILE's extension does not say")

    verify = commands.add_parser("verify", help="check a log and its snapshot without changing them")
    verify.add_argument("session", help=SESSION_HELP)
    verify.add_argument("--json", action="store_true", help="print the report as JSON")

    snapshot = commands.add_parser("snapshot", help="write a fresh snapshot of a session (speeds up listing and opening)")
    snapshot.add_argument("session", help=SESSION_HELP)
    compact = commands.add_parser("compact", help="deprecated: the old name of snapshot (it says so on stderr, then does the same)")
    compact.add_argument("session", help=SESSION_HELP)

    trust_command.add_parser(commands, SESSION_HELP)

    fork_command.add_parser(commands)

    mcp_command.add_parser(commands)

    demo = commands.add_parser("demo", help="run the end-to-end demo (offline without ANTHROPIC_API_KEY, Claude with it)")
    demo.add_argument("--folder", default="nbagent-demo", metavar="DIR", help="the demo's workspace (default: ./nbagent-demo)")
    demo.add_argument("--fresh", action="store_true", help="delete the previous demo's sessions and notes first")
    demo.add_argument("--model", metavar="NAME", help="the Claude model to use when ANTHROPIC_API_KEY is set")
    return parser


# Commands ----------------------------------------------------------------------------------------
def cmd_sessions(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent sessions``."""
    if args.store:
        return _store_sessions(args, out)
    if args.limit is not None:
        raise history.HistoryError("--limit works only with --store (the files are all listed).")
    source = stored.env_store()  # NBAGENT_STORE: its sessions of the notebooks under PATH too
    if args.grep is not None:
        if not args.grep:
            raise history.HistoryError("--grep needs some text to search for.")
        matches, failed = stored.grep_under(args.path, args.grep, source)
        if args.json:
            out.write(terminal.json_dumps([m.__dict__ for m in matches], indent=2) + "\n")
        else:
            for match in matches:
                out.write(f"{match.name}  event {match.seq}  {match.where}: {match.snippet}\n")
            if not matches and failed is None:
                out.write(f"no session mentions {args.grep!r}\n")
    else:
        summaries, failed = stored.sessions_under(args.path, source, check=args.check)
        if args.json:
            rows = family.tree_json(summaries) if args.tree else [history.json_row(s) for s in summaries]
            out.write(terminal.json_dumps(rows, indent=2) + "\n")
        elif summaries:
            (family.write_tree if args.tree else history.write_table)(summaries, out)
        elif failed is None:
            out.write(f"no sessions under {args.path}" + (f" (nor in {source.url})" if source else "") + "\n")
    if failed is not None:
        raise failed  # after what could be listed: one line on stderr, exit 1
    return EXIT_OK


def _store_sessions(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent sessions --store URL``: from the database's index, filtered there."""
    from ..stores import get_store

    source = get_store(args.store)
    summaries = history.store_summaries(source, notebook=args.notebook, owner=args.owner, text=args.grep or "", limit=args.limit)
    if args.check:
        history.checked(source, summaries)
    if args.json:
        rows = family.tree_json(summaries) if args.tree else [history.json_row(s) for s in summaries]
        out.write(terminal.json_dumps(rows, indent=2) + "\n")
    elif not summaries:
        out.write(f"no sessions in {get_store(args.store).url}\n")
    else:
        (family.write_tree if args.tree else history.write_table)(summaries, out)
    return EXIT_OK


def cmd_copy(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent copy SRC DST``."""
    done = history.copy(args.src, args.dst)
    out.write(f"copied {done.events} events from {done.source} to {done.target}\n")
    if done.note:
        out.write(f"  note: {done.note}\n")
    return EXIT_OK


def cmd_show(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent show``: the good events, then the damage (if any) as an error."""
    from ..stores import session_url

    source, path = history.resolve_session(args.session)
    out.write(f"session {history.session_name(path)}  ({session_url(source, path)})\n")
    read = history.read_log(path, source)
    forked = family.of_events(read.events)
    if forked is not None:
        out.write(f"{forked.words}: events 1-{forked.at} are its parent's, byte for byte\n")
    history.transcript(read.events, out, result_limit=10**9 if args.full else 600)
    from functools import reduce

    from ..render.parts import tokens_line
    from ..render.view import follow
    from ..state.fold import State
    from ..state.tokens import Tokens

    figures = Tokens.of_state(reduce(follow, read.events, State())).whole()  # a hostile line changes nothing more
    if figures.used:
        out.write(f"in all: {tokens_line(figures)}\n")  # the whole session's tokens and cost, as every view says them
    if read.torn:
        out.write(
            f"(not shown: a torn last line of {len(read.torn)} bytes at byte offset {read.end}: {read.torn_reason}; "
            "opening the session cuts it off and keeps it aside)\n"
        )
    return EXIT_OK


def cmd_tail(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent tail [-f]``."""
    if args.since < 0:
        raise history.HistoryError("--since must be 0 or more.")
    source, path = history.resolve_session(args.session)
    printer = history.Printer(out)

    def emit(event: dict[str, object]) -> None:
        if args.json:
            out.write(terminal.json_dumps(redact.shown_event(event), separators=(",", ":")) + "\n")  # thinking redacted
            out.flush()
        else:
            printer(event)

    if args.follow:
        try:
            for event in source.follow(path, args.since, idle_timeout=args.idle_exit):
                emit(event)
        except KeyboardInterrupt:
            pass
    else:
        for event in history.read_all(path, source):
            if event["seq"] > args.since:
                emit(event)
    printer.finish()
    return EXIT_OK


def cmd_export(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent export``."""
    from . import export

    source, path = history.resolve_session(args.session)
    target = Path(args.output)
    try:
        export.format_for(target, args.format)
    except ValueError as exc:
        raise history.HistoryError(str(exc)) from None
    written = export.export(history.read_all(path, source), target, fmt=args.format, source=path)
    out.write(f"wrote {written}\n")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent verify``: exit 1 when anything is wrong."""
    source, path = history.resolve_session(args.session)
    report = history.verify(path, source)
    if args.json:
        data = {
            "path": report.path,
            "ok": report.ok,
            "events": report.events,
            "size": report.size,
            "problems": [p.__dict__ for p in report.problems],
            "notes": report.notes,
            "trust": report.trust,
        }
        out.write(terminal.json_dumps(data, indent=2) + "\n")
    else:
        verdict = "OK" if report.ok else f"{len(report.problems)} problem(s)"
        out.write(f"{report.path}: {verdict}: {report.events} valid events, {report.size} bytes\n")
        for problem in report.problems:
            out.write(f"  PROBLEM {problem}\n")
        for note in report.notes:
            out.write(f"  note: {note}\n")
        out.write(f"  trust: {report.trust}\n")
    return EXIT_OK if report.ok else EXIT_DATA


def cmd_snapshot(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent snapshot`` (and its deprecated old name, ``compact``)."""
    source, path = history.resolve_session(args.session, write=True)
    if source is history.FILES:  # a file log: what stands where its snapshot goes is checked before it is opened (one line)
        from ..record.readfile import NotRegularFile
        from ..stores.snapshot import check_place

        try:
            check_place(Path(path))
        except NotRegularFile as exc:
            raise LogError(str(exc)) from None
    written, seq = history.compact(path, source)
    out.write(f"wrote {written} (events 1-{seq})\n")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent demo``."""
    from .demo import DemoError, run_demo

    try:
        return run_demo(args.folder, fresh=args.fresh, model_name=args.model, out=out)
    except DemoError as exc:
        raise history.HistoryError(str(exc)) from None


COMMANDS = {
    "sessions": cmd_sessions,
    "copy": cmd_copy,
    "show": cmd_show,
    "tail": cmd_tail,
    "export": cmd_export,
    "verify": cmd_verify,
    "snapshot": cmd_snapshot,
    "compact": cmd_snapshot,
    "trust": trust_command.cmd_trust,
    "mcp": mcp_command.cmd_mcp,
    "fork": fork_command.cmd_fork,
    "demo": cmd_demo,
}


DEPRECATED = {"compact": "snapshot"}  # an old command name -> the new one (it still works, and says so on stderr)


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the command line; returns the exit code."""
    # Everything printed passes through terminal.safe: no control sequence from a log reaches the terminal.
    out = terminal.wrap(out or sys.stdout)
    err = terminal.wrap(err or sys.stderr)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0) if not isinstance(exit_.code, str) else EXIT_USAGE
    if not args.command:
        parser.print_help(out)
        return EXIT_USAGE
    if args.command in DEPRECATED:
        err.write(f"nbagent {args.command}: deprecated, use `nbagent {DEPRECATED[args.command]}` (it does the same)\n")
    try:
        return COMMANDS[args.command](args, out)
    except history.HistoryError as exc:
        err.write(f"nbagent {args.command}: {exc}\n")
        return EXIT_USAGE if exc.usage else EXIT_DATA
    except (LogCorruptError, LogVersionError) as exc:
        err.write(f"nbagent {args.command}: {' '.join(str(exc).split())}\n")
        return EXIT_DATA
    except (LogError, ModelError, NbagentError) as exc:
        err.write(f"nbagent {args.command}: {' '.join(str(exc).split())}\n")
        return EXIT_DATA
    except BrokenPipeError:
        # Output piped into `head` and closed: not an error.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_OK
    except PermissionError as exc:
        err.write(f"nbagent {args.command}: {exc.filename or ''}: permission denied.\n")
        return EXIT_USAGE
    except IsADirectoryError as exc:
        err.write(f"nbagent {args.command}: {exc.filename or ''} is a folder.\n")
        return EXIT_USAGE
    except OSError as exc:
        err.write(f"nbagent {args.command}: {exc.filename or ''}: {exc.strerror or exc}.\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.write("\n")
        return 130
