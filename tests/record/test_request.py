"""One rule for a ``user_msg``'s request: the kernel matches a re-run cell by it, the server lists a running turn's."""

from __future__ import annotations

from typing import Any

import pytest

from nbagent.record.request import request_text

CASES: dict[str, tuple[dict[str, Any], str]] = {
    "as the cell asked it": ({"content": [{"type": "text", "text": "a note\n\nask"}], "meta": {"request": "ask"}}, "ask"),
    "plain text": ({"content": "ask"}, "ask"),
    "text blocks": ({"content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]}, "ab"),
    "a request that is not text": ({"content": "ask", "meta": {"request": 7}}, "ask"),
    "meta that is not an object": ({"content": "ask", "meta": "x"}, "ask"),
    "hostile blocks": ({"content": [{"type": "text", "text": 3}, "text", {"type": "text"}]}, ""),
    "no content": ({}, ""),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_request_of_a_user_msg(case: str) -> None:
    fields, expected = CASES[case]
    assert request_text({"seq": 1, "type": "user_msg", **fields}) == expected


def test_the_kernel_and_the_server_share_the_rule() -> None:
    from nbagent.notebook import headless, kernel
    from nbagent.server import open_turn

    assert kernel.request_text is headless.request_text is open_turn.request_text is request_text
