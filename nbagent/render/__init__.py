"""Events shown to people: one renderer per medium, each a table with one small function per event type.

- :mod:`.html`: safe HTML, for the live panel, its static transcript and the replay (model Markdown through :mod:`.safe_html`);
- :mod:`.text`: terminal text, for ``nbagent show`` and ``tail``, terminal IPython and the text/plain transcript;
- :mod:`.markdown`: Markdown that carries no raw HTML or script link, for exports;
- :mod:`.view`: the status line and what becomes of streamed text, for the panel and the replay;
- :mod:`.timeline`: a recorded session as the replay shows it;
- :mod:`.parts`: what they share (escaping, text of content, tool names, clipping, times).

The renderers' main functions are also reachable here (loaded when first used: the HTML one imports
a Markdown parser and a sanitizer that a command-line run does not need).

May import: ``agent`` and every floor below it (in practice ``state`` and ``record``); never IPython or the Jupyter server.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {"event_html": "html", "transcript_html": "html", "markdown_html": "safe_html", "transcript_text": "text", "transcript": "text"}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
