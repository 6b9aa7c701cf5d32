"""What ``nbagent trust`` shows before it asks: every text and call of the history it vouches for, compaction summaries included."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from ..record import redact

INDENT = "      "


def write_history(messages: Sequence[dict[str, Any]], out: TextIO) -> None:
    """Every message continuing the session sends to the model, each block in full (secret-shaped values redacted)."""
    for number, message in enumerate(messages, start=1):
        out.write(f"    [{number}] {message.get('role', '?')}\n")
        for piece in pieces(message.get("content")):
            out.write(textwrap.indent(piece, INDENT, lambda line: True).rstrip("\n") + "\n")


def pieces(content: Any) -> Iterator[str]:
    """The texts of one message's content, one per block, each said for what it is."""
    if isinstance(content, str):
        yield redact.text(content)
        return
    for block in content if isinstance(content, list) else [content]:
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(block, dict):
            yield redact.text(json.dumps(block, ensure_ascii=False, default=str))
        elif kind == "text":
            yield redact.text(str(block.get("text", "")))
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input"), ensure_ascii=False, indent=2, sort_keys=True, default=str)
            yield f"(a call of {block.get('name')} ({block.get('id')}), with)\n" + redact.text(arguments)
        elif kind == "tool_result":
            yield f"(the result of {block.get('tool_use_id')}{', an error' if block.get('is_error') else ''})"
            yield from pieces(block.get("content", ""))
        elif kind in ("thinking", "compaction"):
            yield f"({kind})\n" + redact.block_text(block)
        elif kind == "redacted_thinking":
            yield "(redacted thinking: encrypted, only the API reads it)"
        elif kind == "image":
            data = (block.get("source") or {}).get("data") if isinstance(block.get("source"), dict) else None
            yield f"(an image, {len(data or '')} characters of base64)"
        else:
            shown = {k: v for k, v in block.items() if k not in ("data", "signature")}
            yield f"({kind})\n" + redact.text(json.dumps(shown, ensure_ascii=False, default=str))
