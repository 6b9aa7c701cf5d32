"""The tools to look closer at the notebook: ``notebook_history``, ``inspect_variable`` and ``read_notebook`` (effect "read").

Each answer is bounded (a cap on cells and characters, with a note of what was left out) and redacted
(:mod:`nbagent.record.redact`). None calls a user ``__repr__``/``__str__``: cells are what :class:`~.cells.CellLog`
captured, variables are described by :func:`.value_details.details`, and the notebook is the saved ``.ipynb``,
read through :func:`nbagent.record.readfile.open_regular` (the file is the user's: regular files only, no link followed).
"""

from __future__ import annotations

import datetime
import difflib
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

from anthropic.lib.tools import ToolError

from ..record import redact
from ..record.readfile import open_regular
from ..tools.clipping import clipped
from ..tools.decorator import Tool
from . import kernel as nbkernel
from .cells import CellLog, CellRun
from .notebook_context import excluded
from .value_details import SAMPLE, details
from .value_summary import type_label
from .variables import VariableWatch, hidden

HISTORY, INSPECT, READ = "notebook_history", "inspect_variable", "read_notebook"
NAMES = (HISTORY, INSPECT, READ)
MAX_CELLS = 30  # cells in one notebook_history answer
MAX_CHARS = 20_000  # characters in one answer of any of the three tools
MAX_SOURCE = 4_000  # characters of one cell's source in read_notebook (the head and the tail)
MAX_OUTPUT = 2_000  # characters of one output in read_notebook
MAX_FILE = 64 << 20  # bytes of .ipynb read_notebook parses at most (images make notebooks big)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

HISTORY_DESCRIPTION = (
    "The cells the user ran in this notebook's kernel, by execution count (the N of In [N]): each cell's source, "
    "the result it showed (Out[N], as text) and, for a cell that raised, the error and the last frames of its "
    "traceback. Use it to see what the user did, which code produced a variable, or why a cell failed, before "
    "guessing or re-running anything. Reads only; runs nothing. The agent's own python calls and %agent cells are "
    f"not in it. At most {MAX_CELLS} cells and {MAX_CHARS:,} characters per call; a note says what was left out."
)
INSPECT_DESCRIPTION = (
    "One variable of the user's notebook in depth, without running code: for a DataFrame its shape, dtypes, null "
    f"counts, describe() and first rows; for an array its shape, dtype and statistics (over at most {SAMPLE:,} evenly "
    "spaced values; none for a memory-mapped array); for other values their type, length and, for plain built-in "
    "values, a short value. Objects of other types show their type and attributes (their repr is never called); a "
    "subclass of a DataFrame, list, dict... is named, not read. Use it before writing code that depends on a "
    "variable's columns, dtypes or shape. Values of secret-looking variables, dict keys, attributes and columns "
    "(api_key, token, password...) are hidden."
)
READ_DESCRIPTION = (
    "The notebook document: its markdown and code cells in document order, with their text outputs (images appear as "
    "[image/png]), including cells never run and cells run in an earlier kernel. Where nbagent's browser extension is "
    "connected it is the document as it is in the browser now (unsaved edits and current outputs included, with each "
    "cell's id); elsewhere as last saved (edits not yet saved are not in it); the answer says which. Use it to "
    "understand the notebook's purpose and structure, or what the user wrote in markdown; for what actually ran in "
    "this kernel use notebook_history. Where the kernel does not know its notebook "
    f"file (nbclient, papermill, terminal IPython) it says so. At most {MAX_CHARS:,} characters."
)


def notebook_tools(
    shell: Any,
    cells: CellLog,
    variables: VariableWatch,
    exclude: Sequence[str] = (),
    live: Callable[[], tuple[str | None, str]] | None = None,
) -> list[Tool]:
    """The three tools bound to this kernel: ``cells`` and ``variables`` are the magics' own; ``exclude``: names never shown.

    ``live``: the document as the browser has it now, or None and a note to put before the saved file's (cell_edit.read_live).
    """

    def notebook_history(first: int, last: int | None = None) -> str:
        """The user's cells by execution count.

        Args:
            first: The first execution count to show (the N of In [N]).
            last: The last execution count to show (inclusive); omitted: up to the latest cell.
        """
        return history(cells, first, last)

    def inspect_variable(name: str) -> str:
        """One user variable in depth.

        Args:
            name: The variable's name in the notebook's namespace, e.g. df.
        """
        return inspect(shell, variables, name, exclude=exclude)

    def read_notebook() -> str:
        """The notebook document."""
        text, note = live() if live is not None else (None, "")
        return text if text is not None else note + read(shell)

    notebook = Tool(read_notebook, effect="read", name=READ, description=READ_DESCRIPTION)
    notebook.alone = True  # the browser's answer comes through the comm pump, which only the kernel's main thread runs
    return [
        Tool(notebook_history, effect="read", name=HISTORY, description=HISTORY_DESCRIPTION),
        Tool(inspect_variable, effect="read", name=INSPECT, description=INSPECT_DESCRIPTION),
        notebook,
    ]


# notebook_history ---------------------------------------------------------------------------------------------
def history(cells: CellLog, first: int, last: int | None = None, *, max_cells: int = MAX_CELLS, budget: int = MAX_CHARS) -> str:
    """``notebook_history``'s answer: the cells from ``first`` to ``last`` (or the latest), bounded, redacted."""
    latest = cells.count
    if first < 1 or (last is not None and last < first):
        raise ToolError(f"Give execution counts with 1 <= first <= last (got first={first}, last={last}).")
    if latest == 0:
        return "No cells have been run in this kernel yet (since nbagent was loaded)."
    if first > latest:
        raise ToolError(f"No cell has execution count {first} yet: the latest is {latest}.")
    last = latest if last is None else min(last, latest)
    runs = cells.between(first, last)
    parts: list[str] = []
    used = 0
    shown: list[CellRun] = []
    for run in runs:
        text = cell_text(run)
        if len(shown) >= max_cells or (shown and used + len(text) > budget):
            break
        if used + len(text) > budget:  # the first cell alone is over the budget: its head and tail
            text = clipped(text, budget)
        parts.append(text)
        shown.append(run)
        used += len(text)
    head = f"Cells {first} to {last} of this kernel (the latest execution count is {latest})."
    notes = []
    if len(shown) < len(runs):
        rest = runs[len(shown)]
        notes.append(
            f"[{len(runs) - len(shown)} more cells, from In [{rest.count}] to In [{runs[-1].count}], left out: over "
            f"{max_cells} cells or {budget:,} characters; call notebook_history(first={rest.count}) for them]"
        )
    missing = _missing(first, shown[-1].count if len(shown) < len(runs) else last, {r.count for r in runs})
    if missing:
        notes.append(
            f"[no user cell recorded for {missing}: %agent cells are not user cells, and only the latest {cells.keep:,} cells are kept]"
        )
    return redact.text("\n\n".join([head, *parts, *notes]))


def cell_text(run: CellRun) -> str:
    """One cell as notebook_history shows it: In [n], its source, then Out[n] or the error."""
    lines = [f"In [{run.count}]:", run.source.rstrip("\n")]
    if run.result is not None:
        lines += [f"Out[{run.count}]:", run.result.rstrip("\n")]
    if run.error is not None:
        lines += [f"Error in In [{run.count}]:", run.error.rstrip("\n")]
    return "\n".join(lines)


def _missing(first: int, last: int, present: set[int]) -> str:
    """The counts from ``first`` to ``last`` not in ``present``, as ranges: '4, 7-9'."""
    spans: list[str] = []
    start: int | None = None
    for n in range(first, last + 2):
        if n <= last and n not in present:
            start = n if start is None else start
        elif start is not None:
            spans.append(str(start) if start == n - 1 else f"{start}-{n - 1}")
            start = None
    return ", ".join(spans)


# inspect_variable ---------------------------------------------------------------------------------------------
def inspect(shell: Any, variables: VariableWatch, name: str, *, exclude: Sequence[str] = (), budget: int = MAX_CHARS) -> str:
    """``inspect_variable``'s answer: ``details()`` of one user variable, redacted; a ToolError naming close names."""
    name = name.strip()
    if excluded(name, exclude):
        raise ToolError(f"{name!r} is left out by Agent.notebook_context_exclude: the user keeps it from the agent.")
    try:
        value = variables.get(name)
    except KeyError:
        raise ToolError(_unknown(variables, name, exclude)) from None
    if hidden(name, value):
        return f"{name}: {type_label(type(value))} (its value is hidden: the name or the value looks like a secret)"
    return redact.text(f"{name}: {details(value, limit=budget)}")


def _unknown(variables: VariableWatch, name: str, exclude: Sequence[str]) -> str:
    """The error for a name that is not a user variable, with the user variables whose names are close."""
    names = [n for n in variables.names() if not excluded(n, exclude)]
    close = difflib.get_close_matches(name, names, n=8, cutoff=0.6)
    hint = f" Close names: {', '.join(close)}." if close else ""
    return redact.text(
        f"No user variable named {name!r} in the notebook's namespace (modules, names starting with _ and IPython's own "
        f"are not inspected).{hint}"
    )


# read_notebook ------------------------------------------------------------------------------------------------
NO_PATH = (
    "This kernel does not know which notebook file it runs (it was started by nbclient, papermill, terminal IPython "
    "or another front end that does not say), so there is no saved notebook to read. notebook_history shows the "
    "cells run in this kernel."
)


def read(shell: Any, *, budget: int = MAX_CHARS) -> str:
    """``read_notebook``'s answer: the saved notebook's cells and text outputs, bounded, redacted; or why there is none."""
    path = nbkernel.notebook_path(shell)
    if path is None:
        return NO_PATH
    try:
        with open_regular(path) as handle:
            stamp = os.fstat(handle.fileno()).st_mtime
            data = handle.read(MAX_FILE + 1)
    except FileNotFoundError:
        return f"The notebook {path.name} has not been saved yet (no file at {path}); notebook_history shows the cells run in this kernel."
    except OSError as exc:
        raise ToolError(redact.text(f"The notebook file could not be read: {exc}")) from None
    if len(data) > MAX_FILE:
        raise ToolError(f"The notebook file {path.name} is over {MAX_FILE >> 20} MB; read_notebook does not parse it.")
    import nbformat  # imported when first needed

    try:
        notebook = nbformat.reads(data.decode("utf-8", errors="replace"), as_version=4)
    except Exception as exc:  # nbformat raises several kinds for a file that is not a notebook
        raise ToolError(redact.text(f"{path.name} is not a notebook nbformat can read: {type(exc).__name__}: {exc}")) from None
    saved = datetime.datetime.fromtimestamp(stamp).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    return redact.text(document(notebook, f"{path.name}, as last saved at {saved}", budget=budget))


def document(notebook: Any, title: str, *, budget: int = MAX_CHARS) -> str:
    """A notebook's cells in document order with their text outputs, up to ``budget`` characters, with a note of the rest."""
    cells = list(notebook.get("cells") or [])
    parts: list[str] = []
    used = 0
    for index, cell in enumerate(cells):
        text = _cell(index + 1, cell)
        if parts and used + len(text) > budget:
            parts.append(f"[cells {index + 1} to {len(cells)} left out: over {budget:,} characters]")
            break
        if used + len(text) > budget:
            text = clipped(text, budget)
        parts.append(text)
        used += len(text)
    return "\n\n".join([f"Notebook {title}: {len(cells)} cells.", *parts])


def _cell(number: int, cell: Any) -> str:
    kind = str(cell.get("cell_type") or "cell")
    source = _joined(cell.get("source"))
    if kind != "code":
        return f"[cell {number} · {kind}]\n{clipped(source, MAX_SOURCE)}"
    count = cell.get("execution_count")
    ran = f"In [{count}]" if isinstance(count, int) else "never run"
    lines = [f"[cell {number} · code · {ran}]", clipped(source, MAX_SOURCE)]
    outputs = [shown for output in cell.get("outputs") or [] if (shown := _output(output))]
    if outputs:
        lines += ["[output]", *outputs]
    return "\n".join(lines)


def _output(output: Any) -> str:
    """One saved output as text: a stream's text, a result's text/plain (other types by name), an error's name and message."""
    kind = output.get("output_type")
    if kind == "stream":
        return clipped(_ANSI.sub("", _joined(output.get("text"))).rstrip("\n"), MAX_OUTPUT)
    if kind == "error":
        return clipped(f"{output.get('ename', 'Error')}: {_ANSI.sub('', str(output.get('evalue', '')))}", MAX_OUTPUT)
    data = output.get("data") or {}
    if "text/plain" in data:
        text = clipped(_ANSI.sub("", _joined(data["text/plain"])).rstrip("\n"), MAX_OUTPUT)
        others = [f"[{mime}]" for mime in data if mime.startswith("image/")]
        return "\n".join([text, *others])
    for mime in ("text/markdown", "text/latex"):
        if mime in data:
            return clipped(_joined(data[mime]).rstrip("\n"), MAX_OUTPUT)
    return " ".join(f"[{mime}]" for mime in data)


def _joined(value: Any) -> str:
    """A notebook's multiline string (a string, or a list of lines in older files)."""
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return value if isinstance(value, str) else ""
