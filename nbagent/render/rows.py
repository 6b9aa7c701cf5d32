"""What a tool call did, in words read at a glance, which part of its result is the work to show, and approvals in plain words.

Pure rules shared by every view (the HTML panel, transcript and replay, the terminal, exports), built from
the call's input and its recorded result, never from the model's prose.  Everything here comes from a log
and is untrusted: these rules clip it; each renderer escapes it for its medium.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from ..state.approval_rule import DECLINED
from ..state.fold import State
from .parts import ToolNames, content_blocks, dumps, shorten

PYTHON, SHELL = "python", "shell"  # the notebook's python tool and the toolkit's shell tool
PRINTS = frozenset({PYTHON, SHELL})  # tools whose text result is printed output: the work, shown open
SHOWN_LINES = 40  # lines of printed output (or of an error) shown open; the rest stays in the collapsed result
SHOWN_CHARS = 6_000  # characters of it shown open
CLIP = 80  # characters of a path, command, code line or call in a row


class ToolCalls(ToolNames):
    """Tool-use id -> tool name (as :class:`ToolNames`), and each call's input: a result row says what its call did."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.inputs: dict[str, Any] = {}

    def learn(self, event: Mapping[str, Any]) -> None:
        """Note the names and inputs of the event's tool_use blocks."""
        super().learn(event)
        content = event.get("content")
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_use":
                self.inputs[str(block.get("id"))] = block.get("input")

    @classmethod
    def of_state(cls, state: State) -> ToolCalls:
        """The names and inputs of the calls still open in ``state``."""
        calls = cls(ToolNames.of_state(state))
        calls.inputs = {str(i): call.get("input") for i, call in state.open_calls.items()}
        return calls


def input_of(names: Mapping[str, str] | None, tool_use_id: Any) -> dict[str, Any]:
    """The input of the call ``tool_use_id`` if ``names`` knows it (a :class:`ToolCalls`), else {}."""
    found = getattr(names, "inputs", {}).get(str(tool_use_id))
    return found if isinstance(found, dict) else {}


class Row(NamedTuple):
    """One row's words: a lead, a piece of code (a path, a command, a call; shown as code), then facts."""

    lead: str
    code: str = ""
    facts: tuple[str, ...] = ()
    error: bool = False

    @property
    def text(self) -> str:
        """The row as plain text: 'read sales.csv · 366 lines'."""
        head = " ".join(part for part in (self.lead, self.code) if part)
        return " · ".join((head, *self.facts))


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _plural(count: int, word: str, words: str = "") -> str:
    return f"{count:,} {word if count == 1 else (words or word + 's')}"


def _lines(text: str) -> int:
    return len(text.splitlines())


def _texts(content: Any) -> str:
    return "\n".join(str(b.get("text", "")) for b in content_blocks(content) if b.get("type") == "text")


def _images(content: Any) -> int:
    return sum(1 for b in content_blocks(content) if b.get("type") == "image")


def signature(name: str, arguments: Any) -> str:
    """A call as code, clipped: ``word_count(path='notes.txt')``."""
    if not isinstance(arguments, dict):
        return shorten(f"{name}({dumps(arguments)})", CLIP)
    shown = [f"{k}={repr(shorten(v, 40)) if isinstance(v, str) else shorten(dumps(v), 40)}" for k, v in arguments.items()]
    return shorten(f"{name}({', '.join(shown)})", CLIP)


def first_line(code: str) -> str:
    """The first line of ``code`` that holds something, clipped (a row's glimpse of a block of code)."""
    return shorten(next((line for line in code.splitlines() if line.strip()), ""), CLIP)


# Errors -------------------------------------------------------------------------------------------------
_EXCEPTION_LINE = re.compile(r"([A-Z][\w.]*)(?::(?:\s.*)?)?")  # "KeyError: 'x'", "pandas.errors.ParserError: ...", "KeyboardInterrupt"
_NOT_RUN = re.compile(r"\bnot (run|approved)\b|\bdeclined\b", re.IGNORECASE)
_TRACEBACK = "Traceback (most recent call last):"


def exception_name(text: str) -> str:
    """The exception a traceback, or a tool's ``Name: message`` error, names ('' if none)."""
    lines = [line for line in text.splitlines() if line.strip()]
    starts = [i for i, line in enumerate(lines) if line.startswith(_TRACEBACK)]
    if starts:  # the last traceback's own lines, not the code's indented source lines
        candidates = [line for line in lines[starts[-1] + 1 :] if not line[:1].isspace()]
    else:  # nbagent.tools.decorator words an error "Name: message"; a syntax error ends with it
        candidates = lines[:1] + lines[-1:]
    for line in reversed(candidates):
        match = _EXCEPTION_LINE.fullmatch(line)
        if match:
            return shorten(match.group(1).rsplit(".", 1)[-1], 60)
    return ""


def failure(text: str) -> str:
    """What an error result says at a glance: 'not run', 'failed: KeyError', or its first words."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    if _NOT_RUN.search(first):
        return "not run"
    name = exception_name(text)
    return f"failed: {name}" if name else f"error: {shorten(first, 60)}" if first else "failed"


# What each tool did ---------------------------------------------------------------------------------------
_NUMBERED = re.compile(r"^ *(\d+)\t", re.MULTILINE)
_MORE_LINES = re.compile(r"\[(\d+) more lines; call again with offset=\d+\]")
_NO_LINES = re.compile(r"has no lines in that range; it has (\d+) lines")
_MORE_ENTRIES = re.compile(r"^\[(\d+) more entries not shown\]$", re.MULTILINE)


def _read_facts(text: str, images: int) -> tuple[str, ...]:
    if images:
        return (_plural(images, "image"),)
    numbers = [int(n) for n in _NUMBERED.findall(text)]
    more = _MORE_LINES.search(text)
    rest = int(more.group(1)) if more else 0
    if numbers:
        first, last = numbers[0], numbers[-1]
        if first == 1 and not rest:
            return (_plural(len(numbers), "line"),)
        return (f"lines {first:,} to {last:,} of {last + rest:,}",)
    empty = _NO_LINES.search(text)
    return (f"no lines in that range (it has {int(empty.group(1)):,})",) if empty else ()


def _shell_status(text: str) -> tuple[str, str]:
    """A shell result's status line (without 'exit code 0', which says nothing) and its printed output."""
    head, _, rest = text.partition("\n")
    if not (head.startswith("exit code") or head.startswith("timed out")):
        return "", text
    if rest.startswith("stdout:\n") and "\nstderr:\n" not in rest:
        rest = rest[len("stdout:\n") :]
    return ("" if head == "exit code 0" else head), rest


def printed(name: str, text: str) -> str:
    """The printed output in a text result of a tool of :data:`PRINTS` (a shell result without its status line)."""
    if name == SHELL:
        return _shell_status(text)[1]
    return "" if name == PYTHON and text.strip() == "(no output)" else text


def _output_facts(name: str, content: Any) -> tuple[str, ...]:
    count = _lines("\n".join(printed(name, str(b.get("text", ""))) for b in content_blocks(content) if b.get("type") == "text"))
    images = _images(content)
    facts = [_plural(images, "plot") if name == PYTHON else _plural(images, "image")] if images else []
    if count:
        facts.append(_plural(count, "line") + " of output")
    return tuple(facts) or ("no output",)


def result_row(name: str, arguments: Any, content: Any, *, is_error: bool = False) -> Row:
    """What a finished call did, from its input and its result: ``read sales.csv · 366 lines``, ``ran python · 1 plot``."""
    args = arguments if isinstance(arguments, dict) else {}
    text = _texts(content)
    if is_error and failure(text) == "not run":  # declined, or refused: say what it would have done
        return Row(*call_row(name, arguments)[:2], ("not run",), True)
    if name == PYTHON:
        if is_error:
            raised = exception_name(text)
            return Row(f"python raised {raised}" if raised else "python raised an error", error=True)
        return Row("ran python", facts=_output_facts(name, content))
    if name == SHELL:
        command = shorten(_str(args.get("command")), CLIP)
        status = _shell_status(text)[0] if not is_error else failure(text)
        if is_error and text.startswith("TimeoutError: "):
            status = shorten(text[len("TimeoutError: ") :].split("\n", 1)[0], 60)
        facts = () if is_error else _output_facts(name, content)
        return Row("ran" if command else "ran a shell command", command, (*((status,) if status else ()), *facts), is_error)
    path = shorten(_str(args.get("path")), CLIP)
    if name == "read_file":
        return Row("read", path or "a file", (failure(text),) if is_error else _read_facts(text, _images(content)), is_error)
    if name == "write_file":
        lines = _lines(_str(args.get("content")))
        return Row("wrote", path or "a file", (failure(text),) if is_error else (_plural(lines, "line"),), is_error)
    if name == "edit_file":
        old, new = _lines(_str(args.get("old_text"))), _lines(_str(args.get("new_text")))
        return Row(
            "edited", path or "a file", (failure(text),) if is_error else (f"replaced {_plural(old, 'line')} with {new:,}",), is_error
        )
    if name == "list_files":
        return Row("listed", path or ".", _list_facts(args, text, is_error), is_error)
    return Row("called", signature(name, args), _other_facts(content, text, is_error), is_error)


def _list_facts(args: dict[str, Any], text: str, is_error: bool) -> tuple[str, ...]:
    if is_error:
        return (failure(text),)
    pattern = _str(args.get("pattern"))
    matching = (f"matching {shorten(pattern, 40)}",) if pattern and pattern != "*" else ()
    recursive = ("recursive",) if args.get("recursive") is True else ()
    if text.startswith("(nothing in "):
        return ("nothing found", *matching, *recursive)
    more = _MORE_ENTRIES.search(text)
    entries = sum(1 for line in text.splitlines() if line and not _MORE_ENTRIES.fullmatch(line))
    return (_plural(entries + (int(more.group(1)) if more else 0), "entry", "entries"), *matching, *recursive)


def _other_facts(content: Any, text: str, is_error: bool) -> tuple[str, ...]:
    if is_error:
        return (failure(text),)
    images = _images(content)
    facts = [_plural(images, "image")] if images else []
    if text and "\n" not in text.strip() and len(text.strip()) <= 40:
        facts.append(f"returned {text.strip()}")
    elif text:
        facts.append(_plural(_lines(text), "line") + " returned")
    return tuple(facts)


def call_row(name: str, arguments: Any) -> Row:
    """What a call asks for, before it runs: ``python import pandas as pd · 12 lines``, ``shell ls -la``, ``read_file(path='a.csv')``."""
    args = arguments if isinstance(arguments, dict) else {}
    if name == PYTHON and isinstance(args.get("code"), str):
        lines = _lines(args["code"])
        return Row("python", first_line(args["code"]), (_plural(lines, "line"),) if lines > 1 else ())
    if name == SHELL and isinstance(args.get("command"), str):
        return Row("shell", shorten(args["command"], CLIP))
    if name == CELL_EDIT and isinstance(args.get("new_source"), str):  # the change itself is shown once, in its question
        return Row("propose an edit of cell", shorten(str(args.get("cell_id", "?")), CLIP), (_plural(_lines(args["new_source"]), "line"),))
    return Row("", signature(name, arguments))


# The work to show ------------------------------------------------------------------------------------------
class Work(NamedTuple):
    """The part of a result shown open (images, printed output, an error), and whether the raw result stays, collapsed."""

    blocks: tuple[dict[str, Any], ...]  # image blocks and text blocks (the text cut to SHOWN_LINES lines)
    more: int  # lines of shown text left out (they are in the raw result)
    raw: bool  # the raw result holds more than the shown part: keep it, collapsed


def _cut(text: str, *, tail: bool) -> tuple[str, int]:
    """``text`` cut to SHOWN_LINES lines and SHOWN_CHARS characters (its end for an error); the lines left out."""
    lines = text.splitlines()
    kept = lines[-SHOWN_LINES:] if tail else lines[:SHOWN_LINES]
    shown = "\n".join(kept)
    if len(shown) > SHOWN_CHARS:
        shown = shown[-SHOWN_CHARS:] if tail else shown[:SHOWN_CHARS]
        return shown, max(len(lines) - _lines(shown), 1)
    return shown, len(lines) - len(kept)


def work(name: str, content: Any, *, is_error: bool = False) -> Work:
    """What of a tool result is shown without a click (table: tests/render/test_rows.py).

    Images, always.  The printed output of ``python`` and ``shell`` (the value of a last expression, a
    ``describe()`` table, print output) up to :data:`SHOWN_LINES` lines, and an error's last lines.  The raw
    result (a file read, a listing, JSON, a long output) stays collapsed whenever it holds more than that.
    """
    shows_text = is_error or name in PRINTS
    shown: list[dict[str, Any]] = []
    more, raw = 0, False
    for block in content_blocks(content):
        kind = block.get("type")
        if kind == "image":
            shown.append(block)
        elif kind == "text" and shows_text:
            text = printed(name, str(block.get("text", "")))
            if text.strip():
                cut, left = _cut(text.strip("\n"), tail=is_error)
                shown.append({"type": "text", "text": cut})
                more += left
        elif kind != "text" or str(block.get("text", "")).strip():
            raw = True
    return Work(tuple(shown), more, raw or more > 0)


# Approvals ---------------------------------------------------------------------------------------------------
class Question(NamedTuple):
    """An approval question in plain words: the question, what will run (shown as code, in ``language``), and why it asks."""

    question: str
    code: str
    language: str  # python | shell | json
    why: str


WHY = {
    "untrusted": "This session's log was not written by you (it came with a cloned or downloaded notebook, say).",
    "unknown_outcome": "It was interrupted while it ran: it may or may not have taken effect.",
    "irreversible": "{name} is marked irreversible: what it does may not be undone.",
    "outside_workspace": "It uses a path outside the workspace.",
}


MCP_PROJECT = "start_project_mcp_servers"  # nbagent/notebook/mcp_servers.py's question about a .mcp.json
CELL_EDIT = "propose_cell_edit"  # nbagent/notebook/cell_edit.py: the live question shows its diff; a logged one its new source
CELL_EDIT_WHY = "Approved, it is applied as an ordinary edit of the cell, which Ctrl+Z in the cell undoes; nothing is run."


def question(name: str, arguments: Any, reason: Any, logged: str = "") -> Question:
    """What an approval asks, in plain words: 'Run this shell command?' with the command; ``logged``: the log's own question."""
    args = arguments if isinstance(arguments, dict) else None
    again = " again" if reason == "unknown_outcome" else ""
    why = WHY.get(reason, "") if isinstance(reason, str) else ""
    if name == SHELL and args is not None and isinstance(args.get("command"), str):
        why = "" if reason == "irreversible" else why  # every shell command asks: there is no more to say
        return Question(f"Run this shell command{again}?", args["command"], "shell", why)
    if name == PYTHON and args is not None and isinstance(args.get("code"), str):
        return Question(f"Run this Python code{again}?", args["code"], "python", why.format(name=name))
    if name == MCP_PROJECT and args is not None:  # not a call: the notebook asks before a project's .mcp.json starts anything
        return Question("Start the MCP servers of this project's .mcp.json?", json.dumps(args, ensure_ascii=False, indent=2), "json", "")
    if name == CELL_EDIT and args is not None and isinstance(args.get("new_source"), str):  # never "may not be undone"
        words = CELL_EDIT_WHY if reason == "irreversible" else why
        return Question(f"Change cell {args.get('cell_id')} to this source{again}?", args["new_source"], "python", words)
    if args is None and logged:  # the call's input is not known here: the log's own words
        return Question(logged, "", "json", "")
    arguments_json = json.dumps(args if args is not None else arguments, ensure_ascii=False, indent=2, sort_keys=True, default=str)
    return Question(f"Call {name}{again}?", arguments_json, "json", why.format(name=name))


BY = {
    "panel": "by you in the panel",
    "console": "by you at the prompt",
    "callback": "by your approval function",
    "auto": "by the approval policy (auto)",
    "deny": "by the approval policy (deny)",
}
INTERRUPTED_ASK = "unanswered (interrupted): the call was not run"


def decision_words(decision: Any, by: Any, note: Any = "") -> str:
    """What an approval was decided with, in plain words: 'approved by you in the panel' (table: tests/render/test_rows.py)."""
    if decision == "interrupted":  # nobody answered: the ask was interrupted (the cell's next run asks again)
        return INTERRUPTED_ASK
    verdict = decision if decision in ("approved", "declined") else "decided"
    note = note.strip() if isinstance(note, str) else ""
    if by == "nobody":
        return f"{verdict}: {note or 'nobody could answer here'}"
    words = f"{verdict} {BY.get(by) or f'by {by}'}" if isinstance(by, str) and by else f"{verdict} (by whom is not recorded)"
    return f"{words} ({note})" if note and note != DECLINED else words
