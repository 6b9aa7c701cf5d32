"""A field is redacted whole, then clipped (issue 33, item 4): a secret straddling the cut leaves nothing behind."""

from __future__ import annotations

import pytest

from nbagent.notebook import interpolate
from tests.record.test_redact_escaped import KEY, leaked

TOKEN = "sk-ant-api03-" + "Qz7" * 31 + "AA"
TAIL = interpolate.VALUE_LIMIT - interpolate.VALUE_LIMIT // 2  # what a clipped value keeps of its end
CELL_TAIL = interpolate.CELL_LIMIT - interpolate.CELL_LIMIT // 2


def token_leaked(out: str) -> bool:
    return any(TOKEN[i : i + 12] in out for i in range(13, len(TOKEN) - 12))


@pytest.mark.parametrize(
    "value",
    [
        "a" * 12_000 + TOKEN + "b" * (TAIL - len(TOKEN) + 13),  # the tail starts right after the token's prefix
        "a" * (interpolate.VALUE_LIMIT // 2 - 20) + TOKEN + " " + "b" * 30_000,  # the head ends 20 characters into it
        "c" * 20_000 + KEY,  # a key past the first 10,000 characters, its BEGIN line clipped away
        "d" * 20_000 + repr(KEY),
    ],
    ids=["token-tail", "token-head", "key-far", "key-far-repr"],
)
def test_a_string_field_is_redacted_before_it_is_clipped(value: str) -> None:
    summary, secret = interpolate.variable_summary("blob", value)
    assert secret and "value hidden" in summary  # checked whole: the value is not shown at all
    shown, _ = interpolate.value_text("blob", value, summary, False)  # and were it shown, redacted before the clip
    assert "clipped" in shown and not token_leaked(shown) and leaked(shown) is None


@pytest.mark.parametrize(
    "text",
    ["x" * 9_000 + TOKEN + "y" * (CELL_TAIL - len(TOKEN) + 13), "x" * 9_000 + repr(KEY) + "y" * 100],
    ids=["token-tail", "key-tail"],
)
def test_a_cell_field_is_redacted_before_it_is_clipped(text: str) -> None:
    shown = interpolate.block("Out[3]", text)
    assert "more characters not shown" in shown and not token_leaked(shown) and leaked(shown) is None
