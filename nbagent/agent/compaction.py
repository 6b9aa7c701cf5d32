"""Local compaction: the oldest messages summarised by model calls, each summary logged before a request uses it.

The rules (how much to keep, how to cut, what to ask) are in nbagent/state/context.py; this runs them. The
intent is logged first (``compaction_started``), then each part's summary as a ``compaction`` event:
a crash resumes the compaction where it stopped, and no part is summarised twice once logged.
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import ModelError
from ..model.claude import Model, ModelRequest, Reply
from ..model.retries import wait_for
from ..record import events as ev
from ..state import context as ctx
from ..state import providers
from .session import Session


def compact(
    session: Session,
    model: Model,
    settings: ctx.ContextSettings,
    *,
    reason: str,
    max_tokens: int,
    retries: int,
    max_wait: float | None = None,
) -> bool:
    """Summarise the oldest messages of ``session`` (ModelError if a summary call fails); False: nothing to compact."""
    state = session.state
    if state.compacting is None:
        keep = ctx.keep_count(state.messages, settings.keep_tokens)
        if not keep or keep >= len(state.messages):
            return False
        session.append(ev.COMPACTION_STARTED, keep=keep, reason=reason, model=model.name)
    limit = max(200, min(settings.threshold, settings.window))  # each summary request must fit too
    while session.state.compacting is not None:
        messages = list(session.state.messages)
        prefix = messages[: len(messages) - session.state.compacting["keep"]]
        end = ctx.first_chunk(prefix, limit)
        reply = summarise(model, prefix[:end], max_tokens=max_tokens, retries=retries, max_wait=max_wait)
        if isinstance(reply, ModelError):
            if ctx.is_prompt_too_long(reply.kind, reply.status, str(reply)) and limit > 100:
                limit //= 2
                continue
            raise reply
        summary = "".join(b.get("text", "") for b in reply["content"] if b.get("type") == "text").strip()
        session.append(
            ev.COMPACTION,
            summary=summary or "(the model returned an empty summary)",
            messages=end,
            through=session.seq,
            final=end >= len(prefix),
            model=reply.get("model") or model.name,
            usage=reply.get("usage") or {},
            **providers.billed(model),
        )
    return True


def summarise(
    model: Model, messages: list[dict[str, Any]], *, max_tokens: int, retries: int, max_wait: float | None = None
) -> Reply | ModelError:
    """One summary call (retried like any model call, a retry-after past ``max_wait`` not waited for); nothing logged until complete."""
    request = ModelRequest(ctx.summary_request(messages), max_tokens=min(max_tokens, 8192))
    for attempt in range(1, retries + 2):
        try:
            return model.stream(request, lambda delta: None)
        except ModelError as err:
            wait = wait_for(attempt, err.retry_after, max_wait) if err.retryable and attempt <= retries else None
            if wait is None:
                return err
            time.sleep(wait)
    raise AssertionError("unreachable")
