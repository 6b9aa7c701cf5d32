"""The cells the user ran in this kernel: source, result text and error, as IPython's events report them.

:class:`CellLog` listens to IPython's ``post_run_cell`` event and keeps, for each user cell, what
IPython already has: the raw source, the ``text/plain`` IPython itself produced for ``Out[n]``
(``history_manager.output_hist_reprs``, filled by ``DisplayHook.log_output``) and, for a cell that
raised, the exception's type and message and its last few frames, formatted once when the cell ends.
nbagent never builds a repr of a user value here.  The agent's own runs (``store_history=False``,
or while the cell tracker is paused) and ``%agent``/``%%agent`` cells are not user cells.  Cells
run before nbagent was loaded come from IPython's history (their errors where IPython keeps them).
Everything is bounded: the last :data:`KEEP` cells, each text clipped.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import IPython

KEEP = 1000  # cells kept
SOURCE_LIMIT = 4000
RESULT_LIMIT = 2000
MESSAGE_LIMIT = 300  # the exception's own line(s)
ERROR_LIMIT = 800  # message and frames together
FRAMES = 3  # the innermost frames kept
LINE_LIMIT = 160  # one frame's text
_AGENT_CELL = re.compile(r"\s*%%?agent(?![\w.])")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_IPYTHON_DIR = os.path.dirname(IPython.__file__) + os.sep


@dataclass(frozen=True)
class CellRun:
    """One cell the user ran."""

    count: int  # the execution count
    source: str  # as the user ran it (clipped when captured)
    result: str | None  # the text/plain IPython already produced for Out[count] (history_manager.output_hist_reprs), clipped
    error: str | None  # "KeyError: 'x'" + the last frames of its traceback, formatted once at capture, clipped
    cell_id: str | None = None  # the notebook cell's id, where the front end sent it (JupyterLab, Notebook 7, nbclient)


def is_agent_cell(source: str) -> bool:
    """Whether a cell is an ``%agent`` line or ``%%agent`` cell (its first non-blank line starts with one)."""
    return _AGENT_CELL.match(source) is not None


def clip(text: str, limit: int) -> str:
    """At most about ``limit`` characters: the head, then how many were left out."""
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit:,} more characters]"


def error_text(exc: BaseException, shell: Any = None, *, frames: int = FRAMES, limit: int = ERROR_LIMIT) -> str:
    """``KeyError: 'x'`` and, below it, the innermost ``frames`` frames of its traceback, within ``limit`` characters.

    The message is ``str(exc)`` through :func:`traceback.format_exception_only` (IPython printed it
    already; a failing ``__str__`` reads ``<exception str() failed>``).
    """
    message = clip("".join(traceback.format_exception_only(type(exc), exc)).strip(), MESSAGE_LIMIT)
    stack = traceback.extract_tb(exc.__traceback__, limit=-frames) if exc.__traceback__ is not None else []
    while stack and stack[0].filename.startswith(_IPYTHON_DIR):
        stack = stack[1:]  # IPython's own run_code frame, as IPython's tracebacks leave it out
    lines = [_frame(f, shell) for f in stack]
    while lines and len(message) + sum(len(x) + 1 for x in lines) + 40 > limit:
        lines.pop(0)  # the outermost frames go first: the innermost say where it failed
    if not lines:
        return message
    return f"{message}\nTraceback (innermost {len(lines)} frames):\n" + "\n".join(lines)


def _frame(frame: traceback.FrameSummary, shell: Any) -> str:
    where = frame.filename
    fmt = getattr(getattr(shell, "compile", None), "format_code_name", None)
    if fmt is not None:
        try:
            named = fmt(frame.filename)  # IPython's own name for a cell's code: ("Cell", "In[3]")
        except Exception:
            named = None
        if named:
            where = named[1]
    text = f"  {where}, line {frame.lineno}, in {frame.name}"
    if frame.line:
        text += f": {frame.line.strip()}"
    return clip(text, LINE_LIMIT)


class CellLog:
    """The user cells run in this kernel, newest last, bounded to the last :data:`KEEP`."""

    def __init__(self, shell: Any, paused: Callable[[], bool] | None = None, *, keep: int = KEEP) -> None:
        self.shell = shell
        self.paused = paused  # True while the agent runs code (notebook/kernel.py CellTracker.paused)
        self.keep = keep
        self._runs: dict[int, CellRun] = {}  # by execution count, oldest first
        self._count = 0
        self.before_load: CellRun | None = None  # an error from before nbagent was loaded whose cell is unknown
        self._fixed: set[int] = set()  # execution counts whose error an applied edit fixed (0: before_load's)
        self._backfill()

    def register(self) -> None:
        """Start listening to the shell's ``post_run_cell`` event."""
        self.shell.events.register("post_run_cell", self.post_run_cell)

    def unregister(self) -> None:
        """Stop listening."""
        try:
            self.shell.events.unregister("post_run_cell", self.post_run_cell)
        except ValueError:
            pass

    def post_run_cell(self, result: Any) -> None:
        """IPython event hook: record a user cell that just ran (a failure here never reaches the user's cell)."""
        try:
            self._record(result)
        except Exception:
            pass

    def since(self, count: int) -> list[CellRun]:
        """User cells with execution count > ``count``, oldest first."""
        return [run for c, run in self._runs.items() if c > count]

    def between(self, first: int, last: int) -> list[CellRun]:
        """User cells with ``first`` <= execution count <= ``last``, oldest first."""
        return [run for c, run in self._runs.items() if first <= c <= last]

    def get(self, count: int) -> CellRun | None:
        """The cell run with this execution count, if it is a user cell still kept."""
        return self._runs.get(count)

    def last_error(self) -> CellRun | None:
        """The latest error still standing: the newest run that raised whose cell (by id) did not run again and no applied edit fixed.

        Else an error from before nbagent was loaded (count 0), unless fixed too (:meth:`edited`).
        """
        later: set[str] = set()  # the cells that ran after the run looked at
        for run in reversed(self._runs.values()):
            if run.error is not None and run.count not in self._fixed and not (run.cell_id and run.cell_id in later):
                return run
            if run.cell_id:
                later.add(run.cell_id)
        return None if 0 in self._fixed else self.before_load

    def edited(self, cell_id: str, fixing: CellRun | None = None) -> None:
        """An approved edit of the cell ``cell_id`` was applied: its errors are fixed, and so is ``fixing`` (a ``--fix``'s error)."""
        self._fixed.update(run.count for run in self._runs.values() if run.cell_id == cell_id and run.error is not None)
        if fixing is not None:
            self._fixed.add(fixing.count)

    @property
    def count(self) -> int:
        """The latest execution count seen."""
        return self._count

    def _record(self, result: Any) -> None:
        info = getattr(result, "info", None)
        if info is None or not getattr(info, "store_history", False) or getattr(info, "silent", False):
            return  # the agent's python tool runs with store_history=False
        if self.paused is not None and self.paused():
            return
        count = getattr(result, "execution_count", None)
        source = getattr(info, "raw_cell", None)
        if type(count) is not int or type(source) is not str:
            return
        self._count = max(self._count, count)
        if is_agent_cell(source):
            return
        exc = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        error = error_text(exc, self.shell) if isinstance(exc, BaseException) else None
        cell_id = getattr(info, "cell_id", None)
        self._add(CellRun(count, clip(source, SOURCE_LIMIT), self._result(count), error, cell_id if isinstance(cell_id, str) else None))

    def _result(self, count: int) -> str | None:
        reprs = getattr(getattr(self.shell, "history_manager", None), "output_hist_reprs", None) or {}
        text = reprs.get(count)
        return clip(text, RESULT_LIMIT) if type(text) is str else None

    def _add(self, run: CellRun) -> None:
        self._runs.pop(run.count, None)  # a count seen again (the %load_ext cell itself): the newer record
        self._fixed.discard(run.count)
        self._runs[run.count] = run
        while len(self._runs) > self.keep:
            del self._runs[next(iter(self._runs))]

    def _backfill(self) -> None:
        """The cells run before nbagent was loaded, from IPython's history; errors where IPython keeps them."""
        history = getattr(self.shell, "history_manager", None)
        sources = getattr(history, "input_hist_raw", None)
        if not isinstance(sources, list):
            return
        kept = getattr(history, "exceptions", None)  # IPython >= 9: {count: {"ename", "evalue", "traceback"}}
        first = max(1, len(sources) - self.keep)
        for count in range(first, len(sources)):
            source = sources[count]
            self._count = max(self._count, count)
            if type(source) is not str or not source.strip() or is_agent_cell(source):
                continue
            stored = kept.get(count) if isinstance(kept, dict) else None
            self._add(CellRun(count, clip(source, SOURCE_LIMIT), self._result(count), _stored_error(stored)))
        if not isinstance(kept, dict):  # older IPython keeps only the last error, not which cell raised it
            exc = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
            if isinstance(exc, BaseException):
                source = "(a cell run before nbagent was loaded; which one is not known)"
                self.before_load = CellRun(0, source, None, error_text(exc, self.shell))


def _stored_error(stored: Any) -> str | None:
    """An error IPython stored for a cell run before nbagent was loaded: its type and message (its frames are not kept)."""
    if not isinstance(stored, dict):
        return None
    name, value = str(stored.get("ename", "Error")), _ANSI.sub("", str(stored.get("evalue", "")))
    return clip(f"{name}: {value}" if value else name, MESSAGE_LIMIT) + "\n(ran before nbagent was loaded: frames not kept)"
