"""How a proposed cell edit is shown: the cell by its position and first line, and one coloured diff of every changed line.

Pure rules (tests/notebook/test_insert.py). The same diff is the panel's question and, with nbagent's browser
extension, the view at the cell itself (docs/cells.md, "Proposed edits"). The source is the model's: every line is
escaped, and invisible or direction-changing characters are shown escaped and marked, under a line naming them.
"""

from __future__ import annotations

import difflib

from ..render.code import hidden_note_html, mark_hidden
from ..render.parts import esc
from ..render.rows import CELL_EDIT_WHY as UNDO

FIRST_LINE = 60  # characters of a cell's first line in the question


def diff_lines(old: str, new: str) -> list[str]:
    """Every changed line of an edit, as a unified diff (lines of context around them): a pure rule.

    Lines end at ``\n`` only, as in the cell: a U+2028, form feed or ``\r`` stays in its line, where it is shown marked.
    """
    return list(difflib.unified_diff(_lines(old), _lines(new), "before", "after", lineterm="", n=3))


def _lines(source: str) -> list[str]:
    return source.split("\n") if source else []


def _kind(line: str) -> str:
    if line.startswith("@@"):
        return "hunk"
    return "add" if line.startswith("+") else "del" if line.startswith("-") else "ctx"


def diff_html(old: str, new: str) -> str:
    """The diff of a proposed edit, each line marked added, removed, context or a hunk's line numbers (coloured by the stylesheet).

    The ``---``/``+++`` header lines are left out; the ``+``/``-`` of each line stays, so it reads without colour too.
    """
    lines = [line for line in diff_lines(old, new) if not line.startswith(("---", "+++"))]
    rows = [f'<span class="nbagent-diff-{_kind(line)}">{mark_hidden(esc(line))}</span>' for line in lines]
    body = "\n".join(rows) or esc("(no change)")
    return f'{hidden_note_html(chr(10).join(lines))}<pre class="nbagent-code nbagent-diff">{body}</pre>'


def first_line(source: str, limit: int = FIRST_LINE) -> str:
    """A cell's first line that is not blank, clipped ('' for an empty cell)."""
    line = next((x.strip() for x in source.split("\n") if x.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def cell_html(position: int | None, source: str) -> str:
    """The cell named as people see it: 'cell 4 (<code>df = load()</code>)'; its position is from 1, in the notebook now."""
    where = f"cell {position}" if position else "the cell"
    line = first_line(source)
    return f"{where} (<code>{mark_hidden(esc(line))}</code>)" if line else f"{where} (empty)"


def question_html(position: int | None, old: str, new: str, *, label: str = "approval needed") -> str:
    """The question of a proposed edit: which cell, what approving does, and the change shown once, as a coloured diff."""
    head = f'<span class="nbagent-label">{esc(label)}</span> Change {cell_html(position, old)} as shown below?'
    return f'<div class="nbagent-approval nbagent-edit">{head} <span class="nbagent-dim">{esc(UNDO)}</span>{diff_html(old, new)}</div>'
