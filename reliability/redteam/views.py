"""Defects 7 and 8 of issue 20: a pixel bomb and a link into the Jupyter server, in a foreign log, shown by every view.

The attacker (a second user's process with its own ``NBAGENT_DATA_DIR``) writes a session into a
notebook's log folder: a tool result holding a 48 KB PNG that declares 20,000 x 20,000 pixels (a
browser decodes it to 1.6 GB), and replies whose links point at the Jupyter server the victim will
open the session in (``http://127.0.0.1:PORT/logout`` and other spellings of it).  The victim then
looks at it through each real view: a real Jupyter server's stream (the HTML the session page
inserts), the live panel and the static transcript of a re-run cell, and ``nbagent export`` to
Markdown and to a notebook.  Held: no view carries the image (a note says why) and no link to the
server is live.  The session page in Chromium is tested in tests/browser/test_views_attacks.py.
"""

from __future__ import annotations

import base64
import json
import os
import re
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from nbagent.record import events as ev
from reliability.hostile import ROOT, victim

from . import Context, Finding

NOTEBOOK = "work/analysis.ipynb"
SESSION = "bomb"
SIDE = 20_000  # pixels a side of the bomb
NOTE = "[image not shown: it is 20,000x20,000 pixels"
OTHER_LINK = "https://example.org/docs"  # an ordinary link, which stays a link


def bomb_png(width: int = SIDE, height: int = SIDE) -> bytes:
    """A valid 1-bit PNG of black pixels: a few tens of KB declaring ``width`` x ``height`` pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    packer, rows, block = zlib.compressobj(9), ((width + 7) // 8 + 1) * height, bytes(1 << 22)
    pieces = [packer.compress(block[: min(len(block), rows - at)]) for at in range(0, rows, len(block))]
    pixels = b"".join(pieces) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def server_links(port: int) -> list[str]:
    """Links into the Jupyter server on ``port``: its own origin, and other spellings a browser reads as the same host."""
    return [
        f"http://127.0.0.1:{port}/logout",
        f"http://localhost:{port}/logout",
        f"http://127.1:{port}/logout",
        f"http://[::1]:{port}/logout",
        f"HTTP:\\\\2130706433:{port}\\logout",
        "http:/logout",  # relative to the page on a page served over http
    ]


def foreign_events(port: int, image: str) -> list[tuple[str, dict[str, Any]]]:
    """The attacker's session: a request, a call whose result is the image, and replies linking into the server."""
    links = server_links(port)
    reply = "\n".join(f"[step {n}]({url})" for n, url in enumerate(links)) + f"\n<{links[0]}>\n\nAnd [the docs]({OTHER_LINK})."
    call = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "plot.png"}}
    image_block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": image}}
    usage = {"input_tokens": 10, "output_tokens": 5}
    return [
        (ev.USER_MSG, {"content": "show me the plot"}),
        (ev.MODEL_CALL, {"model": "claude-test", "attempt": 1}),
        (ev.ASSISTANT_MSG, {"message_id": "m1", "model": "claude-test", "stop_reason": "tool_use", "usage": usage, "content": [call]}),
        (ev.TOOL_STARTED, {"tool_use_id": "toolu_1", "name": "read_file"}),
        (ev.TOOL_RESULT, {"tool_use_id": "toolu_1", "content": [image_block, {"type": "text", "text": "plot.png"}]}),
        (ev.MODEL_CALL, {"model": "claude-test", "attempt": 1}),
        (
            ev.ASSISTANT_MSG,
            {
                "message_id": "m2",
                "model": "claude-test",
                "stop_reason": "end_turn",
                "usage": usage,
                "content": [{"type": "text", "text": reply}],
            },
        ),
    ]


def write_foreign(log: Path, events: list[tuple[str, dict[str, Any]]], attacker_data: Path) -> None:
    """The second user's process (tests/support/attacker_proc.py ``session``, its own NBAGENT_DATA_DIR) writes the log."""
    env = {**os.environ, "NBAGENT_DATA_DIR": str(attacker_data)}
    args = [sys.executable, "-m", "tests.support.attacker_proc", "session", str(log), json.dumps(events)]
    result = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"the attacker's session failed: {result.stderr[-3000:]}")


# What a view let through -------------------------------------------------------------------------------
class _Anchors(HTMLParser):
    """The targets of the live links and the sources of the images of an HTML document."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.images: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "a" and found.get("href"):
            self.hrefs.append(str(found["href"]))
        if tag == "img":
            self.images.append(str(found.get("src") or ""))


def html_problems(fragment: str, image: str, *, note: str = NOTE) -> tuple[list[str], list[str]]:
    """What HTML let through: (the bomb shown or no note, a live link into the server)."""
    anchors = _Anchors()
    anchors.feed(fragment)
    shown = [src[:40] for src in anchors.images if image[:200] in src]
    pixels = [f"the bomb is shown as <img src={shown[0]}...>"] if shown else []
    pixels += [] if note in fragment else [f"no note says the image is not shown ({note!r})"]
    return pixels, _live(anchors.hrefs)


def markdown_problems(markdown: str, image: str) -> tuple[list[str], list[str]]:
    """What Markdown let through, as CommonMark renders it."""
    rendered = MarkdownIt("commonmark").render(markdown)
    return html_problems(rendered, image, note="an image not exported: it is 20,000x20,000 pixels")


def _live(hrefs: list[str]) -> list[str]:
    into = [h for h in hrefs if re.search(r"logout", h, re.IGNORECASE)]
    problems = [f"a live link into the Jupyter server: {h}" for h in into]
    return problems + ([] if OTHER_LINK in hrefs else [f"the ordinary link {OTHER_LINK} is no longer a link"])


# The views ---------------------------------------------------------------------------------------------
def _stream_html(root: Path, home: Path, port: int) -> str:
    """The HTML a real Jupyter server's stream sends the session page for the whole session."""
    from tests.support.server_harness import NbServer

    server = NbServer(root, home, port=port)
    server.start()
    try:
        stream = server.stream(NOTEBOOK, SESSION)
        try:
            return "".join(str(r.get("html") or "") for r in stream.records(until=len(foreign_events(port, "")) + 1))
        finally:
            stream.close()
    finally:
        server.stop()


def _panel_html(events: list[ev.Event]) -> str:
    """The live panel's widgets and its static fallback after it was fed the session."""
    from nbagent.notebook.panel import Panel

    panel = Panel("foreign")
    for event in events:
        panel(event)
    shown = [str(child.value) for child in panel.items.children if hasattr(child, "value")]
    return "".join(shown) + panel.transcript_html()


def _static_html(events: list[ev.Event]) -> str:
    """The static transcript a re-run cell shows (no widgets)."""
    from nbagent.notebook.output import StaticPanel

    panel = StaticPanel("foreign")
    for event in events:
        panel(event)
    return str(panel.static_bundle()["text/html"])


def _export(log: Path, out: Path) -> str:
    """``nbagent export`` as the victim; the file written."""
    result = subprocess.run(
        [sys.executable, "-m", "nbagent", "export", str(log), "-o", str(out)], capture_output=True, text=True, timeout=120
    )
    if result.returncode != 0:
        raise RuntimeError(f"nbagent export failed: {result.stderr[-2000:]}")
    return out.read_text()


def _notebook_markdown(text: str) -> tuple[str, list[str]]:
    """An exported notebook's Markdown cells, and its image outputs' data."""
    notebook = json.loads(text)
    cells = notebook.get("cells", [])
    markdown = "\n\n".join(
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells if c["cell_type"] == "markdown"
    )
    outputs = [o for c in cells for o in c.get("outputs", [])]
    images = [str(data) for o in outputs for kind, data in o.get("data", {}).items() if kind.startswith("image/")]
    notes = "".join("".join(o.get("text", "")) for o in outputs)
    return markdown + ("\n\n" + notes if notes else ""), images


def attacks(ctx: Context) -> list[Finding]:
    """Defects 7 and 8: each view of the foreign session, judged for the bomb and for live links into the server."""
    from tests.browser.harness import free_port

    findings: list[Finding] = []
    image = base64.b64encode(bomb_png()).decode("ascii")
    size = f"a {SIDE:,}x{SIDE:,} PNG of {len(image) * 3 // 4 // 1024} KB"
    with victim(ctx.folder):
        root, port = ctx.folder / "root", free_port()
        (root / "work").mkdir(parents=True)
        (root / NOTEBOOK).write_text("{}")
        log = root / "work" / ".nbagent" / "analysis.ipynb" / f"{SESSION}.jsonl"
        write_foreign(log, foreign_events(port, image), ctx.folder / "attacker-data")
        from nbagent.record.log_reader import read_events

        events = list(read_events(log))
        views: dict[str, Callable[[], tuple[list[str], list[str]]]] = {
            "the server's stream (the session page's HTML)": lambda: html_problems(_stream_html(root, ctx.folder / "home", port), image),
            "the live panel": lambda: html_problems(_panel_html(events), image),
            "the static transcript of a re-run cell": lambda: html_problems(_static_html(events), image),
            "nbagent export to Markdown": lambda: markdown_problems(_export(log, ctx.folder / "out.md"), image),
            "nbagent export to a notebook": lambda: _notebook_problems(_export(log, ctx.folder / "out.ipynb"), image),
        }
        for view, judge in views.items():
            pixels, links = judge()
            findings.append(Finding(7, f"{size} in a foreign log's tool result, shown by {view}", "ran" if pixels else "inert", pixels))
            findings.append(
                Finding(8, f"links into the Jupyter server in a foreign reply, shown by {view}", "ran" if links else "inert", links)
            )
    return findings


def _notebook_problems(text: str, image: str) -> tuple[list[str], list[str]]:
    markdown, images = _notebook_markdown(text)
    pixels, links = markdown_problems(markdown, image)
    pixels += ["the bomb is an image output of the notebook"] if any(image[:200] in data for data in images) else []
    return pixels, links
