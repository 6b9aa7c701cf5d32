"""The replay and approval rule, every case: what the loop does with an open call at the frontier."""

from __future__ import annotations

import pytest

from nbagent.agent import approval
from nbagent.state.approval_rule import Here
from nbagent.state.decide import (
    NOT_APPROVED,
    OUTSIDE_WORKSPACE,
    RUN,
    UNKNOWN_OUTCOME,
    UNTRUSTED,
    Ask,
    Call,
    Offered,
    Refuse,
    changed,
    decide,
)

READ, WRITE, KEYED, IRREVERSIBLE = Offered("read"), Offered("write"), Offered("write", keyed=True), Offered("irreversible")
OFFERED = ("lookup", "charge")


def call(attempts: int = 0, read: bool | None = None, keyed: bool | None = None) -> Call:
    """A recorded call of tool ``old``; ``read``/``keyed``: what its attempts were recorded as."""
    return Call("toolu_1", "old", attempts, read, keyed)


def missing(offered: str) -> Refuse:
    return Refuse(
        f"Tool 'old' is not available in this run (tools offered: {offered}); it may have been renamed or removed since "
        "the call was recorded. The call was not run.",
        f"The recorded call toolu_1 of tool 'old' was not run: no tool of that name is offered now (tools: {offered}); "
        "the model is told so.",
    )


UNKNOWN = Ask("unknown_outcome", UNKNOWN_OUTCOME)
# trusted, the recorded call, the tool offered now (None: none of that name), its guard  ->  verdict
CASES = [
    # No tool of that name now (renamed or removed): never run, whoever asked; the model hears which tools exist.
    (True, call(), None, None, missing("lookup, charge")),
    (False, call(), None, None, missing("lookup, charge")),
    (True, call(1, read=True, keyed=False), None, "outside_workspace", missing("lookup, charge")),
    # A call from a log this user did not write asks first, whatever else holds.
    (False, call(), READ, None, Ask("untrusted", UNTRUSTED)),
    (False, call(), WRITE, None, Ask("untrusted", UNTRUSTED)),
    (False, call(1, read=True, keyed=False), READ, None, Ask("untrusted", UNTRUSTED)),
    (False, call(2), IRREVERSIBLE, "outside_workspace", Ask("untrusted", UNTRUSTED)),
    # The user's own call, never started: only irreversible tools and paths outside the workspace ask.
    (True, call(), READ, None, RUN),
    (True, call(), WRITE, None, RUN),
    (True, call(), KEYED, None, RUN),
    (True, call(), IRREVERSIBLE, None, Ask("irreversible", "")),
    (True, call(), READ, "outside_workspace", Ask("outside_workspace", OUTSIDE_WORKSPACE)),
    (True, call(), WRITE, "outside_workspace", Ask("outside_workspace", OUTSIDE_WORKSPACE)),
    (True, call(), IRREVERSIBLE, "outside_workspace", Ask("irreversible", "")),
    # Started before and interrupted, the tool unchanged: a read or a keyed call runs again; anything else has an unknown outcome.
    (True, call(1, read=True, keyed=False), READ, None, RUN),
    (True, call(3, read=True, keyed=False), READ, "outside_workspace", RUN),
    (True, call(1, read=False, keyed=True), KEYED, None, RUN),
    (True, call(1, read=False, keyed=False), WRITE, None, UNKNOWN),
    (True, call(1, read=False, keyed=False), IRREVERSIBLE, None, UNKNOWN),
    (True, call(2, read=False, keyed=False), WRITE, "outside_workspace", UNKNOWN),
    # Started, and the tool changed since: it runs again only if it was a read then and now, or keyed then and now.
    (True, call(1, read=True, keyed=False), WRITE, None, UNKNOWN),  # read -> write
    (True, call(1, read=True, keyed=False), KEYED, None, UNKNOWN),  # read -> keyed write
    (True, call(1, read=False, keyed=False), KEYED, None, UNKNOWN),  # write -> keyed write: the first attempt had no key
    (True, call(1, read=False, keyed=False), READ, None, UNKNOWN),  # write -> read
    (True, call(1, read=False, keyed=True), READ, None, UNKNOWN),  # keyed write -> read
    (True, call(1, read=False, keyed=True), WRITE, None, UNKNOWN),  # keyed write -> unkeyed write
    (True, call(1, read=True, keyed=True), KEYED, None, RUN),  # a keyed read -> keyed write: keyed then and now
    # Started, but what the attempts were is not recorded: judged by the tool as it is now.
    (True, call(1), READ, None, RUN),
    (True, call(1), KEYED, None, RUN),
    (True, call(1), WRITE, None, UNKNOWN),
]


@pytest.mark.parametrize("trusted, recorded, tool, guard, expected", CASES)
def test_decide(trusted: bool, recorded: Call, tool: Offered | None, guard: str | None, expected: object) -> None:
    assert decide(recorded, tool, offered=OFFERED, trusted=trusted, guard=guard) == expected


def test_a_missing_tool_with_no_tools_offered_says_none() -> None:
    assert decide(call(), None, offered=(), trusted=True) == missing("none")


def was(then: str, now: str, outcome: str) -> str:
    return f"Tool 'old' changed since call toolu_1 started: it was recorded as {then}, now it is {now}; {outcome}"


WRITE_NO_KEY, WRITE_KEY, AGAIN, UNKNOWN_NOW = (
    "a write without an idempotency key",
    "a write with an idempotency key",
    "it runs again.",
    "its outcome is treated as unknown.",
)
# the recorded call, the tool offered now  ->  the warning for the user (None: nothing changed, or nothing to compare)
CHANGES = [
    (call(), WRITE, None),  # never started: nothing was recorded about it
    (call(1), WRITE, None),  # started, but not recorded as what (an older log)
    (call(1, read=True, keyed=False), None, None),  # no tool now: decide refuses it, with its own warning
    (call(1, read=True, keyed=False), READ, None),
    (call(2, read=False, keyed=True), KEYED, None),
    (call(1, read=False, keyed=False), IRREVERSIBLE, None),  # still a write without a key
    (call(1, read=True, keyed=False), WRITE, was("a read", WRITE_NO_KEY, UNKNOWN_NOW)),
    (call(1, read=False, keyed=False), KEYED, was(WRITE_NO_KEY, WRITE_KEY, UNKNOWN_NOW)),
    (call(1, read=False, keyed=True), READ, was(WRITE_KEY, "a read", UNKNOWN_NOW)),
    (call(1, read=False, keyed=False), READ, was(WRITE_NO_KEY, "a read", UNKNOWN_NOW)),
    (call(1, read=True, keyed=True), KEYED, was("a read", WRITE_KEY, AGAIN)),
]


@pytest.mark.parametrize("recorded, tool, expected", CHANGES)
def test_changed(recorded: Call, tool: Offered | None, expected: str | None) -> None:
    assert changed(recorded, tool) == expected


def request(reason: approval.Reason) -> approval.ApprovalRequest:
    return approval.ApprovalRequest("toolu_1", "write_note", {"text": "hi"}, "write", reason)


# policy, reason -> approved?  ("ask" with nobody at a terminal declines everything)
POLICIES = [
    ("auto", "irreversible", True),
    ("auto", "outside_workspace", True),
    ("auto", "untrusted", False),
    ("auto", "unknown_outcome", False),
    ("deny", "irreversible", False),
    ("deny", "outside_workspace", False),
    ("deny", "untrusted", False),
    ("deny", "unknown_outcome", False),
    ("ask", "irreversible", False),
    ("ask", "untrusted", False),
]


@pytest.mark.parametrize("policy, reason, approved", POLICIES)
def test_headless_policies(policy: str, reason: approval.Reason, approved: bool) -> None:
    decision = approval.resolve(policy)(request(reason))
    assert decision.approved is approved
    if not approved:
        assert decision.note  # the model is told why


@pytest.mark.parametrize("reason", approval.REASONS)
def test_a_callable_gets_the_reason_and_its_answer_counts(reason: approval.Reason) -> None:
    seen: list[str] = []
    for answer in (True, False):
        decision = approval.resolve(lambda r, a=answer: seen.append(r.reason) or a)(request(reason))
        assert decision.approved is answer and decision.by == "callback"
    assert seen == [reason, reason]


def test_auto_hands_foreign_and_unknown_outcome_calls_to_a_person_when_there_is_one() -> None:
    asked: list[str] = []

    class Panel:
        def here(self) -> Here:
            return Here(kernel=True, frontend_stdin=True)  # a front end a person answers in

        def ask(self, r: approval.ApprovalRequest) -> approval.Decision:
            asked.append(r.reason)
            return approval.Decision(True, "panel")

    policy = approval.resolve("auto", Panel())
    assert [policy(request(reason)).by for reason in approval.REASONS] == ["panel", "panel", "auto", "auto"]
    assert asked == ["untrusted", "unknown_outcome"]


def test_the_question_shows_every_argument_in_full() -> None:
    hidden = " " * 300 + "rm -rf ~"
    ask = approval.ApprovalRequest("toolu_1", "shell", {"command": "ls" + hidden, "timeout": 5}, "irreversible", "irreversible")
    assert "rm -rf ~" in ask.arguments() and '"timeout": 5' in ask.arguments()
    assert NOT_APPROVED and "shell" in ask.describe()
