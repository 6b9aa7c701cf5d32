"""nbagent's JupyterLab extension (labextension/) as installed: its version agrees everywhere, Jupyter lists it.

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


@pytest.mark.slow  # a jupyter process: seconds
def test_jupyter_lists_the_installed_extension() -> None:
    """`jupyter labextension list` shows nbagent, enabled and OK, installed by the python package (the wheel's shared data)."""
    if installed_extension() is None:
        reason = "the JupyterLab extension is not installed here (pip install -e . builds it when Node.js >= 20.19 is on PATH)"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"CI=true: {reason}", pytrace=False)
        pytest.skip(reason)
    listed = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)
    assert re.search(rf"nbagent v{re.escape(nbagent.__version__)} enabled\s+OK \(python, nbagent\)", text), text
