"""The ``nbagent`` command: list, show, follow, export, verify and compact session logs, and run the demo.

Exit codes: 0 success, 1 bad data (a damaged or newer-schema log, a failed
verify, a locked log), 2 a usage mistake (bad arguments, missing file, unknown
session).  Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from . import __version__, history, terminal
from .errors import LogCorruptError, LogError, LogVersionError, ModelError, NbagentError

EXIT_OK, EXIT_DATA, EXIT_USAGE = 0, 1, 2
SESSION_HELP = (
    "a session log (.jsonl), a notebook (its most recent session), or a session name or id "
    "(a unique prefix will do) found under the current folder"
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """One line and exit code 2, like every other usage mistake."""
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (try '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    parser = _Parser(prog="nbagent", description="Durable Claude agent sessions for Jupyter: inspect the logs, or run the demo.")
    parser.add_argument("--version", action="version", version=f"nbagent {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    sessions = commands.add_parser("sessions", help="list sessions under a notebook or folder")
    sessions.add_argument("path", nargs="?", default=".", help="a notebook, a log folder, a log, or a folder with notebooks (default: .)")
    sessions.add_argument("--json", action="store_true", help="print JSON for machines")
    sessions.add_argument("--grep", metavar="TEXT", help="search requests, replies and tool input/output (case-insensitive)")

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

    compact = commands.add_parser("compact", help="write a fresh snapshot of a session (speeds up listing and opening)")
    compact.add_argument("session", help=SESSION_HELP)

    trust = commands.add_parser(
        "trust", help="vouch for a session you did not write (e.g. from a cloned notebook), so continuing it may run its calls"
    )
    trust.add_argument("session", help=SESSION_HELP)
    trust.add_argument("--yes", action="store_true", help="do not ask for confirmation (for scripts)")

    demo = commands.add_parser("demo", help="run the end-to-end demo (offline without ANTHROPIC_API_KEY, Claude with it)")
    demo.add_argument("--folder", default="nbagent-demo", metavar="DIR", help="the demo's workspace (default: ./nbagent-demo)")
    demo.add_argument("--fresh", action="store_true", help="delete the previous demo's sessions and notes first")
    demo.add_argument("--model", metavar="NAME", help="the Claude model to use when ANTHROPIC_API_KEY is set")
    return parser


# Commands ----------------------------------------------------------------------------------------
def cmd_sessions(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent sessions``."""
    if args.grep is not None:
        if not args.grep:
            raise history.HistoryError("--grep needs some text to search for.")
        matches = list(history.grep(history.find_logs(args.path), args.grep))
        if args.json:
            out.write(terminal.json_dumps([m.__dict__ for m in matches], indent=2) + "\n")
        else:
            for match in matches:
                out.write(f"{match.name}  event {match.seq}  {match.where}: {match.snippet}\n")
            if not matches:
                out.write(f"no session mentions {args.grep!r}\n")
        return EXIT_OK
    summaries = history.list_summaries(args.path)
    if args.json:
        out.write(terminal.json_dumps([s.to_dict() for s in summaries], indent=2) + "\n")
        return EXIT_OK
    if not summaries:
        out.write(f"no sessions under {args.path}\n")
        return EXIT_OK
    history.write_table(summaries, out)
    return EXIT_OK


def cmd_show(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent show``: the good events, then the damage (if any) as an error."""
    path = history.resolve(args.session)
    out.write(f"session {history.session_name(path)}  ({path})\n")
    read = history.read_log(path)
    history.transcript(read.events, out, result_limit=10**9 if args.full else 600)
    if read.torn:
        out.write(
            f"(not shown: a torn last line of {len(read.torn)} bytes at byte offset {read.end}: {read.torn_reason}; "
            "opening the session cuts it off and keeps it aside)\n"
        )
    return EXIT_OK


def cmd_tail(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent tail [-f]``."""
    from .reader import follow

    if args.since < 0:
        raise history.HistoryError("--since must be 0 or more.")
    path = history.resolve(args.session)
    printer = history.Printer(out)

    def emit(event: dict[str, object]) -> None:
        if args.json:
            out.write(terminal.json_dumps(event, separators=(",", ":")) + "\n")
            out.flush()
        else:
            printer(event)

    if args.follow:
        try:
            for event in follow(path, since=args.since, idle_timeout=args.idle_exit):
                emit(event)
        except KeyboardInterrupt:
            pass
    else:
        for event in history.read_all(path):
            if event["seq"] > args.since:
                emit(event)
    printer.finish()
    return EXIT_OK


def cmd_export(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent export``."""
    from . import export

    path = history.resolve(args.session)
    target = Path(args.output)
    try:
        export.format_for(target, args.format)
    except ValueError as exc:
        raise history.HistoryError(str(exc)) from None
    written = export.export(history.read_all(path), target, fmt=args.format, source=path)
    out.write(f"wrote {written}\n")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent verify``: exit 1 when anything is wrong."""
    path = history.resolve(args.session)
    report = history.verify(path)
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


def cmd_compact(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent compact``."""
    path = history.resolve(args.session, write=True)
    written, seq = history.compact(path)
    out.write(f"wrote {written} (events 1-{seq})\n")
    return EXIT_OK


def cmd_trust(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent trust``: show what trusting would let run, ask, then append a signed ``trust`` event."""
    from .session import Session

    path = history.resolve(args.session, write=True)
    with Session.open(path) as session:
        report = session.trust
        if report.trusted:
            out.write(f"{path}: already trusted ({report.describe()}); nothing was changed\n")
            return EXIT_OK
        state = session.state
        out.write(f"session {history.session_name(path)}  ({path})\n  {report.describe()}\n")
        out.write(f"  {state.turns} turn(s), {len(state.messages)} message(s): continuing it sends this history to the model.\n")
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
        event = session.trust_log()
    out.write(f"trusted: appended your signed trust event (event {event['seq']}), vouching for events 1-{event['vouches']}\n")
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
    "show": cmd_show,
    "tail": cmd_tail,
    "export": cmd_export,
    "verify": cmd_verify,
    "compact": cmd_compact,
    "trust": cmd_trust,
    "demo": cmd_demo,
}


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
