"""The fake Messages API's image and request-size limits, with the real API's wording (used by fake_context and fake_anthropic).

- https://platform.claude.com/docs/en/build-with-claude/vision ("Basics and limits"): at most 100 images in a
  request on models with a 200k window (600 on others; this fake takes the stricter), each at most 8000x8000
  pixels, 2000x2000 when the request holds more than 20 images.
- The 5 MB per image is counted on the base64 string: the API's 400 for a 4 MB file reads "image exceeds 5 MB
  maximum: 5577016 bytes > 5242880 bytes" (github.com/anthropics/claude-code/issues/12167). The 400 wordings
  below are the API's as users report them (claude-code issues 4778, 9375, 12167, 19822).
- https://platform.claude.com/docs/en/api/errors ("Request size limits"): a Messages request is at most 32 MB,
  else 413 ``request_too_large`` "Request exceeds the maximum allowed number of bytes" (10^6 bytes to a MB
  here, the stricter reading).
Only an image's header is decoded for its size (Pillow's ``Image.open(...).size``).
"""

from __future__ import annotations

import base64
import binascii
import io
from collections.abc import Iterator
from typing import Any

from PIL import Image, UnidentifiedImageError

MAX_IMAGES = 100
MAX_BASE64 = 5 * 1024 * 1024
MAX_SIDE = 8_000
MANY_IMAGES = 20  # more than this many images in a request: MANY_SIDE a side
MANY_SIDE = 2_000
MAX_REQUEST_BYTES = 32_000_000
TOO_LARGE = "Request exceeds the maximum allowed number of bytes"
IMAGE_TOKENS = 1_600  # vision docs, "Evaluate image size": an image the API scales to its native size takes about 1,600 tokens


def in_content(value: Any) -> tuple[int, int]:
    """The image blocks in messages or content (tool results' included) and the characters of their base64 data."""
    if isinstance(value, dict):
        source = value.get("source")
        if value.get("type") == "image" and isinstance(source, dict):
            return 1, len(source.get("data") or "")
        value = value.get("content")
    if not isinstance(value, list):
        return 0, 0
    found = [in_content(item) for item in value if isinstance(item, (dict, list))]
    return sum(f[0] for f in found), sum(f[1] for f in found)


def images(body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each image block of the request's messages (tool results' included) with its path as the API names it."""
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        for j, block in enumerate(content if isinstance(content, list) else []):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "image":
                yield f"messages.{i}.content.{j}", block
            elif block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                for k, inner in enumerate(block["content"]):
                    if isinstance(inner, dict) and inner.get("type") == "image":
                        yield f"messages.{i}.content.{j}.tool_result.content.{k}", inner


def size(data: str) -> tuple[int, int] | None:
    """The width and height an image's header declares (None: not base64 or not an image)."""
    try:
        with Image.open(io.BytesIO(base64.b64decode(data, validate=True))) as image:
            return image.size
    except (binascii.Error, ValueError, UnidentifiedImageError, OSError, Image.DecompressionBombError):
        return None


def problem(body: dict[str, Any]) -> str | None:
    """The API's 400 message for the request's images (count, base64 length, pixels), else None."""
    found = list(images(body))
    if len(found) > MAX_IMAGES:
        return f"Too much media: 0 document pages + {len(found)} images > {MAX_IMAGES}"
    side, many = (MANY_SIDE, " for many-image requests") if len(found) > MANY_IMAGES else (MAX_SIDE, "")
    for path, block in found:
        source = block.get("source") or {}
        data = source.get("data")
        if source.get("type") != "base64" or not isinstance(data, str):
            continue
        if len(data) > MAX_BASE64:
            return f"{path}.image.source.base64: image exceeds 5 MB maximum: {len(data)} bytes > {MAX_BASE64} bytes"
        dimensions = size(data)
        if dimensions is not None and max(dimensions) > side:
            return f"{path}.image.source.base64.data: At least one of the image dimensions exceed max allowed size{many}: {side} pixels"
    return None
