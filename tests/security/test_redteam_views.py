"""Issue 20, defects 7 and 8: images from a log are bounded by pixels, and no link into the Jupyter server is live.

The attacks are reliability/redteam/views.py's (the campaign runs the same functions): a second
user's process writes a foreign session holding a 20,000 x 20,000 PNG and links to the server,
which the victim sees through a real Jupyter server's stream, the live panel, the static transcript
and ``nbagent export``.  The session page in Chromium: tests/browser/test_views_attacks.py.  The
table tests below check the two rules (nbagent/render/image_view.py, nbagent/render/hosts.py).
"""

from __future__ import annotations

import base64
import io
import socket

import pytest
from PIL import Image

from nbagent.render import html as render
from nbagent.render import safe_html
from nbagent.render.hosts import local_link
from nbagent.render.image_view import MAX_PIXELS, MAX_SIDE, refusal
from nbagent.render.markdown import link_allowed, safe_markdown
from nbagent.state.image_limits import header_size
from reliability import redteam
from reliability.redteam import views as attacks


@pytest.mark.slow  # a Jupyter server, the attacker's process and two exports
def test_every_views_attack_held() -> None:
    with redteam.context(quick=True) as ctx:
        findings = attacks.attacks(ctx)
    assert {f.defect for f in findings} == {7, 8}
    failed = [f"#{f.defect} {f.attack}: {f.outcome}; {'; '.join(f.problems)}" for f in findings if not f.held]
    assert not failed, "\n".join(failed)


def encoded(width: int, height: int, fmt: str, **options: object) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 20, 30)).save(out, format=fmt, **options)
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP"])
def test_the_size_is_read_from_the_header_of_every_shown_format(fmt: str) -> None:
    assert header_size(encoded(321, 123, fmt))[1:] == (321, 123)  # type: ignore[index]
    if fmt == "WEBP":
        assert header_size(encoded(321, 123, fmt, lossless=True))[1:] == (321, 123)  # type: ignore[index]


def test_the_bomb_is_read_without_decoding_it() -> None:
    bomb = attacks.bomb_png()
    assert len(bomb) < 64 * 1024 and header_size(bomb) == ("PNG", 20_000, 20_000)


@pytest.mark.parametrize(
    ("width", "height", "shown"),
    [
        (640, 480, True),
        (MAX_SIDE, 2_000, True),  # 16 megapixels, at the side limit
        (MAX_SIDE + 1, 10, False),  # one side too long
        (10, MAX_SIDE + 1, False),
        (4_001, 4_000, False),  # sides within the limit, over the pixel cap
        (MAX_PIXELS // 4_000, 4_000, True),
    ],
)
def test_the_pixel_limits(width: int, height: int, shown: bool) -> None:
    assert (refusal(attacks.bomb_png(width, height)) is None) is shown


@pytest.mark.parametrize(
    "data",
    [b"", b"plain text", b"\x89PNG\r\n\x1a\n", b"BM" + bytes(60), b"RIFF\0\0\0\0WEBPVP8X", b"\xff\xd8\xff\xe0garbage"],
)
def test_what_is_not_a_readable_image_is_not_shown(data: bytes) -> None:
    assert refusal(data) == "it is not a readable PNG, JPEG, GIF or WebP image"


def test_a_view_shows_a_note_instead_of_the_bomb() -> None:
    block = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(attacks.bomb_png()).decode()},
    }
    html = render.tool_result_html("read_file", [block])
    assert "<img" not in html and "[image not shown: it is 20,000x20,000 pixels" in html


LOCAL = [
    "http://127.0.0.1:8888/logout",
    "HTTP://127.1/logout",
    "http://2130706433/logout",
    "http://0x7f.0.0.1/",
    "http://0177.0.0.1/",
    "http://[::1]:8888/logout",
    "http://[::ffff:127.0.0.1]/",
    "http://localhost./logout",
    "http://LocalHost:8888/",
    "http://jupyter.localhost/",
    "http://evil.example@127.0.0.1/logout",
    "http:\\\\127.0.0.1\\logout",
    "http:/logout",  # a browser resolves it against the page, on the page's own server
    "http:logout",
    " http://%31%32%37.0.0.1/",
    "http://\uff11\uff12\uff17.0.0.1/",  # full-width digits
    "http://127\u30020\u30020\u30021/",  # ideographic full stops
    "http://0.0.0.0:8888/",
    "http://0/",
    "http://\t127.0.0.1/",
    f"http://{socket.gethostname()}:8888/logout",
]
NOT_LOCAL = [
    "https://example.org/docs",
    "https://example.org/?next=http://127.0.0.1/",
    "http://user@127.0.0.1@example.org/",  # the host is after the last @
    "http://10.0.0.1/",
    "http://[fe80::1]/",
    "mailto:someone@example.org",
    "/relative/path",
]


@pytest.mark.parametrize("url", LOCAL)
def test_links_to_this_machine_are_refused(url: str) -> None:
    assert local_link(url) and not link_allowed(url)


@pytest.mark.parametrize("url", NOT_LOCAL)
def test_other_links_are_kept(url: str) -> None:
    assert not local_link(url) and link_allowed(url)


@pytest.mark.parametrize("url", LOCAL)
def test_the_panel_shows_a_link_to_this_machine_as_text_with_its_url(url: str) -> None:
    html = safe_html.markdown_html(f"see [this page]({url.strip()}) and [the docs](https://example.org/docs)")
    assert html.count("<a ") == 1 and 'href="https://example.org/docs"' in html  # the other link is kept
    assert "this page (" in html or "[this page](" in html  # the text, with its URL (or not a Markdown link at all)


@pytest.mark.parametrize(
    "text",
    [
        "<http://127.0.0.1:8888/logout>",
        "![x](http://127.0.0.1:8888/logout)",
        "[ref]\n\n[ref]: http://127.0.0.1:8888/logout",
        "[**b**](http://[::1]/logout)",
    ],
)
def test_every_markdown_form_of_a_link_to_this_machine_is_inert(text: str) -> None:
    html = safe_html.markdown_html(text)
    assert "href" not in html and "logout" in html
    assert "](http" not in safe_markdown(text).replace("\\]", "")
