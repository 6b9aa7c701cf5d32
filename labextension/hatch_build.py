"""Hatch build hook: the JupyterLab extension in labextension/ is built and put in the wheel, when Node.js is there.

`pip install .` and `pip install -e .` run `jlpm install` and `jlpm build` here (jlpm comes from the build
requirement jupyter-builder), unless labextension/dist/ is newer than every source. The wheel then carries the built
extension as share/jupyter/labextensions/nbagent/ (as jupyter-config/ is carried), so `jupyter labextension list`
shows it. Without Node.js (or with NBAGENT_SKIP_LABEXTENSION=1) the install still succeeds, without the extension,
and says so on stderr (pip shows it with -v); nbagent itself works as before (docs/cells.md, "Without the extension").
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

NAME = "nbagent"  # the npm package's name: share/jupyter/labextensions/<NAME>
SOURCES = ("src", "style", "package.json", "yarn.lock", "tsconfig.json")
NODE_FLOOR = (20, 19)  # @rspack/core (JupyterLab's builder) needs Node.js ^20.19 or >= 22.12


def say(text: str) -> None:
    """One line on stderr, where pip -v shows build output."""
    print(f"nbagent: {text}", file=sys.stderr, flush=True)


def newest(paths: list[Path]) -> float:
    """The newest modification time of any file under the paths (0 when none exists)."""
    times = [0.0]
    for path in paths:
        if path.is_file():
            times.append(path.stat().st_mtime)
        elif path.is_dir():
            times += [p.stat().st_mtime for p in path.rglob("*") if p.is_file()]
    return max(times)


def node_problem() -> str:
    """Why Node.js cannot build the extension here ('' when it can)."""
    node = shutil.which("node")
    if node is None:
        return "no Node.js on PATH"
    try:
        shown = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"node --version failed ({exc})"
    found = re.match(r"v(\d+)\.(\d+)", shown)
    if found is None:
        return f"node --version said {shown!r}"
    major, minor = int(found.group(1)), int(found.group(2))
    if (major, minor) < NODE_FLOOR or (major == 21) or (major == 22 and minor < 12):
        return f"Node.js {shown} is too old (JupyterLab's builder needs ^20.19 or >= 22.12)"
    return ""


class LabExtensionHook(BuildHookInterface):
    """Build labextension/ into labextension/dist/ and map it into the wheel's shared data."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Build when stale and possible; include the built extension when there is one."""
        if self.target_name != "wheel":
            return
        here = Path(self.root) / "labextension"
        dist = here / "dist"
        built = dist / "package.json"
        stale = not built.exists() or newest([here / s for s in SOURCES]) > built.stat().st_mtime
        if stale:
            self._build(here, version)
        if built.exists() and newest([here / s for s in SOURCES]) <= built.stat().st_mtime:
            build_data["shared_data"][str(dist)] = f"share/jupyter/labextensions/{NAME}"
            build_data["shared_data"][str(here / "install.json")] = f"share/jupyter/labextensions/{NAME}/install.json"
        else:
            say(
                "the JupyterLab extension was NOT built, so this install does not include it: "
                "nbagent works, but cells can't be inserted from JupyterLab or Notebook 7 "
                "(install Node.js >= 20.19 and reinstall; docs/cells.md)"
            )

    def _build(self, here: Path, version: str) -> None:
        if os.environ.get("NBAGENT_SKIP_LABEXTENSION", "").strip().lower() in ("1", "true", "yes"):
            say("NBAGENT_SKIP_LABEXTENSION is set: the JupyterLab extension is not built")
            return
        problem = node_problem()
        if problem:
            say(f"{problem}: the JupyterLab extension is not built")
            return
        jlpm = shutil.which("jlpm")  # from the build requirement jupyter-builder
        if jlpm is None:
            say("no jlpm on PATH (jupyter-builder's): the JupyterLab extension is not built")
            return
        script = "build" if version == "editable" else "build:prod"  # a development build is quicker
        for step in (["install", "--immutable"], ["run", script]):
            say(f"building the JupyterLab extension: jlpm {' '.join(step)}")
            try:
                subprocess.run([jlpm, *step], cwd=here, check=True, stdout=sys.stderr)
            except (OSError, subprocess.CalledProcessError) as exc:
                say(f"jlpm {' '.join(step)} failed ({exc})")
                return
