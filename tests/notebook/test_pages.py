"""One ``nbagent.cells`` comm per notebook page (issue 32, item 3): the Bridge's routing and the approval messages' shapes.

The comms here are stand-ins for ipykernel's (our Bridge's own unit tests: it only calls ``send``, ``on_msg``,
``on_close`` and ``close``); tests/notebook/test_pages_kernel.py opens real comms from two clients on one kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from nbagent.notebook import cells_protocol
from nbagent.notebook.cells_comm import Bridge, Message

HELLO = {"v": 1, "type": "hello", "extension": "0.1.0"}


class FakeComm:
    """A comm as the Bridge uses one: what it was sent, its message and close handlers."""

    def __init__(self, comm_id: str) -> None:
        self.comm_id = comm_id
        self.sent: list[Message] = []
        self.on_message: Callable[[Message], None] | None = None
        self.on_closed: Callable[[Message], None] | None = None
        self.closed = False

    def send(self, data: Message) -> None:
        self.sent.append(data)

    def on_msg(self, handler: Callable[[Message], None]) -> None:
        self.on_message = handler

    def on_close(self, handler: Callable[[Message], None]) -> None:
        self.on_closed = handler

    def close(self) -> None:
        self.closed = True

    def receive(self, data: Any) -> None:
        """The browser sends ``data`` on this comm."""
        assert self.on_message is not None
        self.on_message({"content": {"comm_id": self.comm_id, "data": data}})

    def types(self) -> list[str]:
        return [m["type"] for m in self.sent]


class Host:
    """The magics' side: records insert requests and answers them with an insert."""

    def __init__(self) -> None:
        self.bridge: Bridge | None = None

    def insert_request(self, message: Message) -> None:
        assert self.bridge is not None
        self.bridge.insert(message["session"], "anchor", [], message["id"])

    def inserted(self, message: Message, sent: Message) -> None:
        pass


def make(running: str = "") -> tuple[Bridge, Callable[..., FakeComm]]:
    """A bridge whose running cell came from client ``running``, and a way to open a page on it."""
    host = Host()
    bridge = Bridge(host, "9.9", running=lambda: running)
    host.bridge = bridge

    def page(client: str, *, hello: bool = True) -> FakeComm:
        comm = FakeComm(f"comm-{client}")
        bridge.opened(comm, {"header": {"session": client}, "content": {"data": HELLO if hello else {}}})
        return comm

    return bridge, page


def test_each_page_keeps_its_comm_and_a_close_removes_only_that_page() -> None:
    bridge, page = make()
    a, b = page("A"), page("B")
    assert a.types() == ["hello"] and b.types() == ["hello"] and bridge.present
    assert len(bridge.pages) == 2
    assert b.on_closed is not None
    b.on_closed({})
    assert list(bridge.pages) == ["comm-A"] and bridge.present
    bridge.unregister()
    assert a.closed and bridge.pages == {} and not bridge.present


def test_a_page_that_never_said_hello_is_not_present_and_gets_nothing() -> None:
    bridge, page = make()
    silent = page("A", hello=False)
    assert not bridge.present and not bridge.send({"v": 1, "type": "read_request", "id": "r"})
    assert bridge.broadcast({"v": 1, "type": "x"}) == 0 and silent.sent == []


@pytest.mark.parametrize(
    ("running", "expected"),
    [
        ("A", "comm-A"),  # the page that ran the cell running now
        ("B", "comm-B"),
        ("", "comm-B"),  # nothing known: the newest page that said hello
        ("someone-else", "comm-B"),
    ],
)
def test_a_request_goes_to_the_page_that_ran_the_cell_else_the_newest(running: str, expected: str) -> None:
    bridge, page = make(running)
    comms = {"comm-A": page("A"), "comm-B": page("B")}
    assert bridge.send({"v": 1, "type": "read_request", "id": "r1"})
    got = [key for key, comm in comms.items() if comm.types()[-1] == "read_request"]
    assert got == [expected]


def test_an_insert_answers_the_page_that_asked_for_it() -> None:
    bridge, page = make(running="B")  # B ran the cell running now, but A pressed the button
    a, b = page("A"), page("B")
    a.receive({"v": 1, "type": "insert_request", "id": "r1", "session": "s", "turn": 1})
    assert a.types()[-1] == "insert" and a.sent[-1]["id"] == "r1" and b.types() == ["hello"]


def test_an_error_goes_back_to_the_page_that_sent_the_bad_message() -> None:
    bridge, page = make(running="B")
    a, b = page("A"), page("B")
    a.receive({"v": 1, "type": "run_code"})
    assert a.types()[-1] == "error" and b.types() == ["hello"]


def test_a_question_waits_on_every_page_and_the_first_answer_decides() -> None:
    bridge, page = make()
    a, b = page("A"), page("B")
    answers: list[bool] = []
    bridge.waiting("s", "toolu_1", answers.append, "<b>run?</b>", "cell-1")
    expected = {"v": 1, "type": "approval_waiting", "session": "s", "tool_use_id": "toolu_1", "question_html": "<b>run?</b>"}
    assert a.sent[-1] == b.sent[-1] == {**expected, "cell_id": "cell-1"}
    late = page("C")  # a page opened (or reopened) while the question waits is shown it after its hello
    assert late.types() == ["hello", "approval_waiting"]

    b.receive({"v": 1, "type": "approval_answer", "id": "x1", "session": "s", "tool_use_id": "toolu_1", "approved": True})
    assert answers == [True]
    bridge.ended("s", "toolu_1", "approved", "panel")
    decided = {"v": 1, "type": "approval_decided", "session": "s", "tool_use_id": "toolu_1", "decision": "approved", "by": "panel"}
    assert a.sent[-1] == b.sent[-1] == late.sent[-1] == decided
    bridge.ended("s", "toolu_1", "declined", "panel")  # ended twice: told once
    assert a.types().count("approval_decided") == 1

    a.receive({"v": 1, "type": "approval_answer", "id": "x2", "session": "s", "tool_use_id": "toolu_1", "approved": False})
    assert answers == [True] and a.sent[-1] == decided  # a late answer changes nothing: it is told the decision
    a.receive({"v": 1, "type": "approval_answer", "id": "x3", "session": "s", "tool_use_id": "toolu_9", "approved": True})
    assert a.sent[-1]["type"] == "error" and a.sent[-1]["id"] == "x3" and "waiting" in a.sent[-1]["error"]
    assert page("D").types() == ["hello"]  # nothing waits now


def test_a_question_too_long_for_the_protocol_stays_in_the_panel() -> None:
    bridge, page = make()
    a = page("A")
    bridge.waiting("s", "toolu_1", lambda approved: None, "x" * (cells_protocol.MAX_HTML + 1), None)
    assert a.types() == ["hello"] and bridge.asking == {}


@pytest.mark.parametrize(
    ("message", "wrong"),
    [
        ({"v": 1, "type": "approval_answer", "id": "a", "session": "s", "tool_use_id": "t", "approved": True}, ""),
        ({"v": 1, "type": "approval_answer", "id": "a", "session": "s", "tool_use_id": "t", "approved": False}, ""),
        (
            {"v": 1, "type": "approval_answer", "id": "a", "session": "s", "tool_use_id": "t", "approved": "yes"},
            "'approved' is true or false",
        ),
        ({"v": 1, "type": "approval_answer", "id": "a", "session": "s", "approved": True}, "with 'tool_use_id'"),
        ({"v": 1, "type": "approval_answer", "session": "s", "tool_use_id": "t", "approved": True}, "with 'id'"),
        (
            {"v": 1, "type": "approval_answer", "id": "a", "session": "s" * 201, "tool_use_id": "t", "approved": True},
            "'session' is a string",
        ),
        (
            {"v": 1, "type": "approval_answer", "id": "a", "session": "s", "tool_use_id": "t", "approved": True, "by": "me"},
            "without the keys",
        ),
        ({"v": 1, "type": "approval_waiting", "session": "s", "tool_use_id": "t", "question_html": "x"}, "unknown message type"),
    ],
)
def test_the_approval_answer_shape(message: Any, wrong: str) -> None:
    found = cells_protocol.problem(message)
    assert (found == "") if not wrong else (wrong in found), found


@pytest.mark.parametrize(
    ("made", "expected"),
    [
        (
            lambda: cells_protocol.approval_waiting("s", "t", "<p>q</p>", None),
            {"v": 1, "type": "approval_waiting", "session": "s", "tool_use_id": "t", "question_html": "<p>q</p>"},
        ),
        (
            lambda: cells_protocol.approval_waiting("s", "t", "q", "c1"),
            {"v": 1, "type": "approval_waiting", "session": "s", "tool_use_id": "t", "question_html": "q", "cell_id": "c1"},
        ),
        (
            lambda: cells_protocol.approval_decided("s", "t", "interrupted", ""),
            {"v": 1, "type": "approval_decided", "session": "s", "tool_use_id": "t", "decision": "interrupted", "by": ""},
        ),
    ],
)
def test_the_kernel_s_approval_messages(made: Callable[[], Message], expected: Message) -> None:
    assert made() == expected


def test_a_decision_of_another_word_is_refused() -> None:
    with pytest.raises(ValueError, match="one of approved, declined, interrupted"):
        cells_protocol.approval_decided("s", "t", "maybe", "panel")


@pytest.mark.parametrize(
    ("session", "html", "cell", "fits"),
    [
        ("s", "q", None, True),
        ("s", "q" * cells_protocol.MAX_HTML, "c" * 200, True),
        ("s" * 201, "q", None, False),
        ("s", "q" * (cells_protocol.MAX_HTML + 1), None, False),
        ("s", "q", "c" * 201, False),
    ],
)
def test_what_fits_the_protocol(session: str, html: str, cell: str | None, fits: bool) -> None:
    assert cells_protocol.fits(session, "t", html, cell) is fits
