"""What every renderer shares: escaping, the text of content blocks, tool names, clipping, times and token counts."""

from __future__ import annotations

import datetime
import html
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from ..record import redact
from ..state.asides import Asides
from ..state.context import DEFAULT_WINDOW
from ..state.fold import State
from ..state.tokens import Tokens

Event = Mapping[str, Any]
HEADER_KEYS = frozenset({"v", "seq", "ts", "type", "crc"})


def kind_of(event: Event) -> str:
    """The event's type ('' when a hostile log gives something else than a string)."""
    kind = event.get("type")
    return kind if isinstance(kind, str) else ""


def esc(text: Any) -> str:
    """``text`` escaped for HTML text and attribute values."""
    return html.escape(str(text), quote=True)


def dumps(value: Any) -> str:
    """JSON on one line, non-ASCII kept readable; never fails on an odd value."""
    return json.dumps(value, ensure_ascii=False, default=str)


def payload(event: Event) -> dict[str, Any]:
    """The event without its header keys."""
    return {k: v for k, v in event.items() if k not in HEADER_KEYS}


# Content ------------------------------------------------------------------------------------------------
def content_blocks(content: Any) -> list[dict[str, Any]]:
    """Message or tool-result content as a list of blocks: a string is one text block, anything else becomes text."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b if isinstance(b, dict) else {"type": "text", "text": str(b)} for b in content]
    return [] if content is None else [{"type": "text", "text": dumps(content)}]


def text_of(content: Any, *, only_text: bool = False) -> str:
    """Content as plain text: text as is, tool calls as name(arguments), images as [image TYPE], other blocks as JSON.

    ``only_text`` keeps text blocks alone.  Thinking blocks are left out (the HTML view shows them, redacted).
    """
    parts = []
    for block in content_blocks(content):
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif only_text or kind in redact.VERBATIM_BLOCK_TYPES:
            continue
        elif kind == "tool_use":
            parts.append(f"{block.get('name')}({dumps(block.get('input'))})")
        elif kind == "tool_result":
            parts.append(text_of(block.get("content")))
        elif kind == "image":
            source = block.get("source")
            parts.append(f"[image {source.get('media_type', '')}]" if isinstance(source, dict) else "[image]")
        else:
            parts.append(dumps(block))
    return "\n".join(parts)


def note_text(event: Event) -> str:
    """What a note says: its text (or message), else its payload as JSON."""
    text = event.get("text") or event.get("message")
    return str(text) if text else dumps(payload(event))


# Notes to the model -----------------------------------------------------------------------------------
NOTE_PREFIX = "[nbagent note:"  # how every note to the model begins (before v3, the restart note was a block of the request)


def note_words(text: str) -> str:
    """A note to the model as people read it: without its ``[nbagent note: ...]`` wrapper."""
    text = text.strip()
    if text.startswith(NOTE_PREFIX) and text.endswith("]"):
        return text[len(NOTE_PREFIX) : -1].strip()
    return text


def note_summary(words: str) -> tuple[str, str]:
    """A note's first line and the rest: a note of several lines (the notebook's account) shows collapsed to its first."""
    first, _, rest = words.partition("\n")
    return first, rest.strip("\n")


def request_parts(content: Any) -> tuple[list[str], Any]:
    """A request's notes to the model and the user's own content (a display rule for logs before v3).

    Before v3 the restart note was sent as the first text block of the request: a list's leading text
    blocks that begin with ``[nbagent note:`` are notes, not the user's words (the fold still sends them).
    """
    if not isinstance(content, list):
        return [], content
    notes: list[str] = []
    for block in content:
        text = block.get("text") if isinstance(block, dict) and block.get("type") == "text" else None
        if not isinstance(text, str) or not text.startswith(NOTE_PREFIX):
            break
        notes.append(text)
    return notes, content[len(notes) :] if notes else content


def abandoned_words(name: str, why: Any) -> str:
    """What an ``abandoned`` tool result means, said as a note of the request it belonged to."""
    if why == "not_started":
        return f"the call to {name} from the request before was not run: a new request came first"
    return f"the call to {name} from the request before was interrupted while it ran: its outcome is unknown"


class ToolNames(dict[str, str]):
    """Tool-use id -> tool name, learned from the events seen so far (and from the state a view starts from)."""

    @classmethod
    def of_state(cls, state: State) -> ToolNames:
        """The names of the calls still open in ``state`` (a view that starts mid-session may see their results)."""
        return cls({str(tool_use_id): str(call.get("name", "tool")) for tool_use_id, call in state.open_calls.items()})

    def learn(self, event: Event) -> None:
        """Note the names of the event's tool_use blocks (and of a started call: a tail may begin there)."""
        content = event.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    self[str(block.get("id"))] = str(block.get("name"))
        if "tool_use_id" in event and "name" in event:
            self[str(event["tool_use_id"])] = str(event["name"])

    @classmethod
    def of_events(cls, events: Iterable[Event]) -> ToolNames:
        """The names learned from all of ``events``."""
        names = cls()
        for event in events:
            names.learn(event)
        return names


class Start(NamedTuple):
    """Where a view that begins mid-session starts: the names of the calls still open, what the fold puts before the next request.

    ``context``: the tokens the last reply's request and reply took, and the window (see :func:`context_text`);
    ``usage``: the session's summed usage counts so far, so that a view of one turn shows the session's tokens as every view does;
    ``spend``: the session's tokens by price key so far (prices.py), for its cost; ``turn``: the request under way's usage,
    spend and replies (a view continuing it counts what it spent before).
    """

    names: ToolNames
    asides: Asides
    context: tuple[int, int] = (0, 0)
    usage: tuple[tuple[str, int], ...] = ()
    spend: tuple[tuple[str, tuple[int, ...]], ...] = ()
    turn: tuple[tuple[tuple[str, int], ...], tuple[tuple[str, tuple[int, ...]], ...], int] = ((), (), 0)

    @classmethod
    def of_state(cls, state: State) -> Start:
        """Where ``state`` stands (copied: the state goes on changing)."""
        usage = tuple(state.usage.items())
        spend = tuple((key, tuple(counts)) for key, counts in state.spend.items())
        turn = (tuple(state.turn_usage.items()), tuple((k, tuple(c)) for k, c in state.turn_spend.items()), state.turn_replies)
        return cls(ToolNames.of_state(state), Asides.of_state(state), (state.context_tokens, state.window), usage, spend, turn)

    def fresh(self) -> Start:
        """A copy to render with (renderers change what they are given as they go)."""
        return self._replace(names=ToolNames(self.names), asides=replace(self.asides, notes=list(self.asides.notes)))


def tool_name(names: Mapping[str, str] | None, tool_use_id: Any) -> str:
    """The name of the call ``tool_use_id`` ('tool' if unknown)."""
    return (names or {}).get(str(tool_use_id), "tool")


# Clipping ------------------------------------------------------------------------------------------------
def clip(text: str, limit: int, *, note: str = "more characters") -> str:
    """At most ``limit`` characters, then how many were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} {note}]"


def shorten(text: str, limit: int) -> str:
    """At most ``limit`` characters on one line, ending in an ellipsis when cut."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def indent(text: str, prefix: str = "    ") -> str:
    """Every line of ``text`` indented (only newlines break lines: a carriage return stays in, to be shown escaped)."""
    return "\n".join(prefix + line for line in text.split("\n"))


# Times and tokens ----------------------------------------------------------------------------------------
def timestamp(event: Event) -> float | None:
    """The event's time, or None if the log has no usable one."""
    ts = event.get("ts")
    if isinstance(ts, (int, float)) and not isinstance(ts, bool) and math.isfinite(ts) and 0 < ts < 1e11:
        return float(ts)
    return None


def when(ts: float | None, *, date: bool = True, ms: bool = False) -> str:
    """Local time of ``ts``: date and time, or the time alone; to the millisecond with ``ms``; '-' when unknown."""
    if not ts:
        return "-"
    try:
        moment = datetime.datetime.fromtimestamp(ts)
    except (OverflowError, OSError, ValueError):
        return "-"
    text = moment.strftime(("%Y-%m-%d " if date else "") + ("%H:%M:%S.%f" if ms else "%H:%M:%S"))
    return text[:-3] if ms else text


def gap(seconds: float | None) -> str:
    """A time between two events, short: '+0.004 s', '+1.5 s', '+3 min 20 s', '+2 h 5 min', '+3 d 4 h'."""
    if seconds is None:
        return "+?"
    if seconds < 0:
        return f"-{gap(-seconds)[1:]}"
    if seconds < 10:
        return f"+{seconds:.3f} s" if seconds < 1 else f"+{seconds:.1f} s"
    whole = int(round(seconds))
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"+{days} d {hours} h"
    if hours:
        return f"+{hours} h {minutes} min"
    return f"+{minutes} min {secs} s" if minutes else f"+{secs} s"


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def tokens_words(tokens: Tokens) -> str:
    """Input and output in words, the one way every view says them: '12,892 tokens in (12,466 from cache) · 426 out'.

    The input counts every input token, the cached ones too (see :class:`nbagent.state.tokens.Tokens`); '' before any.
    """
    if not tokens.used:
        return ""
    cached = f" ({tokens.from_cache:,} from cache)" if tokens.from_cache else ""
    return f"{tokens.input:,} tokens in{cached} · {tokens.output:,} out"


def context_figure(tokens: Tokens) -> str:
    """How full the window is: '12.9k / 200k', 'compacted' after a local compaction until the next reply, '' before any reply."""
    if tokens.context:
        return f"{short_tokens(tokens.context)} / {short_tokens(tokens.window)}"
    return "compacted" if tokens.compacted else ""


def context_words(tokens: Tokens) -> str:
    """The context use in words: 'context 12.9k / 200k' (see :func:`context_figure`)."""
    figure = context_figure(tokens)
    return f"context {figure}" if figure else ""


def cost_words(tokens: Tokens) -> str:
    """The dollars of these figures in words: '$0.42', 'cost unknown' ('' if not known here, or before any token)."""
    if tokens.cost is None or not (tokens.used or tokens.cost.dollars):
        return ""
    return tokens.cost.words()


def _figures(tokens: Tokens) -> str:
    """Tokens and dollars of one scope: '1,703 tokens in (1,666 from cache) · 12 out · $0.0005' ('' before any)."""
    return " · ".join(part for part in (tokens_words(tokens), cost_words(tokens)) if part)


def tokens_line(tokens: Tokens) -> str:
    """Every figure in words, each scope said: 'this request: 1,703 tokens in · 12 out · $0.0005; session: 3,369 tokens in ·
    16 out · $0.0048; context 1.7k / 1M' (the session's part left out while the same); without ``tokens.turn`` (a view of the
    whole session) the session's alone: '3,369 tokens in · 16 out · $0.0048 · context 1.7k / 1M' ('' before any)."""
    context, whole = context_words(tokens), _figures(tokens)
    if tokens.turn is None:
        return " · ".join(part for part in (whole, context) if part)
    mine = _figures(tokens.turn)
    groups = [f"this request: {mine}" if mine else "", f"session: {whole}" if whole and whole != mine else "", context]
    return "; ".join(group for group in groups if group)


def usage_text(usage: Any) -> str:
    """One reply's input and output in words (its server compaction included; see :func:`tokens_words`)."""
    return tokens_words(Tokens.of(usage)) or "0 tokens"


def with_tokens(status: str, tokens: Tokens) -> str:
    """A status line: the status, then every figure in words (:func:`tokens_line`) once there are any."""
    line = tokens_line(tokens)
    return f"{status} · {line}" if line else status


def short_tokens(count: int) -> str:
    """A token count, short: '950', '8.2k', '12.9k', '143k', '1.2M'."""
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}k".replace(".0k", "k") if count < 100_000 else f"{count // 1000}k"
    return f"{count / 1_000_000:.1f}M".replace(".0M", "M")


def context_text(tokens: Any, window: Any = 0) -> str:
    """How full the context window is: 'context 143k / 200k' ('' before the first reply); window 0: the default window."""
    return context_words(Tokens(context=_count(tokens), window=_count(window) or DEFAULT_WINDOW))


def state_context(state: State) -> str:
    """The context use of a folded session (see :func:`context_words`); after a local compaction, until the next reply, 'context compacted'."""
    return context_words(Tokens.of_state(state))


def compaction_words(event: Event) -> str:
    """What a local ``compaction`` event did, in words: how many messages it summarised, with which model and tokens."""
    count = _count(event.get("messages"))
    words = f"{count} earlier message{'s' if count != 1 else ''} summarised"
    if event.get("final") is False:
        words += " (one part of a longer compaction)"
    model = event.get("model")
    about = [str(model)] if isinstance(model, str) and model else []
    if isinstance(event.get("usage"), Mapping) and any(_count(v) for v in event["usage"].values()):
        about.append(usage_text(event["usage"]))
    return words + (f" ({'; '.join(about)})" if about else "")


COMPACTION_REASONS = {
    "trigger": "the context passed its trigger",
    "too_long": "the API said the prompt is too long",
    "request": "asked for",
}


def compacting_words(event: Event) -> str:
    """What a ``compaction_started`` event says: a compaction began, why, and how much it keeps."""
    keep = _count(event.get("keep"))
    reason = event.get("reason")
    why = COMPACTION_REASONS.get(reason, str(reason)) if isinstance(reason, str) and reason else ""
    return f"compacting the context: summarising all but the latest {keep} message{'s' if keep != 1 else ''}" + (f" ({why})" if why else "")


def superseded_starts(events: Sequence[Event]) -> dict[int, int]:
    """Index of each ``compaction_started`` whose compaction finished -> index of the (final) ``compaction`` that did.

    A view shows the "compacting" line while a compaction runs; once it is done, the entry replaces it.
    A start with no finished compaction after it (a crash, an interruption) keeps its line.
    """
    done: dict[int, int] = {}
    started: int | None = None
    for index, event in enumerate(events):
        kind = kind_of(event)
        if kind == "compaction_started":
            started = index
        elif kind == "compaction" and started is not None and event.get("final") is not False:
            done[started], started = index, None
    return done


def server_compaction_words(block: Mapping[str, Any]) -> str:
    """What a server-side ``compaction`` block of a reply means, in words."""
    return "the API compacted the context: the earlier conversation is summarised"


def thinking_length(block: Mapping[str, Any]) -> int:
    """How many characters of thinking a block holds (0 for redacted thinking: it is encrypted)."""
    text = block.get("thinking")
    return len(text) if isinstance(text, str) else 0


def thinking_shown(block: Mapping[str, Any]) -> bool:
    """Whether a thinking block has words to read: not redacted (encrypted) nor omitted (the API's display "omitted" sends none).

    Such blocks come with thinking off too (a model that cannot turn it off); the log keeps them, no view shows a row.
    """
    return block.get("type") == "thinking" and thinking_length(block) > 0


def thinking_words(block: Mapping[str, Any]) -> str:
    """The one-line label of a thinking block: 'thinking (N characters)', or '(redacted thinking)'."""
    return "(redacted thinking)" if block.get("type") == "redacted_thinking" else f"thinking ({thinking_length(block):,} characters)"
