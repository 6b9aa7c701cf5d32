"""The kernel's side of a reopened page: what each live ``%agent`` run showed, written into the cells a page lacks.

A page asks with ``catch_up`` (its ``%agent`` cells, their sources and the markers their outputs carry); the kernel
answers ``transcripts``: for each cell whose finished run it does not show, the outputs the cell would show (the
static transcript rebuilt from the log as a re-rendered turn is, and the "Insert as cells" button), and whether this
page writes them (one writer a notebook path) or only shows them. No model call, no tool run. The rules are
:mod:`.reopen`'s; the messages are in docs/cells.md.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from ..agent.session import Session
from ..record import events as ev
from ..render.view import FINAL_STATUSES
from ..state.turn_work import turns
from . import insert
from .cells_protocol import MAX_HTML, VERSION, Message
from .interpolate import panel_title
from .kernel import TurnIndex
from .output import StaticPanel
from .reopen import (
    RUNNER_WAIT,
    CellRun,
    Marker,
    Offer,
    PageCell,
    document,
    metadata,
    plan,
    run_of,
    runner_shows,
    runner_unknown,
    unseen,
    writes,
)

KEEP_RUNS = 200  # finished runs remembered for %agent_sessions' "unseen" lines
REOPENED = "written into this cell when a page of the notebook asked for it (the turn ended while no page showed it)"
Render = Callable[[CellRun], "list[Message] | None"]
Later = Callable[[float, Callable[[], None]], bool]  # run this after that many seconds; False where nothing can


def _on_kernel_loop(delay: float, then: Callable[[], None]) -> bool:
    """Run ``then`` on the kernel's event loop after ``delay`` seconds; False outside a kernel."""
    from .pump import current_kernel

    kernel = current_kernel()
    loop = getattr(kernel, "io_loop", None)
    if loop is None:
        return False
    loop.call_later(delay, then)
    return True


class Reopen:
    """The finished runs of this kernel by cell id, the markers pages acknowledged, and the writer offered each document."""

    def __init__(self, render: Render, clock: Callable[[], float] = time.monotonic) -> None:
        self.render = render
        self.clock = clock
        self.runs: dict[str, CellRun] = {}  # cell id -> its last finished live run
        self.recent: list[CellRun] = []  # every finished run, oldest first (cells without an id too)
        self.acknowledged: set[Marker] = set()  # shown on a page (its marker in the page's cells) or written
        self.offers: dict[str, Offer] = {}  # document -> the writer offered it
        self.shown: dict[str, set[Marker]] = {}  # a page's client id -> the runs its cells show (its catch_up's markers)
        self.later: Later = _on_kernel_loop
        self._lock = threading.Lock()

    def ran(self, run: CellRun | None) -> None:
        """A live run ended (the cell's panel finished): remember what it showed."""
        if run is None:
            return
        with self._lock:
            if run.cell_id:
                self.runs[run.cell_id] = run
            self.recent.append(run)
            del self.recent[:-KEEP_RUNS]

    # The comm ------------------------------------------------------------------------------------------
    def received(self, data: Message, page: Any, bridge: Any, *, waited: bool = False) -> None:
        """A page's ``catch_up`` or ``transcripts_written`` (checked by the bridge): answer or note it."""
        if data["type"] == "transcripts_written":
            with self._lock:
                for key, offer in list(self.offers.items()):
                    if offer.page == page.key:
                        self.offers[key] = Offer(offer.page, offer.sent, answered=True)
                self.acknowledged.update(self.runs[i].marker for i in data["written"] if i in self.runs)
            return
        cells = [PageCell(c["id"], c["source"], frozenset((m["session"], m["from"], m["to"]) for m in c["markers"])) for c in data["cells"]]
        with self._lock:
            for cell in cells:
                self.acknowledged.update(cell.markers)
                self.shown.setdefault(page.client, set()).update(cell.markers)
            fills = plan(self.runs, cells)
            pages = list(bridge.pages.values())
            open_clients = {p.client for p in pages if p.client}
            if not waited and not page.collaborative and runner_unknown(fills, page.client, open_clients, self.shown):
                if self.later(RUNNER_WAIT, lambda: self.received(data, page, bridge, waited=True)):
                    return
            doc = document(page.key, page.path)
            write = writes(
                page.key,
                ran_it=any(run.client and run.client == page.client for run in fills),
                shared=page.collaborative,
                offer=self.offers.get(doc),
                open_pages=frozenset(p.key for p in pages),
                now=self.clock(),
                runner_open=runner_shows(fills, page.client, open_clients, self.shown),
            )
            if fills and write:
                self.offers[doc] = Offer(page.key, self.clock())
        found = []
        for run in fills:
            outputs = self.render(run)
            if outputs and len(json.dumps(outputs)) <= MAX_HTML:
                found.append({"id": run.cell_id, "session": run.session, "from": run.first, "to": run.last, "outputs": outputs})
        bridge.send({"v": VERSION, "type": "transcripts", "id": data["id"], "write": write, "cells": found}, page)

    # Without the extension -------------------------------------------------------------------------------
    def unseen(self, client: str, session: str | None = None) -> list[CellRun]:
        """The finished runs (of ``session``, or all) that may have gone unseen by the client ``client`` (see :func:`.reopen.unseen`)."""
        with self._lock:
            done, seen = list(self.recent), set(self.acknowledged)
        return [run for run in done if (session is None or run.session == session) and unseen(run, client, seen)]


def unseen_line(run: CellRun) -> str:
    """What ``%agent_sessions`` and the next panel say of a run that may have gone unseen."""
    request = run.request if len(run.request) <= 60 else run.request[:57] + "..."
    where = f"cell {run.cell_id}" if run.cell_id else "a cell"
    return (
        f"a turn of {run.session} ({where}, {request!r}) ended ({run.status}) while no page showed it: "
        f"`%agent_replay {run.session}` shows it; running that cell again in this kernel would send its request to the model again"
    )


def live_run(view: Any, session: Session, request: str, cell_id: str | None, client: str) -> CellRun | None:
    """The run a live view showed, or None (a view that keeps no events, a cell without an id)."""
    name = getattr(view, "session_name", "") or session.path.stem
    status = getattr(view, "status", "done")
    return run_of(list(view.events), cell_id=cell_id or "", session=name, request=request, status=status, client=client)


def outputs(session: Session, run: CellRun, index: TurnIndex, *, button: bool) -> list[Message]:
    """The outputs the run's cell would show: its static transcript rebuilt from the log (marked), and its button."""
    index.update(session)
    view = StaticPanel(panel_title(run.request) or session.state.title or run.session)
    view.session_name = run.session
    view.begin(index.start(run.first))
    for event in session.events(since=run.first - 1):
        if event["seq"] > run.last:
            break
        view(event)
    if not view.events:
        return []
    view.status = run.status if run.status in FINAL_STATUSES else "done"
    view.recorded(REOPENED)
    found: list[Message] = [{"output_type": "display_data", "data": view.static_bundle(), "metadata": metadata(run.marker)}]
    requests = [e["seq"] for e in view.events if e.get("type") == ev.USER_MSG]
    if button and requests and session.trusted:
        work = next((t for t in turns(session.events()) if t.seq == requests[-1]), None)
        bundle = insert.button(work, run.session) if work is not None else None
        if bundle is not None:
            found.append({"output_type": "display_data", "data": bundle, "metadata": {}})
    return found


__all__ = ["Reopen", "live_run", "outputs", "unseen_line"]
