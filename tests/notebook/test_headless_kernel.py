"""A notebook run with its path known, then re-executed headless (``jupyter nbconvert --execute``, nbclient) with no path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from nbagent.record import events as ev
from nbagent.record.log_reader import read_events
from nbagent.stores import folders as store
from tests.support.fake_anthropic import text

pytestmark = [pytest.mark.kernel, pytest.mark.slow]  # each runs notebooks in real kernels (nbclient, nbconvert)

CELLS = ["%load_ext nbagent", "%agent What is two plus two?", "x = 1", "%%agent\nAnd times three?"]
JUPYTER = Path(sys.executable).parent / "jupyter"


def notebook(folder: Path, name: str, cells: list[str]) -> Path:
    """A saved notebook of these code cells (a python3 kernel), as JupyterLab would leave it."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = folder / name
    nbformat.write(nb, path)
    return path


def env(fake, *, key: bool, path: Path | None = None) -> dict[str, str]:
    """The kernel's environment: the API at the fake server, with or without a key, with or without the notebook's path."""
    found = {k: v for k, v in os.environ.items() if k not in ("JPY_SESSION_NAME", "ANTHROPIC_API_KEY")}
    found["ANTHROPIC_BASE_URL"] = fake.base_url
    if key:
        found["ANTHROPIC_API_KEY"] = "test-key"
    if path is not None:
        found["JPY_SESSION_NAME"] = str(path)
    return found


def nbclient_run(path: Path, kernel_env: dict[str, str], cells: list[str] | None = None):
    """Run All with nbclient in the notebook's folder (``cells``: instead of the saved ones); the executed notebook."""
    nb = nbformat.read(path, as_version=4)
    if cells is not None:
        nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    client = NotebookClient(
        nb, timeout=120, kernel_name="python3", shutdown_kernel="immediate", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute(env=kernel_env)
    return nb


def nbconvert(path: Path, kernel_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``jupyter nbconvert --to notebook --execute`` in a subprocess (its kernel inherits ``kernel_env``), to out.ipynb."""
    command = [str(JUPYTER), "nbconvert", "--to", "notebook", "--execute", path.name, "--output", "out.ipynb"]
    command += ["--ExecutePreprocessor.timeout=120"]
    return subprocess.run(command, cwd=path.parent, env=kernel_env, capture_output=True, text=True, timeout=300)


def outputs(nb, source_start: str) -> str:
    """All text and HTML the first code cell starting with ``source_start`` shows."""
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith(source_start))
    parts = []
    for output in cell.get("outputs", []):
        parts.append(output.get("text", "") if output["output_type"] == "stream" else "")
        parts.extend(str(output.get("data", {}).get(kind, "")) for kind in ("text/plain", "text/html"))
        parts.extend(output.get("traceback", []) if output["output_type"] == "error" else [])
    return "\n".join(parts)


def requests_logged(folder: Path) -> list[str]:
    """The requests every session in a log folder recorded."""
    return [e["meta"]["request"] for s in store.list_sessions(folder) for e in read_events(s.path) if e["type"] == ev.USER_MSG]


def test_a_saved_notebook_re_executed_headless_shows_its_recorded_turns_with_no_model_call(fake, tmp_path: Path) -> None:
    path = notebook(tmp_path, "analysis.ipynb", CELLS)
    folder = tmp_path / ".nbagent" / "analysis.ipynb"
    fake.script(text("Four."), text("Twelve."), text("Twelve times ten is 120."))
    nb = nbclient_run(path, env(fake, key=True, path=path))  # authored with the path known, as JupyterLab runs it
    assert "Four." in outputs(nb, "%agent What") and len(fake.requests) == 2

    ci = {**env(fake, key=False), "NBAGENT_DATA_DIR": str(tmp_path / "ci-user")}  # headless: no path, no key, another user's secret
    done = nbconvert(path, ci)
    assert done.returncode == 0, done.stderr
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert "Four." in outputs(out, "%agent What") and "Twelve." in outputs(out, "%%agent")
    assert "only those of analysis.ipynb hold this request" in outputs(out, "%agent What")
    assert len(fake.requests) == 2  # zero new model requests

    # nbclient without the path, with a key (a call would reach the fake): the recorded turns, then one new request
    nb = nbclient_run(path, env(fake, key=True), cells=[*CELLS, "%agent And times ten?"])
    assert "Four." in outputs(nb, "%agent What") and "Twelve." in outputs(nb, "%%agent")
    assert len(fake.requests) == 3 and "120" in outputs(nb, "%agent And times ten")
    # the new turn went into the notebook's own log, after its recorded ones; nothing into untitled
    assert requests_logged(folder) == ["What is two plus two?", "And times three?", "And times ten?"]
    assert not (tmp_path / ".nbagent" / "untitled").exists()


def test_notebooks_whose_logs_hold_the_same_requests_are_named_not_guessed(fake, tmp_path: Path) -> None:
    path = notebook(tmp_path, "analysis.ipynb", CELLS)
    copy = notebook(tmp_path, "copy.ipynb", CELLS)
    fake.script(text("Four."), text("Twelve."), text("Vier."), text("Zwölf."))
    nbclient_run(path, env(fake, key=True, path=path))
    nbclient_run(copy, env(fake, key=True, path=copy))
    assert len(fake.requests) == 4

    refused = nbconvert(path, env(fake, key=True))
    assert refused.returncode != 0
    assert "analysis.ipynb, copy.ipynb" in refused.stderr and '%config Agent.notebook = "analysis.ipynb"' in refused.stderr
    assert len(fake.requests) == 4 and not (tmp_path / ".nbagent" / "untitled").exists()

    # the workaround that needs no new setting: the notebook's name in JPY_SESSION_NAME
    named = nbconvert(path, {**env(fake, key=False), "JPY_SESSION_NAME": "analysis.ipynb"})
    assert named.returncode == 0, named.stderr
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert "Four." in outputs(out, "%agent What") and "Vier." not in outputs(out, "%agent What")

    # Agent.notebook picks (here the copy, from a run of analysis.ipynb's cells with no path)
    nb = nbclient_run(path, env(fake, key=True), cells=['%config Agent.notebook = "copy.ipynb"', *CELLS])
    assert "Vier." in outputs(nb, "%agent What") and "Zwölf." in outputs(nb, "%%agent")
    assert len(fake.requests) == 4


def test_a_request_no_log_holds_says_the_path_is_unknown(fake, tmp_path: Path) -> None:
    path = notebook(tmp_path, "fresh.ipynb", ["%load_ext nbagent", "%agent Something new?"])
    fake.script(text("A new answer."))
    nb = nbclient_run(path, env(fake, key=True))
    shown = outputs(nb, "%agent Something")
    assert "A new answer." in shown and "this kernel was not told its notebook" in shown and "Agent.notebook" in shown
    assert requests_logged(tmp_path / ".nbagent" / "untitled") == ["Something new?"]  # as before: the untitled folder

    # without a key the cell is refused before anything is made, and says the path is unknown
    nb_path = notebook(tmp_path, "other.ipynb", ["%load_ext nbagent", "%agent Another new one?"])
    refused = nbconvert(nb_path, env(fake, key=False))
    assert refused.returncode != 0 and "No Anthropic API key" in refused.stderr and "Agent.notebook" in refused.stderr
    assert len(fake.requests) == 1
