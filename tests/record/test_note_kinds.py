"""Every kind of note nbagent writes is declared, with the fields it carries, in one place: ``events.NOTE_KINDS``.

Read from the code with ``ast``: each ``<x>.append(<ev>.NOTE, kind=..., field=...)``, and each note built by a method
named ``event`` (a dict with a ``"kind"``, spread into such an append).  A kind is evaluated in its module, so it may be
a literal or any constant; a note whose kind cannot be read that way fails, as an undeclared kind or field does.  The
same checker runs on made-up code first, so that each rule is seen to fail.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nbagent.record import events as ev

PACKAGE = Path(__file__).resolve().parents[2] / "nbagent"


@dataclass(frozen=True)
class Write:
    """One note written in the code: its kind (an expression), the fields named beside it, and where."""

    kind: str | None  # the kind's expression as written; None: the note names no kind
    fields: frozenset[str]
    line: int
    spread: str = ""  # a ``**`` spread in the append that is not a note builder's ``.event()`` (unreadable)


def _is_note(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "NOTE") or (isinstance(node, ast.Name) and node.id == "NOTE")


def writes(tree: ast.AST) -> Iterator[Write]:
    """The notes a module writes: appends of a NOTE event, and the dicts of its note builders (methods named ``event``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append":
            if not node.args or not _is_note(node.args[0]):
                continue
            named = {k.arg: k.value for k in node.keywords if k.arg is not None}
            spreads = [k.value for k in node.keywords if k.arg is None]
            built = [s for s in spreads if isinstance(s, ast.Call) and isinstance(s.func, ast.Attribute) and s.func.attr == "event"]
            other = next((ast.unparse(s) for s in spreads if s not in built), "")
            if built and "kind" not in named and not other:
                continue  # the builder's own dict is read below
            kind = ast.unparse(named["kind"]) if "kind" in named else None
            yield Write(kind, frozenset(named) - {"kind"}, node.lineno, other)
        elif isinstance(node, ast.FunctionDef) and node.name == "event":
            for inner in ast.walk(node):
                if isinstance(inner, ast.Return) and isinstance(inner.value, ast.Dict):
                    keys = {k.value: v for k, v in zip(inner.value.keys, inner.value.values) if isinstance(k, ast.Constant)}
                    if "kind" in keys:
                        yield Write(ast.unparse(keys["kind"]), frozenset(keys) - {"kind"}, inner.lineno)


def problems(found: list[Write], namespace: dict[str, Any], where: str) -> tuple[list[str], set[str]]:
    """What is wrong with a module's notes against ``events.NOTE_KINDS``, and the kinds it writes."""
    wrong, kinds = [], set()
    for write in found:
        at = f"{where}:{write.line}"
        if write.spread:
            wrong.append(f"{at}: a note's fields come from {write.spread}, which this test cannot read (use a builder's .event())")
            continue
        if write.kind is None:
            wrong.append(f"{at}: a note without a kind")
            continue
        try:
            kind = eval(write.kind, dict(namespace))  # noqa: S307 - the code's own constant expression, in its own module
        except Exception as exc:
            wrong.append(f"{at}: the kind {write.kind} is not a constant of the module ({type(exc).__name__}: {exc})")
            continue
        kinds.add(kind)
        if kind not in ev.NOTE_KINDS:
            wrong.append(f"{at}: note kind {kind!r} is not declared in nbagent/record/events.py (NOTE_KINDS)")
        elif undeclared := sorted(write.fields - ev.NOTE_KINDS[kind]):
            wrong.append(f"{at}: note kind {kind!r} carries {undeclared}, not declared for it in NOTE_KINDS")
    return wrong, kinds


def package_notes() -> tuple[list[str], set[str]]:
    """The problems and the kinds of every note the package writes."""
    wrong, kinds = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        found = list(writes(ast.parse(path.read_text(), str(path))))
        if not found:
            continue
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        more, written = problems(found, vars(importlib.import_module(name)), str(path.relative_to(PACKAGE.parent)))
        wrong += more
        kinds |= written
    return wrong, kinds


def test_every_note_kind_written_is_declared_with_its_fields() -> None:
    wrong, _kinds = package_notes()
    assert wrong == []


def test_every_declared_note_kind_is_written_somewhere() -> None:
    _wrong, kinds = package_notes()
    assert sorted(set(ev.NOTE_KINDS) - kinds) == []
    assert len(kinds) >= 14  # the scan finds the notes it is meant to check


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('session.append(ev.NOTE, kind="made_up", text="x")', "'made_up' is not declared"),
        ('session.append(ev.NOTE, kind=KIND, text="x")', "'made_up' is not declared"),
        ('self.session.append(ev.NOTE, kind=ev.NOTE_STOP, action="a", surprise=1)', "carries ['surprise']"),
        ('session.append(ev.NOTE, text="no kind")', "a note without a kind"),
        ("session.append(ev.NOTE, kind=local_variable)", "not a constant of the module"),
        ("session.append(ev.NOTE, **payload)", "cannot read"),
        ('class B:\n    def event(self):\n        return {"kind": "made_up", "text": "x"}', "'made_up' is not declared"),
    ],
)
def test_each_rule_fails_on_made_up_code(source: str, expected: str) -> None:
    wrong, _kinds = problems(list(writes(ast.parse(source))), {"ev": ev, "KIND": "made_up"}, "made_up.py")
    assert len(wrong) == 1 and expected in wrong[0], wrong


def test_declared_code_passes() -> None:
    source = 'session.append(ev.NOTE, kind=ev.NOTE_STOP, action="a", text="t")\nsession.append(ev.NOTE, **budget.event())'
    assert problems(list(writes(ast.parse(source))), {"ev": ev}, "fine.py") == ([], {ev.NOTE_STOP})
