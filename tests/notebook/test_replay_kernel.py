"""``%agent_replay`` in a real ipykernel: widget state on iopub, scrubbing and play/pause through comm messages."""

from __future__ import annotations

import queue
import time
from pathlib import Path
from typing import Any

import anthropic
import pytest

import nbagent
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use
from tests.support.kernels import TIMEOUT, Kernel, click, send_update

pytestmark = [pytest.mark.kernel, pytest.mark.slow]  # the replay plays for seconds


@nbagent.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def comm_states(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Widget state by comm id, as a frontend would hold it after these messages."""
    states: dict[str, dict[str, Any]] = {}
    for msg in messages:
        content = msg["content"]
        if msg["msg_type"] == "comm_open" and content.get("target_name") == "jupyter.widget":
            states[content["comm_id"]] = dict(content["data"]["state"])
        elif msg["msg_type"] == "comm_msg" and content["data"].get("method") == "update" and content["comm_id"] in states:
            states[content["comm_id"]].update(content["data"]["state"])
    return states


def collect_until(kc: Any, states: dict[str, dict[str, Any]], done: Any) -> list[dict[str, Any]]:
    """Read iopub (outside any cell) into ``states`` until ``done(states)``."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + TIMEOUT
    while not done(states):
        assert time.monotonic() < deadline, "the widget state never got there"
        try:
            msg = kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        content = msg["content"]
        if msg["msg_type"] == "comm_msg" and content["data"].get("method") == "update" and content["comm_id"] in states:
            states[content["comm_id"]].update(content["data"]["state"])
            seen.append(msg)
    return seen


def test_replay_in_a_real_kernel_scrubs_and_plays_through_comm_messages(kernel: Kernel, server: FakeAnthropic, tmp_path: Path) -> None:
    # The log comes from a real run in this process; the second answer streams for about 2.5 s.
    server.script(
        tool_use("add", {"a": 2, "b": 3}, text="Let me add."),
        text("The sum is **5**."),
        text("Counting slowly: one two three four five six seven eight.", chunks=30, delay=0.08),
    )
    path = tmp_path / "session.jsonl"
    client = anthropic.Anthropic(base_url=server.base_url, api_key="test-key")
    with nbagent.Session.open(path) as session:
        nbagent.run(session, "what is 2+3?", tools=[add], client=client, model="claude-test")
        nbagent.run(session, "count slowly", tools=[add], client=client, model="claude-test")
    events = list(nbagent.read_events(path))
    recorded_requests = len(server.requests)

    messages, reply = kernel.execute(f"%load_ext nbagent\n%agent_replay {path}")
    assert reply["content"]["status"] == "ok", [m["content"] for m in messages if m["msg_type"] == "error"]
    states = comm_states(messages)
    [slider] = [c for c, s in states.items() if s.get("_model_name") == "IntSliderModel"]
    assert states[slider]["value"] == 1 and states[slider]["max"] == len(events)
    htmls = {c: s for c, s in states.items() if s.get("_model_name") == "HTMLModel"}
    [current] = [c for c, s in htmls.items() if s["value"].startswith('<div class="nbagent-replay-scroll">')]
    assert "Session <b>what is 2+3?</b>" in states[current]["value"] and "2 turns" in states[current]["value"]  # the first frame
    buttons = {s["description"]: c for c, s in states.items() if s.get("_model_name") == "ButtonModel"}
    static, live = [m["content"]["data"] for m in messages if m["msg_type"] == "display_data"]
    # Two outputs: a static summary (the widget hides it while mounted; it stands in for the widget once the kernel is gone)
    assert "application/vnd.jupyter.widget-view+json" not in static and "application/vnd.jupyter.widget-view+json" in live
    assert "what is 2+3?" in static["text/html"] and "The sum is **5**." in static["text/plain"]
    assert "Re-run this cell to replay it interactively." in static["text/html"] and set(live) == {
        "application/vnd.jupyter.widget-view+json",
        "text/plain",
    }
    [root] = [s for s in states.values() if "nbagent" in s.get("_dom_classes", ())]
    key = next(c for c in root["_dom_classes"] if c.startswith("nbagent-live-"))[len("nbagent-live-") :]
    assert f"nbagent-static-{key}" in static["text/html"] and f".jp-OutputArea:has(.nbagent-live-{key})" in static["text/html"]

    # Scrub: the frontend moves the slider to the first assistant message.
    answer = next(i for i, e in enumerate(events) if e["type"] == "assistant_msg") + 1
    send_update(kernel.kc, slider, {"value": answer})
    collect_until(kernel.kc, states, lambda s: "Let me add." in s[current]["value"])
    assert "now</span> running tools" in states[current]["value"]
    [position] = [c for c, s in htmls.items() if s["value"].startswith('<div class="nbagent-position">')]
    assert states[position]["value"] == '<div class="nbagent-position">turn 1 of 2</div>'

    # Play from the second turn: the kernel stays free for cells while the slider moves on a thread.
    second = [i for i, e in enumerate(events) if e["type"] == "user_msg"][1] + 1
    send_update(kernel.kc, slider, {"value": second})
    states[slider]["value"] = second  # the frontend's own copy (the kernel sends no echo of it)
    collect_until(kernel.kc, states, lambda s: "turn 2 of 2" in s[position]["value"])
    click(kernel.kc, buttons["Play"])
    collect_until(kernel.kc, states, lambda s: s[slider]["value"] > second + 2)
    out, reply = kernel.execute(
        "from nbagent.notebook.magics import magics_for\nprint('playing', magics_for(get_ipython()).replay.playing)"
    )
    assert reply["content"]["status"] == "ok"
    assert "playing True" in "".join(m["content"].get("text", "") for m in out if m["msg_type"] == "stream")
    click(kernel.kc, buttons["Play"])  # the same button, now labelled Pause
    out, _ = kernel.execute("r = magics_for(get_ipython()).replay\nprint('paused', r.playing, r.index + 1)")
    printed = "".join(m["content"].get("text", "") for m in out if m["msg_type"] == "stream").split()
    assert printed[:2] == ["paused", "False"] and second < int(printed[2]) < len(events)
    stopped_at = int(printed[2])
    out, _ = kernel.execute("import time; time.sleep(0.3); print('still', r.index + 1)")
    assert f"still {stopped_at}" in "".join(m["content"].get("text", "") for m in out if m["msg_type"] == "stream")

    assert len(server.requests) == recorded_requests  # the replay called no model
