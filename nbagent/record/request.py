"""The user's request in a ``user_msg``, as they wrote it: the one rule the kernel's restart matching and the server's listing share."""

from __future__ import annotations

from .events import Event


def request_text(event: Event) -> str:
    """The request of a ``user_msg`` without any note nbagent prepended: its ``meta.request``, else its text."""
    meta = event.get("meta") or {}
    if isinstance(meta, dict) and isinstance(meta.get("request"), str):
        return str(meta["request"])
    content = event.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))
