"""Every dotted name the docs give (`nbagent.x.y` in backticks) is importable where they say, and the public API is whole."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import nbagent

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_PYTHON = {"nbagent.cells"}  # the comm target's name (docs/cells.md), not a module


def documented_names() -> list[tuple[str, str]]:
    """(file, dotted name) for every `nbagent.…` in backticks in README.md and docs/."""
    found = set()
    for doc in DOCS:
        for name in re.findall(r"`(nbagent(?:\.[A-Za-z_]\w*)+)", doc.read_text()):
            if name not in NOT_PYTHON:
                found.add((doc.name, name))
    return sorted(found)


def resolve(dotted: str) -> object:
    """The object a dotted name names: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            value = getattr(value, attribute)
        return value
    raise ModuleNotFoundError(dotted)


@pytest.mark.parametrize(("doc", "dotted"), documented_names())
def test_a_documented_name_resolves(doc: str, dotted: str) -> None:
    assert resolve(dotted) is not None, f"{doc} names {dotted}"


def test_the_docs_name_something() -> None:
    assert len(documented_names()) > 20  # the scan finds the names it is meant to check


def test_a_name_that_is_not_there_fails() -> None:
    with pytest.raises((AttributeError, ModuleNotFoundError)):
        resolve("nbagent.state.fold.no_such_rule")


def test_every_public_name_resolves() -> None:
    assert all(getattr(nbagent, name) is not None for name in nbagent.__all__)


def test_the_import_paths_users_write() -> None:
    from nbagent.stores import get_store
    from nbagent.tools import Tool, file_tools, tool

    assert get_store("files") is not None and callable(tool) and isinstance(file_tools()[0], Tool)
