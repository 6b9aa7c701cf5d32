"""Images in tool results held to the Messages API's limits (nbagent/state/image_limits.py): downscaled with Pillow, or named in a note.

:func:`fit_images` runs at the tool boundary, before the result is logged: each image goes in as it is,
downscaled to at most :data:`~nbagent.state.image_limits.MAX_SIDE` pixels a side and
:data:`~nbagent.state.image_limits.MAX_BASE64` characters of base64, or (when it cannot be made to fit) as a note.
"""

from __future__ import annotations

import base64
import binascii
import io
from typing import Any

from ..state.image_limits import IMAGE_TYPES, MAX_BASE64, MAX_SIDE, note

MEDIA = {kind.removeprefix("image/").upper(): kind for kind in IMAGE_TYPES}  # Pillow's format names: PNG, JPEG, GIF, WEBP
SAVE_AS = {"image/png": "PNG", "image/jpeg": "JPEG"}


def fit_image(block: dict[str, Any]) -> dict[str, Any]:
    """An image block the API accepts: the same block, a downscaled copy, or a text note when it cannot be made to fit."""
    source = block.get("source") or {}
    if block.get("type") != "image" or source.get("type") != "base64":
        return block
    encoded = source.get("data")
    try:
        data = base64.b64decode(encoded if isinstance(encoded, str) else "", validate=True)
    except (binascii.Error, ValueError):
        return note("it is not valid base64")
    from PIL import Image, UnidentifiedImageError  # Pillow loads its plugins on first use: only for images

    try:
        with Image.open(io.BytesIO(data)) as image:  # reads the header: nothing is decoded unless it must shrink
            width, height = image.size
            kind = MEDIA.get(image.format or "")
            if kind and isinstance(encoded, str) and len(encoded) <= MAX_BASE64 and max(width, height) <= MAX_SIDE:
                return block if kind == source.get("media_type") else dict(block, source=dict(source, media_type=kind))
            media = "image/jpeg" if kind == "image/jpeg" else "image/png"
            smaller = _downscaled(image, media)
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        return note(f"it could not be read as an image ({type(exc).__name__})")
    if smaller is None:
        return note(f"it is {width}x{height} pixels and still over the API's 5 MB of base64 when downscaled")
    return {"type": "image", "source": {"type": "base64", "media_type": media, "data": smaller}}


def fit_images(content: Any) -> Any:
    """A tool result with each of its images made acceptable (see :func:`fit_image`)."""
    if not isinstance(content, list) or not any(isinstance(b, dict) and b.get("type") == "image" for b in content):
        return content
    return [fit_image(b) if isinstance(b, dict) else b for b in content]


def _downscaled(image: Any, media: str) -> str | None:
    """The image at most MAX_SIDE a side and under MAX_BASE64 once encoded, as base64 (None if a few tries do not get there)."""
    image.thumbnail((MAX_SIDE, MAX_SIDE))  # in place: a JPEG is decoded at a reduced scale (Pillow's draft mode)
    for _ in range(4):
        out = io.BytesIO()
        (image.convert("RGB") if media == "image/jpeg" and image.mode != "RGB" else image).save(out, format=SAVE_AS[media], optimize=True)
        encoded = base64.b64encode(out.getvalue())
        if len(encoded) <= MAX_BASE64:
            return encoded.decode()
        shrink = min(0.9, (MAX_BASE64 * 0.9 / len(encoded)) ** 0.5)  # the encoded size goes about with the pixel count
        image = image.resize((max(1, int(image.width * shrink)), max(1, int(image.height * shrink))))
    return None
