"""The model seam: a protocol, the Anthropic adapter (streaming, prompt caching), and an offline demo model."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anthropic

from . import redact
from .errors import ModelError, NbagentError
from .retries import retry_after, should_retry

try:  # the SDK's HTTP library; a connection dropped mid-stream surfaces as its error, unwrapped
    from httpx2 import TransportError
except ImportError:  # older SDKs
    from httpx import TransportError  # type: ignore[no-redef,assignment,unused-ignore]

DEFAULT_MODEL = "claude-sonnet-5-5"
Reply = dict[str, Any]  # {"id", "model", "content": [blocks], "stop_reason", "usage"}
DeltaSink = Callable[[dict[str, Any]], None]


@dataclass
class ModelRequest:
    """Everything one model call needs."""

    messages: Sequence[dict[str, Any]]  # a list, or a resumed session's Transcript
    tools: list[dict[str, Any]] = field(default_factory=list)
    system: str = ""
    max_tokens: int = 8192
    thinking: dict[str, Any] | None = None  # the API's ``thinking`` parameter
    output_config: dict[str, Any] | None = None  # the API's ``output_config`` (effort), where the thinking setting needs it
    context_management: dict[str, Any] | None = None  # server-side compaction and clearing (a beta)
    betas: tuple[str, ...] = ()


class Model(Protocol):
    """The model seam: stream one reply, reporting deltas as they arrive; raise ModelError on failure."""

    name: str

    def stream(self, request: ModelRequest, on_delta: DeltaSink) -> Reply: ...


class AnthropicModel:
    """Claude through the official SDK: streaming, prompt caching; one attempt per call (the loop owns retries)."""

    def __init__(self, name: str = DEFAULT_MODEL, *, client: anthropic.Anthropic | None = None) -> None:
        if client is None:
            if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
                raise NbagentError(
                    "No Anthropic API key: set ANTHROPIC_API_KEY in the environment (or pass client=anthropic.Anthropic(...)). "
                    "To try nbagent without a key, use the offline demo model: `nbagent demo`."
                )
            client = anthropic.Anthropic()  # honours ANTHROPIC_BASE_URL
        self.name = name
        # One retry budget: the SDK would retry twice more inside every attempt the loop makes.
        self.client = client.with_options(max_retries=0)
        redact.register(getattr(client, "api_key", None))  # whatever its shape, the key never reaches a log or an error
        redact.register(getattr(client, "auth_token", None))

    def stream(self, request: ModelRequest, on_delta: DeltaSink) -> Reply:
        """Stream one reply from the Messages API."""
        params: dict[str, Any] = {
            "model": self.name,
            "max_tokens": request.max_tokens,
            "messages": list(request.messages),  # a Transcript (a resumed session) is not a list
            # Automatic prompt caching: a long resumed history is read from cache, not paid in full.
            "cache_control": {"type": "ephemeral"},
        }
        if request.system:
            params["system"] = request.system
        if request.tools:
            params["tools"] = request.tools
        if request.thinking:
            params["thinking"] = request.thinking
        if request.output_config:
            params["output_config"] = request.output_config
        # The beta call only where a beta is used: server-side compaction needs it.
        messages: Any = self.client.messages
        if request.betas or request.context_management:
            messages = self.client.beta.messages
            params["betas"] = list(request.betas)
            if request.context_management:
                params["context_management"] = request.context_management
        try:
            with messages.stream(**params) as stream:
                for event in stream:
                    if event.type == "content_block_delta":
                        delta = event.delta
                        if delta.type == "text_delta":
                            on_delta({"index": event.index, "text": delta.text})
                        elif delta.type == "input_json_delta":
                            on_delta({"index": event.index, "partial_json": delta.partial_json})
                        elif delta.type == "thinking_delta":
                            on_delta({"index": event.index, "thinking": delta.thinking})
                message = stream.get_final_message()
        except anthropic.APIStatusError as exc:
            raise _model_error(exc) from _scrubbed(exc)
        except anthropic.APIConnectionError as exc:  # includes timeouts
            text = redact.text(f"could not reach the Anthropic API: {exc}")
            raise ModelError(text, kind="connection_error", retryable=True) from _scrubbed(exc)
        except TransportError as exc:
            text = redact.text(f"the connection to the Anthropic API broke mid-reply: {exc}")
            raise ModelError(text, kind="connection_error", retryable=True) from _scrubbed(exc)
        reply: Reply = {
            "id": message.id,
            "model": message.model,
            "content": [_block(b) for b in message.content],
            "stop_reason": message.stop_reason,
            "usage": message.usage.model_dump(mode="json", exclude_none=True),
        }
        details = getattr(message, "stop_details", None)  # a refusal's category and explanation (newer SDKs)
        if details is not None:
            reply["stop_details"] = details.model_dump(mode="json", exclude_none=True)
        return reply


def _block(block: Any) -> dict[str, Any]:
    data = block.model_dump(mode="json", exclude_none=True)
    data.pop("parsed_output", None)
    return data


def _model_error(exc: anthropic.APIStatusError) -> ModelError:
    body = exc.body if isinstance(exc.body, dict) else {}
    raw = body.get("error")
    error = raw if isinstance(raw, dict) else {}
    kind = str(error.get("type") or "api_error")
    message = str(error.get("message") or exc.message)
    status = exc.status_code if exc.status_code != 200 else None  # 200: the error arrived mid-stream
    headers = exc.response.headers if exc.response is not None else {}
    retryable = should_retry(kind, status, headers.get("x-should-retry"))
    hint = ""
    if status == 401:
        hint = " Check ANTHROPIC_API_KEY."
    if status in (400, 413) and "prompt is too long" in message.lower():
        kind = "prompt_too_long"
    text = redact.text(f"Anthropic API error ({status or 'mid-stream'} {kind}): {message}.{hint}")  # a 401 may echo the key
    return ModelError(text, status=status, kind=kind, retryable=retryable, retry_after=retry_after(headers) if retryable else None)


def _scrubbed(exc: BaseException) -> BaseException:
    """``exc`` with its message redacted, as the cause a traceback shows under the ModelError."""
    exc.args = tuple(redact.text(a) if isinstance(a, str) else a for a in exc.args)
    if isinstance(getattr(exc, "message", None), str):
        exc.message = redact.text(exc.message)  # type: ignore[attr-defined]
    return exc


class DemoModel:
    """An offline stand-in for Claude, for trying nbagent without a key. It is not Claude and says so.

    For each request it calls the first tool it can call without guessing
    arguments (no required parameters, or only a ``path``), then summarises
    what the tools returned.
    """

    name = "nbagent-demo (offline, not Claude)"
    LABEL = "[offline demo model, not Claude] "

    def __init__(self, *, delay: float = 0.01) -> None:
        self.delay = delay
        self.calls = 0

    def stream(self, request: ModelRequest, on_delta: DeltaSink) -> Reply:
        """Reply deterministically from the conversation so far."""
        self.calls += 1
        results = _results_since_last_request(request.messages)
        tool = None if results else _callable_tool(request.tools)
        if tool is not None:
            text = self.LABEL + f"I'll start by calling `{tool['name']}`."
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
            arguments = {"path": "."} if "path" in tool["input_schema"].get("properties", {}) else {}
            blocks.append({"type": "tool_use", "id": f"toolu_demo_{len(request.messages):04d}", "name": tool["name"], "input": arguments})
            stop = "tool_use"
        else:
            if results:
                summary = "; ".join(_first_line(r) for r in results)
                text = (
                    self.LABEL
                    + f"The tools returned: {summary}. That's all an offline demo can do; set ANTHROPIC_API_KEY to talk to Claude."
                )
            else:
                text = self.LABEL + "I received your request. Set ANTHROPIC_API_KEY to talk to Claude."
            blocks, stop = [{"type": "text", "text": text}], "end_turn"
        for word in text.split(" "):
            on_delta({"index": 0, "text": word + " "})
            if self.delay:
                time.sleep(self.delay)
        if stop == "tool_use":
            on_delta({"index": 1, "partial_json": json.dumps(blocks[1]["input"])})
        usage = {"input_tokens": len(json.dumps(list(request.messages))) // 4, "output_tokens": len(text) // 4}
        return {"id": f"msg_demo_{self.calls:04d}", "model": self.name, "content": blocks, "stop_reason": stop, "usage": usage}


def _results_since_last_request(messages: Sequence[dict[str, Any]]) -> list[Any]:
    results: list[Any] = []
    for message in reversed(messages):
        if message["role"] != "user" or isinstance(message["content"], str):
            break
        blocks = message["content"]
        if any(b.get("type") == "text" for b in blocks):
            break
        results = [b.get("content") for b in blocks if b.get("type") == "tool_result"] + results
    return results


def _callable_tool(tools: list[dict[str, Any]]) -> dict[str, Any] | None:
    for tool in tools:
        required = set(tool.get("input_schema", {}).get("required", []))
        if required <= {"path"}:
            return tool
    return None


def _first_line(content: Any) -> str:
    text = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or [])
    line = (text.strip().splitlines() or [""])[0]
    return line[:120]
