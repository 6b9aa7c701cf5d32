"""Tool-result images the Messages API would refuse, made acceptable: downscaled with Pillow, or named in a note.

The API takes base64 images of at most 5 MB whose sides are at most 8,000 pixels (2,000 when a
request holds many images); an image over those limits would make every later request fail.
"""

from __future__ import annotations

import base64
import binascii
import io
from typing import Any

MAX_BYTES = 5 * 1024 * 1024  # of the decoded image
MAX_SIDE = 2_000  # pixels; the API's limit when a request holds more than 20 images, and ample for a plot
FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "PNG", "image/webp": "PNG"}


def fit_image(block: dict[str, Any]) -> dict[str, Any]:
    """An image block the API accepts: the same block, a downscaled copy, or a text note if it cannot be read."""
    source = block.get("source") or {}
    if block.get("type") != "image" or source.get("type") != "base64":
        return block
    try:
        data = base64.b64decode(source.get("data", ""), validate=True)
    except (binascii.Error, ValueError):
        return _note("it is not valid base64")
    from PIL import Image, UnidentifiedImageError  # Pillow loads its plugins on first use: only for images

    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            if len(data) <= MAX_BYTES and max(width, height) <= MAX_SIDE:
                return block
            media = "image/jpeg" if source.get("media_type") == "image/jpeg" else "image/png"
            image.thumbnail((MAX_SIDE, MAX_SIDE))
            out = io.BytesIO()
            converted = image.convert("RGB") if media == "image/jpeg" else image
            converted.save(out, format=FORMATS[media], optimize=True)
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        return _note(f"it could not be read as an image ({type(exc).__name__})")
    if out.tell() > MAX_BYTES:
        return _note(f"it is {width}x{height} pixels and still over 5 MB when downscaled")
    encoded = base64.b64encode(out.getvalue()).decode()
    return {"type": "image", "source": {"type": "base64", "media_type": media, "data": encoded}}


def fit_images(content: Any) -> Any:
    """A tool result with each of its images made acceptable (see :func:`fit_image`)."""
    if not isinstance(content, list) or not any(isinstance(b, dict) and b.get("type") == "image" for b in content):
        return content
    return [fit_image(b) if isinstance(b, dict) else b for b in content]


def _note(why: str) -> dict[str, Any]:
    return {"type": "text", "text": f"[nbagent note: an image of this result was left out: {why}.]"}
