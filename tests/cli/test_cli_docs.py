"""docs/cli.md against the argument parser: every command and option documented, and no option that does not exist.

The options table in docs/cli.md is generated from ``nbagent.cli.main.build_parser()``
and must match it exactly; after changing the parser, rewrite it with
``NBAGENT_UPDATE_DOCS=1 .venv/bin/python -m pytest -q tests/cli/test_cli_docs.py``.
It is built from the parser's actions rather than from ``--help`` text, whose
layout changes with the terminal width and the Python version.  The hand-written
rest of the page is checked for the options it names.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
from pathlib import Path

import pytest

from nbagent.cli.main import build_parser

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
BEGIN = "<!-- begin options: generated from nbagent.cli.main.build_parser() by tests/cli/test_cli_docs.py -->"
END = "<!-- end options -->"
CODE = re.compile(r"```.*?```|`[^`\n]+`", re.S)  # fenced blocks, then code spans
FLAG = re.compile(r"(?<![\w/.\\-])--?[A-Za-z][\w-]*")
ROW = re.compile(r"^\| `nbagent (\w+)([^`]*)`", re.M)  # a row of the command table


def subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """Each subcommand's parser and its one-line help, in the parser's order."""
    (group,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {choice.dest: choice.help or "" for choice in group._choices_actions}
    return {name: (sub, helps[name]) for name, sub in group.choices.items()}


def arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """A parser's arguments and options, without ``--help`` and the subcommand group."""
    return [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


def flags(parser: argparse.ArgumentParser) -> set[str]:
    """Every option spelling a parser accepts (``-f``, ``--follow``, ...), ``-h``/``--help`` included."""
    return {flag for action in parser._actions for flag in action.option_strings}


def spelled(action: argparse.Action) -> str:
    """How the table shows an argument: ``SESSION``, ``[PATH]``, ``-f``, ``--follow``, ``--since N``, ``--format ipynb|md``."""
    if not action.option_strings:
        name = str(action.metavar or action.dest).upper()
        return f"`[{name}]`" if action.nargs == "?" else f"`{name}`"
    value = ""
    if action.nargs != 0:
        value = " " + (str(action.metavar) if action.metavar else "\\|".join(map(str, action.choices or [])) or action.dest.upper())
    shown = ", ".join(f"`{flag}{value}`" for flag in action.option_strings)
    return shown + (" (required)" if action.required else "")


def options_table(parser: argparse.ArgumentParser) -> str:
    """The generated part of docs/cli.md: every command, argument and option with its help."""
    rows = [
        BEGIN,
        "",
        "| command | argument or option | meaning |",
        "|---|---|---|",
        *(f"| `nbagent` | {spelled(a)} | {a.help} |" for a in arguments(parser)),
    ]
    for name, (sub, summary) in subcommands(parser).items():
        rows.append(f"| `nbagent {name}` | | {summary} |")
        rows += [f"| | {spelled(a)} | {a.help} |" for a in arguments(sub)]
    rows += ["", "Every command also takes `-h`, `--help`: it prints that command's usage.", "", END]
    return "\n".join(rows)


def sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) of each ``## `` section; the text before the first heading has the heading ""."""
    parts = re.split(r"^## (.*)$", text, flags=re.M)
    return [("", parts[0])] + list(zip(parts[1::2], parts[2::2]))


def handwritten(text: str) -> str:
    """The page without its generated options table."""
    return text[: text.index(BEGIN)] + text[text.index(END) + len(END) :]


def named_flags(text: str) -> list[str]:
    """The option-like words a piece of the page names, in code or in prose (``python -m``'s own flags aside)."""
    found = []
    for span in CODE.findall(text):
        if not span.strip("`").startswith("python "):
            found += FLAG.findall(span)
    return found + FLAG.findall(CODE.sub("x", text))


def test_the_options_table_is_the_parser() -> None:
    text = DOC.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1, f"docs/cli.md needs one {BEGIN} ... {END} block"
    current = text[text.index(BEGIN) : text.index(END) + len(END)]
    wanted = options_table(build_parser())
    if os.environ.get("NBAGENT_UPDATE_DOCS") == "1":
        DOC.write_text(text.replace(current, wanted))
        current = wanted
    diff = "\n".join(difflib.unified_diff(current.splitlines(), wanted.splitlines(), "docs/cli.md", "build_parser()", lineterm=""))
    assert current == wanted, f"the options table is out of date; run NBAGENT_UPDATE_DOCS=1 pytest tests/cli/test_cli_docs.py\n{diff}"


def test_every_command_has_a_row_naming_all_its_arguments_and_a_section() -> None:
    text = handwritten(DOC.read_text())
    rows = {name: rest for name, rest in ROW.findall(text)}
    headings = "\n".join(heading for heading, _ in sections(text))
    for name, (sub, _) in subcommands(build_parser()).items():
        assert name in rows, f"docs/cli.md's command table has no row for nbagent {name}"
        assert f"`{name}`" in headings, f"docs/cli.md has no section on nbagent {name}"
        for action in arguments(sub):
            if action.option_strings:
                assert set(action.option_strings) & set(FLAG.findall(rows[name])), (
                    f"the row of nbagent {name} lacks {action.option_strings}"
                )
            else:
                assert str(action.dest).upper() in rows[name], f"the row of nbagent {name} lacks {action.dest.upper()}"


def test_the_page_names_no_option_that_does_not_exist() -> None:
    """An option named in a command's row or section is one of that command's; elsewhere, one of some command's."""
    parser = build_parser()
    commands = subcommands(parser)
    anywhere = flags(parser).union(*(flags(sub) for sub, _ in commands.values()))
    text = handwritten(DOC.read_text())  # the generated table is checked exactly above
    unknown = []
    for heading, body in sections(text):
        about = [name for name in re.findall(r"`(\w+)`", heading) if name in commands]
        allowed = set().union(*(flags(commands[name][0]) for name in about)) if about else anywhere
        for name, rest in ROW.findall(body):
            unknown += [(f"nbagent {name}", flag) for flag in FLAG.findall(rest) if flag not in flags(commands[name][0])]
        unknown += [(heading or "the introduction", flag) for flag in named_flags(ROW.sub("", body)) if flag not in allowed]
    assert not unknown, f"docs/cli.md names options that do not exist: {unknown}"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("`nbagent tail SESSION [-f] [--since N]`", ["-f", "--since"]),
        ("like `tail -f`; or give `--idle-exit SECONDS`", ["-f", "--idle-exit"]),
        ("with --yes in prose, and (-x)", ["--yes", "-x"]),
        ("`python -m nbagent`, a `sessions`-style line, read-only, 20261202-113705-a1b2, .torn-<offset>", []),
    ],
)
def test_what_counts_as_naming_an_option(text: str, found: list[str]) -> None:
    assert named_flags(text) == found
