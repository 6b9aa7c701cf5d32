"""What the API asks, as the real SDK reports it from the fake: a refused request ends the run, a retry-after is waited
for (capped by a setting, interruptible, counted down in the panel), and thinking text is asked for where it would be
omitted."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import anthropic
import pytest

import nbagent
from nbagent.notebook.panel import Panel
from nbagent.record import events as ev
from nbagent.state.fold import SERVER_REFUSED
from tests.support import fake_context
from tests.support.fake_anthropic import FakeAnthropic, error, spend_limit, text, tool_use

pytestmark = pytest.mark.sdk  # run again against the SDK floor in CI (.ci/run)

MODEL = "claude-test"  # a model the table does not know: server compaction is asked for, the local fallback may take over
SMALL = nbagent.ContextSettings(trigger=2_000)  # compaction is asked for from half the trigger on (context.asks_compaction)


def of_type(session: nbagent.Session, kind: str) -> list[dict[str, Any]]:
    return [e for e in session.events() if e["type"] == kind]


# A refused request --------------------------------------------------------------------------------------------------
def test_a_spend_limit_on_a_compaction_request_ends_the_run_with_the_api_s_message(
    fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path
) -> None:
    fake.script(text("short"), spend_limit(), text("never asked"))
    with nbagent.Session.open(log_path) as session:
        assert nbagent.run(session, "hi", client=client, model=MODEL, context=SMALL) == "short"  # under half the trigger: not asked
        with pytest.raises(nbagent.ModelError, match="You have reached your specified workspace API usage limits") as raised:
            nbagent.run(session, fake_context.past_half(SMALL.threshold), client=client, model=MODEL, context=SMALL)
        assert raised.value.status == 400 and not raised.value.retryable
        assert [fake_context.asks(r) for r in fake.requests] == [False, True]  # it asked for compaction; sent once
        assert not session.state.server_refused  # still the server's to compact: a spend limit says nothing of it
        assert not [n for n in of_type(session, ev.NOTE) if n.get("kind") == SERVER_REFUSED]
        [failure] = of_type(session, ev.MODEL_ERROR)
        assert "retry_in" not in failure and failure["status"] == 400


def test_the_api_s_refusal_of_compaction_falls_back_once(fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path) -> None:
    fake.server_compaction = False  # the API's answer to a field it does not take: "context_management: Extra inputs ..."
    fake.script(text("one"), text("two"), text("three"))
    with nbagent.Session.open(log_path) as session:
        assert nbagent.run(session, "hi", client=client, model=MODEL, context=SMALL) == "one"  # under half the trigger: not asked
        assert nbagent.run(session, fake_context.past_half(SMALL.threshold), client=client, model=MODEL, context=SMALL) == "two"
        assert nbagent.run(session, "again", client=client, model=MODEL, context=SMALL) == "three"
        notes = [n for n in of_type(session, ev.NOTE) if n.get("kind") == SERVER_REFUSED]
        assert len(notes) == 1 and "context_management" in notes[0]["text"] and session.state.server_refused
    # The first request that asks is refused and sent again without it; never the same request twice.
    assert ["context_management" in r.body for r in fake.requests] == [False, True, False, False]


# Waiting what the API asks ----------------------------------------------------------------------------------------------
def test_a_retry_after_past_the_cap_stops_the_run_saying_when_to_try_again(
    fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path
) -> None:
    fake.script(error(429, retry_after="120"), text("later"))
    started = time.monotonic()
    with nbagent.Session.open(log_path) as session:
        with pytest.raises(nbagent.ModelError, match=r"asks to wait 120 s .*more than max_retry_wait \(1 s\): try again after") as raised:
            nbagent.run(session, "hi", client=client, model=MODEL, max_retry_wait=1)
        assert time.monotonic() - started < 10 and len(fake.requests) == 1  # not waited for, not retried early
        assert "Rate limited" in str(raised.value) and raised.value.retry_after == 120.0
        [failure] = of_type(session, ev.MODEL_ERROR)
        assert failure["retry_after"] == 120.0 and "retry_in" not in failure
        assert nbagent.run(session, client=client, model=MODEL) == "later"  # run again (after the time it says): it goes on
    assert len(fake.requests) == 2


def test_a_retry_after_under_the_cap_is_waited_for(fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path) -> None:
    fake.script(error(429, retry_after="1"), text("made it"))
    started = time.monotonic()
    with nbagent.Session.open(log_path) as session:
        assert nbagent.run(session, "hi", client=client, model=MODEL, max_retry_wait=5) == "made it"
        assert [e["retry_in"] for e in of_type(session, ev.MODEL_ERROR)] == [1.0]
    assert time.monotonic() - started >= 1.0 and len(fake.requests) == 2


def test_an_interrupt_during_the_wait_stops_it(
    fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path, sigint_raises: None
) -> None:
    fake.script(error(429, retry_after="120"), text("resumed"))
    waiting = threading.Event()

    def interrupt() -> None:
        if waiting.wait(30):
            time.sleep(0.3)  # inside the wait
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    with nbagent.Session.open(log_path) as session:
        session.subscribe(lambda event: waiting.set() if event["type"] == ev.MODEL_ERROR else None)
        threading.Thread(target=interrupt, daemon=True).start()
        started = time.monotonic()
        with pytest.raises(nbagent.Interrupted):
            nbagent.run(session, "hi", client=client, model=MODEL)  # no cap: it would wait the whole 120 s
        assert time.monotonic() - started < 30 and len(fake.requests) == 1
        [failure] = of_type(session, ev.MODEL_ERROR)
        assert failure["retry_in"] == 120.0
        assert [e["type"] for e in session.events()][-1] == ev.INTERRUPTED
        assert nbagent.run(session, client=client, model=MODEL) == "resumed"


def test_the_panel_counts_a_retry_wait_down() -> None:
    panel = Panel("a wait")
    panel({"type": ev.MODEL_CALL, "seq": 1, "attempt": 1})
    panel({"type": ev.MODEL_ERROR, "seq": 2, "status": 429, "kind": "rate_limit_error", "retryable": True, "attempt": 1, "retry_in": 75})
    assert "model error: retrying in 1:15" in panel.header.value
    deadline = time.monotonic() + 5
    while "retrying in 1:14" not in panel.header.value and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "retrying in 1:14" in panel.header.value  # a second later, without another event
    panel({"type": ev.MODEL_CALL, "seq": 3, "attempt": 2})
    time.sleep(1.3)
    assert "retrying in" not in panel.header.value and "streaming (attempt 2)" in panel.header.value  # the countdown ended
    panel.finish()


# Thinking display ---------------------------------------------------------------------------------------------------
def test_summarized_thinking_is_asked_and_the_panel_shows_it_between_tool_calls(
    fake: FakeAnthropic, client: anthropic.Anthropic, log_path: Path
) -> None:
    @nbagent.tool(effect="read")
    def look() -> str:
        """Look at the data."""
        return "42 rows"

    fake.script(tool_use("look", {}, id="toolu_1"), text("There are 42 rows."))
    panel = Panel("display")
    with nbagent.Session.open(log_path) as session:
        session.subscribe(panel)
        # Claude Opus 5.5 thinks adaptively even at "off" (effort low); its default display omits the text.
        assert nbagent.run(session, "how many rows?", client=client, model="claude-opus-5-5", tools=[look]) == "There are 42 rows."
    panel.finish()
    assert [r.body["thinking"].get("display") for r in fake.requests] == ["summarized", "summarized"]
    html = panel.transcript_html()
    first, second = html.index("Thinking about request 1."), html.index("Thinking about request 2.")
    assert first < html.index("42 rows") < second < html.index("There are 42 rows.")  # the notes between the calls, shown


# The notebook setting ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "error"), [(0, None), (30, None), (2.5, None), (-1, "0 or more, not -1")])
def test_the_notebook_setting(value: float, error: str | None) -> None:
    from traitlets import TraitError

    from nbagent.notebook.settings import Agent

    agent = Agent()
    assert agent.max_retry_wait == 0  # no cap: every wait the API asks for is made
    if error is None:
        agent.max_retry_wait = value
        assert agent.max_retry_wait == value
    else:
        with pytest.raises(TraitError, match=error):
            agent.max_retry_wait = value


def test_the_notebook_setting_caps_the_wait_and_the_cell_says_when_to_try_again(shell: Any, fake: FakeAnthropic) -> None:
    from IPython.core.error import UsageError

    fake.script(error(429, retry_after="120"))
    shell.run_cell("%config Agent.max_retry_wait = 1")
    result = shell.run_cell("%agent hi")
    assert isinstance(result.error_in_exec, UsageError) and len(fake.requests) == 1
    assert "more than Agent.max_retry_wait (1 s): try again after" in str(result.error_in_exec)
