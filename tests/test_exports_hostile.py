"""Exports carry no live remote content and no script link: hostile Markdown in a log, exported by the real CLI.

Each payload (``MARKDOWN`` of reliability/payloads.py: hostile links and markup) goes into
every place an export shows text (``markdown_log`` of reliability/attacker.py); the session is
exported to .md and .ipynb with ``nbagent export`` (a subprocess), and the Markdown (the file,
and every notebook Markdown cell) is rendered by markdown-it with raw HTML on and NO URL
filter, as a careless renderer would.  No ``href``/``src`` may then carry a script, data or
file URL (judged after the browser's entity decoding, then %-decoding, without spaces and
controls), and no ``src`` may fetch anything: only nbagent's own inline base64 images stay images.

(A real-browser check is left out: neither Chromium nor Playwright is installed here.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from nbagent import events as ev
from reliability.attacker import markdown_log, write_log
from reliability.payloads import MARKDOWN, PNG, assert_no_live_remote_or_script

pytestmark = pytest.mark.slow  # two ``nbagent export`` processes for each of about 90 payloads


def export(path: Path, out: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "nbagent", "export", str(path), "-o", str(out)],
        cwd=path.parent,
        env={**os.environ, "NBAGENT_DATA_DIR": str(path.parent / "data")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("payload", MARKDOWN)
def test_exports_load_nothing_remote_and_link_to_no_script(tmp_path: Path, payload: str) -> None:
    log = tmp_path / "s.jsonl"
    markdown_log(log, payload)
    export(log, tmp_path / "s.md")
    export(log, tmp_path / "s.ipynb")

    markdown = (tmp_path / "s.md").read_text(encoding="utf-8")
    hrefs, srcs = assert_no_live_remote_or_script(markdown)
    assert "https://example.org/docs" in hrefs  # an ordinary link stays a link
    assert f"data:image/png;base64,{PNG}".lower() in srcs  # and nbagent's own image stays an image

    notebook = nbformat.read(tmp_path / "s.ipynb", as_version=4)
    hrefs = []
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            hrefs += assert_no_live_remote_or_script(cell.source)[0]
    assert "https://example.org/docs" in hrefs
    images = [o for c in notebook.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert [o["data"]["image/png"] for o in images] == [PNG]


def test_a_reference_defined_in_one_part_cannot_make_an_image_or_script_link_in_another(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    reply = {"stop_reason": "end_turn", "usage": {}}
    write_log(
        log,
        [
            (ev.USER_MSG, {"content": "[img]: https://evil.example/cross.png"}),
            (ev.ASSISTANT_MSG, {**reply, "content": [{"type": "text", "text": "![seen][img]"}]}),
            (ev.USER_MSG, {"content": "[late]: data:text/html,x"}),
            (ev.ASSISTANT_MSG, {**reply, "content": [{"type": "text", "text": "[click][late]"}]}),
        ],
    )
    export(log, tmp_path / "s.md")
    _hrefs, srcs = assert_no_live_remote_or_script((tmp_path / "s.md").read_text(encoding="utf-8"))
    assert not srcs
