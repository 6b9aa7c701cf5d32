"""A notebook as nbformat 4.5 writes it, without importing nbformat (its validator's import takes about 2 s)."""

from __future__ import annotations

import json
import uuid
from typing import Any


class NotebookNode(dict[str, Any]):
    """A notebook, cell or output: a dict whose keys read as attributes, as nbformat's NotebookNode reads."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


# nbformat 4.5 as nbformat.v4 builds it. Importing nbformat loads jsonschema's validator and format checkers (about 2 s
# of an export's 2.3 s), so the notebook is built here; the tests check it against the schema (tests/cli/test_export.py).
NBFORMAT, NBFORMAT_MINOR = 4, 5
SPLIT_MIMES = ("application/javascript", "image/svg+xml")  # split into lines like text/* (nbformat.v4.rwbase)


def cell(cell_type: str, source: str, meta: dict[str, Any] | None = None, **more: Any) -> NotebookNode:
    return NotebookNode(id=uuid.uuid4().hex[:8], cell_type=cell_type, metadata=meta or {}, source=source, **more)


def code_cell(source: str, meta: dict[str, Any], outputs: list[NotebookNode] | None = None) -> NotebookNode:
    return cell("code", source, meta, execution_count=None, outputs=outputs or [])


def _lines(value: Any) -> Any:
    return value.splitlines(True) if isinstance(value, str) else value


def writes(notebook: NotebookNode) -> str:
    """The notebook's JSON as ``nbformat.writes`` writes it: sorted keys, indent 1, multi-line strings as lists of lines."""
    cells = []
    for each in notebook["cells"]:
        written = {**each, "source": _lines(each["source"])}
        if written["cell_type"] == "code":
            written["outputs"] = [_split_output(output) for output in written["outputs"]]
        cells.append(written)
    out = {**notebook, "cells": cells}
    return json.dumps(out, indent=1, sort_keys=True, separators=(",", ": "), ensure_ascii=False)


def _split_output(output: dict[str, Any]) -> dict[str, Any]:
    if output["output_type"] == "stream":
        return {**output, "text": _lines(output["text"])}
    data = {k: _lines(v) if k.startswith("text/") or k in SPLIT_MIMES else v for k, v in output.get("data", {}).items()}
    return {**output, "data": data}
