"""The Messages API's limits on images, and the size an image's header declares: pure rules the fold checks.

The API refuses, with a 400 that every later request of the session would repeat, an image whose base64
string is over 5 MB (the string, not the decoded bytes: a 3.75 to 5 MB file passes a check on bytes and
is refused), one over 8,000 pixels a side, or over 2,000 when the request holds more than 20 images.
Images are always held to 2,000 pixels, the many-image limit, so an image stays valid however many others
later requests carry: the limit depends on a count that changes as the session goes on, and the model
scales anything over 1,568 pixels down itself (vision docs, "Evaluate image size"), so the cap loses it
nothing.  Tools' images are made to fit before they are logged (nbagent/tools/image_fit.py); :func:`sendable`
is the fold's second line, for results logged by earlier versions.
"""

from __future__ import annotations

import base64
import binascii
import io
from typing import Any

# The media types of the images the API takes, the notebook's preferred output first (python_tool picks the first a display has).
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
# https://platform.claude.com/docs/en/build-with-claude/vision ("Basics and limits"): 8000x8000 px, 2000x2000 px
# with more than 20 images. The 5 MB is checked on the base64 string: the API's 400 reads "image exceeds 5 MB
# maximum: 5577016 bytes > 5242880 bytes" for a 4 MB file (github.com/anthropics/claude-code/issues/12167).
MAX_BASE64 = 5 * 1024 * 1024  # characters of one image's base64 data
MAX_SIDE = 2_000  # pixels a side, always (see the module docstring)
HEADER = 65_536  # base64 characters the fold decodes to read an image's declared size


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


# Headers -------------------------------------------------------------------------------------------------
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
    except Exception:  # noqa: BLE001 - hostile bytes: whatever Pillow raises, no size is known
        return None
    return image.format or "?", width, height


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
