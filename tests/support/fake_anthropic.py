"""A fake Anthropic Messages API server that the real `anthropic` SDK talks to over HTTP on 127.0.0.1.

Usage::

    with FakeAnthropic() as fake:
        fake.script(text("Hello"), tool_use("add", {"a": 1, "b": 2}))
        client = anthropic.Anthropic(base_url=fake.base_url, api_key="test-key")
        ...
        assert fake.requests[0].body["model"] == "claude-test"

Each POST /v1/messages consumes one scripted item (a `Reply`, or a callable that receives the
`RecordedRequest` and returns a `Reply`); when the queue is empty `fake.responder` is used, and
without one the server answers 500 "fake server: no scripted reply left".

A streamed reply is this sequence of SSE events (index in brackets, used by `hang_after`,
`stream_error(after=...)` and `delay`): [0] message_start, [1] ping, then per content block
content_block_start, its deltas, content_block_stop; then message_delta and message_stop.
A tool_use block's first input_json_delta has an empty `partial_json`, as the real API sends.

Every request body is checked against the SDK's own request types (tests/support/request_types.py; the beta ones on
the beta endpoint): a key the types do not name, or a literal they do not allow, gets the API's 400
"<path>: Extra inputs are not permitted" / "Input should be ...". A request that ends on an assistant turn is
refused on the models that no longer take prefill (tests/support/fake_prefill.py). A reply that compacted on the
server reports the summarizing step in ``usage.iterations``, outside the top-level counts.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import select
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union

from tests.support import fake_context, fake_images, fake_prefill, fake_versions, request_types

__all__ = [
    "FakeAnthropic",
    "RecordedRequest",
    "Reply",
    "auth_error_echoing_key",
    "cut_tool_use",
    "error",
    "refusal",
    "spend_limit",
    "stream_error",
    "text",
    "tool_use",
    "tool_uses",
]

CHUNK = 8  # default characters per text_delta / input_json_delta
ERROR_TYPES = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    402: ("billing_error", "Billing error"),
    403: ("permission_error", "Permission denied"),
    404: ("not_found_error", "Not found"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes"),
    429: ("rate_limit_error", "Rate limited"),
    500: ("api_error", "Internal server error"),
    504: ("timeout_error", "Request timed out"),
    529: ("overloaded_error", "Overloaded"),
}
STATUS_FOR_TYPE = {etype: status for status, (etype, _) in ERROR_TYPES.items()}
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


@dataclass
class RecordedRequest:
    """One HTTP request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON (a dict for Messages requests), or None if the body was not JSON
    raw: bytes = b""

    @property
    def stream(self) -> bool:
        """Whether the client asked for an SSE stream."""
        return isinstance(self.body, dict) and bool(self.body.get("stream"))


@dataclass
class Reply:
    """A scripted answer: an assistant message, an HTTP error, or a stream that breaks with an error event."""

    content: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str = "end_turn"
    chunks: int | None = None  # number of text_delta pieces per text block (None: every CHUNK chars)
    delay: float = 0.0  # seconds slept between SSE events
    hang_after: int | None = None  # stall after this many SSE events (non-streaming: at once) until stop/disconnect
    usage: dict[str, int] | None = None  # overrides for the computed usage numbers
    status: int = 200  # != 200: an HTTP error response
    error_type: str | None = None  # set with status 200: an in-stream `event: error`
    error_message: str = ""
    error_after: int = 0  # SSE events sent before the in-stream error
    headers: dict[str, str] = field(default_factory=dict)
    stop_details: dict[str, Any] | None = None  # a refusal's category and explanation (sent in message_delta)
    cut_json: int | None = None  # the last tool_use's input JSON is streamed only up to this many characters
    # Streamed as they are instead (streaming requests only), for shapes the blocks above do not make (citations, server
    # tools): the test that scripts them checks each against the SDK's own event types (tests/model/test_reply_build.py).
    events: list[tuple[str, dict[str, Any]]] | None = None


Script = Union[Reply, Callable[[RecordedRequest], Reply]]  # noqa: UP007 - a runtime alias on Python 3.10


def text(
    s: str,
    *,
    chunks: int | None = None,
    stop_reason: str = "end_turn",
    delay: float = 0.0,
    usage: dict[str, int] | None = None,
    hang_after: int | None = None,
) -> Reply:
    """An assistant text reply, streamed as several text_deltas (`chunks` pieces, default every CHUNK chars)."""
    return Reply([{"type": "text", "text": s}], stop_reason, chunks=chunks, delay=delay, hang_after=hang_after, usage=usage)


def tool_uses(
    calls: Iterable[tuple[Any, ...]],
    text: str | None = None,
    *,
    delay: float = 0.0,
    hang_after: int | None = None,
    usage: dict[str, int] | None = None,
) -> Reply:
    """Optional leading text, then one tool_use block per (name, input) or (name, input, id) tuple."""
    content = [{"type": "text", "text": text}] if text is not None else []
    for call in calls:
        name, args, tid = (*call, None)[:3]
        content.append({"type": "tool_use", "id": tid, "name": name, "input": dict(args)})
    return Reply(content, "tool_use", delay=delay, hang_after=hang_after, usage=usage)


def tool_use(
    name: str,
    input: dict[str, Any],
    *,
    id: str | None = None,
    text: str | None = None,
    delay: float = 0.0,
    hang_after: int | None = None,
    usage: dict[str, int] | None = None,
) -> Reply:
    """Optional leading text, then one tool_use block; ids default to toolu_0001, toolu_0002, ... per server."""
    return tool_uses([(name, input, id)], text, delay=delay, hang_after=hang_after, usage=usage)


def cut_tool_use(name: str, input: dict[str, Any], at: int, *, text: str | None = None, stop_reason: str = "max_tokens") -> Reply:
    """A reply cut off inside a tool call: its input JSON stops after ``at`` characters.

    Source: "Handling stop reasons" (platform docs): a reply stops at ``max_tokens`` wherever the limit
    falls, mid tool_use included, and ``model_context_window_exceeded`` ends a reply the same way when the
    context window fills. The SDK then parses the cut ``partial_json`` leniently (jiter's partial mode).
    """
    return dataclasses.replace(tool_use(name, input, text=text), stop_reason=stop_reason, cut_json=at)


def refusal(
    partial: str = "", *, category: str | None = "cyber", explanation: str | None = "The request could enable cyber harm."
) -> Reply:
    """A reply the streaming classifier stopped: ``stop_reason`` "refusal", ``stop_details`` in the message_delta.

    Source: "Streaming refusals" (platform docs) and the SDK's ``RefusalStopDetails``: the text streamed so far
    stays in the content, no refusal message is added, usage is still reported.
    """
    details = {"type": "refusal", "category": category, "explanation": explanation}
    return Reply([{"type": "text", "text": partial}] if partial else [], "refusal", stop_details=details)


def error(
    status: int,
    type: str | None = None,
    message: str | None = None,
    *,
    retry_after: str | float | None = None,
    x_should_retry: bool | None = None,
    delay: float = 0.0,
) -> Reply:
    """An HTTP error with the real body; retryable statuses send `retry-after-ms: 1` unless retry_after is given."""
    default_type, default_message = ERROR_TYPES.get(status, ("api_error", "Error"))
    headers: dict[str, str] = {}
    if retry_after is not None:
        headers["retry-after"] = str(retry_after)
    elif status in (408, 409, 429) or status >= 500:
        headers["retry-after-ms"] = "1"
    if x_should_retry is not None:
        headers["x-should-retry"] = "true" if x_should_retry else "false"
    return Reply(delay=delay, status=status, error_type=type or default_type, error_message=message or default_message, headers=headers)


def auth_error_echoing_key(request: RecordedRequest) -> Reply:
    """A scripted callable: 401 whose message echoes the request's key (x-api-key, or the Bearer token), as some proxies do."""
    key = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix("Bearer ")
    return error(401, "authentication_error", f"invalid x-api-key: {key}")


def spend_limit(until: str = "2026-12-01 at 00:00 UTC") -> Reply:
    """The 400 a workspace past its spend limit gets: ``invalid_request_error``, whatever the request asked for.

    Source: the errors page (https://platform.claude.com/docs/en/api/errors: a 400 ``invalid_request_error`` is the
    type for this too), with the API's wording as reported in anthropics/claude-code#55998. It names no part of the
    request (no ``context_management``): no fallback mends it, and no retry.
    """
    return error(
        400, "invalid_request_error", f"You have reached your specified workspace API usage limits. You will regain access on {until}."
    )


def stream_error(after: int = 2, type: str = "overloaded_error", message: str = "Overloaded", partial: Reply | None = None) -> Reply:
    """HTTP 200 SSE stream: the first `after` events of `partial`, then `event: error`, then the connection closes."""
    base = partial or text("This reply is cut short by an error.")
    return dataclasses.replace(base, error_type=type, error_message=message, error_after=after)


def _error_body(etype: str, message: str, request_id: str) -> dict[str, Any]:
    """The API's error JSON."""
    return {"type": "error", "error": {"type": etype, "message": message}, "request_id": request_id}


def _blocks(message: Any) -> list[dict[str, Any]]:
    """The content blocks of a message param (a string content has none)."""
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _validate(body: Any) -> str | None:
    """Return the API's 400 message for a request it would reject, else None."""
    if not isinstance(body, dict):
        return "There was an error parsing the body of your request: expected a JSON object"
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            return f"{name}: Field required"
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
    for i, msg in enumerate(messages):
        blocks = _blocks(msg)
        if msg["role"] == "assistant":
            use_ids = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
            following = messages[i + 1] if i + 1 < len(messages) else {}
            answered = {b.get("tool_use_id") for b in _blocks(following) if b.get("type") == "tool_result"}
            missing = [str(u) for u in use_ids if u not in answered or following.get("role") != "user"]
            if missing:
                return (
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
                    f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
                    "`tool_result` block in the next message."
                )
        else:
            previous = messages[i - 1] if i > 0 and messages[i - 1]["role"] == "assistant" else {}
            asked = {b.get("id") for b in _blocks(previous) if b.get("type") == "tool_use"}
            for j, b in enumerate(blocks):
                if b.get("type") == "tool_result" and b.get("tool_use_id") not in asked:
                    return (
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                        f"blocks: {b.get('tool_use_id')}. Each `tool_result` block must have a "
                        "corresponding `tool_use` block in the previous message."
                    )
    return None


def _has_cache_control(value: Any) -> bool:
    """Whether any dict inside `value` carries a cache_control key."""
    if isinstance(value, dict):
        return "cache_control" in value or any(_has_cache_control(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_cache_control(v) for v in value)
    return False


def _strip_cache_control(value: Any) -> Any:
    """A copy of `value` without cache_control keys (markers do not change what is cached)."""
    if isinstance(value, dict):
        return {k: _strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache_control(v) for v in value]
    return value


def _prompt_units(body: dict[str, Any]) -> list[list[Any]]:
    """The request's prompt in cache order as [kind, value] units: tools, system, then each message."""
    units = [[key, body[key]] for key in ("tools", "system") if body.get(key) is not None]
    return units + [["message", m] for m in body.get("messages", [])]


def _chars(units: list[Any]) -> int:
    """Characters of the JSON of some prompt units, the basis of the token estimate."""
    return sum(len(json.dumps(u, sort_keys=True)) for u in units)


def _pieces(s: str, count: int | None) -> list[str]:
    """Split s into `count` near-equal pieces, or pieces of CHUNK characters (always at least one)."""
    if count is None:
        return [s[i : i + CHUNK] for i in range(0, len(s), CHUNK)] or [s]
    size = max(1, -(-len(s) // max(1, count)))
    return [s[i : i + size] for i in range(0, len(s), size)] or [s]


class FakeAnthropic:
    """The fake server: a context manager that serves the Messages API on 127.0.0.1 in a daemon thread."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        """Create the server (not yet started)."""
        self.requests: list[RecordedRequest] = []
        self.responder: Callable[[RecordedRequest], Reply] | None = None
        self.errors: list[BaseException] = []  # exceptions raised by scripted callables / the responder
        self.window: int | None = None  # tokens (characters / 4); a longer request gets 400 "prompt is too long"
        self.server_compaction = True  # False: a model or gateway that refuses `context_management`
        self._queue: deque[Script] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._cached_prefixes: list[list[str]] = []
        self._paused: set[str] = set()  # pause_turn replies (fake_prefill.key): sent back as they are, they continue
        self._ids = {name: itertools.count(1) for name in ("msg", "req", "toolu")}
        self._handlers: set[tuple[threading.Thread, socket.socket]] = set()
        self._httpd = ThreadingHTTPServer((host, port), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The URL to pass to anthropic.Anthropic(base_url=...)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def pending(self) -> int:
        """How many scripted replies are still queued."""
        with self._lock:
            return len(self._queue)

    def script(self, *replies: Script) -> FakeAnthropic:
        """Queue replies; each POST /v1/messages consumes exactly one, in order."""
        with self._lock:
            self._queue.extend(replies)
        return self

    def start(self) -> FakeAnthropic:
        """Start serving in a daemon thread."""
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-anthropic", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, cut open connections (ending hung streams) and join all threads."""
        self._stopping.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(5)
        with self._lock:
            handlers = list(self._handlers)
        for _, sock in handlers:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread, _ in handlers:
            thread.join(5)
        self._httpd.server_close()

    def __enter__(self) -> FakeAnthropic:
        """Start the server."""
        return self.start()

    def __exit__(self, *exc: object) -> None:
        """Stop the server."""
        self.stop()

    def _next_id(self, kind: str) -> str:
        """A deterministic id such as msg_fake0001, req_fake0001 or toolu_0001."""
        with self._lock:
            n = next(self._ids[kind])
        return f"toolu_{n:04d}" if kind == "toolu" else f"{kind}_fake{n:04d}"

    def _record(self, request: RecordedRequest) -> None:
        """Append to the request log."""
        with self._lock:
            self.requests.append(request)

    def _take(self, request: RecordedRequest) -> Reply | str:
        """The reply for a Messages request, or an error message if there is none."""
        with self._lock:
            item = self._queue.popleft() if self._queue else self.responder
        if item is None:
            return "fake server: no scripted reply left"
        if isinstance(item, Reply):
            return item
        try:
            reply = item(request)
        except Exception as exc:  # a broken test callable: fail the request loudly
            self.errors.append(exc)
            return f"fake server: scripted callable raised {exc!r}"
        return reply if isinstance(reply, Reply) else f"fake server: scripted callable returned {reply!r}"

    def _usage(self, body: dict[str, Any], reply: Reply, output_chars: int) -> dict[str, int]:
        """Deterministic usage numbers, simulating prompt caching by whole prompt units."""
        units = _prompt_units(body)
        marked = [i for i, unit in enumerate(units) if _has_cache_control(unit)]
        units = _strip_cache_control(units)
        total = _chars(units)
        read = create = 0
        if "cache_control" in body or marked:
            keys = [json.dumps(unit, sort_keys=True) for unit in units]
            end = len(units) if "cache_control" in body else marked[-1] + 1
            with self._lock:
                hit = max(
                    (len(list(itertools.takewhile(lambda p: p[0] == p[1], zip(keys[:end], old)))) for old in self._cached_prefixes),
                    default=0,
                )
                self._cached_prefixes.append(keys[:end])
            read = _chars(units[:hit])
            create = _chars(units[:end]) - read
        usage = {
            "input_tokens": (total - read - create) // 4,
            "cache_creation_input_tokens": create // 4,
            "cache_read_input_tokens": read // 4,
            "output_tokens": output_chars // 4 + 1,
        }
        usage.update(reply.usage or {})
        return usage

    def clear_script(self) -> None:
        """Drop the scripted replies not used yet."""
        with self._lock:
            self._queue.clear()

    def _render(
        self, reply: Reply, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
        """The full Message JSON and the SSE events that stream it."""
        content = [dict(b, id=b["id"] or self._next_id("toolu")) if b["type"] == "tool_use" else dict(b) for b in reply.content]
        content = fake_context.leading_blocks(body, headers or {}, len(self.requests)) + content
        output_chars = sum(
            len(b["text"]) if b["type"] == "text" else len(json.dumps(b.get("input") if b["type"] == "tool_use" else b)) for b in content
        )
        usage: dict[str, Any] = dict(self._usage(body, reply, output_chars))
        summaries = [b for b in content if b["type"] == "compaction"]
        if summaries:
            # "Compaction" docs (build-with-claude/compaction, its usage example) and the SDK's BetaIterationsUsage:
            # the summarizing step is an `iterations` entry of its own, billed but not in the top-level counts;
            # the reply's own sampling is a `message` entry with the top-level counts.
            counts = {key: usage[key] for key in USAGE_KEYS}
            summary = str(summaries[0].get("content") or "")
            closed = dict.fromkeys(counts, 0) | {"input_tokens": fake_context.tokens(body), "output_tokens": len(summary) // 4 + 1}
            usage["iterations"] = [{"type": "compaction", **closed}, {"type": "message", **counts}]
        message = {
            "id": self._next_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-fake"),
            "content": content,
            "stop_reason": reply.stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }
        if reply.stop_details is not None:
            message["stop_details"] = reply.stop_details
        _, dropped = fake_context.fake_binding.check(body, headers or {}, fake_context.live_start(body.get("messages") or []))
        if dropped:  # thinking blocks a binding check removed (beta only: the drop_block setting needs its beta)
            message["input_transformations"] = dropped
        if reply.stop_reason == "pause_turn":
            with self._lock:
                self._paused.add(fake_prefill.key(content))
        start_usage = {key: value for key, value in usage.items() if key != "iterations"}
        start = dict(message, content=[], stop_reason=None, usage=dict(start_usage, output_tokens=1))
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": start}),
            ("ping", {"type": "ping"}),
        ]
        for index, block in enumerate(content):
            if block["type"] in ("compaction", "thinking", "redacted_thinking"):
                events += fake_context.stream_events(index, block)
                continue
            if block["type"] == "text":
                opening = dict(block, text="")
                deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"], reply.chunks)]
            else:
                opening = dict(block, input={})
                sent = json.dumps(block["input"])
                if reply.cut_json is not None and index == len(content) - 1:
                    sent = sent[: reply.cut_json]
                pieces = [""] + _pieces(sent, None)
                deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
            events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}))
            events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "usage": usage,
                    "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None}
                    | ({"stop_details": reply.stop_details} if reply.stop_details is not None else {}),
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return message, events


def _make_handler(fake: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    """Build the request handler class bound to one FakeAnthropic."""

    class Handler(BaseHTTPRequestHandler):
        """Serves one connection (HTTP/1.1 keep-alive; SSE bodies are chunked)."""

        protocol_version = "HTTP/1.1"
        # TCP_NODELAY, as the real API's servers: with Nagle each streamed reply waited ~40 ms for a delayed ACK.
        disable_nagle_algorithm = True
        timeout = 30

        def setup(self) -> None:
            """Track the connection so stop() can cut it."""
            super().setup()
            with fake._lock:
                fake._handlers.add((threading.current_thread(), self.connection))

        def finish(self) -> None:
            """Untrack the connection."""
            with fake._lock:
                fake._handlers.discard((threading.current_thread(), self.connection))
            try:
                super().finish()
            except OSError:
                pass

        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output quiet."""

        def _serve(self) -> None:
            """Record the request, then answer it."""
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            request = RecordedRequest(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body, raw)
            fake._record(request)
            rid = fake._next_id("req")
            if len(raw) > fake_images.MAX_REQUEST_BYTES:  # Cloudflare's 413, before the API reads it (fake_images cites the docs)
                return self._send_error(413, "request_too_large", fake_images.TOO_LARGE, rid)
            path = self.path.split("?")[0].rstrip("/")
            if self.command != "POST" or path != "/v1/messages":
                return self._send_error(404, "not_found_error", f"Not Found: {self.command} {self.path}", rid)
            if "x-api-key" not in request.headers and "authorization" not in request.headers:
                return self._send_error(401, "authentication_error", "x-api-key header is required", rid)
            problem = fake_versions.api_problem(request.headers, body) or _validate(body)  # the API versions: fake_versions.py
            if problem is None:  # every key and literal the SDK's own request types name, and no other
                problem = request_types.problem(body, beta="beta=true" in self.path or "anthropic-beta" in request.headers)
            if problem is None:
                with fake._lock:
                    problem = fake_prefill.problem(body, fake._paused)
            if problem is None and body.get("context_management") and not fake.server_compaction:
                # The compaction page gives no error text for a model or gateway without it; this is the API's wording for a
                # field it does not take (request_types.py), the only refusal nbagent falls back on (context.refuses_compaction).
                problem = "context_management: Extra inputs are not permitted"
            if problem is None:
                problem = fake_context.problem(body, request.headers, fake.window)
            if problem is not None:
                return self._send_error(400, "invalid_request_error", problem, rid)
            reply = fake._take(request)
            if isinstance(reply, str):
                return self._send_error(500, "api_error", reply, rid)
            if reply.status != 200:
                if reply.delay and fake._stopping.wait(reply.delay):
                    return self._abort()
                etype = reply.error_type or "api_error"
                return self._send_error(reply.status, etype, reply.error_message, rid, reply.headers)
            if reply.events is not None:
                if not request.stream:
                    return self._send_error(500, "api_error", "fake server: scripted events answer streaming requests only", rid)
                return self._send_stream(reply, reply.events, rid)
            message, events = fake._render(reply, body, request.headers)
            if not request.stream:
                return self._send_message(reply, message, rid)
            self._send_stream(reply, events, rid)

        do_GET = do_POST = do_PUT = do_DELETE = _serve

        def _send_json(self, status: int, payload: dict[str, Any], rid: str, headers: dict[str, str]) -> None:
            """Write a complete JSON response."""
            data = json.dumps(payload).encode()
            self.send_response(status)
            for key, value in {"content-type": "application/json", "request-id": rid, "content-length": str(len(data)), **headers}.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _send_error(self, status: int, etype: str, message: str, rid: str, headers: dict[str, str] | None = None) -> None:
            """Write an error response with the real error body."""
            self._send_json(status, _error_body(etype, message, rid), rid, headers or {})

        def _send_message(self, reply: Reply, message: dict[str, Any], rid: str) -> None:
            """Answer a non-streaming request with the full Message (or the error a stream would end in)."""
            if reply.hang_after is not None:
                return self._hang()
            if reply.delay and fake._stopping.wait(reply.delay):
                return self._abort()
            if reply.error_type is not None:
                status = STATUS_FOR_TYPE.get(reply.error_type, 500)
                return self._send_error(status, reply.error_type, reply.error_message, rid, {"retry-after-ms": "1"})
            self._send_json(200, message, rid, reply.headers)

        def _send_stream(self, reply: Reply, events: list[tuple[str, dict[str, Any]]], rid: str) -> None:
            """Stream SSE events as a chunked body, honouring delay, hang_after and in-stream errors."""
            if reply.error_type is not None:
                failure = _error_body(reply.error_type, reply.error_message, rid)
                events = events[: reply.error_after] + [("error", failure)]
            self.send_response(200)
            for key, value in {
                "content-type": "text/event-stream; charset=utf-8",
                "cache-control": "no-cache",
                "request-id": rid,
                "transfer-encoding": "chunked",
                **reply.headers,
            }.items():
                self.send_header(key, value)
            self.end_headers()
            try:
                for index, (name, data) in enumerate(events):
                    if index == reply.hang_after:
                        return self._hang()
                    if index and reply.delay and fake._stopping.wait(reply.delay):
                        return self._abort()
                    self._chunk(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                if reply.hang_after is not None and reply.hang_after >= len(events):
                    return self._hang()
                self._chunk(b"")
            except OSError:  # the client went away mid-stream
                return self._abort()
            if reply.error_type is not None:
                self.close_connection = True

        def _chunk(self, data: bytes) -> None:
            """Write one chunk of a chunked body and flush it (b"" ends the body)."""
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def _client_gone(self) -> bool:
            """Whether the client has closed its end of the connection."""
            try:
                readable, _, _ = select.select([self.connection], [], [], 0)
                return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                return True

        def _hang(self) -> None:
            """Stall until the server stops or the client disconnects, then drop the connection."""
            while not fake._stopping.wait(0.02) and not self._client_gone():
                pass
            self._abort()

        def _abort(self) -> None:
            """Drop the connection without finishing the response."""
            self.close_connection = True

    return Handler
