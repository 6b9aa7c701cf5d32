"""The context-window rules (nbagent/state/context.py) and the fold's compaction and clipping rules, as tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nbagent import Session, read_events
from nbagent.errors import NbagentError
from nbagent.record import events as ev
from nbagent.state import context as ctx
from nbagent.state.fold import State, apply, fold
from nbagent.state.model_table import thinking_request


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str, *calls: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}, *({"type": "tool_use", "id": c, "name": "t", "input": {}} for c in calls)],
    }


def results(*ids: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids]}


BIG = "x" * 4_000  # about 1,000 tokens


@pytest.mark.parametrize(
    ("messages", "keep_tokens", "keep"),
    [
        ([user("q")], 10, 0),  # nothing before the request: nothing to compact
        ([user("q"), assistant("a")], 10, 1),  # the answer is kept, the request summarised
        ([user(BIG), assistant(BIG), user("q2")], 10, 1),  # the new request alone
        ([user(BIG), assistant(BIG), user("q2")], 5_000, 2),  # everything after the first message fits
        ([user("q"), assistant("a", "t1"), results("t1")], 10, 2),  # a tool result never starts the kept part
        ([user("q"), assistant("a", "t1"), results("t1"), assistant("b")], 10, 1),
        ([user("q"), assistant(BIG, "t1"), results("t1"), assistant(BIG, "t2"), results("t2")], 1_200, 2),
    ],
)
def test_keep_count(messages: list[dict[str, Any]], keep_tokens: int, keep: int) -> None:
    assert ctx.keep_count(messages, keep_tokens) == keep
    if keep:
        assert ctx.can_start(messages[-keep])


@pytest.mark.parametrize(
    ("messages", "limit", "end"),
    [
        ([user("q"), assistant("a")], 1_000, 2),  # fits: all of it
        ([user(BIG), assistant(BIG), user(BIG), assistant(BIG)], 1_500, 2),  # two parts
        ([user(BIG), assistant(BIG, "t"), results("t"), assistant(BIG)], 1_200, 3),  # never before a tool result
        ([user(BIG), assistant(BIG)], 10, 2),  # no place to split: the whole prefix
    ],
)
def test_first_chunk(messages: list[dict[str, Any]], limit: int, end: int) -> None:
    assert ctx.first_chunk(messages, limit) == end


@pytest.mark.parametrize(
    ("content", "budget", "expected_texts"),
    [
        ("short", 100, None),  # unchanged
        ("abcdefghij", None, None),  # no budget: whole
        ("abcdefghij", 4, ["abcd", "NOTE"]),
        ([{"type": "text", "text": "abc"}, {"type": "text", "text": "defgh"}], 5, ["abc", "de", "NOTE"]),
        ([{"type": "text", "text": "abcdef"}, {"type": "image", "source": {}}, {"type": "text", "text": "xyz"}], 3, ["abc", None, "NOTE"]),
    ],
)
def test_clip_result(content: Any, budget: int | None, expected_texts: list[str | None] | None) -> None:
    clipped = ctx.clip_result(content, budget, seq=7)
    if expected_texts is None:
        assert clipped is content
        return
    texts = [b.get("text") for b in clipped]
    assert texts[:-1] == expected_texts[:-1]
    assert "event 7" in texts[-1] and f"first {budget:,}" in texts[-1]


@pytest.mark.parametrize(
    ("kind", "status", "message", "too_long"),
    [
        ("invalid_request_error", 400, "prompt is too long: 210000 tokens > 200000 maximum", True),
        ("prompt_too_long", 400, "Prompt is too long", True),
        ("request_too_large", 413, "Request exceeds the maximum allowed number of bytes", True),
        ("invalid_request_error", 400, "context_management: Extra inputs are not permitted", False),
        ("overloaded_error", 529, "Overloaded", False),
    ],
)
def test_error_rules(kind: str, status: int, message: str, too_long: bool) -> None:
    assert ctx.is_prompt_too_long(kind, status, message) is too_long


# The local fallback is taken only on the API's refusal of the compaction part itself (a 400 naming context_management,
# the edit or the beta), on a model the table does not know to compact: never on any 400 (a spend limit is a 400 too).
UNKNOWN_FIELD = "context_management: Extra inputs are not permitted"
SPEND = "You have reached your specified workspace API usage limits. You will regain access on 2026-12-01 at 00:00 UTC."


@pytest.mark.parametrize(
    ("kind", "status", "message", "model", "refused"),
    [
        ("invalid_request_error", 400, UNKNOWN_FIELD, "claude-test", True),  # unknown model: no server compaction here
        ("invalid_request_error", 400, UNKNOWN_FIELD, "claude-haiku-4-5", True),  # not offered (False)
        ("invalid_request_error", 400, "context_management.edits.0.type: compact_20260112 is not supported", "claude-test", True),
        ("invalid_request_error", 400, "anthropic-beta: compact-2026-01-12 is not available", "claude-test", True),
        ("invalid_request_error", 400, SPEND, "claude-test", False),  # a spend limit: the run ends with it
        ("invalid_request_error", 400, SPEND, "claude-sonnet-5-5", False),
        ("invalid_request_error", 400, "messages: text content blocks must be non-empty", "claude-test", False),
        ("invalid_request_error", 400, "Invalid `signature` in `thinking` block", "claude-sonnet-5-5", False),
        ("invalid_request_error", 400, UNKNOWN_FIELD, "claude-opus-4-6", False),  # documented: a refused request, not a fallback
        ("invalid_request_error", 400, UNKNOWN_FIELD, "claude-sonnet-4-6", False),
        ("prompt_too_long", 400, "prompt is too long: context_management", "claude-test", False),
        ("request_too_large", 413, UNKNOWN_FIELD, "claude-test", False),
        ("overloaded_error", 529, UNKNOWN_FIELD, "claude-test", False),
        ("api_error", 500, UNKNOWN_FIELD, "claude-test", False),
        ("invalid_request_error", None, UNKNOWN_FIELD, "claude-test", False),  # mid-stream
    ],
)
def test_compaction_fallback_rule(kind: str, status: int | None, message: str, model: str, refused: bool) -> None:
    assert ctx.refuses_compaction(kind, status, message, model) is refused


@pytest.mark.parametrize(
    ("settings", "model", "refused", "server"),
    [
        (ctx.ContextSettings(), "claude-sonnet-5-5", False, True),
        (ctx.ContextSettings(), "claude-sonnet-5-5", True, False),  # the API refused it once: local from then on
        (ctx.ContextSettings(), "my-gateway-model", False, False),
        (ctx.ContextSettings(compact="server"), "my-gateway-model", True, True),  # asked for: always
        (ctx.ContextSettings(compact="local"), "claude-sonnet-5-5", False, False),
        (ctx.ContextSettings(compact="off"), "claude-sonnet-5-5", False, False),
    ],
)
def test_which_compaction(settings: ctx.ContextSettings, model: str, refused: bool, server: bool) -> None:
    assert ctx.uses_server(settings, model, refused) is server


STARTS_COMPACTED = [{"role": "assistant", "content": [{"type": "compaction", "content": "S"}]}, {"role": "user", "content": "next"}]


@pytest.mark.parametrize(
    ("messages", "estimate", "asks"),
    [
        ([{"role": "user", "content": "hi"}], 2_499, False),  # under half the trigger (5,000): the plain endpoint
        ([{"role": "user", "content": "hi"}], 2_500, True),  # at half: asked, well before the server would compact
        ([{"role": "user", "content": "hi"}], 10**6, True),
        (STARTS_COMPACTED, 0, True),  # a history starting at a compaction block needs the beta whatever its size
    ],
)
def test_a_request_asks_for_server_compaction_from_half_the_trigger(messages: list[dict[str, Any]], estimate: int, asks: bool) -> None:
    assert ctx.asks_compaction(ctx.ContextSettings(trigger=5_000), messages, lambda: estimate) is asks
    assert ctx.starts_compacted(messages) is (messages is STARTS_COMPACTED)


def test_the_default_trigger_is_a_margin_under_the_window() -> None:
    assert ctx.ContextSettings().threshold == 175_000
    assert ctx.ContextSettings(window=1_000_000).threshold == 875_000
    assert ctx.ContextSettings(trigger=5_000).threshold == 5_000
    assert ctx.needs_compaction(ctx.ContextSettings(), False, lambda: 175_000)
    assert not ctx.needs_compaction(ctx.ContextSettings(), False, lambda: 174_999)
    assert not ctx.needs_compaction(ctx.ContextSettings(), True, lambda: 175_000)
    assert not ctx.needs_compaction(ctx.ContextSettings(compact="off"), False, lambda: 10**9)

    def never() -> int:
        raise AssertionError("the estimate is not needed where the server compacts or compaction is off")

    assert not ctx.needs_compaction(ctx.ContextSettings(), True, never)
    assert not ctx.needs_compaction(ctx.ContextSettings(compact="off"), False, never)


@pytest.mark.parametrize(
    ("setting", "param"),
    [(None, None), ("off", None), ("adaptive", {"type": "adaptive"}), (2048, {"type": "enabled", "budget_tokens": 2048})],
)
def test_thinking_param(setting: Any, param: Any) -> None:
    assert thinking_request(setting, "claude-test", 8192).param == param


@pytest.mark.parametrize("setting", [512, 8192, "lots", True, 3.5])
def test_a_bad_thinking_setting_says_what_is_allowed(setting: Any) -> None:
    with pytest.raises(NbagentError, match="'off', 'adaptive', or a token budget of at least 1024"):
        thinking_request(setting, "claude-test", 8192)


# The fold ----------------------------------------------------------------------------------------------------
def events(*specs: tuple[str, dict[str, Any]]) -> list[ev.Event]:
    return [ev.make(n, kind, payload) for n, (kind, payload) in enumerate([(ev.SESSION_START, {"session_id": "s"}), *specs], 1)]


ANSWER = (
    ev.ASSISTANT_MSG,
    {"content": [{"type": "text", "text": "a1"}], "stop_reason": "end_turn", "usage": {"input_tokens": 90, "output_tokens": 10}},
)
COMPACTED = {"type": "compaction", "content": "summary by the server", "encrypted_content": "opaque"}


@pytest.mark.parametrize(
    ("specs", "messages"),
    [
        (  # the server compacted: the request starts at its block, kept verbatim, and what came before is not sent
            [(ev.USER_MSG, {"content": "q1"}), ANSWER, (ev.USER_MSG, {"content": "q2"}),
             (ev.ASSISTANT_MSG, {"content": [COMPACTED, {"type": "text", "text": "a2"}], "stop_reason": "end_turn"}),
             (ev.USER_MSG, {"content": "q3"})],
            [{"role": "assistant", "content": [COMPACTED, {"type": "text", "text": "a2"}]}, {"role": "user", "content": "q3"}],
        ),
        (  # a failed server compaction (no summary) changes nothing
            [(ev.USER_MSG, {"content": "q1"}), (ev.ASSISTANT_MSG, {"content": [{"type": "compaction", "content": None}, {"type": "text", "text": "a"}]})],
            [{"role": "user", "content": "q1"}, {"role": "assistant", "content": [{"type": "compaction", "content": None}, {"type": "text", "text": "a"}]}],
        ),
        (  # a local summary of the first two messages goes first into the kept request
            [(ev.USER_MSG, {"content": "q1"}), ANSWER, (ev.USER_MSG, {"content": "q2"}),
             (ev.COMPACTION_STARTED, {"keep": 1}), (ev.COMPACTION, {"summary": "S", "messages": 2, "final": True})],
            [{"role": "user", "content": [{"type": "text", "text": ctx.SUMMARY_PREFIX + "S"}, {"type": "text", "text": "q2"}]}],
        ),
        (  # kept part starting with an answer: the summary is a user message of its own
            [(ev.USER_MSG, {"content": "q1"}), ANSWER, (ev.COMPACTION_STARTED, {"keep": 1}), (ev.COMPACTION, {"summary": "S", "messages": 1})],
            [{"role": "user", "content": [{"type": "text", "text": ctx.SUMMARY_PREFIX + "S"}]}, {"role": "assistant", "content": [{"type": "text", "text": "a1"}]}],
        ),
        (  # a budget recorded in the session clips tool results in the request
            [(ev.CONTEXT, {"result_budget": 3}), (ev.USER_MSG, {"content": "q"}),
             (ev.ASSISTANT_MSG, {"content": [{"type": "tool_use", "id": "t", "name": "read", "input": {}}], "stop_reason": "tool_use"}),
             (ev.TOOL_RESULT, {"tool_use_id": "t", "content": "abcdef"})],
            None,
        ),
    ],
)  # fmt: skip
def test_the_fold_starts_the_request_at_the_latest_compaction(specs: list[tuple[str, dict[str, Any]]], messages: Any) -> None:
    state = fold(events(*specs))
    if messages is not None:
        assert state.messages == messages
    else:
        result = state.messages[-1]["content"][0]["content"]
        assert result[0] == {"type": "text", "text": "abc"} and "event 5" in result[1]["text"]


def test_a_compaction_in_parts_stays_in_progress_until_its_last_part() -> None:
    log = events(
        (ev.USER_MSG, {"content": "q1"}), ANSWER, (ev.USER_MSG, {"content": "q2"}), ANSWER, (ev.USER_MSG, {"content": "q3"}),
        (ev.COMPACTION_STARTED, {"keep": 1, "reason": "trigger"}),
        (ev.COMPACTION, {"summary": "S1", "messages": 2, "final": False}),
    )  # fmt: skip
    state = fold(log)
    assert state.compacting == {"keep": 1, "reason": "trigger", "seq": 7} and state.compactions == 0
    assert [m["role"] for m in state.messages] == ["user", "assistant", "user"]
    apply(state, ev.make(9, ev.COMPACTION, {"summary": "S2", "messages": 2, "final": True}))
    assert state.compacting is None and state.compactions == 1
    assert state.messages == [
        {"role": "user", "content": [{"type": "text", "text": ctx.SUMMARY_PREFIX + "S2"}, {"type": "text", "text": "q3"}]}
    ]
    assert state.frontier == "model"


def test_context_use_comes_from_the_last_reply() -> None:
    state = fold(events((ev.CONTEXT, {"window": 1_000}), (ev.USER_MSG, {"content": "q"}), ANSWER))
    assert (state.context_tokens, state.window) == (100, 1_000)
    assert State.from_dict(state.to_dict()) == state


def test_only_the_latest_tool_results_stay_whole_when_asked() -> None:
    def turn(n: int) -> list[tuple[str, dict[str, Any]]]:
        call = {"type": "tool_use", "id": f"t{n}", "name": "read", "input": {}}
        return [
            (ev.ASSISTANT_MSG, {"content": [call], "stop_reason": "tool_use"}),
            (ev.TOOL_RESULT, {"tool_use_id": f"t{n}", "content": f"r{n}"}),
        ]

    log = events((ev.CONTEXT, {"keep_tool_results": 2}), (ev.USER_MSG, {"content": "q"}), *turn(1), *turn(2), *turn(3))
    state = fold(log)
    sent = [m["content"][0]["content"] for m in state.messages if m["role"] == "user" and isinstance(m["content"], list)]
    assert sent[1:] == ["r2", "r3"] and sent[0] == ctx.cleared_result(5)
    assert next(e for e in log if e["seq"] == 5)["content"] == "r1"  # the log keeps it
    assert State.from_dict(state.to_dict()) == state
    without = fold([e for e in log if e["type"] != ev.CONTEXT])
    assert [m["content"][0]["content"] for m in without.messages[2::2]] == ["r1", "r2", "r3"]


def test_cleared_results_and_compactions_survive_a_snapshot_resume(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Session.open(path, fsync="never", snapshot_every=3) as session:
        session.append(ev.CONTEXT, keep_tool_results=2, result_budget=5)
        session.append(ev.USER_MSG, content="q")
        for n in range(6):
            call = {"type": "tool_use", "id": f"t{n}", "name": "read", "input": {}}
            session.append(ev.ASSISTANT_MSG, content=[call], stop_reason="tool_use")
            session.append(ev.TOOL_RESULT, tool_use_id=f"t{n}", content=f"result number {n}")
            if n == 3:
                session.append(ev.COMPACTION_STARTED, keep=2)
                session.append(ev.COMPACTION, summary="S", messages=len(session.messages) - 2, final=True)
    with Session.open(path, fsync="never") as reopened:  # from the snapshot, its messages still encoded
        assert reopened.snapshot_note == "" and list(reopened.messages) == fold(list(read_events(path))).messages


# Images: a request carries at most MAX_IMAGES; the oldest beyond it go in as notes -----------------------------------
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}


@pytest.mark.parametrize(
    ("content", "drop", "expected"),
    [
        ("text only", 0, 0),
        ([{"type": "text", "text": "t"}, IMAGE, IMAGE], 0, 2),
        ([IMAGE, {"type": "text", "text": "t"}, IMAGE], 1, 1),  # the first one goes
        ([IMAGE, IMAGE], 2, 0),
    ],
)
def test_images_are_counted_and_the_first_ones_dropped(content: Any, drop: int, expected: int) -> None:
    if drop:
        content = ctx.drop_images(content, drop, 7)
        assert [b["text"] for b in content if b["type"] == "text" and "event 7" in b["text"]] == [ctx.dropped_image(7)] * drop
    assert ctx.image_count(content) == expected


def image_turn(n: int, images: int) -> list[tuple[str, dict[str, Any]]]:
    call = {"type": "tool_use", "id": f"t{n}", "name": "plot", "input": {}}
    return [
        (ev.ASSISTANT_MSG, {"content": [call], "stop_reason": "tool_use"}),
        (ev.TOOL_RESULT, {"tool_use_id": f"t{n}", "content": [{"type": "text", "text": f"r{n}"}, *[IMAGE] * images]}),
    ]


def sent_images(state: State) -> list[int]:
    """The images each tool result carries in the request, oldest first."""
    return [ctx.image_count(b["content"]) for m in state.messages for b in ctx_blocks(m) if b.get("type") == "tool_result"]


def ctx_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    return message["content"] if isinstance(message["content"], list) else []


@pytest.mark.parametrize(
    ("specs", "expected"),
    [
        ([(ev.USER_MSG, {"content": "q"}), *image_turn(1, 40), *image_turn(2, 40)], [40, 40]),  # under the limit
        ([(ev.USER_MSG, {"content": "q"}), *image_turn(1, 40), *image_turn(2, 40), *image_turn(3, 40)], [20, 40, 40]),
        ([(ev.USER_MSG, {"content": "q"}), *image_turn(1, 30), *image_turn(2, 30), *image_turn(3, 90)], [0, 10, 90]),
        ([(ev.USER_MSG, {"content": "q"}), *image_turn(1, 150)], [100]),  # one result over the limit keeps its latest
        (  # a cleared result no longer counts
            [(ev.CONTEXT, {"keep_tool_results": 1}), (ev.USER_MSG, {"content": "q"}), *image_turn(1, 90), *image_turn(2, 90)],
            [0, 90],
        ),
        (  # the server compacted: what is before its block is not sent, so it does not count
            [(ev.USER_MSG, {"content": "q"}), *image_turn(1, 90),
             (ev.ASSISTANT_MSG, {"content": [{"type": "compaction", "content": "S"}, {"type": "tool_use", "id": "t2", "name": "plot", "input": {}}],
                                 "stop_reason": "tool_use"}),
             (ev.TOOL_RESULT, {"tool_use_id": "t2", "content": [IMAGE] * 90})],
            [90],
        ),
    ],
)  # fmt: skip
def test_a_request_carries_at_most_the_api_limit_of_images(specs: list[tuple[str, dict[str, Any]]], expected: list[int]) -> None:
    log = events(*specs)
    state = fold(log)
    assert sent_images(state) == expected
    assert sum(expected) <= ctx.MAX_IMAGES
    assert State.from_dict(state.to_dict()) == state
    logged = [ctx.image_count(e["content"]) for e in log if e["type"] == ev.TOOL_RESULT]
    assert all(isinstance(n, int) for n in logged) and sum(logged) >= sum(expected)  # the log keeps every image


@pytest.mark.parametrize(
    ("before", "replaced", "roles"),
    [
        ([], 3, ["user", "assistant", "user", "assistant", "user"]),  # the summary goes first as a message of its own
        ([ANSWER, (ev.USER_MSG, {"content": "q2"})], 4, ["user", "assistant", "user", "assistant", "user"]),  # ... or into q2
    ],
)
def test_images_kept_by_a_local_compaction_still_count_where_they_moved(
    before: list[tuple[str, dict[str, Any]]], replaced: int, roles: list[str]
) -> None:
    log = events(
        (ev.USER_MSG, {"content": "q"}), *image_turn(1, 30), *before, *image_turn(2, 60),
        (ev.COMPACTION_STARTED, {"keep": 2}),
        (ev.COMPACTION, {"summary": "S", "messages": replaced, "final": True}),
        *image_turn(3, 60),
    )  # fmt: skip
    state = fold(log)
    assert [m["role"] for m in state.messages] == roles
    assert state.messages[0]["content"][0]["text"] == ctx.SUMMARY_PREFIX + "S"
    assert sent_images(state) == [40, 60]  # turn 1 is in the summary; turn 2's result lost its 20 oldest images
    assert sent_images(fold(log[:-2])) == [60]


def test_dropped_images_read_back_the_same_from_a_snapshot_resume(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Session.open(path, fsync="never", snapshot_every=2) as session:
        session.append(ev.USER_MSG, content="q")
        for n in range(4):
            for kind, payload in image_turn(n, 45):
                session.append(kind, **payload)
    with Session.open(path, fsync="never") as reopened:
        for kind, payload in image_turn(9, 45):
            reopened.append(kind, **payload)
        assert reopened.snapshot_note == ""
        assert list(reopened.messages) == fold(list(read_events(path))).messages
        assert sent_images(reopened.state) == [0, 0, 10, 45, 45]
