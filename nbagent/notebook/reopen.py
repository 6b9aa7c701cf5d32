"""A reopened page, a second tab: which finished turns a page's cells still lack, who writes them, what went unseen.

Pure rules only (table tests in tests/notebook/test_reopen.py); the comm side is :mod:`.reopen_comm`, the messages
are in docs/cells.md ("A finished turn in its cell").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

from .restart import same_request
from .syntax import split_request

OFFER_SECONDS = 30.0  # a writer that has not said ``transcripts_written`` by then is replaced by the next page asking
RUNNER_WAIT = 1.5  # seconds the kernel waits for a run's own page to say it shows the run (``runner_unknown``)
Marker = tuple[str, int, int]  # (session, first seq, last seq) of what a cell's final output shows


@dataclass(frozen=True)
class CellRun:
    """What one live ``%agent`` run showed in its cell: the session, the request, its events' seqs, its end, who ran it."""

    cell_id: str
    session: str
    request: str
    first: int
    last: int
    status: str = "done"
    client: str = ""  # the client id (header ``session``) of the page that ran the cell ('' if not known)

    @property
    def marker(self) -> Marker:
        """What the cell's final output says it shows."""
        return (self.session, self.first, self.last)


@dataclass(frozen=True)
class PageCell:
    """A code cell of a page that names ``%agent``: its id, its source now, the markers its outputs carry."""

    id: str
    source: str
    markers: frozenset[Marker] = frozenset()


def metadata(marker: Marker) -> dict[str, Any]:
    """The display metadata of a final transcript: the marker a page reads back from the cell's outputs."""
    session, first, last = marker
    return {"nbagent": {"final": {"session": session, "from": first, "to": last}}}


def marker_of(value: Any) -> Marker | None:
    """The marker in one output's metadata (as :func:`metadata` writes it), or None."""
    final = ((value or {}).get("nbagent") or {}).get("final") if isinstance(value, dict) else None
    if not isinstance(final, dict):
        return None
    session, first, last = final.get("session"), final.get("from"), final.get("to")
    if not isinstance(session, str) or not all(isinstance(n, int) and not isinstance(n, bool) for n in (first, last)):
        return None
    return (session, int(first), int(last))  # type: ignore[arg-type]  # checked just above


def run_of(events: Sequence[Mapping[str, Any]], *, cell_id: str, session: str, request: str, status: str, client: str) -> CellRun | None:
    """The run a live view showed (its events' first and last seq), or None when it showed no event."""
    if not cell_id or not events:
        return None
    return CellRun(cell_id, session, request, int(events[0]["seq"]), int(events[-1]["seq"]), status, client)


_LINE = re.compile(r"^[ \t]*%agent(?:[ \t]+(?P<line>.*))?$")
_CELL = re.compile(r"^[ \t]*%%agent(?:[ \t]+(?P<line>.*))?$")


def requests(source: str) -> list[str]:
    """The requests a cell's source asks, as the magic parses them: a ``%%agent`` cell's one, else each ``%agent`` line's."""
    lines = source.splitlines()
    if not lines:
        return []
    cell = _CELL.match(lines[0])
    if cell:
        request = split_request(cell.group("line") or "")[1]
        return [(request + "\n" + "\n".join(lines[1:])).strip()]
    found = []
    for line in lines:
        match = _LINE.match(line)
        if match:
            found.append(split_request(match.group("line") or "")[1])
    return found


def plan(runs: Mapping[str, CellRun], cells: Iterable[PageCell]) -> list[CellRun]:
    """The finished runs to write into a page's cells: the cell id matches, its source still asks the run's request, and
    no output of the cell shows the run already (its marker)."""
    fills = []
    for cell in cells:
        run = runs.get(cell.id)
        if run is None or run.marker in cell.markers:
            continue
        if any(same_request(asked, run.request) for asked in requests(cell.source)):
            fills.append(run)
    return fills


def document(page: str, path: str) -> str:
    """Which document a page's writer is chosen for: its notebook path's (one writer a path), else the page's own."""
    return f"path:{path}" if path else f"page:{page}"


@dataclass(frozen=True)
class Offer:
    """``write: true`` sent to a page for a document: when, and whether the page answered ``transcripts_written``."""

    page: str
    sent: float
    answered: bool = False


def runner_unknown(fills: Iterable[CellRun], asker: str, open_clients: Set[str], shown: Mapping[str, Set[Marker]]) -> bool:
    """Whether a run's own page still has the comm open but has not yet said it shows the run: wait for its word.

    A tab closed without closing its comm looks open to the kernel; a live page says what it shows (``catch_up``)
    as soon as its cell ends, so the kernel waits a moment (:data:`RUNNER_WAIT`) before it picks a writer.
    """
    return any(
        run.client and run.client != asker and run.client in open_clients and run.marker not in shown.get(run.client, ()) for run in fills
    )


def runner_shows(fills: Iterable[CellRun], asker: str, open_clients: Set[str], shown: Mapping[str, Set[Marker]]) -> bool:
    """Whether the page that ran one of these cells is open and shows the run (then it is that notebook's writer)."""
    return any(
        run.client and run.client != asker and run.client in open_clients and run.marker in shown.get(run.client, ()) for run in fills
    )


def writes(
    asker: str, *, ran_it: bool, shared: bool, offer: Offer | None, open_pages: frozenset[str], now: float, runner_open: bool = False
) -> bool:
    """Whether the page ``asker`` writes the transcripts into its document, or only shows them read-only.

    One writer a notebook. The page that ran the cell writes into its own model (its panel already did), and while it
    is open and shows the run no other page writes (``runner_open``); otherwise the first page to ask, unless another page was offered it
    and is still open and either wrote it or has not let :data:`OFFER_SECONDS` pass. Collaborative pages of a path edit
    one ``shared`` document: for them only the offer decides (two writers would write twice).
    """
    if not shared and ran_it:
        return True
    if not shared and runner_open:
        return False
    if offer is None or offer.page == asker or offer.page not in open_pages:
        return True
    return not offer.answered and now - offer.sent >= OFFER_SECONDS


def unseen(run: CellRun, asking_client: str, acknowledged: Iterable[Marker]) -> bool:
    """Whether a finished run may have gone unseen by the page asking now.

    Without the extension the kernel cannot know what a page showed. The rule: a run counts as possibly unseen when it
    was run by another client than the one asking now (a page closed while it ran, a reopened page, another tab get a
    new client id) and no page with the extension acknowledged it (its marker seen in a page's cells, or written).
    """
    if not run.client or not asking_client or run.client == asking_client:
        return False
    return run.marker not in set(acknowledged)
