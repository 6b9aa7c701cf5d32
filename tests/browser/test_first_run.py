"""A new user's first cells, in JupyterLab and Notebook 7, with no API key: what to do, calmly, nothing left behind.

The shared servers of conftest.py give their kernels a key (the fake API's); these servers are started from an
environment without one, as a new user's Jupyter is. A no-key start must say what to do alone, as plain output and
not as a red error block (nothing failed: issue 35 item 6; no panel, no "done"), create no log (not even the
``.nbagent`` folder), and a mistyped option (a real mistake) must stay an error naming the right one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.browser.harness import (
    Jupyter,
    JupyterServer,
    private_jupyter_env,
    screenshot_pages,
    visible_text,
    write_notebook,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = [pytest.mark.browser, pytest.mark.slow]
NOTEBOOK = "first.ipynb"
CELLS = ["%load_ext nbagent", "%agent What is in this folder?", "%agent --modle claude-x What is in this folder?"]


@pytest.fixture(scope="module", params=["lab", "notebook"])
def keyless(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, chromium: Browser) -> Iterator[Jupyter]:
    """A Jupyter server started with no ANTHROPIC_* variable in its environment, and one page of it."""
    home = tmp_path_factory.mktemp(f"first-{request.param}")
    base = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    (home / "data").mkdir()
    env = private_jupyter_env(home / "home", base, NBAGENT_DATA_DIR=str(home / "data"), PYTHONUNBUFFERED="1")
    server = JupyterServer(request.param, home / "root", env)
    try:
        server.start()
    except RuntimeError as exc:
        pytest.fail(f"could not start jupyter {request.param}: {exc}", pytrace=False)
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(30_000)
        app = Jupyter(page, server)
        app.start()
        yield app
    finally:
        context.close()
        server.stop()


STDERR = '[data-mime-type="application/vnd.jupyter.stderr"]'  # how JupyterLab and Notebook 7 mark an error's red block


def test_a_start_without_a_key_says_what_to_do_calmly_and_leaves_no_log(keyless: Jupyter) -> None:
    root: Path = keyless.server.root
    write_notebook(root / NOTEBOOK, CELLS)
    keyless.open(NOTEBOOK)
    for index in range(len(CELLS)):
        keyless.run_cell(NOTEBOOK, index)
        keyless.wait_idle(NOTEBOOK)
    [shot] = screenshot_pages([keyless.page], f"first-run-no-key-{keyless.kind}")
    print(f"screenshot: {shot}")
    output = keyless.output(NOTEBOOK, 1)
    said = visible_text(output)
    assert "nbagent: No Anthropic API key" in said and "getpass" in said and "UsageError" not in said, said
    assert output.locator(STDERR).count() == 0 and output.locator('[data-mime-type="application/vnd.jupyter.stdout"]').count() >= 1
    assert "%env" not in said and "done" not in said, said
    assert output.locator(".nbagent, .jupyter-widgets").count() == 0  # no panel, live or static
    assert not (root / ".nbagent").exists(), sorted(p.name for p in root.iterdir())
    mistyped = visible_text(keyless.output(NOTEBOOK, 2))
    assert "unrecognized option --modle: did you mean --model?" in mistyped, mistyped
    assert "UsageError" in mistyped and keyless.output(NOTEBOOK, 2).locator(STDERR).count() == 1  # a real mistake stays one
