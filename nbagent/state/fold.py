"""The fold: session state (:class:`~.session_state.State`) as a pure function of the events, updated in O(1) per event.

Events and the messages built from them are shared, not copied: treat both as read-only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..record import events as ev
from . import binding, prices, rewrites, stops
from . import budget as budgets
from . import model_table as models
from .asides import awaiting_reply, interruption_note, request_notes, to_model
from .context import (
    SUMMARY_PREFIX,
    clip_result,
    context_tokens,
    image_count,
)
from .image_limits import sendable
from .providers import price_key
from .session_state import State
from .tokens import totals

SERVER_REFUSED = ev.NOTE_SERVER_COMPACTION_REFUSED  # a note's kind: this session compacts locally from then on
DROP_THINKING = ev.NOTE_DROP_THINKING  # a note's kind: later requests leave out every thinking block before it (the log keeps them)


def as_blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Message content as a list of blocks."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _add_user_content(state: State, blocks: list[dict[str, Any]], content: str | list[dict[str, Any]]) -> None:
    last = state.messages[-1] if state.messages else None
    if last is not None and last["role"] == "user":
        # The API wants user and assistant turns to alternate: merge into the open user message.
        state.messages[-1] = {"role": "user", "content": as_blocks(last["content"]) + blocks}
    else:
        state.messages.append({"role": "user", "content": content})


def _session_start(state: State, event: ev.Event) -> None:
    state.session_id = event["session_id"]
    state.created = event.get("ts", 0.0)
    state.meta = dict(event.get("meta") or {})
    forked = state.meta.get("fork")
    if isinstance(forked, dict) and isinstance(forked.get("title"), str) and forked["title"].strip():
        state.title = " ".join(forked["title"].split())[:200]  # a fork's own title (lineage.fork_title), not its parent's


def _user_msg(state: State, event: ev.Event) -> None:
    content = event["content"]
    sent = content
    notes = request_notes(state.pending_notes, state.unanswered_interrupt)
    if notes:
        sent = [{"type": "text", "text": note} for note in notes] + as_blocks(content)
        state.pending_notes, state.unanswered_interrupt = [], False
    last = state.messages[-1] if state.messages else None
    state.turn_start = len(state.messages) - (1 if last is not None and last["role"] == "user" else 0)
    _add_user_content(state, as_blocks(sent), sent)
    state.turns += 1
    if not state.title:
        text = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)
        state.title = " ".join(text.split())[:80]
    state.status, state.stop_reason = "model", None
    state.stop_action, state.stop_note, state.asked_again = "", "", 0
    state.refused = ""
    state.turn_spend, state.turn_replies, state.budget_stopped = {}, 0, False  # budgets of one request start again
    state.turn_usage = dict.fromkeys(ev.USAGE_KEYS, 0)  # and its tokens


def _model_call(state: State, event: ev.Event) -> None:
    state.status, state.partial = "model", []
    if event.get("model") and event["model"] != state.model:
        state.model = str(event["model"])
        state.window = models.window(state.model, state.recorded_window)


def _delta(state: State, event: ev.Event) -> None:
    if "text" in event:
        state.partial.append(event["text"])


def _assistant_msg(state: State, event: ev.Event) -> None:
    content = event["content"]
    for key, count in totals(event.get("usage")).items():  # server compactions' tokens included
        state.usage[key] += count
        state.turn_usage[key] = state.turn_usage.get(key, 0) + count
    _spent(state, event)
    state.turn_replies += 1
    state.context_tokens = context_tokens(event.get("usage") or {}) or state.context_tokens
    state.stop_reason, state.refused = event.get("stop_reason"), ""
    state.partial, state.unanswered_interrupt = [], False
    has_calls = any(b.get("type") == "tool_use" for b in content)
    stop = stops.rule(state.stop_reason, has_calls, state.asked_again, stops.refusal_detail(event.get("stop_details")))
    state.stop_action, state.stop_note, state.stop_noted = stop.action, stop.note, False
    if not stop.keep:  # the log keeps the reply; later requests do not carry it (nor, for a refusal, its turn)
        state.asked_again += stop.action in ("again", "compact")
        if stop.action == "refused":
            rewrites.drop_turn(state)
        state.open_calls, state.awaiting = {}, []
        state.status = "done" if stop.ends_turn else "model"
        return
    state.asked_again = 0
    start = latest_compaction(content)
    if start is not None:  # the server compacted: the API ignores what is before this block, so the request starts at it
        state.messages, state.results, state.images, state.turn_start = [], [], [], 0
        content = content[start:] if start else content
        state.compactions += 1
    state.messages.append({"role": "assistant", "content": content})
    state.open_calls = (
        {b["id"]: {"name": b["name"], "input": b.get("input", {}), "started": 0} for b in content if b.get("type") == "tool_use"}
        if stop.runs_calls
        else {}
    )
    state.awaiting = list(state.open_calls)
    state.status = "tools" if state.open_calls else ("model" if stop.action == "continue" else "done")


def _spent(state: State, event: ev.Event) -> None:
    """A reply's or summary's tokens, by price key: the model, named by its cloud where one served it (providers.price_key)."""
    model = price_key(event.get("model") or state.model, event.get("provider"))
    prices.record(state.spend, model, event.get("usage"), state.turn_spend)


def _model_error(state: State, event: ev.Event) -> None:
    state.model_errors += 1
    state.status = "error"
    if refuses_request(event):
        state.refused = str(event.get("message") or "")


def refuses_request(event: ev.Event) -> bool:
    """Whether a ``model_error`` says the request itself is malformed: a 400 no retry answers and no compaction mends."""
    return event.get("status") == 400 and not event.get("retryable") and event.get("kind") not in ("prompt_too_long", "request_too_large")


def _tool_started(state: State, event: ev.Event) -> None:
    call = state.open_calls.get(event["tool_use_id"])
    if call is not None:
        call["started"] += 1
        # What the attempts were recorded as, so a resume can tell if the tool changed since.
        call["read"] = call.get("read", True) and event.get("effect") == "read"
        call["keyed"] = call.get("keyed", True) and bool(event.get("idempotency_key"))
    state.status = "tools"


def _tool_result(state: State, event: ev.Event) -> None:
    tool_use_id = event["tool_use_id"]
    state.open_calls.pop(tool_use_id, None)
    state.status = "tools" if state.open_calls else "model"
    if tool_use_id not in state.awaiting:
        _add_result(state, event)
        return
    # Logged as it finished; it goes in once the calls before it in the reply are in. What _add_result reads is kept, so a
    # state folded from the log (whose lines carry their crc) equals one folded from the events as they were appended.
    state.held[tool_use_id] = {key: event[key] for key in ("seq", "tool_use_id", "content", "is_error") if key in event}
    while state.awaiting and state.awaiting[0] in state.held:
        _add_result(state, state.held.pop(state.awaiting.pop(0)))


def _add_result(state: State, event: ev.Event) -> None:
    # The log keeps it whole; the request gets it clipped, without an image the API would refuse (logged by earlier versions).
    content = sendable(clip_result(event["content"], state.result_budget, event["seq"]), event["seq"])
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": event["tool_use_id"], "content": content}
    if event.get("is_error"):
        block["is_error"] = True
    _add_user_content(state, [block], [block])
    if state.keep_tool_results > 0:
        rewrites.clear_old_results(state, event["seq"])
    images = image_count(content)
    if images:  # after clearing: a cleared result's images no longer count
        rewrites.keep_images(state, event["seq"], images)


def _interrupted(state: State, event: ev.Event) -> None:
    state.status, state.partial = "interrupted", []
    state.unanswered_interrupt = state.unanswered_interrupt or interruption_note(awaiting_reply(state), event)


def _note(state: State, event: ev.Event) -> None:
    if event.get("kind") in (SERVER_REFUSED, DROP_THINKING) or to_model(event) is not None:
        state.refused = ""  # the next request is not the one refused
    if event.get("kind") == SERVER_REFUSED:
        state.server_refused = True
    elif event.get("kind") == binding.NOTE_KIND:
        state.thinking_noted = int(event.get("dropped") or state.thinking_dropped)
    elif event.get("kind") == ev.NOTE_STOP:
        state.stop_noted = True
    elif event.get("kind") == budgets.BUDGET:
        state.budget, state.budget_stopped = budgets.recorded(event), False
    elif event.get("kind") == budgets.REACHED:
        state.budget_stopped = True
    elif event.get("kind") == DROP_THINKING:
        state.messages = [rewrites.without_thinking(m) for m in state.messages]
        state.foreign_thinking_dropped = state.foreign_thinking_dropped or event.get("reason") == "foreign"
    text = to_model(event)
    if text is not None:
        state.pending_notes.append(text)


def _context(state: State, event: ev.Event) -> None:
    state.refused = ""
    carried = bool(event.get("thinking_binding", state.thinking_binding))
    prefix = str(event.get("prefix") or "")
    if binding.context_drops(state.model, event.get("model"), state.thinking_binding, carried) or (
        prefix and binding.prefix_drops(state.model, state.prefix, prefix, carried)
    ):
        rewrites.unbind_after(state, -1, every=True)
    state.prefix = prefix or state.prefix
    state.thinking_binding = carried
    if "result_budget" in event:
        state.result_budget = event["result_budget"]
    if "keep_tool_results" in event:
        state.keep_tool_results = int(event["keep_tool_results"] or 0)
    state.recorded_window = int(event.get("window") or state.recorded_window)
    state.window = models.window(state.model, state.recorded_window)  # earlier versions logged 200,000 for every model


def _compaction_started(state: State, event: ev.Event) -> None:
    state.compacting = {"keep": event["keep"], "reason": event.get("reason", ""), "seq": event["seq"]}


def _compaction(state: State, event: ev.Event) -> None:
    """A local summary replaces the first ``messages`` messages: it goes first, as a note, into the next user message."""
    _spent(state, event)  # a summary is a model call: paid for too
    replaced = event["messages"]
    rest = list(state.messages)[replaced:]
    summary = {"type": "text", "text": SUMMARY_PREFIX + event["summary"]}
    merged = bool(rest) and rest[0]["role"] == "user"
    if merged:
        rest[0] = {"role": "user", "content": [summary, *as_blocks(rest[0]["content"])]}
    else:
        rest.insert(0, {"role": "user", "content": [summary]})
    state.messages, state.results = rest, []  # results before it are in the summary; the kept ones stay whole
    shift = -replaced if merged else 1 - replaced  # where the kept messages' images now are
    state.images = [
        [index + shift, position + (1 if merged and index == replaced else 0), seq, count, size]
        for index, position, seq, count, size in state.images
        if index >= replaced
    ]
    state.turn_start = max(1, state.turn_start + shift)  # the summary (first) is never part of a turn left out
    state.unbound_to = 0
    rewrites.unbind_after(state, -1)  # the kept messages' thinking was bound to what the summary replaced
    state.context_tokens = 0  # unknown until the next reply: estimated from the messages meanwhile
    if event.get("final", True):
        state.compacting = None
        state.compactions += 1
        state.refused = ""


def latest_compaction(content: Sequence[Mapping[str, Any]]) -> int | None:
    """The index of the last compaction block with a summary in an assistant message's content (None: none)."""
    found = None
    for index, block in enumerate(content):
        if block.get("type") == "compaction" and block.get("content"):
            found = index
    return found


def _nothing(state: State, event: ev.Event) -> None:
    """Approvals and trust lines change no state the loop reads (the rules read them from the log)."""


# One small function per event type: the one place besides the renderers that knows every type.
APPLY: dict[str, Callable[[State, ev.Event], None]] = {
    ev.SESSION_START: _session_start,
    ev.USER_MSG: _user_msg,
    ev.MODEL_CALL: _model_call,
    ev.DELTA: _delta,
    ev.ASSISTANT_MSG: _assistant_msg,
    ev.MODEL_ERROR: _model_error,
    ev.APPROVAL: _nothing,
    ev.TOOL_STARTED: _tool_started,
    ev.TOOL_RESULT: _tool_result,
    ev.INTERRUPTED: _interrupted,
    ev.NOTE: _note,
    ev.TRUST: _nothing,
    ev.CONTEXT: _context,
    ev.COMPACTION_STARTED: _compaction_started,
    ev.COMPACTION: _compaction,
}


def apply(state: State, event: ev.Event) -> State:
    """Fold one event into the state (in place, O(1)) and return it."""
    state.seq = event["seq"]
    state.last_ts = event.get("ts", state.last_ts)
    APPLY.get(event["type"], _nothing)(state, event)
    return state


def fold(events: Iterable[ev.Event], state: State | None = None) -> State:
    """Fold events into a fresh state (or onto ``state``)."""
    state = State() if state is None else state
    for event in events:
        apply(state, event)
    return state
