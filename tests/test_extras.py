"""The install line README gives for notebook use (issue 35 item 6): the ``lab`` extra brings what a notebook needs.

JupyterLab and Notebook 7 at the versions the bundled extension is built for, the server extension, and the
ipykernel the approval buttons' pump was written for; the versions the test extra pins (what CI drives) fit it.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from nbagent.notebook import pump

ROOT = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")


def extra(name: str) -> dict[str, Requirement]:
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][name]
    return {req.name: req for req in map(Requirement, listed)}


def test_the_lab_extra_brings_jupyterlab_notebook_the_server_extension_and_the_pumps_ipykernel() -> None:
    lab = extra("lab")
    assert set(lab) == {"nbagent", "jupyterlab", "notebook", "ipykernel"}
    assert lab["nbagent"].extras == {"server"}
    assert lab["ipykernel"].specifier == SpecifierSet(pump.SUPPORTED_IPYKERNEL)
    package = json.loads((ROOT / "labextension" / "package.json").read_text())
    floor = package["dependencies"]["@jupyterlab/application"].lstrip("^")  # the extension's JupyterLab: ^4.6.0
    assert Version(floor) in lab["jupyterlab"].specifier and Version(floor).major == 4
    assert f">={Version(floor).major}.{Version(floor).minor}" in str(lab["jupyterlab"].specifier)


@pytest.mark.parametrize("name", ["jupyterlab", "notebook", "ipykernel"])
def test_what_the_tests_drive_is_inside_the_lab_extra(name: str) -> None:
    pinned = extra("test")[name].specifier
    installed = importlib.metadata.version(name)
    assert installed in pinned and installed in extra("lab")[name].specifier


def test_readme_gives_the_lab_install_line_and_keeps_its_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    notebook = readme[readme.index("## In a notebook") : readme.index("## From the terminal")]
    assert re.search(r"pip install -e '\.\[lab\]' && \.venv/bin/jupyter lab", notebook)
    assert ".venv/bin/pip install -e . && .venv/bin/nbagent demo" in readme
    assert ".venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest -q -n 3 --dist loadfile" in readme
