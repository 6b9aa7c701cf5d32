"""How a magic line is read: options before a free-text request, and requests that end in '?'."""

from __future__ import annotations

import re

_VALUE_OPTIONS = ("--session", "--model", "--approval", "--resume")


def split_request(line: str) -> tuple[str, str]:
    """Split ``--options`` at the start of a magic line from the free-text request after them.

    The request is kept verbatim (quotes, apostrophes and all); ``--`` ends the options.
    """
    position = 0
    expect_value = False
    for match in re.finditer(r"\S+", line):
        token = match.group()
        if expect_value:
            expect_value = False
        elif token == "--":
            return line[: match.start()], line[match.end() :].strip()
        elif token.startswith("-") and len(token) > 1:
            expect_value = token in _VALUE_OPTIONS
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
