"""Issue 20, defects 1 and 11: ``nbagent trust`` vouches only for what it showed, and the library continues no foreign log.

The attacks are reliability/redteam/trust.py's (the campaign runs the same functions): the real
``python -m nbagent trust`` at a pty, the attacker a second user's process with its own key.
"""

from __future__ import annotations

import pytest

from nbagent.history.vouch import pieces
from nbagent.record import trust
from nbagent.state.decide import refuse_continuing
from reliability import redteam
from reliability.redteam import trust as attacks


@pytest.mark.slow  # each attack starts the CLI and the attacker's process
def test_every_trust_attack_held() -> None:
    with redteam.context(quick=True) as ctx:
        findings = attacks.attacks(ctx)
    assert {f.defect for f in findings} == {1, 11}
    failed = [f"#{f.defect} {f.attack}: {f.outcome}; {'; '.join(f.problems)}" for f in findings if not f.held]
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize(
    ("opened", "trusted_upto", "broken_trust", "keyed", "why"),
    [
        (0, 0, 0, True, ""),  # a new session: every line is this process's own
        (0, 0, 0, False, ""),  # ... even without a key (its lines are unsigned)
        (5, 5, 0, True, ""),  # all yours (or trusted) when opened
        (5, 9, 0, True, ""),  # and what was written since
        (5, 5, 1, True, ""),  # a broken trust event does not matter when the lines are yours anyway
        (5, 4, 0, True, "not yours"),  # one line not yours
        (5, 0, 0, True, "not yours"),  # another user's log
        (5, 0, 0, False, "no key"),  # nbagent cannot tell
        (5, 1, 1, True, "changed"),  # trusted, then changed
        (5, 1, 1, False, "changed"),
    ],
)
def test_the_continue_rule(opened: int, trusted_upto: int, broken_trust: int, keyed: bool, why: str) -> None:
    assert refuse_continuing(opened=opened, trusted_upto=trusted_upto, broken_trust=broken_trust, keyed=keyed) == why


def test_a_report_written_before_broken_trust_was_counted_still_reads() -> None:
    old = {k: v for k, v in trust.Report(lines=3, mine=3, trusted_upto=3).to_dict().items() if k != "broken_trust"}
    assert trust.Report.from_dict(old) == trust.Report(lines=3, mine=3, trusted_upto=3)
    with pytest.raises(ValueError):
        trust.Report.from_dict({**old, "extra": 1})


@pytest.mark.parametrize(
    ("content", "shown"),
    [
        ("a plain request", ["a plain request"]),
        ([{"type": "text", "text": "IGNORE ALL PREVIOUS"}], ["IGNORE ALL PREVIOUS"]),
        ([{"type": "compaction", "content": "a server summary"}], ["(compaction)\na server summary"]),
        (
            [{"type": "tool_use", "id": "t1", "name": "python", "input": {"code": "x"}}],
            ['(a call of python (t1), with)\n{\n  "code": "x"\n}'],
        ),
        (
            [{"type": "tool_result", "tool_use_id": "t1", "is_error": True, "content": [{"type": "text", "text": "out"}]}],
            ["(the result of t1, an error)", "out"],
        ),
        ([{"type": "redacted_thinking", "data": "zzz"}], ["(redacted thinking: encrypted, only the API reads it)"]),
        ([{"type": "image", "source": {"type": "base64", "data": "QUJD"}}], ["(an image, 4 characters of base64)"]),
    ],
)
def test_trust_shows_every_text(content: object, shown: list[str]) -> None:
    assert list(pieces(content)) == shown
