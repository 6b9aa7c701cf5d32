"""Thinking blocks bound to their conversation: the rules (binding.py), the fold's part, and sessions through the real SDK."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import pytest

import nbagent
from nbagent.record import events as ev
from nbagent.state import binding, context, fold
from nbagent.state import model_table as models
from tests.support import fake_binding, fake_context
from tests.support.fake_anthropic import FakeAnthropic, RecordedRequest, Reply, error, text, tool_use

pytestmark = pytest.mark.sdk  # run again against the SDK floor in CI (.ci/run)

SONNET = "claude-sonnet-5-5"
DROP = {"prefix_mismatch_behavior": "drop_block"}


# The rules ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("setting", "model", "param", "betas"),
    [
        ("adaptive", SONNET, {"type": "adaptive", "block_binding": DROP}, (binding.BINDING_BETA,)),
        (2048, SONNET, {"type": "adaptive", "block_binding": DROP}, (binding.BINDING_BETA,)),  # a budget runs as adaptive
        ("off", SONNET, {"type": "between_tools"}, ()),  # between_tools takes no block_binding: the fold drops instead
        ("off", "claude-haiku-5-5", {"type": "disabled"}, ()),
        ("off", "claude-opus-5-5", {"type": "adaptive", "block_binding": DROP}, (binding.BINDING_BETA,)),  # always on
        ("adaptive", "claude-opus-4-6", {"type": "adaptive"}, ()),  # 4.x: not assumed to bind
        (2048, "claude-haiku-4-5", {"type": "enabled", "budget_tokens": 2048}, ()),
        ("adaptive", "claude-test", {"type": "adaptive"}, ()),  # unknown: sent as asked
        ("off", "claude-test", None, ()),
    ],
)
def test_what_a_request_asks(setting: Any, model: str, param: Any, betas: tuple[str, ...]) -> None:
    thinking = binding.request(models.thinking_request(setting, model, 8192), model)
    assert thinking.param == param and thinking.betas == betas
    assert binding.carries(thinking.param) is bool(betas)
    assert binding.fold_drops(model, binding.carries(thinking.param)) is (model in binding.BINDS and not betas)


@pytest.mark.parametrize(
    ("old", "new", "was_carried", "carried", "drops"),
    [
        (SONNET, "claude-opus-5-5", True, True, False),  # the API drops what no longer fits
        (SONNET, "claude-haiku-4-5", True, False, True),  # the old model bound them; the new requests can't ask
        (SONNET, SONNET, True, False, True),  # adaptive, then "off": blocks left for the API to drop must go now
        (SONNET, SONNET, False, False, False),  # nothing changed
        ("claude-test", "claude-haiku-4-5", False, False, False),  # the old model does not bind
        ("", SONNET, False, False, False),  # the first request
    ],
)
def test_a_settings_change_drops_bound_blocks_only_where_needed(old: str, new: str, was_carried: bool, carried: bool, drops: bool) -> None:
    assert binding.context_drops(old, new, was_carried, carried) is drops


def _fold_session(binding_carried: bool, model: str = SONNET) -> fold.State:
    """Four tool calls, each reply starting with a thinking block, results cleared down to the last one."""
    state = fold.State()
    seq = 0

    def apply(kind: str, **data: Any) -> None:
        nonlocal seq
        seq += 1
        fold.apply(state, {"seq": seq, "type": kind, **data})

    apply(ev.CONTEXT, keep_tool_results=1, thinking_binding=binding_carried, model=model)
    apply(ev.USER_MSG, content="go")
    for n in range(4):
        apply(ev.MODEL_CALL, model=model, attempt=1)
        thought = {"type": "thinking", "thinking": f"t{n}", "signature": "s"}
        apply(ev.ASSISTANT_MSG, content=[thought, {"type": "tool_use", "id": f"c{n}", "name": "look", "input": {}}], stop_reason="tool_use")
        apply(ev.TOOL_RESULT, tool_use_id=f"c{n}", content=f"r{n}")
    return state


def thinking_in(messages: Any) -> list[str]:
    return [b["thinking"] for m in messages if m["role"] == "assistant" for b in m["content"] if b.get("type") == "thinking"]


def test_the_fold_drops_unbound_thinking_only_where_requests_cannot_ask_the_api() -> None:
    assert thinking_in(_fold_session(True).messages) == ["t0", "t1", "t2", "t3"]  # drop_block: the API drops them
    # Clearing result n rewrites message 2n+2: every thinking block after it was bound to the old text.
    assert thinking_in(_fold_session(False).messages) == ["t0"]
    assert _fold_session(False).thinking_dropped == 3 and _fold_session(True).thinking_dropped == 0
    assert thinking_in(_fold_session(False, "claude-test").messages) == ["t0", "t1", "t2", "t3"]  # not bound


# The fake learns the binding ------------------------------------------------------------------------------
def _bound_history(client: anthropic.Anthropic) -> list[dict[str, Any]]:
    reply = client.messages.create(
        model=SONNET, max_tokens=100, messages=[{"role": "user", "content": "one"}], thinking={"type": "adaptive"}
    )
    content = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
    return [{"role": "user", "content": "one"}, {"role": "assistant", "content": content}, {"role": "user", "content": "two"}]


def test_the_fake_refuses_a_block_whose_prefix_changed_unless_asked_to_drop_it(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.script(text("a"), text("b"), text("c"))
    history = _bound_history(client)
    assert history[1]["content"][0]["type"] == "thinking" and history[1]["content"][0]["signature"].startswith("bound1.")
    client.messages.create(model=SONNET, max_tokens=100, messages=history, thinking={"type": "adaptive"})  # unchanged: fine
    changed = [{"role": "user", "content": "one, rewritten"}, *history[1:]]
    with pytest.raises(anthropic.BadRequestError, match=r"messages\.1\.content\.0: Invalid `signature` in `thinking` block"):
        client.messages.create(model=SONNET, max_tokens=100, messages=changed, thinking={"type": "adaptive"})
    with pytest.raises(anthropic.BadRequestError, match="Invalid `signature`"):  # another model: model_binding_mismatch
        client.messages.create(model="claude-opus-5-5", max_tokens=100, messages=history, thinking={"type": "adaptive"})
    dropped = client.beta.messages.create(
        model=SONNET,
        max_tokens=100,
        messages=changed,  # type: ignore[arg-type]
        thinking={"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}},
        betas=[fake_binding.BINDING_BETA],
    )
    assert [(t.path, t.reason) for t in dropped.input_transformations or []][:1] == [("messages.1.content.0", "prefix_binding_mismatch")]


def test_the_fake_refuses_a_changed_block_of_the_latest_reply_in_the_apis_words(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.script(text("a"))
    history = _bound_history(client)
    history[1]["content"][0] = dict(history[1]["content"][0], thinking="edited")
    with pytest.raises(anthropic.BadRequestError, match="blocks in the latest assistant message cannot be modified"):
        client.messages.create(model=SONNET, max_tokens=100, messages=history, thinking={"type": "adaptive"})


def test_the_fake_refuses_a_compaction_block_sent_back_changed(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    block = {"type": "compaction", "content": "S", "encrypted_content": "e", "tool_changes": []}
    block["signature"] = fake_binding.compaction_signature(block)
    for sent, ok in ((block, True), (dict(block, encrypted_content="other"), False), (dict(block, content="T"), False)):
        fake.script(text("a"))
        if ok:
            send_back(client, sent)
        else:
            with pytest.raises(anthropic.BadRequestError, match="Invalid `signature` in `compaction` block"):
                send_back(client, sent)
        fake.clear_script()


def send_back(client: anthropic.Anthropic, block: dict[str, Any]) -> None:
    client.beta.messages.create(
        model="claude-test",
        max_tokens=100,
        messages=[{"role": "assistant", "content": [block]}, {"role": "user", "content": "next"}],  # type: ignore[list-item]
        betas=[fake_context.COMPACT_BETA],
    )


# Sessions through the real SDK ---------------------------------------------------------------------------------
@nbagent.tool(effect="read")
def look(n: int = 0) -> str:
    """Look at something."""
    return f"result {n}: " + "x" * 200


def tool_loop(calls: int) -> list[Reply]:
    return [*(tool_use("look", {"n": n}) for n in range(calls)), text("done")]


def dropped_by_the_api(fake: FakeAnthropic) -> list[str]:
    """The reasons of the thinking blocks the fake API dropped (drop_block) over the session's requests."""
    found = []
    for r in fake.requests:
        _, dropped = fake_binding.check(r.body, r.headers, fake_context.live_start(r.body.get("messages") or []))
        found += [d["reason"] for d in dropped]
    return found


def test_clearing_old_results_mid_tool_loop_keeps_a_thinking_session_going(
    fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path
) -> None:
    fake.script(*tool_loop(5), *tool_loop(2))
    settings = nbagent.ContextSettings(keep_tool_results=1)
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        for prompt in ("look five times", "and twice more"):
            out = nbagent.run(session, prompt, tools=[look], client=client, model=SONNET, thinking="adaptive", context=settings)
            assert out == "done"
        errors = [e for e in session.events() if e["type"] == ev.MODEL_ERROR]
    assert errors == [] and len(fake.requests) == 9
    assert all(r.body["thinking"]["block_binding"] == DROP for r in fake.requests)
    assert any("[nbagent note: this older tool result was cleared" in str(r.body["messages"]) for r in fake.requests)
    assert "prefix_binding_mismatch" in dropped_by_the_api(fake)  # what the clearing unbound; the session never saw a 400


def test_a_mid_session_model_change(fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path) -> None:
    fake.script(*tool_loop(2), text("opus here"), text("haiku here"), text("back"))
    path = tmp_path / "s.jsonl"
    with nbagent.Session.open(path) as session:
        nbagent.run(session, "look", tools=[look], client=client, model=SONNET, thinking="adaptive")
        # Another binding model: the API drops blocks of the old model (the request asks it to).
        assert nbagent.run(session, "and you?", tools=[look], client=client, model="claude-opus-5-5", thinking="adaptive") == "opus here"
        # A model whose requests can't carry the binding: the fold leaves the bound blocks out, with a note.
        assert nbagent.run(session, "and you?", tools=[look], client=client, model="claude-haiku-4-5", thinking=2048) == "haiku here"
        assert "thinking" not in str(fake.requests[-1].body["messages"][:-2])
        assert nbagent.run(session, "again", tools=[look], client=client, model=SONNET, thinking="adaptive") == "back"
        assert [e for e in session.events() if e["type"] == ev.MODEL_ERROR] == []
    notes = [e for e in nbagent.read_events(path) if e["type"] == ev.NOTE and e.get("kind") == "thinking_binding"]
    # Once, for the change to claude-haiku-4-5: every bound block so far (thinking and redacted) left out.
    assert len(notes) == 1 and notes[0]["dropped"] >= 3
    assert "model_binding_mismatch" in dropped_by_the_api(fake)


def test_thinking_turned_off_after_rewrites_drops_the_unbound_blocks(
    fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path
) -> None:
    """Adaptive (the API dropped what clearing unbound), then "off" (between_tools, no binding): the fold drops them, with a note."""
    fake.script(*tool_loop(3), *tool_loop(2))
    settings = nbagent.ContextSettings(keep_tool_results=1)
    path = tmp_path / "s.jsonl"
    with nbagent.Session.open(path) as session:
        nbagent.run(session, "look", tools=[look], client=client, model=SONNET, thinking="adaptive", context=settings)
        nbagent.run(session, "quietly now", tools=[look], client=client, model=SONNET, thinking="off", context=settings)
        assert [e for e in session.events() if e["type"] == ev.MODEL_ERROR] == []
    assert fake.requests[-1].body["thinking"] == {"type": "between_tools"}
    assert "'thinking'" not in str(fake.requests[-1].body["messages"])
    notes = [e for e in nbagent.read_events(path) if e["type"] == ev.NOTE and e.get("kind") == "thinking_binding"]
    assert notes and all("left out of later requests" in n["text"] and n["dropped"] > 0 for n in notes)  # after each rewrite


def summary_or(reply: Reply) -> Any:
    def answer(request: RecordedRequest) -> Reply:
        if "Summarise the conversation below" in str(request.body["messages"]):
            return text("Summary: numbered questions, numbered answers.")
        return reply

    return answer


def test_a_local_compaction_keeping_later_thinking_blocks(fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path) -> None:
    fake.responder = summary_or(text("Answer: " + "words " * 60))
    settings = nbagent.ContextSettings(compact="local", trigger=600, keep_tokens=300)
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        for n in range(6):
            nbagent.run(session, f"question {n}", client=client, model=SONNET, thinking="adaptive", context=settings)
        kinds = [e["type"] for e in session.events()]
    assert ev.COMPACTION in kinds and ev.MODEL_ERROR not in kinds
    after = [r for r in fake.requests if "compacted. Summary" in str(r.body["messages"])]
    assert after and any("'thinking'" in str(r.body["messages"]) for r in after)  # kept blocks sent; the API drops them
    assert "prefix_binding_mismatch" in dropped_by_the_api(fake)


def test_a_trusted_session_another_user_wrote_with_thinking(fake: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Alice's session (her secret, her API key), trusted and continued by Bob: her blocks are bound to her organization."""
    path = tmp_path / "s.jsonl"
    alice = anthropic.Anthropic(base_url=fake.base_url, api_key="alice-key", max_retries=0)
    bob = anthropic.Anthropic(base_url=fake.base_url, api_key="bob-key", max_retries=0)
    fake.script(*tool_loop(2), text("bob's answer"))
    with monkeypatch.context() as alices:
        alices.setenv("NBAGENT_DATA_DIR", str(tmp_path / "alice"))
        with nbagent.Session.open(path) as session:
            nbagent.run(session, "look", tools=[look], client=alice, model=SONNET, thinking="adaptive")
    with nbagent.Session.open(path) as session:
        assert session.continue_refusal()  # Bob did not write it
        session.trust_log()
        assert nbagent.run(session, "go on", tools=[look], client=bob, model=SONNET, thinking="adaptive") == "bob's answer"
        assert [e for e in session.events() if e["type"] == ev.MODEL_ERROR] == []
    assert "'thinking'" in str(fake.requests[-1].body["messages"])  # sent, and dropped by the API: another organization
    assert "organization_binding_mismatch" in dropped_by_the_api(fake)


def test_a_trusted_session_continued_with_thinking_off_leaves_the_other_accounts_blocks_out(
    fake: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bob continues Alice's trusted session with thinking "off" (between_tools on Sonnet 5.5: no binding to ask for): the fold
    leaves her blocks out, once, with a note, instead of sending blocks the API refuses for another organization."""
    path = tmp_path / "s.jsonl"
    alice = anthropic.Anthropic(base_url=fake.base_url, api_key="alice-key", max_retries=0)
    bob = anthropic.Anthropic(base_url=fake.base_url, api_key="bob-key", max_retries=0)
    fake.script(*tool_loop(2), text("bob's answer"), text("and again"))
    with monkeypatch.context() as alices:
        alices.setenv("NBAGENT_DATA_DIR", str(tmp_path / "alice"))
        with nbagent.Session.open(path) as session:
            nbagent.run(session, "look", tools=[look], client=alice, model=SONNET, thinking="off")
        assert binding.has_thinking(session.messages)  # Sonnet 5.5 thinks between tools, even at "off"
    sent = len(fake.requests)
    with nbagent.Session.open(path) as session:
        session.trust_log()
        assert nbagent.run(session, "go on", tools=[look], client=bob, model=SONNET, thinking="off") == "bob's answer"
        assert nbagent.run(session, "more", tools=[look], client=bob, model=SONNET, thinking="off") == "and again"
        notes = [e for e in session.events() if e["type"] == ev.NOTE and e.get("kind") == fold.DROP_THINKING]
        assert [e.get("reason") for e in notes] == ["foreign"]  # once
        assert [e for e in session.events() if e["type"] == ev.MODEL_ERROR] == []
    assert all("'thinking'" not in str(r.body["messages"]) for r in fake.requests[sent : sent + 1])


def test_a_model_known_to_compact_is_not_switched_to_local_by_a_400(
    fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path
) -> None:
    fake.server_compaction = False  # a gateway refusing context_management, on a model the table says compacts
    fake.script(text("short"))
    small = nbagent.ContextSettings(trigger=2_000)  # compaction is asked for from half the trigger on (context.asks_compaction)
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        nbagent.run(session, "hi", client=client, model="claude-opus-4-6", context=small)
        with pytest.raises(nbagent.RefusedRequestError):
            nbagent.run(session, fake_context.past_half(small.threshold), client=client, model="claude-opus-4-6", context=small)
        notes = [e.get("kind") for e in session.events() if e["type"] == ev.NOTE]
    assert fold.SERVER_REFUSED not in notes and [fake_context.asks(r) for r in fake.requests] == [False, True]


def test_a_400_without_compaction_asked_never_switches(fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path) -> None:
    fake.script(error(400, message="context_management compact compaction"))  # words that once switched it
    settings = nbagent.ContextSettings(compact="local")
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        with pytest.raises(nbagent.RefusedRequestError):
            nbagent.run(session, "hi", client=client, model="claude-test", context=settings)
        assert not session.state.server_refused


def test_server_compaction_with_thinking_on_a_binding_model(fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path) -> None:
    """The reply that compacts starts with the compaction block; its thinking is bound to it, and comes back valid."""
    fake.responder = summary_or(text("Answer: " + "words " * 60))
    settings = nbagent.ContextSettings(trigger=400)
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        for n in range(6):
            nbagent.run(session, f"question {n}", client=client, model=SONNET, thinking="adaptive", context=settings)
        events = list(session.events())
    assert ev.MODEL_ERROR not in [e["type"] for e in events]
    compacted = [e for e in events if e["type"] == ev.ASSISTANT_MSG and e["content"][0]["type"] == "compaction"]
    assert compacted and {"signature", "encrypted_content"} <= set(compacted[0]["content"][0])  # kept as the API sent them
    assert compacted[0]["content"][1]["type"] == "thinking"
    assert dropped_by_the_api(fake) == []  # nothing unbound: every block came back as it was made


def test_an_image_note_unbinds_later_thinking_in_the_fold() -> None:
    state = fold.State()
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 16}}
    events: list[dict[str, Any]] = [
        {"type": ev.CONTEXT, "thinking_binding": False, "model": SONNET},
        {"type": ev.USER_MSG, "content": "go"},
    ]
    for n in range(context.MAX_IMAGES + 2):
        thought = {"type": "thinking", "thinking": f"t{n}", "signature": "s"}
        events += [
            {"type": ev.MODEL_CALL, "model": SONNET, "attempt": 1},
            {
                "type": ev.ASSISTANT_MSG,
                "content": [thought, {"type": "tool_use", "id": f"c{n}", "name": "shot", "input": {}}],
                "stop_reason": "tool_use",
            },
            {"type": ev.TOOL_RESULT, "tool_use_id": f"c{n}", "content": [image]},
        ]
    for seq, event in enumerate(events, 1):
        fold.apply(state, {"seq": seq, **event})
    # The oldest images went in as notes (at most MAX_IMAGES a request): the thinking after the first note is out.
    assert "left out" in str(state.messages[2]["content"]) and thinking_in(state.messages) == ["t0"]


@pytest.mark.parametrize(
    ("model", "carried", "all_mine", "already", "drops"),
    [
        (SONNET, False, False, False, True),  # another key wrote some of it, and the request can't ask the API to drop
        (SONNET, True, False, False, False),  # drop_block asked: the API drops what another organization wrote
        (SONNET, False, True, False, False),  # all this user's
        (SONNET, False, False, True, False),  # done once already
        ("claude-opus-4-6", False, False, False, False),  # blocks not bound to the account
    ],
)
def test_when_another_keys_thinking_is_left_out(model: str, carried: bool, all_mine: bool, already: bool, drops: bool) -> None:
    assert binding.drops_foreign(model, carried, all_mine, already) == drops
