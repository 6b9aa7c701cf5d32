"""The event vocabulary: every event type, the shape of each, the kinds of note, the schema version and its upgrades.

A newcomer reads this file to learn what a log can hold (docs/log-format.md says what the fields mean).
How an event becomes one checksummed, signed line and back: :mod:`nbagent.record.line_codec`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from typing_extensions import NotRequired, TypedDict, is_typeddict

# v2: a line's signature also covers the previous line's (a MAC chain, see signing.py); v1 lines still read.
# v3: notes to the model (a note's ``to_model`` goes into the next request) and the interruption note (see fold.py).
# v4: the context window: local compactions (compaction_started, compaction) and the request's context settings.
SCHEMA_VERSION = 4
KNOWN_VERSIONS = (1, 2, 3, 4)
# No line is longer (a bigger tool result is clipped before it is logged); a reader refuses longer lines.
MAX_LINE = 16 * 1024 * 1024

Event = dict[str, Any]

# Event types.  Payload keys are documented in docs/log-format.md.
SESSION_START = "session_start"
USER_MSG = "user_msg"
MODEL_CALL = "model_call"
DELTA = "delta"
ASSISTANT_MSG = "assistant_msg"
MODEL_ERROR = "model_error"
APPROVAL = "approval"
TOOL_STARTED = "tool_started"
TOOL_RESULT = "tool_result"
INTERRUPTED = "interrupted"
NOTE = "note"
TRUST = "trust"
CONTEXT = "context"
COMPACTION_STARTED = "compaction_started"
COMPACTION = "compaction"

EVENT_TYPES = frozenset(
    {SESSION_START, USER_MSG, MODEL_CALL, DELTA, ASSISTANT_MSG, MODEL_ERROR, APPROVAL, TOOL_STARTED, TOOL_RESULT, INTERRUPTED, NOTE, TRUST}
    | {CONTEXT, COMPACTION_STARTED, COMPACTION}
)

# Under fsync="turn" these are fsynced before append() returns, except a tool_started or tool_result whose
# effect is "read".  Deltas and model_call never are.
DURABLE_TYPES = frozenset(
    {SESSION_START, USER_MSG, ASSISTANT_MSG, MODEL_ERROR, APPROVAL, TOOL_RESULT, INTERRUPTED, NOTE, TRUST, CONTEXT}
    | {COMPACTION_STARTED, COMPACTION}
)


USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


# The declared shape of each event type (docs/log-format.md says what the fields mean) ---------------------
# Every event also has v, seq, ts, type (and crc once read).  The reader checks each line against its
# declaration: required keys must be there, and every declared key that is there must have its type.
class Block(TypedDict, total=False):
    """A content block (text, tool_use, tool_result, image, thinking, ...); other keys are the API's."""

    type: str
    text: str
    id: str
    name: str
    input: dict[str, Any]


class Usage(TypedDict, total=False):
    """Token counts of one model reply."""

    input_tokens: int | None
    output_tokens: int | None
    cache_creation_input_tokens: int | None
    cache_read_input_tokens: int | None


class SessionStart(TypedDict):
    session_id: str
    meta: NotRequired[dict[str, Any] | None]


class UserMsg(TypedDict):
    content: str | list[Block]
    meta: NotRequired[dict[str, Any] | None]


class ModelCall(TypedDict):
    model: NotRequired[str | None]
    attempt: NotRequired[int]
    provider: NotRequired[str]  # where Claude ran: "anthropic", "bedrock", "vertex", "foundry" (providers.py)
    provider_model: NotRequired[str]  # the provider's own model id, where it is not the table's name


class Delta(TypedDict):
    index: NotRequired[int]
    text: NotRequired[str]
    partial_json: NotRequired[str]
    thinking: NotRequired[str]


class AssistantMsg(TypedDict):
    content: list[Block]
    message_id: NotRequired[str | None]
    model: NotRequired[str | None]
    stop_reason: NotRequired[str | None]
    stop_details: NotRequired[dict[str, Any] | None]  # a refusal's category and explanation, as the API gave them
    usage: NotRequired[Usage | None]
    provider: NotRequired[str]  # the cloud that served and bills it (providers.py); absent: the Claude API


class ModelErrorEvent(TypedDict):
    message: NotRequired[str]
    status: NotRequired[int | None]
    kind: NotRequired[str]
    retryable: NotRequired[bool]
    attempt: NotRequired[int]
    retry_in: NotRequired[float]  # seconds waited before the next attempt (the API's retry-after, else the back-off)
    retry_after: NotRequired[float]  # the API's retry-after where it was longer than max_retry_wait: not waited for, the run stopped


# An approval's decisions: asked (pending), answered, or the ask interrupted before anyone answered (the call did not run).
APPROVAL_DECISIONS = ("pending", "approved", "declined", "interrupted")


class Approval(TypedDict):
    tool_use_id: NotRequired[str]
    reason: NotRequired[str]
    decision: NotRequired[str]  # one of APPROVAL_DECISIONS
    question: NotRequired[str]
    by: NotRequired[str]
    note: NotRequired[str]


class ToolStarted(TypedDict):
    tool_use_id: str
    name: NotRequired[str]
    effect: NotRequired[str]
    attempt: NotRequired[int]
    idempotency_key: NotRequired[str]
    mcp: NotRequired[dict[str, str]]  # an MCP tool's call: {"server": its name in the settings, "tool": the server's tool name}


class ToolResult(TypedDict):
    tool_use_id: str
    content: str | list[Block]
    is_error: NotRequired[bool]
    abandoned: NotRequired[str]  # not_started | unknown_outcome: it settles a call of a request the user moved on from
    effect: NotRequired[str]  # the effect of the tool that ran (v4); a "read" result is not fsynced on its own


class InterruptedEvent(TypedDict):
    during: NotRequired[str]
    open_calls: NotRequired[list[str]]
    mark: NotRequired[bool]  # false: the next request gets no interruption note (every event upgraded from v2)


class Note(TypedDict):
    kind: NotRequired[str]  # one of NOTE_KINDS (below)
    text: NotRequired[str]  # what people read
    to_model: NotRequired[str]  # what the model reads: the fold puts it before the next request's own content
    action: NotRequired[str]  # kind "stop": what the stop rule decided for the reply before it (stops.py)
    budget: NotRequired[int]  # kind "notebook_context": the note's limit in characters (Agent.notebook_context_budget)
    left_out: NotRequired[dict[str, int]]  # kind "notebook_context": how many cells, variables, names gone did not fit
    max_turns: NotRequired[int]  # kind "budget" (budget.py): model calls one request may make (absent: no limit)
    max_cost: NotRequired[float]  # kind "budget": dollars one request may cost
    max_session_cost: NotRequired[float]  # kind "budget": dollars the session may cost
    reached: NotRequired[str]  # kind "budget_reached": which budget stopped the loop there (max_turns, max_cost, ...)
    turn: NotRequired[int]  # kind "cells_inserted": the turn (from 1) whose python calls became cells
    anchor: NotRequired[str]  # kind "cells_inserted": the id of the %agent cell they were inserted below
    cells: NotRequired[list[dict[str, Any]]]  # kind "cells_inserted": [{tool_use_id, cell_id, index}] the browser inserted
    skipped: NotRequired[list[str]]  # kind "cells_inserted": tool_use_ids already in the notebook, not inserted again


# Note kinds: a note's ``kind`` says what it records, and each kind is declared here with the fields it carries
# besides ``kind`` (Note above types those it names; the others are free-form).  Who writes it: in parentheses.
NOTE_THINKING = "thinking"  # the requests' thinking differs from the setting: e.g. a budget runs as adaptive (agent/loop.py)
NOTE_STOP = "stop"  # what the stop rule decided for the reply before it (agent/loop.py, state/stops.py)
NOTE_BUDGET = "budget"  # the budgets from here on; an absent one is no limit (state/budget.py)
NOTE_BUDGET_REACHED = "budget_reached"  # the loop stopped here before a model call, at a budget (agent/loop.py)
NOTE_DROP_THINKING = "drop_thinking"  # later requests leave out every thinking block before it (agent/loop.py)
NOTE_MCP = "mcp"  # news of the MCP servers: started, failed, restarted (agent/loop.py)
NOTE_THINKING_BINDING = "thinking_binding"  # the fold left ``dropped`` thinking blocks out so far (state/binding.py)
NOTE_SERVER_COMPACTION_REFUSED = "server_compaction_refused"  # the API refused server compaction: local from here on
NOTE_REPLAY_MISMATCH = "replay_mismatch"  # the code's tools disagree with a recorded call (agent/tool_calls.py)
NOTE_KERNEL_RESTARTED = "kernel_restarted"  # the kernel restarted since the previous turn (notebook/magics.py)
NOTE_NOTEBOOK_CONTEXT = "notebook_context"  # what the notebook did since the last turn (notebook/notebook_context.py)
NOTE_CELLS_INSERTED = "cells_inserted"  # the browser inserted a turn's python calls as cells (notebook/agent_cells.py)
NOTE_KERNEL_STATE_RESTORED = "kernel_state_restored"  # python calls run again after a restart (notebook/restore.py)
NOTE_REWOUND = "rewound"  # this fork left out the parent's later turns (notebook/rewind.py)

NOTE_KINDS: dict[str, frozenset[str]] = {
    NOTE_THINKING: frozenset({"text"}),
    NOTE_STOP: frozenset({"action", "text"}),
    NOTE_BUDGET: frozenset({"max_turns", "max_cost", "max_session_cost", "text"}),
    NOTE_BUDGET_REACHED: frozenset({"reached", "text"}),
    NOTE_DROP_THINKING: frozenset({"reason", "text"}),  # reason "foreign": only the thinking another user's key wrote
    NOTE_MCP: frozenset({"text"}),
    NOTE_THINKING_BINDING: frozenset({"dropped", "text"}),
    NOTE_SERVER_COMPACTION_REFUSED: frozenset({"text"}),
    NOTE_REPLAY_MISMATCH: frozenset({"tool_use_id", "text"}),
    NOTE_KERNEL_RESTARTED: frozenset({"to_model"}),
    NOTE_NOTEBOOK_CONTEXT: frozenset({"to_model", "text", "budget", "left_out"}),
    NOTE_CELLS_INSERTED: frozenset({"text", "turn", "anchor", "cells", "skipped"}),
    NOTE_KERNEL_STATE_RESTORED: frozenset({"python_calls", "failed"}),
    NOTE_REWOUND: frozenset({"text", "to_model"}),
}


class Trust(TypedDict):
    vouches: NotRequired[int]
    prefix_sha256: NotRequired[str]


class Context(TypedDict):
    result_budget: NotRequired[int | None]  # characters of one tool result in a request (the log keeps it whole); None: no limit
    keep_tool_results: NotRequired[int]  # >0: a request carries only the latest this many tool results (older ones cleared)
    window: NotRequired[int]  # the model's context window in tokens (for views: "context 143k / 200k")
    trigger: NotRequired[int | None]  # input tokens at which the conversation is compacted
    compact: NotRequired[str]  # auto | server | local | off
    thinking_binding: NotRequired[bool]  # requests ask the API to drop thinking blocks a rewrite unbound (binding.py)
    model: NotRequired[str]  # the model of the requests from here on
    prefix: NotRequired[str]  # a fingerprint of the requests' system prompt and tools (binding.prefix): a change unbinds thinking


class CompactionStarted(TypedDict):
    keep: int  # the last ``keep`` messages stay as they are; everything before them is summarised
    reason: NotRequired[str]  # trigger | too_long | request
    model: NotRequired[str | None]


class Compaction(TypedDict):
    summary: str
    messages: int  # how many leading messages of the request this summary replaces
    through: NotRequired[int]  # the seq of the last event it covers (for people)
    final: NotRequired[bool]  # the compaction is complete (a long prefix is summarised in several parts)
    model: NotRequired[str | None]
    usage: NotRequired[Usage | None]
    provider: NotRequired[str]  # the cloud that served and bills it (providers.py); absent: the Claude API


def _tool_uses_named(event: Event) -> bool:
    return all(isinstance(b.get("id"), str) and isinstance(b.get("name"), str) for b in event["content"] if b.get("type") == "tool_use")


SHAPES: dict[str, type] = {
    SESSION_START: SessionStart, USER_MSG: UserMsg, MODEL_CALL: ModelCall, DELTA: Delta, ASSISTANT_MSG: AssistantMsg,
    MODEL_ERROR: ModelErrorEvent, APPROVAL: Approval, TOOL_STARTED: ToolStarted, TOOL_RESULT: ToolResult,
    INTERRUPTED: InterruptedEvent, NOTE: Note, TRUST: Trust, CONTEXT: Context, COMPACTION_STARTED: CompactionStarted,
    COMPACTION: Compaction,
}  # fmt: skip
# Rules a declaration cannot say: the one today is that a tool_use block names its id and tool.
EXTRA_RULES: dict[str, Callable[[Event], bool]] = {ASSISTANT_MSG: _tool_uses_named}


def _checker(declared: Any) -> Callable[[Any], bool]:
    """A fast predicate for values of a declared type (the subset of typing the shapes above use)."""
    origin, args = get_origin(declared), get_args(declared)
    if declared is Any:
        return lambda value: True
    if declared is None or declared is type(None):
        return lambda value: value is None
    if declared is float:
        return lambda value: isinstance(value, (int, float))
    if is_typeddict(declared):
        # Read NotRequired from the hints themselves: under postponed annotations __required_keys__ cannot see it.
        hints = get_type_hints(declared, include_extras=True)
        fields = tuple(
            (
                key,
                declared.__total__ and get_origin(hint) is not NotRequired,
                _checker(get_args(hint)[0] if get_origin(hint) is NotRequired else hint),
            )
            for key, hint in hints.items()
        )

        def typed_dict(value: Any) -> bool:
            if not isinstance(value, dict):
                return False
            for key, needed, check in fields:  # a loop, not all(...): this runs for every line a reader reads
                if key in value:
                    if not check(value[key]):
                        return False
                elif needed:
                    return False
            return True

        return typed_dict
    if origin is Union or str(origin) == "<class 'types.UnionType'>":
        plain = tuple(type(None) if a is None or a is type(None) else a for a in args)
        if all(isinstance(a, type) and a is not float and not is_typeddict(a) for a in plain):
            return lambda value: isinstance(value, plain)
        options = tuple(_checker(a) for a in args)
        return lambda value: any(check(value) for check in options)
    if origin is list:
        item = _checker(args[0]) if args else (lambda value: True)

        def list_of(value: Any) -> bool:
            if not isinstance(value, list):
                return False
            for v in value:
                if not item(v):
                    return False
            return True

        return list_of
    if origin is dict:
        return lambda value: isinstance(value, dict)
    if origin is Literal:
        return lambda value: value in args
    if isinstance(declared, type):
        return lambda value: isinstance(value, declared)
    raise TypeError(f"no shape check for {declared!r}")


def _with_rule(check: Callable[[Any], bool], rule: Callable[[Event], bool] | None) -> Callable[[Any], bool]:
    return check if rule is None else (lambda event: check(event) and rule(event))


_SHAPE_CHECKS = {kind: _with_rule(_checker(shape), EXTRA_RULES.get(kind)) for kind, shape in SHAPES.items()}


def shape_problem(event: Event) -> str:
    """Why an event with a valid checksum still cannot be folded (a hand-made or foreign log), or ''."""
    kind = event["type"]
    if not isinstance(kind, str) or not isinstance(event.get("ts"), (int, float)):
        return "the event has no valid type or timestamp"
    check = _SHAPE_CHECKS.get(kind)
    if check is None:
        return f"unknown event type {kind!r}"
    if check(event):
        return ""
    return f"a {kind} event is missing fields or has fields of the wrong type"


# Reading older logs: one named step per schema version, applied in order (v1 -> v2 -> ...). -----------
def v1_to_v2(event: Event) -> Event:
    """v2 changed how a line is signed (its MAC also covers the previous line's), not what an event holds."""
    return event


def v2_to_v3(event: Event) -> Event:
    """v3 sends notes to the model and marks interrupted requests; a v2 log did neither, and so its events still fold as they did.

    A v2 note never reached the model (any ``to_model`` in one is dropped), and the request after a v2
    interruption was sent without the interruption note (``mark: false``).
    """
    if event.get("type") == NOTE:
        event.pop("to_model", None)
    elif event.get("type") == INTERRUPTED:
        event["mark"] = False
    return event


def v3_to_v4(event: Event) -> Event:
    """v4 added event types (context, compaction_started, compaction); no v3 event changes meaning."""
    return event


# Each step changes the event in place and returns it.
MIGRATIONS: dict[int, Callable[[Event], Event]] = {1: v1_to_v2, 2: v2_to_v3, 3: v3_to_v4}


def upgrade(event: Event) -> Event:
    """An event of any known schema in the shape of the current one, changed in place (``v`` still says how its line was written)."""
    version = event["v"]
    while version < SCHEMA_VERSION:
        event = MIGRATIONS[version](event)
        version += 1
    return event


def is_durable(event_type: str, payload: dict[str, Any]) -> bool:
    """Whether an event must reach the disk before the engine acts on it."""
    if event_type in (TOOL_STARTED, TOOL_RESULT):
        # A lost read runs again harmlessly; the next durable line's fsync covers it (one file, written in order).
        return payload.get("effect") != "read"
    return event_type in DURABLE_TYPES


def make(seq: int, event_type: str, payload: dict[str, Any]) -> Event:
    """Build an event with the standard header keys first."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    if "sig" in payload or "crc" in payload:
        raise ValueError("'sig' and 'crc' are reserved for the line's signature and checksum")
    return {"v": SCHEMA_VERSION, "seq": seq, "ts": round(time.time(), 6), "type": event_type, **payload}
