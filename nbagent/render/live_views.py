"""What a saved notebook keeps of an nbagent view that was live when it was saved.

A live view is an output holding a widget reference, marked ``{"nbagent": {"live": true}}`` in its
metadata, beside a static sibling output (the readable copy).  Saved as it is, the reference names
a widget model that is gone once the kernel is: JupyterLab and Notebook 7 then log "widget model
not found".  Saved with an empty model id, the widget manager hides the output without looking the
model up, and the static sibling is what the reader sees.  The page in the browser keeps its live
view: only the file changes.
"""

from __future__ import annotations

from typing import Any

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
LIVE = {"nbagent": {"live": True}}  # the metadata of a live view's output


def is_live_view(output: dict[str, Any]) -> bool:
    """Whether an output is an nbagent live view (a widget reference nbagent marked)."""
    marker = (output.get("metadata") or {}).get("nbagent")
    return isinstance(marker, dict) and marker.get("live") is True and WIDGET_VIEW in (output.get("data") or {})


def unlink_live_views(notebook: dict[str, Any]) -> int:
    """Empty the model id of every nbagent live view in a notebook (nbformat 4 JSON, changed in place); how many."""
    count = 0
    for cell in notebook.get("cells") or []:
        for output in cell.get("outputs") or [] if isinstance(cell, dict) else []:
            if isinstance(output, dict) and is_live_view(output):
                view = output["data"][WIDGET_VIEW]
                if isinstance(view, dict) and view.get("model_id"):
                    output["data"][WIDGET_VIEW] = {**view, "model_id": ""}
                    count += 1
    return count


def pre_save(model: dict[str, Any], **_: Any) -> None:
    """Jupyter Server's pre-save hook: notebooks lose their live nbagent widget references."""
    if model.get("type") == "notebook" and isinstance(model.get("content"), dict):
        unlink_live_views(model["content"])
