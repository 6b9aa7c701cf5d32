"""The user's variables and what changed among them since the agent's last turn.

:class:`VariableWatch` keeps, for each user variable, the id of its value and its one-line
summary (:mod:`.value_summary`): a variable is new, rebound (another object) or changed (same object,
a different summary: a column added, a list grown).  Values are never hashed, compared or copied,
and summaries run no user code, so the cost grows with the number of names, not with the size of the data;
a snapshot also stops summarising after :data:`BUDGET` seconds (the rest are told by type, and say so).
Left out: modules, names starting with ``_``, IPython's own names (``In``, ``Out``, ``exit``...), nbagent's
own objects and the ``exclude`` patterns.  A variable named like a secret (``api_key``, ``token``,
``password``...: :mod:`.secret_names`) or holding a key-shaped value never shows its value, and a secret-named
string is registered with :mod:`nbagent.record.redact`, so it is redacted wherever it appears later (a cell's source).
"""

from __future__ import annotations

import fnmatch
import re
import time
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..record import redact
from .secret_names import HIDDEN, SECRET_NAME, secret_name
from .value_summary import summary, type_label

__all__ = ["HIDDEN", "SECRET_NAME", "Variable", "VariableWatch", "hidden", "secret_name"]

SHAPE_CHECK = 10_000  # the characters of a string value checked for key shapes
BUDGET = 0.25  # seconds one snapshot spends on summaries (two snapshots a turn: at its start and its end)
UNREAD = "(not summarised: over the time budget for summaries)"
CLOCK_EVERY = 16  # the clock is read before every 16th name (a summary takes microseconds; the clock a tenth of that)
_IPYTHON_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython"})


@dataclass(frozen=True)
class Variable:
    """A user variable as the model is told of it."""

    name: str
    summary: str  # value_summary.summary(value), redacted (nbagent.record.redact) and with secret-named values hidden


def hidden(name: str, value: object) -> bool:
    """Whether a variable's value must not be shown: a secret-like name, or a string value that redaction would change."""
    if secret_name(name):
        return True
    if type(value) is str:
        return redact.text(value[:SHAPE_CHECK]) != value[:SHAPE_CHECK]
    return False  # other values' summaries and details are redacted where they are shown


def _user_type(cls: type) -> bool:
    """Whether values of this class can be user variables (not modules, not nbagent's own objects)."""
    # type(value), never value.__class__: a property there would be user code
    return not issubclass(cls, types.ModuleType) and not type_label(cls).startswith("nbagent.")


# exact types (a subclass may mutate), by id: hashing a class would run its metaclass's __hash__
IMMUTABLE = frozenset(map(id, (int, float, complex, bool, str, bytes, type(None))))


class VariableWatch:
    """The user namespace's variables, compared with a baseline set by :meth:`mark`."""

    def __init__(self, shell: Any, exclude: Sequence[str] = (), budget: float = BUDGET) -> None:
        self.shell = shell
        self.budget = budget  # seconds of summaries per snapshot
        self.exclude = tuple(exclude)
        self._excluded = re.compile("|".join(fnmatch.translate(p) for p in self.exclude)) if self.exclude else None
        self._baseline: dict[str, tuple[int, str]] = {}  # name -> (id of the value, raw summary)
        # An immutable value's summary, kept with the value itself (alive, so its id is not reused) until the next snapshot
        self._immutable: dict[str, tuple[object, str]] = {}

    def changes(self) -> tuple[list[Variable], list[str]]:
        """(new or changed since the mark, names gone since the mark), in namespace order."""
        now = self._snapshot()
        base = self._baseline
        changed = [(name, entry) for name, entry in now.items() if base.get(name) != entry and _changed(base.get(name), entry)]
        gone = [name for name in base if name not in now]
        return self._shown(changed), gone

    def mark(self) -> None:
        """The current namespace becomes the baseline (after each agent turn: the agent's own changes are not news)."""
        self._baseline = self._snapshot()

    def get(self, name: str) -> object:
        """A user variable's value; KeyError if there is none by that name (or it is left out)."""
        ns = self.shell.user_ns
        if name not in ns or not self._user(name, ns[name], self._hidden_ns()):
            raise KeyError(name)
        return ns[name]

    def names(self) -> list[str]:
        """The user variables' names, in namespace order."""
        hidden_ns = self._hidden_ns()
        return [name for name, value in list(self.shell.user_ns.items()) if self._user(name, value, hidden_ns)]

    def _hidden_ns(self) -> dict[str, Any]:
        ns = getattr(self.shell, "user_ns_hidden", None)
        return ns if isinstance(ns, dict) else {}

    def _user(self, name: object, value: object, hidden_ns: dict[str, Any]) -> bool:
        if type(name) is not str or name.startswith("_") or name in _IPYTHON_NAMES:
            return False
        if name in hidden_ns and hidden_ns[name] is value:
            return False  # IPython's own (what %who leaves out)
        return _user_type(type(value)) and (self._excluded is None or self._excluded.match(name) is None)

    def _snapshot(self) -> dict[str, tuple[int, str]]:
        found: dict[str, tuple[int, str]] = {}
        immutable: dict[str, tuple[object, str]] = {}
        hidden_ns = self._hidden_ns()
        user = self._user
        deadline, over, told = time.perf_counter() + self.budget, False, 0
        for name, value in list(self.shell.user_ns.items()):
            if not user(name, value, hidden_ns):
                continue
            over = over or (not told % CLOCK_EVERY and time.perf_counter() > deadline)
            told += 1
            if secret_name(name):
                if type(value) is str or type(value) is bytes:
                    redact.register(value)  # shorter than 8 characters: ignored by redact
                found[name] = (id(value), f"{type_label(type(value))} {HIDDEN}")
            elif over:
                found[name] = (id(value), f"{type_label(type(value))} {UNREAD}")
            elif id(type(value)) in IMMUTABLE:  # the same object has the same summary: not worked out again
                seen = self._immutable.get(name)
                text = seen[1] if seen is not None and seen[0] is value else summary(value)
                immutable[name] = (value, text)
                found[name] = (id(value), text)
            else:
                found[name] = (id(value), summary(value))
        self._immutable = immutable
        return found

    def _shown(self, changed: list[tuple[str, tuple[int, str]]]) -> list[Variable]:
        """The changed variables with their summaries redacted: a summary redaction would change is hidden whole."""
        texts = [text for _, (_, text) in changed]
        joined = "\n".join(texts)
        if redact.text(joined) == joined:  # the common case: one search over all of them
            return [Variable(name, text) for name, (_, text) in changed]
        out = []
        for name, (_, text) in changed:
            if redact.text(text) != text:
                text = f"{text.partition(' ')[0].rstrip(',')} {HIDDEN}"
            out.append(Variable(name, text))
        return out


def _changed(before: tuple[int, str] | None, now: tuple[int, str]) -> bool:
    """Whether a variable is news: new, bound to another object, or summarised differently (unless either is unsummarised)."""
    if before is None or before[0] != now[0]:
        return True
    return before[1] != now[1] and not before[1].endswith(UNREAD) and not now[1].endswith(UNREAD)
