"""Which images from a log a view may show: bounded by pixels, read from the header without decoding.

A few kilobytes of PNG can declare 20,000 x 20,000 pixels, which a browser decodes to 1.6 GB.
Every view (the live panel, its static transcript, the replay, the server's page, exports) shows
an image only if its header names a PNG, JPEG, GIF or WebP image of at most :data:`MAX_SIDE`
pixels a side and :data:`MAX_PIXELS` in all; otherwise a note says why (the log keeps the image).
The format is sniffed from the bytes, as a browser does, not taken from the declared media type.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from ..state.image_limits import IMAGE_TYPES, header_size

MAX_SIDE = 8_000  # pixels: the Messages API's own limit for one image
MAX_PIXELS = 16_000_000  # in all: about 64 MB once a browser decodes it to RGBA


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


def checked_image(block: Mapping[str, Any]) -> tuple[str, str] | str:
    """An image block's media type and base64 data (re-encoded from checked base64) if a view may show it, else why not.

    Shown: base64 PNG, JPEG, GIF or WebP whose header declares a size within the pixel limits (:func:`refusal`).
    """
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") != "base64" or source.get("media_type") not in IMAGE_TYPES:
        return "only base64 PNG, JPEG, GIF or WebP images are displayed"
    data = source.get("data")
    try:
        raw = base64.b64decode(data if isinstance(data, str) else "?", validate=True)
    except (binascii.Error, ValueError):
        return "invalid base64 data"
    why = refusal(raw)
    # re-encoded, so nothing but base64 can follow "data:...;base64," wherever it is put
    return why if why is not None else (str(source["media_type"]), base64.b64encode(raw).decode("ascii"))


def image_data(block: Mapping[str, Any]) -> tuple[str, str] | None:
    """An image block's media type and base64 data if a view may show it (see :func:`checked_image`), else None."""
    shown = checked_image(block)
    return shown if isinstance(shown, tuple) else None
