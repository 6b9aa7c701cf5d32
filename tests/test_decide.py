"""The replay and approval rule, every case: what the loop does with an open call at the frontier."""

from __future__ import annotations

import pytest

from nbagent import approval
from nbagent.loop import NOT_APPROVED, OUTSIDE_WORKSPACE, RUN, UNKNOWN_OUTCOME, UNTRUSTED, Ask, decide

# trusted, attempts, safe to repeat, effect, guard  ->  verdict
CASES = [
    # A call from a log this user did not write asks first, whatever else holds.
    (False, 0, True, "read", None, Ask("untrusted", UNTRUSTED)),
    (False, 0, False, "write", None, Ask("untrusted", UNTRUSTED)),
    (False, 1, True, "read", None, Ask("untrusted", UNTRUSTED)),
    (False, 2, False, "irreversible", "outside_workspace", Ask("untrusted", UNTRUSTED)),
    # The user's own call, never started: only irreversible tools and paths outside the workspace ask.
    (True, 0, True, "read", None, RUN),
    (True, 0, False, "write", None, RUN),
    (True, 0, False, "irreversible", None, Ask("irreversible", "")),
    (True, 0, True, "read", "outside_workspace", Ask("outside_workspace", OUTSIDE_WORKSPACE)),
    (True, 0, False, "write", "outside_workspace", Ask("outside_workspace", OUTSIDE_WORKSPACE)),
    (True, 0, False, "irreversible", "outside_workspace", Ask("irreversible", "")),
    # Started before and interrupted: a read or a keyed call runs again; anything else has an unknown outcome.
    (True, 1, True, "read", None, RUN),
    (True, 1, True, "write", None, RUN),
    (True, 3, True, "read", "outside_workspace", RUN),
    (True, 1, False, "write", None, Ask("unknown_outcome", UNKNOWN_OUTCOME)),
    (True, 1, False, "irreversible", None, Ask("unknown_outcome", UNKNOWN_OUTCOME)),
    (True, 2, False, "write", "outside_workspace", Ask("unknown_outcome", UNKNOWN_OUTCOME)),
]


@pytest.mark.parametrize("trusted, attempts, safe, effect, guard, expected", CASES)
def test_decide(trusted: bool, attempts: int, safe: bool, effect: str, guard: str | None, expected: object) -> None:
    assert decide(trusted=trusted, attempts=attempts, safe_to_repeat=safe, effect=effect, guard=guard) == expected


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

    def person(r: approval.ApprovalRequest) -> approval.Decision:
        asked.append(r.reason)
        return approval.Decision(True, "panel")

    policy = approval.auto(person)
    assert [policy(request(reason)).by for reason in approval.REASONS] == ["panel", "panel", "auto", "auto"]
    assert asked == ["untrusted", "unknown_outcome"]


def test_the_question_shows_every_argument_in_full() -> None:
    hidden = " " * 300 + "rm -rf ~"
    ask = approval.ApprovalRequest("toolu_1", "shell", {"command": "ls" + hidden, "timeout": 5}, "irreversible", "irreversible")
    assert "rm -rf ~" in ask.arguments() and '"timeout": 5' in ask.arguments()
    assert NOT_APPROVED and "shell" in ask.describe()
