"""What a live view shows besides each event's own rendering: its status line, and what becomes of streamed text.

The live panel and the replay both follow these rules, so a replay shows what the panel showed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Literal

from ..record import events as ev
from ..state.fold import State, apply
from ..state.tokens import Tokens
from .parts import kind_of, with_tokens

Event = Mapping[str, Any]
STARTING = "starting"
BUDGET_STOP = "stopped at its budget"  # the listing's words (history/summary.py)
# The fold's State.status in words.
STATUS_WORDS = {
    "idle": STARTING,
    "model": "waiting for the model",
    "tools": "running tools",
    "done": "done",
    "interrupted": "interrupted",
    "error": "model error",
}
FINAL_STATUSES = ("interrupted", "model error", BUDGET_STOP)  # a finished view keeps these instead of saying "done"


def _folded(e: Event, state: State) -> str:
    return STATUS_WORDS.get(state.status, str(state.status))


def _model_call(e: Event, state: State) -> str:
    attempt = e.get("attempt", 1)
    return "streaming" if attempt == 1 else f"streaming (attempt {attempt})"


def _model_error(e: Event, state: State) -> str:
    wait = e.get("retry_in")
    if isinstance(wait, (int, float)) and wait >= 1:  # the panel counts it down (notebook/activity.py)
        return retry_words(wait)
    return "retrying after a model error" if e.get("retryable") and not e.get("retry_after") else "model error"


def retry_words(seconds: float) -> str:
    """The status while a retry waits: the seconds left, as minutes and seconds past a minute."""
    left = max(0, math.ceil(seconds))
    return f"model error: retrying in {left // 60}:{left % 60:02d}" if left >= 60 else f"model error: retrying in {left} s"


def _approval(e: Event, state: State) -> str:
    return "waiting for approval" if e.get("decision") == "pending" else _folded(e, state)


def _tool_started(e: Event, state: State) -> str:
    running = sum(1 for call in state.open_calls.values() if call.get("started"))  # side by side: several (parallel.py)
    return f"running {running} tools" if running > 1 else f"running tool {e.get('name', '?')}"


def _compaction_started(e: Event, state: State) -> str:
    return "compacting the context"


def _compaction(e: Event, state: State) -> str:
    return "compacting the context" if state.compacting is not None else _folded(e, state)


def _note(e: Event, state: State) -> str | None:
    return BUDGET_STOP if e.get("kind") == ev.NOTE_BUDGET_REACHED else None  # the loop stopped before a model call


# None: the event leaves the status as it was.
STATUS: dict[str, Callable[[Event, State], str | None] | None] = {
    ev.SESSION_START: None,
    ev.USER_MSG: _folded,
    ev.MODEL_CALL: _model_call,
    ev.DELTA: None,
    ev.ASSISTANT_MSG: _folded,
    ev.MODEL_ERROR: _model_error,
    ev.APPROVAL: _approval,
    ev.TOOL_STARTED: _tool_started,
    ev.TOOL_RESULT: _folded,
    ev.INTERRUPTED: _folded,
    ev.NOTE: _note,
    ev.TRUST: None,
    ev.CONTEXT: None,
    ev.COMPACTION_STARTED: _compaction_started,
    ev.COMPACTION: _compaction,
}


def status(event: Event, state: State) -> str | None:
    """The status line right after ``event``, given the fold ``state`` after it; None if the event leaves it as it was."""
    rule = STATUS.get(kind_of(event))
    return rule(event, state) if rule is not None else None


def status_line(status: str, state: State) -> str:
    """A view's status line: the status, then the session's token figures in words (parts.tokens_line), the same in every view."""
    return with_tokens(status, Tokens.of_state(state))


def follow(state: State, event: Event) -> State:
    """Fold ``event`` into ``state`` as a view does: a malformed event (a hostile log's) changes nothing more."""
    try:
        apply(state, event)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - the view still shows the event and everything after it
        pass
    return state


# What an event does to the text streamed so far: ends it (the next delta starts anew) or replaces it
# with the finished message.  Every other event leaves the stream going.
StreamEffect = Literal["end", "replace"]
STREAM: dict[str, StreamEffect] = {ev.MODEL_CALL: "end", ev.INTERRUPTED: "end", ev.ASSISTANT_MSG: "replace"}


def stream_effect(event: Event) -> StreamEffect | None:
    """What ``event`` does to the streamed text on screen (None: nothing)."""
    return STREAM.get(kind_of(event))
