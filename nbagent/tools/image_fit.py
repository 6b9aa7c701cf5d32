"""Images in tool results held to the Messages API's limits: downscaled with Pillow, or named in a note.

The API refuses, with a 400 that every later request of the session would repeat, an image whose base64
string is over 5 MB (the string, not the decoded bytes: a 3.75 to 5 MB file passes a check on bytes and
is refused), one over 8,000 pixels a side, or over 2,000 when the request holds more than 20 images.
:func:`fit_images` runs at the tool boundary, before the result is logged: each image goes in as it is,
downscaled, or (when it cannot be made to fit) as a note.  Images are always held to 2,000 pixels, the
many-image limit, so an image stays valid however many others later requests carry: the limit depends
on a count that changes as the session goes on, and the model scales anything over 1,568 pixels down
itself (vision docs, "Evaluate image size"), so the cap loses it nothing.  :func:`sendable` is the
fold's second line for results logged by earlier versions.
"""

from __future__ import annotations

import base64
import binascii
import io
from typing import Any

from ..render.image_view import header_size

# https://platform.claude.com/docs/en/build-with-claude/vision ("Basics and limits"): 8000x8000 px, 2000x2000 px
# with more than 20 images. The 5 MB is checked on the base64 string: the API's 400 reads "image exceeds 5 MB
# maximum: 5577016 bytes > 5242880 bytes" for a 4 MB file (github.com/anthropics/claude-code/issues/12167).
MAX_BASE64 = 5 * 1024 * 1024  # characters of one image's base64 data
MAX_SIDE = 2_000  # pixels a side, always (see the module docstring)
HEADER = 65_536  # base64 characters the fold decodes to read an image's declared size
MEDIA = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
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


def refusal(block: dict[str, Any]) -> str | None:
    """Why the API would refuse this logged image (over 5 MB of base64, or a header declaring over MAX_SIDE), or None.

    Cheap enough for the fold: a length, and the header decoded from the first :data:`HEADER` characters;
    an image whose header is not in them is left to the API.
    """
    source = block.get("source") or {}
    data = source.get("data")
    if block.get("type") != "image" or source.get("type") != "base64" or not isinstance(data, str):
        return None
    if len(data) > MAX_BASE64:
        return f"its base64 data is {len(data):,} characters, over the API's {MAX_BASE64:,}"
    try:
        size = header_size(base64.b64decode(data[: HEADER - HEADER % 4]))
    except (binascii.Error, ValueError):
        return None
    if size is not None and max(size[1], size[2]) > MAX_SIDE:
        return f"it is {size[1]:,}x{size[2]:,} pixels, over the {MAX_SIDE:,} a side a request with many images takes"
    return None


def sendable(content: Any, seq: int) -> Any:
    """A logged tool result as a request may carry it: each image the API would refuse (see :func:`refusal`) named in a note."""
    if not isinstance(content, list):
        return content
    why = [refusal(b) if isinstance(b, dict) else None for b in content]
    if not any(why):
        return content
    return [note(f"{reason}; the session log keeps it (event {seq})") if reason else b for b, reason in zip(content, why, strict=True)]


def note(why: str) -> dict[str, Any]:
    """The text block that stands in for an image left out."""
    return {"type": "text", "text": f"[nbagent note: an image of this result was left out: {why}.]"}
