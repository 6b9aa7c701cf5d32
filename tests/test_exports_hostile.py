"""Exports carry no live remote content and no script link: hostile Markdown in a log, exported by the real CLI.

Each payload goes into a request, a reply and a tool result; the session is exported to
.md and .ipynb with ``nbagent export`` (a subprocess), and the Markdown (the file, and every
notebook Markdown cell) is rendered by markdown-it with raw HTML on and NO URL filter, as a
careless renderer would.  No ``href``/``src`` may then carry a script, data or file URL
(judged after the browser's entity decoding, then %-decoding, without spaces and controls),
and no ``src`` may fetch anything: only nbagent's own inline base64 images stay images.

(A real-browser check is left out: neither Chromium nor Playwright is installed here.)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import nbformat
import pytest
from markdown_it import MarkdownIt

import nbagent
from nbagent import events as ev

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
BENIGN_LINK = "[the docs](https://example.org/docs)"

PAYLOADS = [
    # Remote images, every way CommonMark makes one.
    "![pixel](https://evil.example/pixel.png)",
    "![pixel](//evil.example/pixel.png)",
    '![pixel](HTTPS://evil.example/pixel.png "title")',
    "![pixel][r]\n\n[r]: https://evil.example/ref.png",
    "![r][]\n\n[r]: https://evil.example/collapsed.png",
    "![r]\n\n[r]: https://evil.example/shortcut.png",
    "![pixel][r]\n\n[r]:\n  https://evil.example/next-line.png",
    "> ![quoted](https://evil.example/quote.png)",
    "- ![listed](https://evil.example/list.png)",
    "# ![heading](https://evil.example/heading.png)",
    "[![nested](https://evil.example/nested.png)](https://example.org/)",
    '<img src="https://evil.example/tag.png">',
    "<https://evil.example/autolink>",
    "![svg](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSkvPg==)",
    # Script, data and file links, however spelled.
    "[a](javascript:alert(1))",
    "[a](JaVaScRiPt:alert(1))",
    "[a](javascript\\:alert(1))",
    "[a](javascript&#58;alert(1))",
    "[a](javascript&#x3A;alert(1))",
    "[a](javascript&colon;alert(1))",
    "[a](jav&#x09;ascript:alert(1))",
    "[a](&#106;avascript:alert(1))",
    "[a](java%73cript:alert(1))",
    "[a](javascript%3Aalert(1))",
    "[a](%6Aavascript:alert(1))",
    "[a](\\javascript:alert(1))",
    "[a](\x01javascript:alert(1))",
    "[a](<javascript:alert(1)>)",
    '[a](javascript\\:alert(1) "title")',
    "[a](\njavascript\\:alert(1))",
    "[a](vbscript\\:msgbox(1))",
    "[a](data\\:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[a](data:text/html,%3Cscript%3Ealert(1)%3C/script%3E)",
    "[a](DATA:image/svg+xml,%3Csvg%20onload=alert(1)%3E)",
    "[a](file:///etc/passwd)",
    "[a](FILE\\:///C:/Windows/win.ini)",
    "[a](blob:https://evil.example/uuid)",
    "[a][r]\n\n[r]: javascript\\:alert(1)",
    "[r]\n\n[r]: vbscript\\:msgbox(1)",
    '[r][]\n\n[r]: data\\:text/html,x "t"',
    "[a][r]\n\n[r]: <javascript:alert(1)>",
    "[a][R]\n\n  [r]: file\\:///etc/passwd",
    "> [a](javascript\\:alert(1))\n> more",
    "1. item\n\n   [a](javascript\\:alert(1))",
    "*[a](javascript\\:alert(1))* and **[b](file:///x)**",
    "[a \\](b)](javascript\\:alert(1))",
    "\\\\[a](javascript\\:alert(1))",
    "[a](javascript\\:alert(1))" * 3,
]
DANGEROUS = ("javascript:", "vbscript:", "data:", "file:", "blob:")
SAFE_IMAGE = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[a-z0-9+/=]*")


class Attrs(HTMLParser):
    """Every start tag with its attributes, entity-decoded as a browser decodes them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {k: v or "" for k, v in attrs}))


def careless_html(markdown: str) -> str:
    """Markdown rendered with raw HTML allowed and no URL filter at all."""
    md = MarkdownIt("commonmark", {"html": True})
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    return md.render(markdown)


def cleaned(url: str) -> str:
    """The URL %-decoded (repeatedly), without whitespace or controls, lowercased: the most a lenient reader makes of it."""
    for _ in range(4):
        url = unquote(url)
    return "".join(c for c in url if c.isprintable() and not c.isspace()).lower()


def assert_no_live_remote_or_script(markdown: str) -> tuple[list[str], list[str]]:
    """Render carelessly and check every URL; returns the hrefs and srcs found."""
    html = careless_html(markdown)
    parser = Attrs()
    parser.feed(html)
    parser.close()
    hrefs, srcs = [], []
    for tag, attrs in parser.found:
        for name, value in attrs.items():
            if name in ("src", "srcset", "poster", "background", "data"):
                url = cleaned(value)
                srcs.append(url)
                assert SAFE_IMAGE.fullmatch(url), f"<{tag} {name}={value!r}> loads something: {html}"
            elif name in ("href", "xlink:href", "action", "formaction"):
                url = cleaned(value)
                hrefs.append(url)
                assert not url.startswith(DANGEROUS), f"<{tag} {name}={value!r}>: {html}"
    return hrefs, srcs


def hostile_log(path: Path, payload: str) -> None:
    """The payload in a request, a reply and a tool result, beside a good link and a tool image nbagent embeds."""
    with nbagent.Session.open(path, fsync="never") as session:
        session.append(ev.USER_MSG, content=f"{payload}\n\nsee {BENIGN_LINK}")
        session.append(
            ev.ASSISTANT_MSG,
            message_id="msg_1",
            model="claude-test",
            stop_reason="tool_use",
            usage={},
            content=[
                {"type": "text", "text": payload},
                {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": payload}},
                {"type": "tool_use", "id": "t2", "name": "python", "input": {"code": "plot()"}},
            ],
        )
        session.append(ev.TOOL_RESULT, tool_use_id="t1", content=[{"type": "text", "text": payload}])
        session.append(
            ev.TOOL_RESULT,
            tool_use_id="t2",
            content=[
                {"type": "text", "text": payload},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            ],
        )
        session.append(ev.USER_MSG, content=payload)


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


@pytest.mark.parametrize("payload", PAYLOADS)
def test_exports_load_nothing_remote_and_link_to_no_script(tmp_path: Path, payload: str) -> None:
    log = tmp_path / "s.jsonl"
    hostile_log(log, payload)
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
    with nbagent.Session.open(log, fsync="never") as session:
        session.append(ev.USER_MSG, content="[img]: https://evil.example/cross.png")
        session.append(
            ev.ASSISTANT_MSG,
            message_id="m",
            model="claude-test",
            stop_reason="end_turn",
            usage={},
            content=[{"type": "text", "text": "![seen][img]"}],
        )
        session.append(ev.USER_MSG, content="[late]: data:text/html,x")
        session.append(
            ev.ASSISTANT_MSG,
            message_id="n",
            model="claude-test",
            stop_reason="end_turn",
            usage={},
            content=[{"type": "text", "text": "[click][late]"}],
        )
    export(log, tmp_path / "s.md")
    _hrefs, srcs = assert_no_live_remote_or_script((tmp_path / "s.md").read_text(encoding="utf-8"))
    assert not srcs
