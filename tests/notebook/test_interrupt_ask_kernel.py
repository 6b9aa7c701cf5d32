"""In a real ipykernel: an interrupt while a call waits for approval, the cell re-run (unchanged or edited), and a cell of several turns re-rendered after a restart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import nbagent
from nbagent.record import events as ev
from nbagent.stores import folders as store
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use
from tests.support.kernels import Kernel, Message, button_id, click, errors, shown, wait_for

SETUP = "%load_ext nbagent\n%config Agent.tools = ['python', 'shell']"  # approval: 'ask' (the default), so the shell call is asked
ASK = "%agent make the file"
pytestmark = pytest.mark.kernel


def events(tmp_path: Path) -> list[ev.Event]:
    """The events of the notebook's one session."""
    [stored] = store.list_sessions(tmp_path / ".nbagent" / "work.ipynb")
    return list(nbagent.read_events(stored.path))


def interrupt_while_asking(kernel: Kernel, fake: FakeAnthropic, tmp_path: Path) -> str:
    """Run ASK: the model calls shell, the panel asks, the kernel is interrupted while it waits; the call's id."""
    fake.script(tool_use("shell", {"command": "touch made-by-shell"}))
    interrupted: list[bool] = []

    def act(msg: Message) -> None:
        if button_id(msg, "Approve") is not None and not interrupted:
            kernel.km.interrupt_kernel()  # the panel's buttons are there: the user interrupts instead of answering
            interrupted.append(True)

    messages, reply = kernel.execute(ASK, cell_id="ask", on_message=act)
    assert interrupted and reply["content"]["status"] == "ok", errors(messages)  # the magic says it was interrupted
    logged = events(tmp_path)
    [call] = [b for e in logged if e["type"] == ev.ASSISTANT_MSG for b in e["content"] if b["type"] == "tool_use"]
    asked = [(e["tool_use_id"], e["decision"]) for e in logged if e["type"] == ev.APPROVAL]
    assert asked == [(call["id"], "pending"), (call["id"], "interrupted")]
    assert logged[-1]["type"] == ev.INTERRUPTED and logged[-1]["open_calls"] == [call["id"]]  # the approval was written first
    assert not (tmp_path / "made-by-shell").exists() and len(fake.requests) == 1
    return str(call["id"])


def test_an_unchanged_cell_asks_the_interrupted_call_again_without_a_new_model_request(
    kernels: Callable[[], Kernel], fake: FakeAnthropic, tmp_path: Path
) -> None:
    kernel = kernels()
    kernel.run(SETUP, "setup")
    call = interrupt_while_asking(kernel, fake, tmp_path)

    fake.script(text("Made it."))
    requests_when_asked: list[int] = []

    def approve(msg: Message) -> None:
        button = button_id(msg, "Approve")
        if button is not None:
            requests_when_asked.append(len(fake.requests))
            click(kernel.kc, button)

    messages, reply = kernel.execute(ASK, cell_id="ask", on_message=approve)  # the same cell, its request unchanged
    assert reply["content"]["status"] == "ok", errors(messages)
    assert requests_when_asked == [1]  # asked again from the recorded reply: no new model request
    logged = events(tmp_path)
    assert [e["decision"] for e in logged if e["type"] == ev.APPROVAL] == ["pending", "interrupted", "pending", "approved"]
    assert {e["tool_use_id"] for e in logged if e["type"] == ev.APPROVAL} == {call}
    assert [e["tool_use_id"] for e in logged if e["type"] == ev.TOOL_STARTED] == [call]  # the tool ran exactly once
    assert len([e for e in logged if e["type"] == ev.USER_MSG]) == 1 and (tmp_path / "made-by-shell").exists()
    assert len(fake.requests) == 2 and fake.requests[1].body["messages"][-1]["content"][0]["tool_use_id"] == call
    final = [m["content"]["data"]["text/html"] for m in messages if m["msg_type"] == "update_display_data"][-1]
    assert "its unfinished turn continues below" in final  # the recorded turn is shown first, then goes on
    assert final.index("unanswered</span> (interrupted)") < final.index("approved</span>") < final.index("Made it.")


def test_an_edited_cell_is_a_new_request_and_the_interrupted_call_is_not_run(
    kernels: Callable[[], Kernel], fake: FakeAnthropic, tmp_path: Path
) -> None:
    kernel = kernels()
    kernel.run(SETUP, "setup")
    call = interrupt_while_asking(kernel, fake, tmp_path)

    fake.script(text("Left it alone."))
    messages, reply = kernel.execute("%agent never mind, leave it", cell_id="ask")
    assert reply["content"]["status"] == "ok", errors(messages)
    assert not [m for m in messages if button_id(m, "Approve")]  # nothing asked again
    assert len(fake.requests) == 2 and "Left it alone." in shown(messages)
    final = [m["content"]["data"]["text/html"] for m in messages if m["msg_type"] == "update_display_data"][-1]
    assert "the call to shell from the request before was not run" in final  # the transcript says so, above the new request
    [settled] = [b for b in fake.requests[1].body["messages"][-1]["content"] if b.get("type") == "tool_result"]
    assert settled["tool_use_id"] == call and settled["content"].startswith("Not run: the user moved on to a new request")
    logged = events(tmp_path)
    assert not [e for e in logged if e["type"] == ev.TOOL_STARTED] and not (tmp_path / "made-by-shell").exists()
    assert [e["decision"] for e in logged if e["type"] == ev.APPROVAL] == ["pending", "interrupted"]


@pytest.mark.slow
def test_a_cell_run_twice_rerenders_both_turns_after_a_restart(kernels: Callable[[], Kernel], fake: FakeAnthropic, tmp_path: Path) -> None:
    fake.script(text("The first answer."), text("The second answer."), text("Something else."))
    first = kernels()
    first.run(SETUP, "setup")
    first.run("%agent say something", "say")
    first.run("%agent say something", "say")  # run again unchanged in the same kernel: a new turn
    first.run("%agent something else", "other")
    first.shutdown()
    assert len(fake.requests) == 3

    fake.script(text("The third answer."))
    second = kernels()
    second.run(SETUP, "setup")
    messages, reply = second.execute("%agent say something", cell_id="say")
    assert reply["content"]["status"] == "ok", errors(messages)
    assert len(fake.requests) == 3  # re-rendered from the log, nothing sent
    [output] = [m["content"]["data"]["text/html"] for m in messages if m["msg_type"] in ("display_data", "update_display_data")][-1:]
    assert output.index("The first answer.") < output.index("The second answer.") and "from the log" in output
    assert "something else" not in output  # another cell's turn in between is not this cell's
    assert "The third answer." in second.run("%agent say something", "say")  # run once more in this kernel: asked anew


def wait_for_deltas(tmp_path: Path) -> None:
    """Until the log holds a streamed delta."""

    def streamed() -> bool:
        try:
            return any(e["type"] == ev.DELTA for e in events(tmp_path))
        except ValueError:  # no session yet
            return False

    wait_for(streamed)


@pytest.mark.slow
def test_text_streamed_before_a_crash_is_labelled_cut_off_when_the_cell_is_re_run(
    kernels: Callable[[], Kernel], fake: FakeAnthropic, tmp_path: Path
) -> None:
    fake.script(text("Half an answer, then the kernel dies ", chunks=4, hang_after=5), text("The whole answer."))
    first = kernels()
    first.run(SETUP, "setup")
    first.send("%agent explain it", "ask")
    wait_for_deltas(tmp_path)
    first.kill()
    assert not [e for e in events(tmp_path) if e["type"] == ev.ASSISTANT_MSG]

    second = kernels()
    second.run(SETUP, "setup")
    messages, reply = second.execute("%agent explain it", cell_id="ask")
    assert reply["content"]["status"] == "ok", errors(messages)
    [final] = [m["content"]["data"]["text/html"] for m in messages if m["msg_type"] == "update_display_data"][-1:]
    assert final.index("Half an") < final.index("cut off</span>") < final.index("The whole answer.")
    assert len(fake.requests) == 2
