"""The comm target ``nbagent.cells``: the bridge to the browser extension that inserts, reads and edits cells (docs/cells.md).

Every message either way is a JSON object of a documented shape (:mod:`.cells_protocol` checks one, a pure rule
with table tests); anything else is answered with an ``error`` message, never an exception. A reply the kernel waits
for while a cell runs (``notebook``, ``edit_result``) is read through the comm pump (:mod:`.pump`), as approval
clicks are. Every notebook page on the kernel has its own comm (:class:`Page`): a question to the user waits on all
of them (``approval_waiting``), and any of them may answer it.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .cells_protocol import (  # re-exported: the shapes were defined here first (tests and docs name them here)
    CELL_TYPES,
    MAX_CELLS,
    MAX_HTML,
    MAX_ID,
    MAX_OUTPUTS_TEXT,
    MAX_PATH,
    MAX_SOURCE,
    MAX_TEXT,
    TARGET,
    VERSION,
    Message,
    approval_decided,
    approval_waiting,
    error,
    fits,
    message_id,
    problem,
)
from .pump import CommPump, current_kernel

__all__ = ["CELL_TYPES", "MAX_CELLS", "MAX_HTML", "MAX_ID", "MAX_OUTPUTS_TEXT", "MAX_PATH", "MAX_SOURCE", "MAX_TEXT"]
__all__ += ["TARGET", "VERSION", "Bridge", "Host", "Message", "Page", "error", "message_id", "problem"]
logger = logging.getLogger("nbagent")
KEEP_PAGES = 100  # pages remembered (a page closed without closing its comm is never told apart from a live one)
KEEP_DECIDED = 100  # questions whose decision is sent again to a late answer


class Fills(Protocol):
    """Who answers ``catch_up`` and ``transcripts_written`` (reopen_comm.Reopen): finished turns written into a page's cells."""

    def received(self, data: Message, page: Page, bridge: Bridge) -> None:
        """A checked ``catch_up`` or ``transcripts_written`` from ``page``."""


class Host(Protocol):
    """What the bridge asks of the magics: act on an insert request, record cells the browser inserted."""

    def insert_request(self, message: Message) -> None:
        """The user pressed "Insert as cells" (raise ValueError with a message for the browser to refuse it)."""

    def inserted(self, message: Message, sent: Message) -> None:
        """The browser's ``inserted`` reply to ``sent`` (our ``insert``)."""


@dataclass
class Page:
    """One notebook page's end of the comm: its comm, its client id (the ``session`` of its messages' headers), its hello."""

    comm: Any
    client: str
    opened: float
    extension: str = ""  # the browser extension's version, once it said hello
    hello: float = 0.0  # when it said hello (time.monotonic())
    key: str = ""  # its comm's id
    path: str = ""  # the notebook's path, as its hello said
    collaborative: bool = False  # its document is shared with the other collaborative pages of its path (RTC)


@dataclass(frozen=True)
class Question:
    """An approval waiting in a panel: how to answer it, its HTML, the cell running the turn."""

    answer: Callable[[bool], None]
    html: str
    cell_id: str | None
    edit: Message | None = None  # a proposed cell edit, shown at the cell it changes (cells_protocol.edit)


class Bridge:
    """The kernel's end of the ``nbagent.cells`` comm: one :class:`Page` per comm, the questions waiting, requests waiting."""

    def __init__(self, host: Host, version: str, *, running: Callable[[], str] | None = None) -> None:
        self.host = host
        self.version = version
        self.running = running or _running_client  # the client id of the page whose cell runs now ('' if none)
        self.pages: dict[str, Page] = {}  # comm id -> page, oldest first
        self.asking: dict[tuple[str, str], Question] = {}  # (session, tool_use_id) -> the question waiting
        self.decided: dict[tuple[str, str], Message] = {}  # the last questions' approval_decided, oldest first
        self._waiting: dict[str, list[Message]] = {}  # request id -> [reply] once it came
        self._sent_inserts: dict[str, Message] = {}  # insert id -> the insert, until its inserted reply
        self._reply_to: Page | None = None  # the page whose request is being handled (its answer goes there)
        self.fills: Fills | None = None  # what answers a page's catch_up (set by the magics)
        self.edit_of: Callable[[str], Message | None] = lambda tool_use_id: None  # a question's proposed edit (cell_edit.Proposals.view)
        self._lock = threading.RLock()

    @property
    def present(self) -> bool:
        """Whether a browser extension is connected and said hello (on some page)."""
        return any(page.extension for page in list(self.pages.values()))

    @property
    def extension(self) -> str:
        """The version the newest page's extension said in its hello ('' when none did)."""
        page = self._newest()
        return page.extension if page is not None else ""

    # The comm ------------------------------------------------------------------------------------------
    def register(self) -> bool:
        """Register the comm target with this kernel's comm manager; False where there is no kernel (terminal IPython)."""
        manager = _manager()
        if manager is None:
            return False
        manager.register_target(TARGET, self.opened)
        return True

    def unregister(self) -> None:
        """Stop answering the target; close every page's comm."""
        manager = _manager()
        if manager is not None:
            manager.targets.pop(TARGET, None)
        with self._lock:
            pages, self.pages = list(self.pages.values()), {}
        for page in pages:
            try:
                page.comm.close()
            except Exception:
                pass

    def opened(self, comm: Any, open_msg: Message) -> None:
        """A notebook page opened the comm (its kernel is ready, or restarted): one more page."""
        key = str(getattr(comm, "comm_id", "") or id(comm))
        client = str(((open_msg.get("header") or {}).get("session")) or "")
        page = Page(comm, client, time.monotonic(), key=key)
        with self._lock:
            self.pages[key] = page
            while len(self.pages) > KEEP_PAGES:
                self.pages.pop(next(iter(self.pages)))
        comm.on_msg(lambda msg: self.received(msg, page))
        comm.on_close(lambda _msg: self._closed(key, page))
        data = (open_msg.get("content") or {}).get("data")
        if data:
            self.handle(data, page)

    def _closed(self, key: str, page: Page) -> None:
        with self._lock:
            if self.pages.get(key) is page:
                del self.pages[key]

    def received(self, msg: Message, page: Page) -> None:
        """One comm message from a page."""
        self.handle((msg.get("content") or {}).get("data"), page)

    def handle(self, data: Any, page: Page) -> None:
        """Check a message from a page and act on it; a refused one is answered (to that page) with an error, never raised."""
        wrong = problem(data)
        if wrong:
            self.send(error(wrong, message_id(data)), page)
            return
        kind = data["type"]
        try:
            if kind == "hello":
                page.extension, page.hello = data["extension"] or "?", time.monotonic()
                page.path, page.collaborative = data.get("path", ""), data.get("collaborative", False)
                self.send({"v": VERSION, "type": "hello", "nbagent": self.version}, page)
                with self._lock:
                    waiting = list(self.asking.items())
                for (session, tool_use_id), question in waiting:  # a page opened while a question waits shows it
                    self.send(approval_waiting(session, tool_use_id, question.html, question.cell_id, question.edit), page)
            elif kind == "insert_request":
                self._reply_to = page
                try:
                    self.host.insert_request(data)
                finally:
                    self._reply_to = None
            elif kind == "inserted":
                sent = self._sent_inserts.pop(data["id"], None)
                if sent is None or sent["session"] != data["session"]:
                    self.send(error("no insert of this id and session is waiting for its reply", data["id"]), page)
                else:
                    self.host.inserted(data, sent)
            elif kind == "approval_answer":
                self._answer(data, page)
            elif kind in ("catch_up", "transcripts_written"):
                if self.fills is None:
                    raise ValueError("this kernel writes no transcripts into cells")
                self.fills.received(data, page, self)
            elif "id" in data:
                with self._lock:
                    slot = self._waiting.get(data["id"])
                    if slot is not None and not slot:
                        slot.append(data)
                if slot is None and kind != "error":
                    self.send(error("no request of this id is waiting for a reply", data["id"]), page)
        except ValueError as exc:
            self.send(error(str(exc), message_id(data)), page)
        except Exception as exc:  # a bug of ours: logged, and the browser told, never a traceback in a cell
            logger.warning("nbagent: the cells comm failed on a %s message: %s: %s", kind, type(exc).__name__, exc)
            self.send(error(f"the kernel failed on this message ({type(exc).__name__})", message_id(data)), page)

    def send(self, message: Message, page: Page | None = None) -> bool:
        """Send a message to one page (by default the one :meth:`target` chooses); False without one."""
        page = page if page is not None else self.target()
        if page is None:
            return False
        try:
            page.comm.send(message)
        except Exception as exc:  # a comm closed meanwhile: that page is gone
            logger.debug("nbagent: a page's comm refused a message: %s", exc)
            return False
        return True

    def broadcast(self, message: Message) -> int:
        """Send a message to every page that said hello; how many."""
        with self._lock:
            pages = [page for page in self.pages.values() if page.extension]
        return sum(self.send(message, page) for page in pages)

    def target(self) -> Page | None:
        """The page a request of the kernel goes to: the one that ran the cell running now, else the newest that said hello."""
        client = self.running()
        with self._lock:
            pages = [page for page in self.pages.values() if page.extension]
        ran = [page for page in pages if client and page.client == client]
        return max(ran or pages, key=lambda page: page.hello, default=None)

    def _newest(self) -> Page | None:
        with self._lock:
            return max((page for page in self.pages.values() if page.extension), key=lambda page: page.hello, default=None)

    # Approvals -------------------------------------------------------------------------------------------
    def waiting(self, session: str, tool_use_id: str, answer: Callable[[bool], None], question_html: str, cell_id: str | None) -> None:
        """A panel asks a question: every page shows it and may answer (``answer(approved)``, the buttons' own choice)."""
        proposed = self.edit_of(tool_use_id)
        if not fits(session, tool_use_id, question_html, cell_id):
            return  # too long for the protocol: only the page that runs the cell shows it, in the panel
        with self._lock:
            self.asking[(session, tool_use_id)] = Question(answer, question_html, cell_id, proposed)
        self.broadcast(approval_waiting(session, tool_use_id, question_html, cell_id, proposed))

    def ended(self, session: str, tool_use_id: str, decision: str, by: str) -> None:
        """The panel's question ended (``decision`` approved, declined or interrupted): every page is told."""
        with self._lock:
            if self.asking.pop((session, tool_use_id), None) is None:
                return
            message = approval_decided(session, tool_use_id, decision, by)
            self.decided[(session, tool_use_id)] = message
            while len(self.decided) > KEEP_DECIDED:
                self.decided.pop(next(iter(self.decided)))
        self.broadcast(message)

    def _answer(self, data: Message, page: Page) -> None:
        """A page's ``approval_answer``: the first answer decides (the panel keeps only it); a late one is told the decision."""
        key = (data["session"], data["tool_use_id"])
        with self._lock:
            question, decided = self.asking.get(key), self.decided.get(key)
        if question is not None:
            question.answer(data["approved"])
        elif decided is not None:
            self.send(decided, page)
        else:
            self.send(error("no approval of this session and call is waiting", data["id"]), page)

    # Requests --------------------------------------------------------------------------------------------
    def insert(self, session: str, anchor: str, cells: list[Message], request_id: str | None = None) -> str | None:
        """Send ``insert`` (below the cell ``anchor``) to the page that asked, else :meth:`target`'s; its id, or None without an extension."""
        if not self.present:
            return None
        message: Message = {
            "v": VERSION,
            "type": "insert",
            "id": request_id or uuid.uuid4().hex,  # the browser matches its click by the request's id
            "session": session,
            "anchor_cell_id": anchor,
            "cells": cells,
        }
        self._sent_inserts[message["id"]] = message
        if len(self._sent_inserts) > 100:  # replies that never came are forgotten, oldest first
            self._sent_inserts.pop(next(iter(self._sent_inserts)))
        self.send(message, self._reply_to)
        return str(message["id"])

    def request(self, message: Message, timeout: float = 10.0) -> Message | None:
        """Send a request to :meth:`target`'s page and wait for its reply, pumping comm messages while the cell runs; None if none came in time.

        Only the kernel's main thread can read a reply while a cell runs (through the pump); elsewhere (a tool run on
        another thread while the main thread waits, a kernel the pump does not support) nothing could read it, so
        None at once: the caller falls back.
        """
        if not self.present or threading.current_thread() is not threading.main_thread():
            return None
        pump = CommPump.for_current_kernel()
        if pump is None:
            return None
        request_id = uuid.uuid4().hex
        slot: list[Message] = []
        with self._lock:
            self._waiting[request_id] = slot
        try:
            self.send({"v": VERSION, **message, "id": request_id})
            deadline = time.monotonic() + timeout
            with pump:
                while not slot and time.monotonic() < deadline and pump.poll(min(0.1, max(0.0, deadline - time.monotonic()))):
                    pass
            return slot[0] if slot else None
        finally:
            with self._lock:
                self._waiting.pop(request_id, None)


def _running_client() -> str:
    """The client id (header ``session``) of the request the kernel's main shell is handling now ('' if none is known)."""
    kernel = current_kernel()
    if kernel is None:
        return ""
    try:
        parent = kernel.get_parent("shell") or {}
    except Exception:
        return ""
    return str((parent.get("header") or {}).get("session") or "")


def _manager() -> Any:
    """The running kernel's comm manager (ipykernel's, through the ``comm`` package), or None outside a kernel."""
    if current_kernel() is None:
        return None
    try:
        import comm
    except ImportError:
        return None
    return comm.get_comm_manager()
