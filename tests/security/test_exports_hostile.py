"""Exports carry no live remote content and no script link: hostile Markdown in a log, exported by the real CLI.

Each payload (``MARKDOWN`` of reliability/payloads.py: hostile links and markup) goes into
every place an export shows text (``markdown_log`` of reliability/attacker.py); the session is
exported to .md and .ipynb through ``nbagent export``'s entry point (``nbagent.cli.main``, in this process;
one test runs the command as a process and gets the same bytes), and the Markdown (the file,
and every notebook Markdown cell) is rendered by markdown-it with raw HTML on and NO URL
filter, as a careless renderer would.  No ``href``/``src`` may then carry a script, data or
file URL (judged after the browser's entity decoding, then %-decoding, without spaces and
controls), and no ``src`` may fetch anything: only nbagent's own inline base64 images stay images.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from nbagent.cli.main import main
from nbagent.record import events as ev
from reliability.attacker import markdown_log, write_log
from reliability.payloads import MARKDOWN, PNG, assert_no_live_remote_or_script

pytestmark = pytest.mark.slow  # two exports for each of about 90 payloads


def export(path: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``nbagent export path -o out``, run from the log's folder, through the command's entry point in this process."""
    monkeypatch.chdir(path.parent)
    monkeypatch.setenv("NBAGENT_DATA_DIR", str(path.parent / "data"))
    err = io.StringIO()
    assert main(["export", str(path), "-o", str(out)], out=io.StringIO(), err=err) == 0, err.getvalue()


def export_process(path: Path, out: Path) -> None:
    """``nbagent export path -o out`` as its own process (``python -m nbagent``)."""
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


def test_the_command_writes_what_its_entry_point_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "s.jsonl"
    markdown_log(log, MARKDOWN[0])
    for suffix in ("md", "ipynb"):
        export_process(log, tmp_path / f"process.{suffix}")
        export(log, tmp_path / f"entry.{suffix}", monkeypatch)
    assert (tmp_path / "process.md").read_bytes() == (tmp_path / "entry.md").read_bytes()
    by_process, by_entry = (nbformat.read(tmp_path / f"{way}.ipynb", as_version=4) for way in ("process", "entry"))
    for cell in [*by_process.cells, *by_entry.cells]:
        del cell["id"]  # nbformat gives each new cell a random id
    assert by_process == by_entry


@pytest.mark.parametrize("payload", MARKDOWN)
def test_exports_load_nothing_remote_and_link_to_no_script(tmp_path: Path, payload: str, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "s.jsonl"
    markdown_log(log, payload)
    export(log, tmp_path / "s.md", monkeypatch)
    export(log, tmp_path / "s.ipynb", monkeypatch)

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


def test_a_reference_defined_in_one_part_cannot_make_an_image_or_script_link_in_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
    export(log, tmp_path / "s.md", monkeypatch)
    _hrefs, srcs = assert_no_live_remote_or_script((tmp_path / "s.md").read_text(encoding="utf-8"))
    assert not srcs
