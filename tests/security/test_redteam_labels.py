"""Issue 20, defects 4 and 9 (reliability/redteam/labels.py): forged trust labels in a database's index, and thinking shown.

The campaign's attacks run here as they run in ``python -m reliability``: a second database role and
nbagent key (mallory) in a process of her own, the real command line, a real Jupyter server, and a
real PostgreSQL cluster with the documented grants.  The rules under them have table tests below.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nbagent.record import redact
from reliability import redteam
from reliability.redteam import labels
from tests.support import pg_harness

SECRET = labels.SECRET


@pytest.mark.slow
@pytest.mark.postgres
def test_the_forged_label_and_thinking_attacks_hold() -> None:
    if pg_harness.missing():
        pytest.skip(pg_harness.missing() or "")
    pytest.importorskip("jupyter_server")
    with redteam.context(quick=True) as ctx:
        findings = labels.attacks(ctx)
    assert {f.defect for f in findings} == {4, 9}
    assert len(findings) >= 8
    failed = [f"#{f.defect} {f.attack}: {f.outcome} {f.problems}" for f in findings if not f.held]
    assert not failed, "\n".join(failed)


THINKING = {"type": "thinking", "thinking": f"the key is {SECRET}", "signature": "sig" + SECRET}
REDACTED = {"type": "redacted_thinking", "data": "enc" + SECRET}
COMPACTION = {"type": "compaction", "content": f"summary with {SECRET}"}
TEXT = {"type": "text", "text": "hello"}


@pytest.mark.parametrize(
    ("block", "shown"),
    [
        (THINKING, {"type": "thinking", "thinking": "the key is [REDACTED]"}),
        (REDACTED, {"type": "redacted_thinking"}),
        (COMPACTION, {"type": "compaction", "content": "summary with [REDACTED]"}),
    ],
)
def test_a_verbatim_block_is_shown_redacted_without_what_only_the_api_reads(block: dict[str, Any], shown: dict[str, Any]) -> None:
    assert redact.shown_block(block) == shown


def test_an_event_is_shown_with_its_verbatim_blocks_redacted_and_the_logged_event_untouched() -> None:
    event = {"seq": 2, "type": "assistant_msg", "content": [THINKING, TEXT, REDACTED, COMPACTION]}
    before = copy.deepcopy(event)
    shown = redact.shown_event(event)
    assert event == before  # the event as read is not changed
    assert SECRET not in str(shown) and shown["content"][1] == TEXT and shown["seq"] == 2
    plain = {"seq": 1, "type": "user_msg", "content": f"user text {SECRET}"}  # redacted when written, not here
    assert redact.shown_event(plain) is plain
    other = {"seq": 3, "type": "tool_result", "content": [THINKING]}  # only an assistant_msg's blocks are verbatim
    assert redact.shown_event(other) is other
