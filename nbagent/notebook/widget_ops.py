"""Changing ipywidgets as little as possible: a value set only when it differs, a tree of widgets closed (the panel's and the replay's)."""

from __future__ import annotations

import ipywidgets as widgets


def set_value(widget: widgets.HTML, value: str) -> int:
    """Set an HTML widget's value if it differs; the widget updates made (0 or 1), for a view's count."""
    if widget.value == value:
        return 0
    widget.value = value
    return 1


def close_all(root: widgets.Widget) -> None:
    """Close a widget, its children and their layout and style models (each has its own)."""
    pending = [root]
    while pending:
        widget = pending.pop()
        pending.extend(getattr(widget, "children", ()))
        for part in (getattr(widget, "layout", None), getattr(widget, "style", None), widget):
            if isinstance(part, widgets.Widget):
                part.close()
