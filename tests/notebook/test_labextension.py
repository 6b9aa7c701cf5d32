"""nbagent's JupyterLab extension (labextension/) as installed: its version and the comm's limits agree everywhere, Jupyter lists it.

The extension's own tests are TypeScript (labextension/src/__tests__, `jlpm check`); the browser tests drive it
(tests/browser/test_cells.py). Here: what `pip install` is meant to leave behind (docs/cells.md, "Build and install").
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import nbagent
from nbagent.notebook import cells_comm

ROOT = Path(__file__).resolve().parents[2]
EXTENSION = ROOT / "labextension"


def installed_extension() -> Path | None:
    """The installed extension's package.json in one of Jupyter's data folders (None when the install did not build it)."""
    from jupyter_core.paths import jupyter_path

    for folder in jupyter_path("labextensions"):
        found = Path(folder) / "nbagent" / "package.json"
        if found.is_file():
            return found
    return None


def test_versions_agree() -> None:
    """package.json, the version the extension sends in hello, and nbagent's own are one version."""
    package = json.loads((EXTENSION / "package.json").read_text())
    protocol = (EXTENSION / "src" / "protocol.ts").read_text()
    sent = re.search(r"EXTENSION_VERSION = '([^']+)'", protocol)
    assert sent is not None
    assert package["version"] == sent.group(1) == nbagent.__version__


# Limits only one side checks: the kernel checks the path the browser sends; the browser checks the outputs the kernel sends.
PYTHON_ONLY = {"MAX_PATH"}
TYPESCRIPT_ONLY = {"MAX_OUTPUTS", "MAX_OUTPUT_CHARS"}


def disagreements(ours: dict[str, object], typescript: str) -> list[str]:
    """Where the Python limits (``MAX_…`` ints) and a TypeScript source's ``export const MAX_… = 1_000;`` differ."""
    theirs = {name: int(value) for name, value in re.findall(r"^export const (MAX_\w+) = ([\d_]+);", typescript, re.M)}
    limits = {name: value for name, value in ours.items() if name.startswith("MAX_") and isinstance(value, int)}
    found = [
        f"{name} is {limits[name]} in Python, {theirs[name]} in TypeScript"
        for name in sorted(set(limits) & set(theirs))
        if limits[name] != theirs[name]
    ]
    found += [f"{name} only in Python" for name in sorted(set(limits) - set(theirs) - PYTHON_ONLY)]
    found += [f"{name} only in TypeScript" for name in sorted(set(theirs) - set(limits) - TYPESCRIPT_ONLY)]
    return found


def test_the_comm_limits_agree() -> None:
    """Every limit of the nbagent.cells comm is one number in nbagent/notebook/cells_comm.py and labextension/src/protocol.ts."""
    protocol = (EXTENSION / "src" / "protocol.ts").read_text()
    assert disagreements(vars(cells_comm), protocol) == []
    assert len(re.findall(r"^export const MAX_\w+ = [\d_]+;", protocol, re.M)) >= 7  # the limits the regex is meant to read
    version = re.search(r"^export const VERSION = (\d+);", protocol, re.M)
    assert version is not None and int(version.group(1)) == cells_comm.VERSION
    assert f"export const TARGET = '{cells_comm.TARGET}';" in protocol


@pytest.mark.parametrize(
    ("typescript", "expected"),
    [
        ("export const MAX_ID = 1_000; // characters", ["MAX_ID is 200 in Python, 1000 in TypeScript"]),
        ("export const MAX_ID = 200;\nexport const MAX_NEW = 5;", ["MAX_NEW only in TypeScript"]),
        ("", ["MAX_ID only in Python"]),
        ("export const MAX_ID = 200;\nexport const MAX_OUTPUTS = 9;", []),
    ],
)
def test_a_limit_that_differs_fails(typescript: str, expected: list[str]) -> None:
    assert disagreements({"MAX_ID": 200, "MAX_PATH": 4096, "VERSION": 1}, typescript) == expected


def need_extension() -> None:
    """Skip where nbagent's JupyterLab extension is not installed (a machine with no Node.js); fail under CI."""
    if installed_extension() is None:
        reason = "nbagent's JupyterLab extension is not installed (pip install -e . builds it when Node.js >= 20.19 is on PATH)"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"CI=true: {reason}", pytrace=False)
        pytest.skip(reason)


@pytest.mark.slow  # a jupyter process: seconds
def test_jupyter_lists_the_installed_extension() -> None:
    """`jupyter labextension list` shows nbagent, enabled and OK, installed by the python package (the wheel's shared data)."""
    need_extension()
    listed = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)
    assert re.search(rf"nbagent v{re.escape(nbagent.__version__)} enabled\s+OK \(python, nbagent\)", text), text
