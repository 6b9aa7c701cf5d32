"""Scenario 11, replay determinism: a log's recorded tool calls and the code's tools disagree; resume must say so, not guess.

Each case writes a log as an earlier run would have left it (a tool call recorded, maybe
started, with the tool's effect and key at that time), then resumes it with other tool
declarations, through the real SDK against the fake server.  Checked: whether the tool
body ran, which approvals were asked, the result the model got, and whether the user was
told (a ``note`` event of kind ``replay_mismatch`` and a logged warning).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic

import nbagent
from nbagent.agent.approval import AUTO_APPROVES
from nbagent.state.decide import UNKNOWN_OUTCOME
from nbagent.tools.decorator import idempotency_key
from tests.support.fake_anthropic import FakeAnthropic, text


@dataclass(frozen=True)
class Case:
    """A recorded call (tool name, started as which effect, with a key or not) and the tools the resume offers."""

    label: str
    recorded: str  # the tool name in the log
    started: str | None  # None: never started; else the effect recorded in tool_started
    keyed: bool  # the recorded tool_started carried an idempotency key
    now: str | None  # the offered tool's name (None: none offered)
    effect: str = "write"  # its effect now
    takes_key: bool = False  # whether it takes a key now
    ran: bool = False  # expected: the body runs without approval
    asked: str | None = None  # expected approval reason (the body runs only if approved)
    told: bool = False  # expected: a replay_mismatch note and a warning


CASES = (
    Case("tool removed, call not started", "send_email", None, False, None, told=True),
    Case("tool renamed, call not started", "send_mail", None, False, "send_email", told=True),
    Case("tool removed, call started", "send_email", "write", False, None, told=True),
    Case("un-keyed write now declared read", "send_email", "write", False, "send_email", effect="read", asked="unknown_outcome", told=True),
    Case("un-keyed write now takes a key", "send_email", "write", False, "send_email", takes_key=True, asked="unknown_outcome", told=True),
    Case("keyed write now without a key", "send_email", "write", True, "send_email", asked="unknown_outcome", told=True),
    Case(
        "keyed write now irreversible and keyed", "send_email", "write", True, "send_email", effect="irreversible", takes_key=True, ran=True
    ),
    Case("read now a write", "send_email", "read", False, "send_email", asked="unknown_outcome", told=True),
    Case("unchanged keyed write (control)", "send_email", "write", True, "send_email", takes_key=True, ran=True),
    Case("unchanged read (control)", "send_email", "read", False, "send_email", effect="read", ran=True),
    Case("unchanged un-keyed write (control)", "send_email", "write", False, "send_email", asked="unknown_outcome"),
    Case("not started, now irreversible", "send_email", None, False, "send_email", effect="irreversible", asked="irreversible"),
)


def _tool(case: Case, calls: list[str]) -> nbagent.Tool:
    if case.takes_key:

        def body(to: str, idempotency_key: str) -> str:
            calls.append(to)
            return f"sent to {to}"
    else:

        def body(to: str) -> str:  # type: ignore[misc]
            calls.append(to)
            return f"sent to {to}"

    body.__doc__ = "Send an email.\n\nArgs:\n    to: The address.\n"
    return nbagent.Tool(body, effect=case.effect, name=case.now)  # type: ignore[arg-type]


def _write_recorded(log: Path, case: Case) -> None:
    """The log an earlier run left: a request, the model's tool call, maybe its start; then the process died."""
    with nbagent.Session.open(log) as session:
        session.append("user_msg", content="Email the report to ada@example.com.")
        session.append("model_call", model="claude-test", attempt=1)
        use = {"type": "tool_use", "id": "toolu_r1", "name": case.recorded, "input": {"to": "ada@example.com"}}
        session.append("assistant_msg", message_id="msg_r1", model="claude-test", content=[use], stop_reason="tool_use", usage={})
        if case.started is not None:
            started: dict[str, Any] = {"tool_use_id": "toolu_r1", "name": case.recorded, "effect": case.started, "attempt": 1}
            if case.keyed:
                started["idempotency_key"] = idempotency_key(session.id, "toolu_r1")
            session.append("tool_started", **started)


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def run_case(folder: Path, case: Case, approval: str, client: anthropic.Anthropic) -> list[str]:
    """Resume one recorded log; return what disagreed with the expectation."""
    log = folder / "session.jsonl"
    _write_recorded(log, case)
    calls: list[str] = []
    tools = [_tool(case, calls)] if case.now else []
    warnings = _Warnings()
    logger = logging.getLogger("nbagent")
    logger.addHandler(warnings)
    try:
        with nbagent.Session.open(log) as session:
            final = nbagent.run(session, tools=tools, client=client, model="claude-test", approval=approval)
            events = list(session.events())
    finally:
        logger.removeHandler(warnings)
    wrong = []
    asked = [e["reason"] for e in events if e["type"] == "approval" and e["decision"] == "pending"]
    expected_asked = [case.asked] if case.asked else []
    if asked != expected_asked:
        wrong.append(f"approvals asked {asked}, expected {expected_asked}")
    # "auto" approves only the user's own new calls (an irreversible tool), never a repeat of unknown outcome.
    should_run = case.ran or (case.asked in AUTO_APPROVES and approval == "auto")
    if calls != (["ada@example.com"] if should_run else []):
        wrong.append(f"the tool body ran {len(calls)} times, expected {int(should_run)}")
    [result] = [e for e in events if e["type"] == "tool_result"]
    if not should_run:
        content = str(result["content"])
        if not result.get("is_error"):
            wrong.append(f"a call that was not run got a non-error result: {content}")
        if case.now is None or case.now != case.recorded:
            if "not available" not in content or (case.now and case.now not in content):
                wrong.append(f"the model was not told which tools exist: {content}")
        elif case.asked == "unknown_outcome" and not content.startswith(UNKNOWN_OUTCOME):
            wrong.append(f"the model was not told the outcome is unknown: {content}")
    notes = [e for e in events if e["type"] == "note" and e.get("kind") == "replay_mismatch"]
    if bool(notes) != case.told or bool(warnings.messages) != case.told:
        wrong.append(f"user told: {len(notes)} notes, {len(warnings.messages)} warnings; expected {case.told}")
    if final != "Done.":
        wrong.append(f"the resumed run did not finish: {final!r}")
    return [f"{case.label} (approval={approval}): {w}" for w in wrong]


def run_replay(quick: bool, seed: int) -> dict[str, Any]:
    """Scenario 11 (deterministic; ``seed`` only labels the row)."""
    began = time.perf_counter()
    approvals = ("deny",) if quick else ("deny", "auto")
    failures: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="nbagent-replay-"))
    count = 0
    with FakeAnthropic() as fake:
        fake.responder = lambda request: text("Done.")
        client = anthropic.Anthropic(base_url=fake.base_url, api_key="test-key", max_retries=0)
        try:
            for approval in approvals:
                for index, case in enumerate(CASES):
                    case_folder = folder / f"{approval}{index}"
                    case_folder.mkdir()
                    failures += run_case(case_folder, case, approval, client)
                    count += 1
        finally:
            client.close()
            shutil.rmtree(folder, ignore_errors=True)
    return {
        "scenario": "11. Replay when the tools changed",
        "cases": f"{count} resumes ({len(CASES)} recorded-vs-declared combinations x approval {'/'.join(approvals)})",
        "checked": (
            "a recorded call to a removed or renamed tool is not run, the model gets an error naming the tools "
            "offered; a started call re-runs unasked only if it was a read then and now, or keyed then and now, "
            "else it goes to approval as unknown_outcome; every mismatch is told to the user (note event "
            "replay_mismatch + logged warning); unchanged tools give no note"
        ),
        "result": "pass" if not failures else f"FAIL ({len(failures)})",
        "failures": failures[:20],
        "details": {"combinations": "; ".join(c.label for c in CASES)},
        "seed": seed,
        "duration": time.perf_counter() - began,
    }


SCENARIOS: dict[str, Callable[[bool, int], dict[str, Any]]] = {"replay": run_replay}
