"""How a magic line is read: the options of ``%agent``, options before a free-text request, and requests that end in '?'."""

from __future__ import annotations

import argparse
import inspect
import re
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments

from ..state.approval_rule import APPROVAL_MODES

_VALUE_OPTIONS = ("--session", "--model", "--approval", "--resume", "--rewind")
_NUMBER_OPTIONS = ("--fork",)  # an option whose value, a number, may be left out

# The options of %agent, in the order its help lists them (IPython's magic_arguments).
AGENT_ARGUMENTS = (
    argument("--new", action="store_true", help="Start a new session for this request."),
    argument("--session", metavar="NAME", help="Use (or create) the session called NAME in this notebook's log folder."),
    argument(
        "--resume",
        metavar="SESSION",
        help="Continue a past session (a name from %%agent_sessions, or a log path), re-rendering its history first.",
    ),
    argument("--model", metavar="NAME", help="Claude model for this request (default: Agent.model)."),
    argument("--approval", choices=APPROVAL_MODES, help="Approval for this request (default: Agent.approval)."),
    argument(
        "--restore", action="store_true", help="After a kernel restart, re-run the agent's recorded python code to restore its variables."
    ),
    argument(
        "--compact",
        action="store_true",
        help="Compact the current session (or --session/--resume's) now, with no request: a model call summarises the "
        "earlier conversation (the local path, whatever Agent.compact says), and the summary is logged as a compaction event.",
    ),
    argument(
        "--drop-thinking",
        action="store_true",
        help="Leave every thinking block so far out of the session's later requests (the log keeps them), with no request: "
        "the way out when the API refused the session's history as malformed.",
    ),
    argument(
        "--fork",
        nargs="?",
        const=-1,
        type=int,
        metavar="N",
        help="Continue in a fork of the current session that keeps its turns 1 to N (default: all); later cells use the fork. "
        "Run again after a kernel restart, the cell reuses the fork it made.",
    ),
    argument(
        "--rewind",
        type=int,
        metavar="N",
        help="Go back to the end of turn N: continue in a fork of the current session that keeps turns 1 to N. The kernel's "
        "variables, the files the agent changed and the cells it inserted are not rewound (the model is told).",
    ),
    argument(
        "--fix",
        "-f",
        action="store_true",
        help="Ask the agent to explain and fix the most recent error in this kernel (the failing cell's code and traceback "
        "are sent); words after it are added to the request.",
    ),
    argument(
        "request",
        nargs="*",
        help="What you want the agent to do. A request may end with '?'. {name} puts in a variable (its value if a string "
        "or a number, else its type and shape); {In[3]}, {Out[3]} and {Err[3]} the code, result and error of cell [3]; "
        "{Err} the most recent error; {{ and }} are literal braces. Nothing else is expanded: a $ stays a $.",
    ),
)


OPTIONS = tuple(a.args[0] for a in AGENT_ARGUMENTS if a.args[0].startswith("-"))  # what an unknown option is compared with


def agent_arguments(func: Any) -> Any:
    """Give ``%agent`` its options, and as its docstring (what ``%agent?`` shows) its help in plain text."""
    description = inspect.cleandoc(func.__doc__ or "")
    for decorate in reversed(AGENT_ARGUMENTS):
        func = decorate(func)
    func = magic_arguments()(func)
    func.__doc__ = plain_help(description)  # IPython's own help text is reStructuredText ("::", "<{ask,auto,deny}>")
    return func


def plain_help(description: str) -> str:
    """The usage, ``description`` and options of ``%agent``, as argparse writes them for a terminal."""
    parser = argparse.ArgumentParser(
        prog="%agent", description=description, add_help=False, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for option in AGENT_ARGUMENTS:
        option.add_to_parser(parser, None)
    return parser.format_help()


def check_agent_line(args: Any, request: str) -> None:
    """Refuse option combinations that make no sense, saying what to do instead."""
    if args.compact and args.drop_thinking:
        raise UsageError("--compact and --drop-thinking each change the session on their own: run one, then the other.")
    for flag, given in (("--compact", args.compact), ("--drop-thinking", args.drop_thinking)):
        if given and (request or args.new or args.restore):
            raise UsageError(f"{flag} changes a session and takes no request (nor --new or --restore): run `%agent {flag}` alone.")
    if args.compact or args.drop_thinking:
        return
    forking = args.fork is not None or args.rewind is not None
    if forking and (args.new or args.resume or args.fix or (args.fork is not None and args.rewind is not None)):
        raise UsageError("--fork and --rewind continue the current session in a fork: run one alone (no --new, --resume or --fix).")
    if not request and not (args.resume or args.restore or forking):
        raise UsageError("The request is empty: write what you want the agent to do, e.g. `%agent summarize data.csv`.")
    if args.new and (args.session or args.resume):
        raise UsageError("--new starts a fresh session; it cannot be combined with --session or --resume.")


def split_request(line: str) -> tuple[str, str]:
    """Split ``--options`` at the start of a magic line from the free-text request after them.

    The request is kept verbatim (quotes, apostrophes and all); ``--`` ends the options.
    """
    position = 0
    expect_value = expect_number = False
    for match in re.finditer(r"\S+", line):
        token = match.group()
        if expect_value or (expect_number and token.isdigit()):
            expect_value = expect_number = False
        elif token == "--":
            return line[: match.start()], line[match.end() :].strip()
        elif token.startswith("-") and len(token) > 1:
            expect_value, expect_number = token in _VALUE_OPTIONS, token in _NUMBER_OPTIONS
        else:
            return line[: match.start()], line[match.start() :].strip()
        position = match.end()
    return line[:position], ""


_QUESTION_LINE = re.compile(r"^(?P<indent>[ \t]*)%agent(?P<rest>[ \t]+\S.*?)[ \t]*$")


def keep_question_marks(lines: list[str]) -> list[str]:
    """Input transformer: ``%agent ... ?`` is a request, not a help lookup (only a bare ``%agent?`` is help).

    IPython's help transformer runs before the magic one and would turn
    ``%agent what is in data.csv?`` into ``help(data.csv)``; this runs first
    (a cleanup transformer) and writes the magic call out in full.
    """
    if lines and lines[0].lstrip().startswith("%%"):
        return lines  # a cell magic's body is its own business
    out = []
    for line in lines:
        body = line.rstrip("\r\n")
        match = _QUESTION_LINE.match(body)
        if match and body.endswith("?"):
            call = f"get_ipython().run_line_magic('agent', {match.group('rest').strip()!r})"
            line = match.group("indent") + call + line[len(body) :]
        out.append(line)
    return out
