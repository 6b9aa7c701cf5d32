"""The replay's list of search matches: a row per match, its text in context with the match marked, and a button to go there.

The rows are made once and refilled for each search (typing searches as it goes: no widgets are made per keystroke).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import ipywidgets as widgets

from ..render.matches import Found

ROWS = 20  # matches listed at once; "Next match" steps through all of them


class MatchList:
    """Up to ROWS matches, each a "Show" button (moves the cursor there) beside its snippet."""

    def __init__(self, choose: Callable[[int], None], rows: int = ROWS) -> None:
        self.events: list[int] = []  # the event each listed row stands for
        self.buttons = [
            widgets.Button(description="Show", tooltip="move the cursor to this match", layout=widgets.Layout(width="auto", flex="none"))
            for _ in range(rows)
        ]
        self.snippets = [widgets.HTML(layout=widgets.Layout(flex="1 1 auto")) for _ in range(rows)]
        self.rows = [
            widgets.HBox([button, snippet], layout=widgets.Layout(display="none", align_items="center"))
            for button, snippet in zip(self.buttons, self.snippets)
        ]
        for row in self.rows:
            row.add_class("nbagent-match")
        self.widget = widgets.VBox(self.rows, layout=widgets.Layout(display="none", max_height="260px", overflow="auto"))
        for number, button in enumerate(self.buttons):
            button.on_click(lambda _, number=number: choose(self.events[number]))

    def show(self, found: Sequence[Found], html_of: Callable[[Found], str], *, visible: bool) -> None:
        """List the first ROWS of ``found`` (each as ``html_of`` renders it); hide the list unless ``visible``."""
        listed = list(found[: len(self.rows)])
        self.events = [f.index for f in listed]
        for number, row in enumerate(self.rows):
            if number < len(listed):
                match = listed[number]
                self.buttons[number].tooltip = f"move the cursor to this match (event {match.index + 1})"
                self.snippets[number].value = html_of(match)
                row.layout.display = None
            else:
                row.layout.display = "none"
        self.widget.layout.display = None if visible and listed else "none"
