"""``{name}``, ``{In[3]}``, ``{Out[4]}``, ``{Err[4]}`` and ``{Err}`` in a request: nbagent's one interpolation.

The fields are jupyter-ai's (its ``%%ai`` formats a prompt with the user's namespace), but nothing in
braces is evaluated: a field is a name, or ``In``/``Out``/``Err`` with an execution count in
brackets, and every other brace is left as written (a dict literal, JSON, ``{x + 1}``). ``{{`` is a
literal ``{`` and a ``}}`` after it a literal ``}``. An unknown name or a cell that does not exist is
a ``UsageError`` naming it. What a field becomes is bounded and redacted, and a variable named like a
secret never shows its value; see docs/notebook.md, "Variables in a request".
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from IPython.core.error import UsageError

from ..record import redact
from ..tools.clipping import clipped
from .cells import CellLog, CellRun
from .value_summary import summary, type_label
from .variables import HIDDEN, VariableWatch, hidden

CELLS = ("In", "Out", "Err")
_FIELD = re.compile(r"\{(?P<name>[^\W\d]\w*)(?:\[(?P<count>[0-9]{1,9})\])?\}")

VALUE_LIMIT = 2_000  # characters of a string variable's value
CELL_LIMIT = 4_000  # characters of a cell's source, result or error
BUDGET = 20_000  # characters all the fields of one request may add
LITERAL = "Write {{ and }} for literal braces."


@dataclass(frozen=True)
class Field:
    """One field of a template: ``{name}`` (kind "name"), or ``{In[n]}``, ``{Out[n]}``, ``{Err[n]}``, ``{Err}``."""

    kind: str  # "name", "In", "Out" or "Err"
    name: str  # the variable's name (kind "name"), else the kind
    count: int | None = None  # the execution count; None for a name and for {Err}, the most recent error

    @property
    def written(self) -> str:
        """The field as the request writes it."""
        return "{" + self.name + (f"[{self.count}]" if self.count is not None else "") + "}"


Piece = str | Field


def parse(template: str) -> list[Piece]:
    """The literal text and the fields of ``template``, in order (adjacent text joined); a pure rule."""
    pieces: list[Piece] = []
    text: list[str] = []
    escaped = 0  # "{{" seen whose "}}" has not come yet
    i = 0
    while i < len(template):
        if template.startswith("{{", i):
            text.append("{")
            escaped += 1
            i += 2
            continue
        if template.startswith("}}", i) and escaped:
            text.append("}")
            escaped -= 1
            i += 2
            continue
        match = _FIELD.match(template, i) if template[i] == "{" else None
        field = _field(match) if match else None
        if field is None:
            text.append(template[i])
            i += 1
            continue
        if text:
            pieces.append("".join(text))
            text = []
        pieces.append(field)
        i = match.end() if match else i
    if text:
        pieces.append("".join(text))
    return pieces


def _field(match: re.Match[str]) -> Field | None:
    name, count = match.group("name"), match.group("count")
    if keyword.iskeyword(name):
        return None  # {if}, {None}: never a variable
    if count is not None:
        return Field(name, name, int(count)) if name in CELLS else None  # {x[0]} would be evaluating: left as written
    if name in ("In", "Out"):
        raise UsageError(f"{{{name}}} needs an execution count, e.g. {{{name}[3]}} for cell [3]. {LITERAL}")
    return Field("Err", "Err") if name == "Err" else Field("name", name)


def fields(template: str) -> list[Field]:
    """The fields of ``template``."""
    return [p for p in parse(template) if isinstance(p, Field)]


@dataclass(frozen=True)
class Notebook:
    """Where fields are looked up: ``variable(name)`` (the text of a variable, KeyError if none), ``cell(count)``, ``last_error()``."""

    variable: Callable[[str], tuple[str, str]]  # (what {name} becomes, a few words on it)
    cell: Callable[[int], CellRun | None]
    last_error: Callable[[], CellRun | None]


@dataclass(frozen=True)
class Expansion:
    """A request with its fields expanded: ``text`` is what is logged and sent; ``expanded`` says what each field became."""

    template: str
    text: str
    expanded: tuple[tuple[str, str], ...] = ()  # (the field as written, a few words on what it became)
    problem: UsageError | None = None  # why the request cannot be sent (then ``text`` is the template)

    def meta(self) -> dict[str, Any]:
        """What the user_msg's meta keeps of it: the template and what each field became (nothing if the text is the template)."""
        meta: dict[str, Any] = {"template": self.template} if self.text != self.template else {}
        if self.expanded:
            meta["expanded"] = [list(pair) for pair in self.expanded]
        return meta


def expand(template: str, notebook: Notebook, *, budget: int = BUDGET) -> Expansion:
    """``template`` with every field replaced; a UsageError names the first field that cannot be (nothing is sent then)."""
    pieces = parse(template)
    found = [p for p in pieces if isinstance(p, Field)]
    if not found:
        return Expansion(template, "".join(p for p in pieces if isinstance(p, str)))
    texts = {f: field_text(f, notebook) for f in dict.fromkeys(found)}  # every field checked before any is used
    out: list[str] = []
    left = budget
    for piece in pieces:
        if isinstance(piece, str):
            out.append(piece)
            continue
        text = texts[piece][0]
        if len(text) > left:
            text = f"[{piece.written[1:-1]}: left out, this request's fields are over {budget:,} characters]"
        left -= min(left, len(text))
        out.append(text)
    return Expansion(template, "".join(out), tuple((f.written, short) for f, (_, short) in texts.items()))


def field_text(field: Field, notebook: Notebook) -> tuple[str, str]:
    """What one field becomes (bounded and redacted) and a few words on it for people, or a UsageError naming it."""
    if field.kind == "name":
        try:
            return notebook.variable(field.name)
        except KeyError:
            raise UsageError(
                f"{field.written}: there is no variable {field.name} in this kernel (modules, names starting with _ "
                f"and IPython's own are left out). {LITERAL}"
            ) from None
    if field.kind == "Err" and field.count is None:
        cell = notebook.last_error()
        if cell is None:
            raise UsageError(f"{{Err}}: no cell has raised an error in this kernel yet, or each was fixed since ({FIXED}). {LITERAL}")
        return error_text(cell)
    assert field.count is not None
    cell = notebook.cell(field.count)
    if cell is None:
        raise UsageError(f"{field.written}: there is no cell [{field.count}] in this kernel's history. {LITERAL}")
    if field.kind == "In":
        return block(f"In[{cell.count}]", cell.source, "python"), f"the code of cell [{cell.count}]{_lines(cell.source)}"
    if field.kind == "Out":
        if cell.result is None:
            raise UsageError(f"{field.written}: cell [{cell.count}] has no result (Out[{cell.count}]). {LITERAL}")
        return block(f"Out[{cell.count}]", cell.result), f"the result of cell [{cell.count}]{_lines(cell.result)}"
    if cell.error is None:
        raise UsageError(f"{field.written}: cell [{cell.count}] raised no error. {LITERAL}")
    return error_text(cell)


def error_text(cell: CellRun) -> tuple[str, str]:
    """A cell that raised: its source, then its error and traceback; and the error's first line."""
    error = cell.error or ""
    where = f"In[{cell.count}], which raised an error" if cell.count else "A cell that raised an error"
    text = block(where, cell.source, "python") + block("Its error", error)
    return text, f"the error of cell [{cell.count or '?'}]: {_first_line(redact.text(error))}"


def block(label: str, text: str, language: str = "") -> str:
    """``label:`` and ``text`` in a fenced block (a fence longer than any run of backticks in it), redacted, then bounded."""
    text = clipped(redact.text(text), CELL_LIMIT)  # in this order: a clip could cut a secret's shape and leave its rest
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return f"{label}:\n{fence}{language}\n{text}\n{fence}\n"


def _lines(text: str) -> str:
    count = text.count("\n") + 1
    return f" ({count} lines)" if count > 1 else ""


def value_text(name: str, value: object, summary: str, secret: bool) -> tuple[str, str]:
    """What ``{name}`` becomes: a string's or a number's value itself, else the name and its summary; a secret's value never.

    ``summary``: the variable's summary as the context shows it (redacted, a secret's value hidden).
    """
    if secret:
        return f"{name} ({summary})", summary
    if type(value) is str:
        shown = redact.text(value)  # the whole value, then the clip: a clip could cut a secret's shape and leave its rest
        if len(shown) <= VALUE_LIMIT:
            return shown, summary
        return f"{name} (str, {len(value):,} characters, clipped):\n" + clipped(shown, VALUE_LIMIT), summary
    if type(value) in (float, bool) or (type(value) is int and value.bit_length() <= 128):
        return redact.text(str(value)), summary
    return f"{name} ({summary})", summary


def _first_line(text: str, limit: int = 80) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


# The request of `%agent --fix`: the most recent error, then any words the user added (fields in them are expanded too).
FIX = (
    "Explain the error below and fix it: find its cause, correct the code and run the corrected code "
    "with the python tool to check it works.\n\n{Err}"
)
FIXED = "its cell ran again, or an approved edit changed it"
NO_ERROR = f"No cell has raised an error in this kernel yet, or each was fixed since ({FIXED}): `%agent --fix` has nothing to fix."


FIX_PROPOSE = (
    "\n\nThen propose the corrected code as an edit of the failing cell with the propose_cell_edit tool (read_notebook "
    "gives each cell's id); the user approves or declines it."
)


def fix_request(words: str, *, propose: bool = False) -> str:
    """The template ``%agent --fix`` sends, with the user's own words after it; ``propose``: the fix is proposed as a cell edit."""
    return FIX + (FIX_PROPOSE if propose else "") + (f"\n{words}" if words.strip() else "")


def panel_title(request: str, error: CellRun | None = None) -> str:
    """A panel's title: the request, but for ``%agent --fix`` the user's own words, else "Fix the error in cell [n]" (``error``'s)."""
    if not request.startswith(FIX):
        return request
    words = request[len(FIX) :].removeprefix(FIX_PROPOSE).strip()
    if words:
        return words
    return f"Fix the error in cell [{error.count}]" if error is not None and error.count else "Fix the most recent error"


def prepare(template: str, notebook: Notebook, *, fix: bool = False) -> Expansion:
    """The expansion of a cell's request; if it cannot be sent, the template with the reason (raised only if it is to be sent)."""
    try:
        if fix and notebook.last_error() is None:
            raise UsageError(NO_ERROR)
        return expand(template, notebook)
    except UsageError as err:
        return Expansion(template, template, problem=err)


def kernel_notebook(shell: Any, cells: CellLog | None = None, watch: VariableWatch | None = None) -> Notebook:
    """Fields looked up in a kernel: variables through the VariableWatch, cells through the CellLog, else IPython's history."""

    def variable(name: str) -> tuple[str, str]:
        if watch is None:
            raise KeyError(name)
        value = watch.get(name)
        return value_text(name, value, *variable_summary(name, value))

    def cell(count: int) -> CellRun | None:
        run = cells.get(count) if cells is not None else None
        return run if run is not None else history_cell(shell, count)

    def last_error() -> CellRun | None:
        return cells.last_error() if cells is not None else None

    return Notebook(variable, cell, last_error)


def variable_summary(name: str, value: object) -> tuple[str, bool]:
    """A variable's summary as the context tells it (redacted), and whether its value is hidden (a secret's name or shape).

    A string is checked whole (``hidden`` reads only its first characters): a key anywhere in it hides it.
    """
    if hidden(name, value) or (type(value) is str and redact.text(value) != value):
        return f"{type_label(type(value))} {HIDDEN}", True
    text = summary(value)
    if redact.text(text) != text:
        return f"{type_label(type(value))} {HIDDEN}", True
    return text, False


def of_magics(magics: Any) -> Notebook:
    """The fields of the ``%agent`` magics' kernel: the cell log and variable watch their notebook context keeps."""
    return kernel_notebook(magics.shell, magics.context.cells, magics.context.variables)


def history_cell(shell: Any, count: int) -> CellRun | None:
    """Cell ``count`` as IPython's history has it (a cell run before the CellLog followed them): source and result, whole.

    Not clipped here: :func:`block` redacts a text whole before it clips it.
    """
    history = getattr(shell, "history_manager", None)
    raw = getattr(history, "input_hist_raw", None) or []
    if not 0 < count < len(raw):
        return None
    reprs = getattr(history, "output_hist_reprs", None) or {}
    result = reprs.get(count)
    return CellRun(count, str(raw[count]), None if result is None else str(result), None)
