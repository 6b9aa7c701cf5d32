"""The approval rule, every case: for each mode, reason and place (a notebook, nbclient, a terminal, a headless run), who answers."""

from __future__ import annotations

import pytest

from nbagent.agent import approval
from nbagent.state.approval_rule import (
    AUTO_APPROVES,
    DECLINED,
    REASONS,
    ApprovalRequest,
    Decision,
    Here,
    Reason,
    who_answers,
    who_can_answer,
)

NOTEBOOK = Here(kernel=True, frontend_stdin=True)  # a panel in JupyterLab: a person can click
NBCLIENT = Here(kernel=True, tty=True)  # a kernel whose request allows no stdin (nbclient, papermill): nobody, whatever the tty
TERMINAL = Here(tty=True)  # terminal IPython, or nbagent.run() at a prompt
HEADLESS = Here()  # a script with no terminal, a CI job
PLACES = {"notebook": NOTEBOOK, "nbclient": NBCLIENT, "terminal": TERMINAL, "headless": HEADLESS}
OWN: tuple[Reason, ...] = ("irreversible", "outside_workspace")  # the user's own new calls
NEEDS_A_PERSON: tuple[Reason, ...] = ("untrusted", "unknown_outcome")

# mode, reasons, place -> who answers: a person ("panel", "console", "nobody") or the mode itself ("yes/no by <who>")
TABLE = [
    ("ask", OWN + NEEDS_A_PERSON, "notebook", "panel"),
    ("ask", OWN + NEEDS_A_PERSON, "nbclient", "nobody"),
    ("ask", OWN + NEEDS_A_PERSON, "terminal", "console"),
    ("ask", OWN + NEEDS_A_PERSON, "headless", "nobody"),
    ("auto", OWN, "notebook", "yes by auto"),
    ("auto", OWN, "nbclient", "yes by auto"),
    ("auto", OWN, "terminal", "yes by auto"),
    ("auto", OWN, "headless", "yes by auto"),
    ("auto", NEEDS_A_PERSON, "notebook", "panel"),
    ("auto", NEEDS_A_PERSON, "nbclient", "no by auto"),
    ("auto", NEEDS_A_PERSON, "terminal", "console"),
    ("auto", NEEDS_A_PERSON, "headless", "no by auto"),
    ("deny", OWN + NEEDS_A_PERSON, "notebook", "no by deny"),
    ("deny", OWN + NEEDS_A_PERSON, "nbclient", "no by deny"),
    ("deny", OWN + NEEDS_A_PERSON, "terminal", "no by deny"),
    ("deny", OWN + NEEDS_A_PERSON, "headless", "no by deny"),
]


def said(found: Decision | str) -> str:
    """A rule's answer in the table's words."""
    if isinstance(found, Decision):
        return f"{'yes' if found.approved else 'no'} by {found.by}"
    return found


@pytest.mark.parametrize("mode, reasons, place, expected", TABLE)
def test_who_answers(mode: str, reasons: tuple[Reason, ...], place: str, expected: str) -> None:
    for reason in reasons:
        found = who_answers(mode, reason, PLACES[place])
        assert said(found) == expected, (mode, reason, place)
        if isinstance(found, Decision) and not found.approved:
            assert found.note  # the model is told why


def test_the_table_covers_every_mode_reason_and_place() -> None:
    covered = {(mode, reason, place) for mode, reasons, place, _ in TABLE for reason in reasons}
    assert covered == {(mode, reason, place) for mode in ("ask", "auto", "deny") for reason in REASONS for place in PLACES}
    assert set(OWN) == AUTO_APPROVES and set(OWN + NEEDS_A_PERSON) == set(REASONS)


@pytest.mark.parametrize(
    "here, expected",
    [
        (Here(), "nobody"),
        (Here(tty=True), "console"),
        (Here(kernel=True), "nobody"),
        (Here(kernel=True, tty=True), "nobody"),
        (Here(kernel=True, frontend_stdin=True), "panel"),
        (Here(kernel=True, frontend_stdin=True, tty=True), "panel"),
    ],
)
def test_who_can_answer(here: Here, expected: str) -> None:
    assert who_can_answer(here) == expected


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="approval must be one of ask, auto, deny"):
        who_answers("sometimes", "irreversible", HEADLESS)
    with pytest.raises(ValueError, match="approval must be one of"):
        approval.resolve("sometimes")


# A call that rewrites what the user wrote (a proposed cell edit: asks_always), mode and place -> who answers.
# It asks under "ask" and "auto" alike and is refused under "deny" (issue 33 item 10); "auto" never says yes to it.
ASKS_ALWAYS = [
    ("ask", "notebook", "panel"),
    ("ask", "nbclient", "nobody"),
    ("ask", "terminal", "console"),
    ("ask", "headless", "nobody"),
    ("auto", "notebook", "panel"),
    ("auto", "nbclient", "no by auto"),
    ("auto", "terminal", "console"),
    ("auto", "headless", "no by auto"),
    ("deny", "notebook", "no by deny"),
    ("deny", "nbclient", "no by deny"),
    ("deny", "terminal", "no by deny"),
    ("deny", "headless", "no by deny"),
]


@pytest.mark.parametrize("mode, place, expected", ASKS_ALWAYS)
def test_a_cell_edit_asks_under_ask_and_auto_and_is_refused_under_deny(mode: str, place: str, expected: str) -> None:
    for reason in REASONS:
        found = who_answers(mode, reason, PLACES[place], asks_always=True)
        # a foreign or interrupted cell edit is asked as any such call is; the user's own is asked as well
        assert said(found) == expected, (mode, reason, place)
        if isinstance(found, Decision):
            assert found.note
    if expected == "no by auto":
        note = who_answers(mode, "irreversible", PLACES[place], asks_always=True)
        assert isinstance(note, Decision) and "rewrites what you wrote" in note.note


class Person:
    """An asker at a given place that records what it was asked and answers yes."""

    def __init__(self, here: Here) -> None:
        self.place, self.asked = here, []

    def here(self) -> Here:
        return self.place

    def ask(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request.reason)
        return Decision(True, "panel")


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("mode", ["ask", "auto", "deny"])
def test_a_policy_asks_its_person_exactly_where_the_rule_says(mode: str, place: str) -> None:
    person = Person(PLACES[place])
    policy = approval.resolve(mode, person)
    for reason in REASONS:
        request = ApprovalRequest("toolu_1", "write_note", {"text": "hi"}, "write", reason)
        found = who_answers(mode, request.reason, PLACES[place])
        decision = policy(request)
        assert decision == (found if isinstance(found, Decision) else Decision(True, "panel"))
    assert person.asked == [r for r in REASONS if not isinstance(who_answers(mode, r, PLACES[place]), Decision)]


def test_one_decline_note_for_a_persons_no(monkeypatch: pytest.MonkeyPatch) -> None:
    request = ApprovalRequest("toolu_1", "write_note", {"text": "hi"}, "write", "irreversible")
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    assert approval.resolve(lambda r: False)(request).note == DECLINED
    assert approval.console(request) == Decision(False, "console", DECLINED)


def test_the_prompt_shows_hidden_characters_escaped_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33 item 9, as text: the [y/N] question escapes bidi controls and zero-width characters and names them."""
    import io

    request = ApprovalRequest(
        "toolu_1", "propose_cell_edit", {"cell_id": "c1", "new_source": 'x = "a\u202e\u2066"\u200b'}, "irreversible", "irreversible"
    )
    out = io.StringIO()
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    assert approval.console(request, out=out) == Decision(False, "console", DECLINED)
    shown = out.getvalue()
    assert not any(c in shown for c in "\u202e\u2066\u200b"), shown
    assert "\\u202e" in shown and "\\u200b" in shown and "Warning: " in shown and "U+2066 LEFT-TO-RIGHT ISOLATE" in shown
