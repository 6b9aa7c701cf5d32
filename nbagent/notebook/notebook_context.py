"""What the model is told at a new turn about the notebook: the cells the user ran, their errors, the variables.

:func:`compose` is the rule (pure, table-tested in tests/notebook/test_notebook_context.py): a few lines a model reads,
bounded by a budget in characters, with a line saying what was left out. :class:`NotebookContext` is the
state the magics keep between turns (the cell log, the variable watch, the execution count of the last turn).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..record import events as ev
from .cells import CellLog, CellRun
from .variables import Variable, VariableWatch

KIND = ev.NOTE_NOTEBOOK_CONTEXT  # the note event's kind
PREFIX = "[nbagent note: "
FRAME_ROOM = 340  # characters kept for the section headings, the line saying what was left out and the closing bracket
RANGES_LIMIT = 100
GONE = "Names gone: "
MIN_CELL = 10  # "In [1]: x" and its newline: below this room, no more cells are tried
OWN_LINES = ("%load_ext nbagent", "%reload_ext nbagent", "%config Agent", "%agent", "%%agent")
SOURCE_LIMIT = 600  # one cell's source, result and error, before the budget shares what is left
RESULT_LIMIT = 300
ERROR_LIMIT = 800
VARIABLE_LIMIT = 240
CELLS_SHARE = 0.6  # of the budget, for cells first; variables then take what they need, cells the rest


@dataclass(frozen=True)
class Note:
    """The composed note: its text to the model, a line for people, and the figures recorded in the event."""

    to_model: str
    text: str
    budget: int
    left_out: dict[str, int] = field(default_factory=dict)  # "cells", "variables", "gone": how many were not told

    def event(self) -> dict[str, Any]:
        """The ``note`` event's fields."""
        return {"kind": KIND, "to_model": self.to_model, "text": self.text, "budget": self.budget, "left_out": dict(self.left_out)}


def compose(cells: Sequence[CellRun], variables: Sequence[Variable], gone: Sequence[str], *, restarted: bool, budget: int) -> Note | None:
    """The note to the model about what happened in the kernel since the last turn, or None when nothing did.

    ``restarted``: the kernel restarted since the last turn (the restart note says the old variables are gone;
    this note then lists what is in the kernel now and never names the names gone). The note is at most
    ``budget`` characters: cells that raised and the newest cells go first, then the variables.
    """
    gone = [] if restarted else sorted(gone)
    if not (cells or variables or gone):
        return None
    since = "since the kernel restarted" if restarted else "since your last turn"
    header = f"what the notebook did {since}: {counts(cells, variables, gone)}."
    room = max(0, budget - len(PREFIX) - len(header) - FRAME_ROOM)
    texts = _Texts({c.count: c for c in cells})
    told, room = _fit(_cell_order(cells), texts, int(room * CELLS_SHARE), room)
    var_lines: list[str] = []
    for variable in variables:
        line = variable_line(variable)
        if len(line) + 1 > room:
            break
        var_lines.append(line)
        room -= len(line) + 1
    gone_told = _take(gone, room - len(GONE))
    room -= len(GONE) + sum(len(n) + 2 for n in gone_told) if gone_told else 0
    more, room = _fit([c for c in _cell_order(cells) if c.count not in told], texts, room, room)
    shown = [c for c in cells if c.count in told | more]
    lines = [header]
    if shown:
        lines.append(f"Cells the user ran ({head(cell_ranges(c.count for c in shown), RANGES_LIMIT)}):")
        lines += [texts[c.count] for c in shown]
    if var_lines:
        lines.append("Variables in the kernel now:" if restarted else "Variables new or changed:")
        lines += var_lines
    if gone_told:
        lines.append(GONE + ", ".join(gone_told))
    left_out = {"cells": len(cells) - len(shown), "variables": len(variables) - len(var_lines), "gone": len(gone) - len(gone_told)}
    left_out = {k: n for k, n in left_out.items() if n}
    if left_out:
        lines.append(left_out_line(left_out, budget))
    people = "since the kernel restarted" if restarted else "since the last turn"
    return Note(PREFIX + "\n".join(lines) + "]", f"what the notebook did {people}: {counts(cells, variables, gone)}", budget, left_out)


def _take(names: Sequence[str], room: int) -> list[str]:
    """The first names that fit in ``room`` characters, comma-separated."""
    taken: list[str] = []
    for name in names:
        if len(name) + 2 > room:
            break
        taken.append(name)
        room -= len(name) + 2
    return taken


def _cell_order(cells: Sequence[CellRun]) -> list[CellRun]:
    """Which cells are told first when not all fit: those that raised, then the others, the newest first."""
    newest = sorted(cells, key=lambda c: -c.count)
    return [c for c in newest if c.error] + [c for c in newest if not c.error]


class _Texts(dict[int, str]):
    """Cells' texts by execution count, made when first asked for (most of 200 cells never are)."""

    def __init__(self, cells: dict[int, CellRun]) -> None:
        super().__init__()
        self.cells = cells

    def __missing__(self, count: int) -> str:
        text = self[count] = cell_text(self.cells[count])
        return text


def _fit(order: Iterable[CellRun], texts: dict[int, str], share: int, room: int) -> tuple[set[int], int]:
    """The cells of ``order`` whose texts fit in ``share`` characters (and the room left after them)."""
    told: set[int] = set()
    for cell in order:
        if share < MIN_CELL:
            break
        size = len(texts[cell.count]) + 1
        if size <= share:
            told.add(cell.count)
            share, room = share - size, room - size
    return told, room


def counts(cells: Sequence[CellRun], variables: Sequence[Variable], gone: Sequence[str]) -> str:
    """'3 cells (1 error), 2 variables, 1 name gone': what happened, in numbers."""
    errors = sum(1 for c in cells if c.error)
    parts = []
    if cells:
        parts.append(_plural(len(cells), "cell") + (f" ({_plural(errors, 'error')})" if errors else ""))
    if variables:
        parts.append(_plural(len(variables), "variable"))
    if gone:
        parts.append(_plural(len(gone), "name") + " gone")
    return ", ".join(parts)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def cell_ranges(numbers: Iterable[int]) -> str:
    """Execution counts as ranges: 'cell 3', 'cells 12-15, 18'."""
    found = sorted(set(numbers))
    spans: list[list[int]] = []
    for n in found:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    words = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
    return ("cell " if len(found) == 1 else "cells ") + words


def cell_text(cell: CellRun) -> str:
    """One cell as the model reads it: ``In [n]:`` its source, then ``Out [n]:`` or ``Error in [n]:``."""
    lines = [f"In [{cell.count}]: {head(cell.source.strip(), SOURCE_LIMIT)}"]
    if cell.error:
        lines.append(f"Error in [{cell.count}]: {tail(cell.error.strip(), ERROR_LIMIT)}")
    elif cell.result:
        lines.append(f"Out[{cell.count}]: {head(cell.result.strip(), RESULT_LIMIT)}")
    return "\n".join(lines)


def variable_line(variable: Variable) -> str:
    """One variable: ``name: summary``."""
    return f"- {variable.name}: {head(' '.join(variable.summary.split()), VARIABLE_LIMIT)}"


def head(text: str, limit: int) -> str:
    """The first ``limit`` characters, then how many more there were."""
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit} more characters]"


def tail(text: str, limit: int) -> str:
    """The last ``limit`` characters (a traceback's end says most), after how many came before."""
    return text if len(text) <= limit else f"[{len(text) - limit} characters before] …{text[-limit:]}"


def left_out_line(left_out: dict[str, int], budget: int) -> str:
    """The line saying what did not fit in the budget and where to find it."""
    words = [_plural(left_out[k], w) for k, w in (("cells", "cell"), ("variables", "variable"), ("gone", "name gone")) if left_out.get(k)]
    return (
        f"Left out to keep this note under {budget:,} characters: {', '.join(words)} "
        "(the notebook_history and inspect_variable tools show them)."
    )


def nbagent_own(cell: CellRun) -> bool:
    """Whether a cell only sets nbagent up (``%load_ext nbagent``, ``%config Agent...``): not news to the model."""
    if not cell.source.lstrip().startswith(("%", "#")):
        return False
    lines = [line.strip() for line in cell.source.splitlines() if line.strip() and not line.strip().startswith("#")]
    return bool(lines) and not cell.error and all(line.startswith(OWN_LINES) for line in lines)


def excluded(name: str, patterns: Sequence[str]) -> bool:
    """Whether ``name`` matches one of the ``Agent.notebook_context_exclude`` patterns."""
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


class NotebookContext:
    """What the magics keep between turns: the cells run, the variables, and where the last turn left them."""

    def __init__(self, shell: Any, paused: Callable[[], bool] | None = None) -> None:
        self.shell = shell
        self.cells = CellLog(shell, paused)  # paused: while the agent runs code, its runs are not the user's cells
        # Agent.notebook_context_exclude is applied where it is read (gather, the tools), as set then, not as at load
        self.variables = VariableWatch(shell)
        self.last = 0  # the execution count of the last agent turn's cell: cells after it are news

    def register(self) -> None:
        """Start following the cells the user runs."""
        self.cells.register()

    def unregister(self) -> None:
        """Stop following them."""
        self.cells.unregister()

    def gather(self, settings: Any, *, restarted: bool) -> Note | None:
        """The note for the turn about to start, as the ``Agent`` settings say (None: nothing happened, or 'off')."""
        if settings.notebook_context == "off":
            return None
        exclude = settings.notebook_context_exclude
        variables, gone = self.variables.changes()
        return compose(
            [c for c in self.cells.since(self.last) if not nbagent_own(c)],
            [v for v in variables if not excluded(v.name, exclude)],
            [n for n in gone if not excluded(n, exclude)],
            restarted=restarted,
            budget=settings.notebook_context_budget,
        )

    def mark(self) -> None:
        """After a turn: the agent's own changes and the cells so far are not news next time."""
        self.variables.mark()
        # IPython counts a cell before running it: the running %agent cell is execution_count - 1
        self.last = max(self.last, self.cells.count, int(getattr(self.shell, "execution_count", 1) or 1) - 1)
