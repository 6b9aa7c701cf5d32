"""A streamed reply folded from the SDK's typed stream events into the plain data nbagent records.

``messages.stream()`` keeps a snapshot model up to date and builds a second event object for every delta:
about 13 µs a delta with anthropic 2.17 (300 µs of a 20-delta reply), more with 1.9.0 (benchmarks/RESULTS.md,
"The engine's share through the SDK"). ``messages.create(stream=True)`` yields the
typed events alone; this fold keeps what the helper's ``get_final_message()`` would hold, field for field and in
the same key order, and the test that holds it there runs the helper on the same bytes
(tests/model/test_reply_build.py). Text is joined once at the end and a tool's input JSON parsed once, where the
helper re-joins and re-parses it on every delta.

May import: the standard library and ``jiter`` (the SDK's own JSON parser, one of its dependencies).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

TOOL_INPUT_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})  # blocks whose input streams as JSON
FINE_GRAINED_BETA = "fine-grained-tool-streaming-2025-05-14"  # with it the SDK keeps a cut string in a tool's input
# The counts a message_delta carries are totals so far: each one it has replaces the message_start value (the SDK's
# lists; the beta endpoint's has two more).
DELTA_USAGE = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "server_tool_use", "output_tokens_details")
BETA_DELTA_USAGE = (*DELTA_USAGE, "iterations", "fallback_credit")


class StreamError(ValueError):
    """A stream no reply can be made of: events out of order, a block it never opened, a tool input that is not JSON."""


def _dump(model: Any) -> dict[str, Any]:
    """A typed SDK object as JSON data, ``None`` fields left out (as a reply is kept); a dict the SDK could not type, as is."""
    if isinstance(model, dict):
        return dict(model)
    data: dict[str, Any] = model.model_dump(mode="json", exclude_none=True)
    return data


class ReplyBuilder:
    """Folds one stream's events into a reply: ``delta_of(event)`` for each, then ``reply()``."""

    def __init__(self, *, beta: bool = False, betas: tuple[str, ...] | list[str] = ()) -> None:
        self.delta_usage = BETA_DELTA_USAGE if beta else DELTA_USAGE  # the endpoint the stream came from
        self.trailing_strings = beta and FINE_GRAINED_BETA in betas
        self.message: dict[str, Any] | None = None
        self.blocks: list[dict[str, Any]] = []
        self.fields: list[Any] = []  # per block: its SDK type's fields in order (a key a delta adds goes in its place)
        self.pieces: defaultdict[tuple[int, str], list[str]] = defaultdict(list)  # streamed text, thinking and tool JSON, joined once
        self.stop_details: Any = None
        self.usage_fields: Any = ()
        # message_stop came: every stream ends with it (https://platform.claude.com/docs/en/build-with-claude/streaming,
        # "Event flow"), so one that closes without it broke off mid-reply
        self.ended = False

    def delta_of(self, event: Any) -> dict[str, Any] | None:
        """Fold ``event`` in; return the delta to report for it (text, tool JSON or thinking), else None."""
        kind = event.type
        if kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        if self.message is None:
            if kind != "message_start":
                raise StreamError(f'its events are out of order: {kind} before "message_start"')
            message = event.message
            usage = message.usage
            self.usage_fields = getattr(type(usage), "model_fields", ())
            self.message = {
                "id": message.id,
                "model": message.model,
                "stop_reason": message.stop_reason,
                "usage": _dump(usage),
            }
            for block in message.content:
                self._start(block)
        elif kind == "content_block_start":
            self._start(event.content_block)
        elif kind == "message_delta":
            delta, message = event.delta, self.message
            message["stop_reason"] = delta.stop_reason
            self.stop_details = getattr(delta, "stop_details", None)
            counts = _dump(event.usage)
            usage = message["usage"]
            usage["output_tokens"] = event.usage.output_tokens
            for name in self.delta_usage:
                if name in counts:
                    usage[name] = counts[name]
        elif kind == "message_stop":
            self.ended = True
        return None

    def _start(self, block: Any) -> None:
        self.blocks.append(_dump(block))
        self.fields.append(getattr(type(block), "model_fields", ()))
        if getattr(block, "type", None) == "fallback" and self.message is not None:
            self.message["model"] = block.to.model  # the model that served the rest of the reply, as the SDK relabels it

    def _delta(self, index: int, delta: Any) -> dict[str, Any] | None:
        kind = delta.type
        if not 0 <= index < len(self.blocks):
            raise StreamError(f"a {kind} for content block {index}, which never started")
        block = self.blocks[index].get("type")
        if kind == "text_delta":
            if block == "text":
                self.pieces[index, "text"].append(delta.text)
            return {"index": index, "text": delta.text}
        if kind == "input_json_delta":
            if block in TOOL_INPUT_BLOCKS:
                self.pieces[index, "input"].append(delta.partial_json)
            return {"index": index, "partial_json": delta.partial_json}
        if kind == "thinking_delta":
            if block == "thinking":
                self.pieces[index, "thinking"].append(delta.thinking)
            return {"index": index, "thinking": delta.thinking}
        data = self.blocks[index]
        if kind == "signature_delta" and block == "thinking":
            data["signature"] = delta.signature
        elif kind == "citations_delta" and block == "text":
            data.setdefault("citations", []).append(_dump(delta.citation))
        elif kind == "compaction_delta" and block == "compaction":
            for name in ("content", "encrypted_content"):  # each replaced, as the SDK replaces it
                value = getattr(delta, name, None)
                if value is None:
                    data.pop(name, None)
                else:
                    data[name] = value
        return None

    def reply(self) -> dict[str, Any]:
        """The reply as nbagent records it: id, model, content, stop_reason, usage (and stop_details when given)."""
        if self.message is None:
            raise StreamError("it ended before its message started")
        for (index, name), pieces in self.pieces.items():
            data, joined = self.blocks[index], "".join(pieces)
            if name != "input":
                data[name] = data.get(name, "") + joined
            elif joined:
                data[name] = self._parse(joined)
        content = [_ordered(data, fields) for data, fields in zip(self.blocks, self.fields)]
        message = self.message
        reply = {
            "id": message["id"],
            "model": message["model"],
            "content": content,
            "stop_reason": message["stop_reason"],
            "usage": _ordered(message["usage"], self.usage_fields),
        }
        if self.stop_details is not None:
            reply["stop_details"] = _dump(self.stop_details)
        return reply

    def _parse(self, text: str) -> Any:
        """A tool's streamed input, parsed once as the SDK's helper parses it (a reply cut mid-JSON keeps what is whole).

        Where the helper raised a bare ``ValueError`` out of the stream, this is a :class:`StreamError`: the adapter
        makes it a retryable model error, so the loop asks again instead of stopping on a traceback.
        """
        from jiter import from_json

        raw = text.encode()
        try:
            return from_json(raw, partial_mode="trailing-strings" if self.trailing_strings else True)
        except ValueError as exc:
            raise StreamError(f"a tool input is not JSON ({exc}): {text}") from None  # whole: clipped after redaction


def _ordered(data: dict[str, Any], fields: Any) -> dict[str, Any]:
    """``data`` with its keys in its SDK type's field order (extra keys last), as the type's own dump orders them."""
    if not fields:
        return data
    order = {name: position for position, name in enumerate(fields)}
    keys = list(data)
    ranked = sorted(keys, key=lambda key: order.get(key, len(order)))
    return data if ranked == keys else {key: data[key] for key in ranked}
