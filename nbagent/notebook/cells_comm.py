"""The comm target ``nbagent.cells``: the bridge to the browser extension that inserts, reads and edits cells (docs/cells.md).

Every message either way is a JSON object of a documented shape (:func:`problem` checks one, a pure rule with table
tests); anything else is answered with an ``error`` message, never an exception. A reply the kernel waits for while a
cell runs (``notebook``, ``edit_result``) is read through the comm pump (:mod:`.pump`), as approval clicks are.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from .pump import CommPump

logger = logging.getLogger("nbagent")

TARGET = "nbagent.cells"
VERSION = 1
MAX_ID = 200  # characters of an id, a session name, a cell id, a tool_use_id
MAX_TEXT = 1_000  # characters of a reason, an error, an extension version
MAX_SOURCE = 1_000_000  # characters of one cell's source
MAX_OUTPUTS_TEXT = 20_000  # characters of one cell's outputs as text (the browser clips them)
MAX_CELLS = 10_000  # cells in one message
MAX_PATH = 4_096
CELL_TYPES = ("code", "markdown", "raw")

Message = dict[str, Any]
Check = Callable[[Any], str]  # '' when the value is good, else what is wrong with it


def _str(limit: int) -> Check:
    return lambda v: "" if isinstance(v, str) and len(v) <= limit else f"a string of at most {limit:,} characters"


def _int(low: int = 0) -> Check:
    return lambda v: "" if isinstance(v, int) and not isinstance(v, bool) and v >= low else f"an integer of at least {low}"


def _bool(v: Any) -> str:
    return "" if isinstance(v, bool) else "true or false"


def _optional_int(v: Any) -> str:
    return "" if v is None else _int(0)(v)


def _one_of(*choices: str) -> Check:
    return lambda v: "" if v in choices else f"one of {', '.join(choices)}"


def _list(item: Check, limit: int = MAX_CELLS) -> Check:
    def check(v: Any) -> str:
        if not isinstance(v, list) or len(v) > limit:
            return f"a list of at most {limit:,} items"
        for i, x in enumerate(v):
            wrong = item(x)
            if wrong:
                return f"a list whose item {i} is {wrong}"
        return ""

    return check


def _object(required: dict[str, Check], optional: dict[str, Check] | None = None) -> Check:
    optional = optional or {}

    def check(v: Any) -> str:
        if not isinstance(v, dict):
            return "an object"
        extra = sorted(set(v) - set(required) - set(optional))
        if extra:
            return f"an object without the keys {extra}"
        for key in required:
            if key not in v:
                return f"an object with {key!r}"
        for key, rule in {**required, **optional}.items():
            if key in v:
                wrong = rule(v[key])
                if wrong:
                    return f"an object whose {key!r} is {wrong}"
        return ""

    return check


ID = _str(MAX_ID)
HEADER = {"v": lambda v: "" if v == VERSION and not isinstance(v, bool) else f"{VERSION}", "type": _str(40)}
# What the browser may send (docs/cells.md, "Comm protocol v1"): type -> its keys besides v and type.
FROM_BROWSER: dict[str, tuple[dict[str, Check], dict[str, Check]]] = {
    "hello": ({"extension": _str(MAX_TEXT)}, {}),
    "insert_request": ({"id": ID, "session": ID, "turn": _int(1)}, {"tool_use_id": ID}),
    "inserted": (
        {
            "id": ID,
            "session": ID,
            "cells": _list(_object({"tool_use_id": ID, "cell_id": ID, "index": _int(0)})),
            "skipped": _list(ID),
        },
        {},
    ),
    "notebook": (
        {
            "id": ID,
            "path": _str(MAX_PATH),
            "cells": _list(
                _object(
                    {
                        "id": ID,
                        "cell_type": _one_of(*CELL_TYPES),
                        "source": _str(MAX_SOURCE),
                        "execution_count": _optional_int,
                        "outputs_text": _str(MAX_OUTPUTS_TEXT),
                        "dirty": _bool,
                    }
                )
            ),
        },
        {},
    ),
    "edit_result": ({"id": ID, "ok": _bool}, {"reason": _str(MAX_TEXT)}),
    "error": ({"error": _str(MAX_TEXT)}, {"id": ID}),
}
REPLIES = ("notebook", "edit_result", "error")  # answers to a request the kernel waits for


def problem(message: Any) -> str:
    """What is wrong with a message from the browser ('' when it is of a documented shape): a pure rule."""
    if not isinstance(message, dict):
        return "a message must be a JSON object"
    for key, rule in HEADER.items():
        if key not in message or rule(message[key]):
            return f"a message needs {key!r} = {rule(None) if key == 'v' else 'a type name'}"
    kind = message["type"]
    if kind not in FROM_BROWSER:
        return f"unknown message type {str(kind)[:40]!r}"
    required, optional = FROM_BROWSER[kind]
    wrong = _object({**required, **{k: lambda v: "" for k in HEADER}}, optional)(message)
    return f"{kind}: must be {wrong}" if wrong else ""


def error(text: str, request_id: str | None = None) -> Message:
    """The error message for a refused message (its id echoed when it had a valid one)."""
    message: Message = {"v": VERSION, "type": "error", "error": text[:MAX_TEXT]}
    if request_id is not None:
        message["id"] = request_id
    return message


def message_id(message: Any) -> str | None:
    """A message's id, when it has one that is a short string."""
    value = message.get("id") if isinstance(message, dict) else None
    return value if isinstance(value, str) and len(value) <= MAX_ID else None


class Host(Protocol):
    """What the bridge asks of the magics: act on an insert request, record cells the browser inserted."""

    def insert_request(self, message: Message) -> None:
        """The user pressed "Insert as cells" (raise ValueError with a message for the browser to refuse it)."""

    def inserted(self, message: Message, sent: Message) -> None:
        """The browser's ``inserted`` reply to ``sent`` (our ``insert``)."""


class Bridge:
    """The kernel's end of the ``nbagent.cells`` comm: the last notebook view that opened it, its hello, requests waiting."""

    def __init__(self, host: Host, version: str) -> None:
        self.host = host
        self.version = version
        self.comm: Any = None
        self.extension = ""  # the browser extension's version, once it said hello
        self._waiting: dict[str, list[Message]] = {}  # request id -> [reply] once it came
        self._sent_inserts: dict[str, Message] = {}  # insert id -> the insert, until its inserted reply
        self._lock = threading.Lock()

    @property
    def present(self) -> bool:
        """Whether a browser extension is connected and said hello."""
        return self.comm is not None and bool(self.extension)

    # The comm ------------------------------------------------------------------------------------------
    def register(self) -> bool:
        """Register the comm target with this kernel's comm manager; False where there is no kernel (terminal IPython)."""
        manager = _manager()
        if manager is None:
            return False
        manager.register_target(TARGET, self.opened)
        return True

    def unregister(self) -> None:
        """Stop answering the target; close the comm."""
        manager = _manager()
        if manager is not None:
            manager.targets.pop(TARGET, None)
        if self.comm is not None:
            try:
                self.comm.close()
            except Exception:
                pass
        self.comm, self.extension = None, ""

    def opened(self, comm: Any, open_msg: Message) -> None:
        """A notebook view opened the comm (its kernel is ready, or restarted): it replaces any earlier one."""
        self.comm, self.extension = comm, ""
        comm.on_msg(self.received)
        comm.on_close(lambda _msg: self._closed(comm))
        data = (open_msg.get("content") or {}).get("data")
        if data:
            self.handle(data)

    def _closed(self, comm: Any) -> None:
        if self.comm is comm:
            self.comm, self.extension = None, ""

    def received(self, msg: Message) -> None:
        """One comm message from the browser."""
        self.handle((msg.get("content") or {}).get("data"))

    def handle(self, data: Any) -> None:
        """Check a message and act on it; a refused one is answered with an error, never raised."""
        wrong = problem(data)
        if wrong:
            self.send(error(wrong, message_id(data)))
            return
        kind = data["type"]
        try:
            if kind == "hello":
                self.extension = data["extension"] or "?"
                self.send({"v": VERSION, "type": "hello", "nbagent": self.version})
            elif kind == "insert_request":
                self.host.insert_request(data)
            elif kind == "inserted":
                sent = self._sent_inserts.pop(data["id"], None)
                if sent is None or sent["session"] != data["session"]:
                    self.send(error("no insert of this id and session is waiting for its reply", data["id"]))
                else:
                    self.host.inserted(data, sent)
            elif "id" in data:
                with self._lock:
                    slot = self._waiting.get(data["id"])
                    if slot is not None and not slot:
                        slot.append(data)
                if slot is None and kind != "error":
                    self.send(error("no request of this id is waiting for a reply", data["id"]))
        except ValueError as exc:
            self.send(error(str(exc), message_id(data)))
        except Exception as exc:  # a bug of ours: logged, and the browser told, never a traceback in a cell
            logger.warning("nbagent: the cells comm failed on a %s message: %s: %s", kind, type(exc).__name__, exc)
            self.send(error(f"the kernel failed on this message ({type(exc).__name__})", message_id(data)))

    def send(self, message: Message) -> bool:
        """Send a message to the browser; False without a comm."""
        comm = self.comm
        if comm is None:
            return False
        comm.send(message)
        return True

    # Requests --------------------------------------------------------------------------------------------
    def insert(self, session: str, anchor: str, cells: list[Message], request_id: str | None = None) -> str | None:
        """Send ``insert`` (below the cell ``anchor``); its id (``request_id``, the insert_request's, or a new one), or None without an extension."""
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
        self.send(message)
        return str(message["id"])

    def request(self, message: Message, timeout: float = 10.0) -> Message | None:
        """Send a request and wait for its reply, pumping comm messages while the cell runs; None if none came in time.

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


def _manager() -> Any:
    """The running kernel's comm manager (ipykernel's, through the ``comm`` package), or None outside a kernel."""
    from .pump import current_kernel

    if current_kernel() is None:
        return None
    try:
        import comm
    except ImportError:
        return None
    return comm.get_comm_manager()
