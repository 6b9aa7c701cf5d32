"""Which images from a log a view may show: bounded by pixels, read from the header without decoding.

A few kilobytes of PNG can declare 20,000 x 20,000 pixels, which a browser decodes to 1.6 GB.
Every view (the live panel, its static transcript, the replay, the server's page, exports) shows
an image only if its header names a PNG, JPEG, GIF or WebP image of at most :data:`MAX_SIDE`
pixels a side and :data:`MAX_PIXELS` in all; otherwise a note says why (the log keeps the image).
The format is sniffed from the bytes, as a browser does, not taken from the declared media type.
"""

from __future__ import annotations

import io
from typing import Any

MAX_SIDE = 8_000  # pixels: the Messages API's own limit for one image
MAX_PIXELS = 16_000_000  # in all: about 64 MB once a browser decodes it to RGBA


def header_size(data: bytes) -> tuple[str, int, int] | None:
    """The format and the width and height an image's header declares (nothing decoded); None if not a PNG, JPEG, GIF or WebP."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp_size(data)
    opener = _opener(data)
    if opener is None:
        return None
    try:
        with opener(io.BytesIO(data)) as image:  # a plugin's own class reads the header only, with no bomb warning
            width, height = image.size
    except Exception:  # noqa: BLE001 - hostile bytes: whatever Pillow raises, the image is not shown
        return None
    return image.format or "?", width, height


def refusal(data: bytes) -> str | None:
    """Why a view must not show this image (not a readable image, or too many pixels), or None if it may."""
    size = header_size(data)
    if size is None:
        return "it is not a readable PNG, JPEG, GIF or WebP image"
    _, width, height = size
    if width <= 0 or height <= 0:
        return "it declares no pixels"
    if max(width, height) > MAX_SIDE or width * height > MAX_PIXELS:
        return (
            f"it is {width:,}x{height:,} pixels, over what a view shows "
            f"({MAX_SIDE:,} pixels a side, {MAX_PIXELS // 1_000_000} megapixels in all; the log keeps it)"
        )
    return None


def _opener(data: bytes) -> Any:
    """Pillow's image class for the format the bytes start with (PNG, JPEG, GIF), or None."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        from PIL.PngImagePlugin import PngImageFile

        return PngImageFile
    if data[:3] == b"\xff\xd8\xff":
        from PIL.JpegImagePlugin import JpegImageFile

        return JpegImageFile
    if data[:6] in (b"GIF87a", b"GIF89a"):
        from PIL.GifImagePlugin import GifImageFile

        return GifImageFile
    return None


def _webp_size(data: bytes) -> tuple[str, int, int] | None:
    """A WebP image's canvas size from its first chunk (Pillow's WebP decoder allocates the canvas when it opens the file)."""
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        return "WEBP", 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return "WEBP", 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        return "WEBP", int.from_bytes(data[26:28], "little") & 0x3FFF, int.from_bytes(data[28:30], "little") & 0x3FFF
    return None
