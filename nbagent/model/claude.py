"""The model seam: a protocol, the Anthropic adapter (streaming, prompt caching), and an offline demo model."""

from __future__ import annotations

import json
import os
import re
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ModelError, NbagentError
from ..record import redact
from ..state import api_versions, providers
from . import clients
from .reply_build import ReplyBuilder, StreamError
from .retries import retry_after, should_retry

if TYPE_CHECKING:
    import anthropic

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


def has_api_key() -> bool:
    """Whether the environment gives the SDK a key (or a token) to call the API with."""
    return bool(os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"))


class AnthropicModel:
    """Claude through the official SDK: streaming, prompt caching; one attempt per call (the loop owns retries)."""

    def __init__(self, name: str = DEFAULT_MODEL, *, client: Any | None = None, provider: str | None = None) -> None:
        import anthropic  # here, not at the top: %load_ext and a re-rendered cell never load the SDK (about 1.5 s)

        info = providers.lookup(provider)  # the cloud's own SDK client (clients.py): "anthropic" unless asked
        self.name = providers.table_name(info.name, name)  # the model table's name: its limits and thinking rules apply
        self.model_id = name if name != self.name else providers.model_id(info.name, name)  # what the request names
        if client is None:
            if info.name == "anthropic" and not has_api_key():
                raise NbagentError(
                    "No Anthropic API key: set ANTHROPIC_API_KEY in the environment (or pass client=anthropic.Anthropic(...)). "
                    "To try nbagent without a key, use the offline demo model: `nbagent demo`."
                )
            # Kept per configuration: each %agent turn makes its model, and keeps the connection the last one opened.
            client = clients.client(info.name, self.name)  # on Bedrock: InvokeModel or the Messages-API endpoint, by model
        self.provider = info.name
        self.info = info
        # InvokeModel carries the API version in the body: the one this model takes, whichever SDK is installed.
        self.body_version = api_versions.body_version(isinstance(client, anthropic.AnthropicBedrock), self.name)
        self.auth_errors = clients.auth_errors(info.name)  # a cloud's credential library failing while a request is signed
        # One retry budget: the SDK would retry twice more inside every attempt the loop makes.
        self.client = _one_attempt(client)
        # Whatever their shape, its key, token, credential headers and base URL password never reach a log or an error.
        clients.register_secrets(client)

    def stream(self, request: ModelRequest, on_delta: DeltaSink) -> Reply:
        """Stream one reply from the Messages API."""
        params: dict[str, Any] = {
            "model": self.model_id,
            "max_tokens": request.max_tokens,
            "messages": list(request.messages),  # a Transcript (a resumed session) is not a list
        }
        # Prompt caching: a long resumed history is read from cache, not paid in full. Automatic (top-level) where the
        # endpoint takes it, else one breakpoint on the last block, which every platform's prompt caching takes.
        if self.info.automatic_cache:
            params["cache_control"] = {"type": "ephemeral"}
        else:
            params["messages"] = providers.cache_last_block(params["messages"])
        if request.system:
            params["system"] = request.system
        if request.tools:
            params["tools"] = request.tools
        if request.thinking:
            params["thinking"] = request.thinking
        if request.output_config:
            params["output_config"] = request.output_config
        if self.body_version:
            params["extra_body"] = {"anthropic_version": self.body_version}  # the SDK only fills it in where it is missing
        # The beta call only where a beta is used: server-side compaction needs it.
        messages: Any = self.client.messages
        beta = bool(request.betas or request.context_management)
        if beta:
            messages = self.client.beta.messages
            params["betas"] = list(request.betas)
            if request.context_management:
                params["context_management"] = request.context_management
        import anthropic  # imported already, by __init__

        # The typed events, folded here: the stream() helper's snapshot and second event object per delta cost about
        # 13 µs a delta, and it re-parses a tool's input at every delta (reply_build.py).
        built = ReplyBuilder(beta=beta, betas=request.betas)
        try:
            with messages.create(stream=True, **params) as stream:
                for event in stream:
                    delta = built.delta_of(event)
                    if delta is not None:
                        on_delta(delta)
            if not built.ended:  # closed cleanly mid-reply (a gateway, a proxy): a cut tool input must never run
                text = f"the reply from {_where(self.info)} broke off: its stream closed before message_stop, so none of it is used"
                raise ModelError(text, kind="connection_error", retryable=True)
            reply = built.reply()
        except StreamError as exc:  # the model's output, possibly echoing a secret: redacted whole, then clipped
            text = redact.text(f"the reply from {_where(self.info)} could not be read: {exc}")
            raise ModelError(text if len(text) <= 500 else text[:500] + "…", kind="api_error", retryable=True) from None
        except anthropic.APIStatusError as exc:
            clients.register_secrets(self.client)  # a token minted for this request (Vertex) is redacted from its error too
            raise _model_error(exc, self.info) from _scrubbed(exc)
        except anthropic.APIConnectionError as exc:  # includes timeouts
            text = redact.text(f"could not reach {_where(self.info)}: {exc}")
            raise ModelError(text, kind="connection_error", retryable=True) from _scrubbed(exc)
        except _transport_error() as exc:
            text = redact.text(f"the connection to {_where(self.info)} broke mid-reply: {exc}")
            raise ModelError(text, kind="connection_error", retryable=True) from _scrubbed(exc)
        except self.auth_errors as exc:  # empty for the Claude API
            text = redact.text(f"{self.info.label} credentials failed: {exc}. Credentials: {self.info.credentials}.")
            raise ModelError(text, kind="authentication_error", retryable=False) from _scrubbed(exc)
        return reply


_ONE_ATTEMPT: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _one_attempt(client: Any) -> Any:
    """``client`` with the SDK's retries off, copied once per client: a copy per run was about 60 µs of every run's CPU."""
    try:
        return _ONE_ATTEMPT[client]
    except (KeyError, TypeError):  # TypeError: an object no weak reference can point at
        pass
    copy = client.with_options(max_retries=0)
    try:
        _ONE_ATTEMPT[client] = copy
    except TypeError:
        pass
    return copy


def _where(info: providers.ProviderInfo) -> str:
    """The endpoint a message names: "the Anthropic API", or the cloud ("Amazon Bedrock")."""
    return "the Anthropic API" if info.name == "anthropic" else info.label


@cache
def _transport_error() -> type[Exception]:
    """The SDK's HTTP library's error: a connection dropped mid-stream surfaces as it, unwrapped."""
    try:
        from httpx2 import TransportError
    except ImportError:  # older SDKs
        from httpx import TransportError  # type: ignore[no-redef,assignment,unused-ignore]
    return TransportError


def _model_error(exc: anthropic.APIStatusError, info: providers.ProviderInfo = providers.INFO["anthropic"]) -> ModelError:
    body = exc.body if isinstance(exc.body, dict) else {}
    raw = body.get("error")
    error = raw if isinstance(raw, dict) else {}
    kind = str(error.get("type") or "api_error")
    message = str(error.get("message") or exc.message)
    if not error.get("type") and info.name != "anthropic":  # a cloud's own error shape: the kind the status stands for
        kind = providers.status_kind(exc.status_code)
        message = str(error.get("message") or body.get("message") or exc.message)
    elif info.name != "anthropic":
        kind = providers.error_kind(kind)  # a Bedrock stream's exception type
    status = exc.status_code if exc.status_code != 200 else None  # 200: the error arrived mid-stream
    headers = exc.response.headers if exc.response is not None else {}
    retryable = should_retry(kind, status, headers.get("x-should-retry"))
    hint = ""
    if status == 401:
        hint = " Check ANTHROPIC_API_KEY." if info.name == "anthropic" else f" Check the credentials: {info.credentials}."
    if status in (400, 413) and "prompt is too long" in message.lower():
        kind = "prompt_too_long"
    where = "Anthropic API" if info.name == "anthropic" else info.label
    text = redact.text(f"{where} error ({status or 'mid-stream'} {kind}): {message}.{hint}")  # a 401 may echo the key
    return ModelError(text, status=status, kind=kind, retryable=retryable, retry_after=retry_after(headers) if retryable else None)


def _scrubbed(exc: BaseException) -> BaseException:
    """``exc`` with its message redacted, as the cause a traceback shows under the ModelError."""
    exc.args = tuple(redact.text(a) if isinstance(a, str) else a for a in exc.args)
    if isinstance(getattr(exc, "message", None), str):
        exc.message = redact.text(exc.message)  # type: ignore[attr-defined]
    return exc


class DemoModel:
    """An offline stand-in for Claude, for trying nbagent without a key. It is not Claude and says so.

    It reads the request for what it can do without guessing: a tool the request names, else
    list the folder and read the files the request names that the listing shows (see
    :func:`_demo_plan`); then it says what the tools returned and what it cannot do.
    """

    name = "nbagent-demo (offline, not Claude)"
    LABEL = "[offline demo model, not Claude] "

    def __init__(self, *, delay: float = 0.01) -> None:
        self.delay = delay
        self.calls = 0

    def stream(self, request: ModelRequest, on_delta: DeltaSink) -> Reply:
        """Reply deterministically from the conversation so far."""
        self.calls += 1
        asked = _last_request(request.messages)
        done = _calls_since_last_request(request.messages)
        steps, missing = _demo_plan(asked, request.tools, done)
        blocks: list[dict[str, Any]]
        if len(done) < len(steps):
            name, arguments = steps[len(done)]
            what = f" on `{arguments['path']}`" if arguments.get("path", ".") != "." else ""
            text = self.LABEL + f"I'll call `{name}`{what}."
            call = {"type": "tool_use", "id": f"toolu_demo_{len(request.messages):04d}", "name": name, "input": arguments}
            blocks, stop = [{"type": "text", "text": text}, call], "tool_use"
        else:
            text = self.LABEL + _demo_summary(done, missing)
            blocks, stop = [{"type": "text", "text": text}], "end_turn"
        for word in text.split(" "):
            on_delta({"index": 0, "text": word + " "})
            if self.delay:
                time.sleep(self.delay)
        if stop == "tool_use":
            on_delta({"index": 1, "partial_json": json.dumps(blocks[1]["input"])})
        usage = {"input_tokens": len(json.dumps(list(request.messages))) // 4, "output_tokens": len(text) // 4}
        return {"id": f"msg_demo_{self.calls:04d}", "model": self.name, "content": blocks, "stop_reason": stop, "usage": usage}


@dataclass(frozen=True)
class _DemoCall:
    """A call the demo model made since the request, and what came back."""

    name: str
    input: dict[str, Any]
    result: str
    error: bool


_NUMBERED = re.compile(r"^\s*\d+\t")
_FILE_NAME = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.[A-Za-z][A-Za-z0-9]{1,5})(?![\w/-])")  # data.csv, sub/notes.txt


def _demo_plan(asked: str, tools: list[dict[str, Any]], done: list[_DemoCall]) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """The demo model's calls for ``asked`` given what ``done`` returned so far, and the named files the listing did not show.

    A tool the request names (callable with at most a ``path``) is called; otherwise a listing tool lists the
    folder and a reading tool reads each file the request names, if the listing shows it.
    """
    usable = [t for t in tools if set(t.get("input_schema", {}).get("required", [])) <= {"path"}]
    files = list(dict.fromkeys(_FILE_NAME.findall(asked)))
    named = [t for t in usable if re.search(rf"(?<![\w-]){re.escape(t['name'])}(?![\w-])", asked, re.IGNORECASE)]
    if named:
        named.sort(key=lambda t: asked.lower().index(t["name"].lower()))
        return [(t["name"], _demo_arguments(t, files)) for t in named], []
    lister = next((t for t in usable if "list" in t["name"].lower()), None)
    reader = next((t for t in usable if "read" in t["name"].lower() and "path" in _properties(t)), None)
    steps: list[tuple[str, dict[str, Any]]] = []
    missing: list[str] = []
    if lister is not None:
        steps.append((lister["name"], _demo_arguments(lister, [])))
    listing = done[0].result if lister is not None and done and not done[0].error else None
    if reader is not None and (lister is None or listing is not None):
        for file in files:
            if listing is None or file.rsplit("/", 1)[-1] in listing:
                steps.append((reader["name"], {"path": file}))
            else:
                missing.append(file)
    if not steps:
        steps = [(t["name"], {}) for t in usable[:1] if not t.get("input_schema", {}).get("required")]
    return steps, missing


def _properties(tool: dict[str, Any]) -> dict[str, Any]:
    properties = tool.get("input_schema", {}).get("properties", {})
    return properties if isinstance(properties, dict) else {}


def _demo_arguments(tool: dict[str, Any], files: list[str]) -> dict[str, Any]:
    """A ``path`` only where the tool requires one: the first file the request names, else the folder."""
    if "path" not in tool.get("input_schema", {}).get("required", []):
        return {}
    return {"path": files[0] if files and "list" not in tool["name"].lower() else "."}


def _demo_summary(done: list[_DemoCall], missing: list[str]) -> str:
    """The demo model's last reply: what each call returned, what was not found, and what only Claude can do."""
    parts = []
    for call in done:
        lines = call.result.strip().splitlines()
        if call.error:
            parts.append(f"`{call.name}` failed: {_first_line(call.result)}")
        elif "list" in call.name.lower():
            names = [line.split("\t")[0].strip() for line in lines if line.strip()]
            shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
            parts.append(
                f"this folder holds {len(names)} {'entry' if len(names) == 1 else 'entries'}: {shown}" if names else "this folder is empty"
            )
        elif "path" in call.input:
            numbered = [_NUMBERED.sub("", line) for line in lines if _NUMBERED.match(line)]  # read_file's "     1\tline"
            parts.append(f"{call.input['path']} starts with: {(numbered or lines or [''])[0][:120]}")
        else:
            parts.append(f"`{call.name}` returned: {_first_line(call.result)}")
    parts += [f"I see no {file} here" for file in missing]
    found = ("; ".join(parts).rstrip(".") + ". ") if parts else "I received your request. "
    return (
        found[0].upper()
        + found[1:]
        + (
            "An offline demo can only list and read files; it cannot write code, plot or reason. "
            "Set ANTHROPIC_API_KEY in the environment (never in a notebook cell) to talk to Claude."
        )
    )


def _last_request(messages: Sequence[dict[str, Any]]) -> str:
    """The text of the latest user request (its last text block: notes to the model come before it)."""
    for message in reversed(messages):
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content if b.get("type") == "text"]
        if texts:
            return texts[-1]
    return ""


def _calls_since_last_request(messages: Sequence[dict[str, Any]]) -> list[_DemoCall]:
    """The tool calls made since the latest request, in order, with their results."""
    results: dict[str, tuple[str, bool]] = {}
    calls: list[_DemoCall] = []
    for message in reversed(messages):
        content = message["content"]
        if message["role"] == "user":
            if isinstance(content, str) or any(b.get("type") == "text" for b in content):
                break
            for block in content:
                if block.get("type") == "tool_result":
                    results[block.get("tool_use_id", "")] = (_text(block.get("content")), bool(block.get("is_error")))
        elif not isinstance(content, str):
            for block in reversed(content):
                if block.get("type") == "tool_use" and block.get("id") in results:
                    result, error = results[block["id"]]
                    calls.insert(0, _DemoCall(block["name"], dict(block.get("input") or {}), result, error))
    return calls


def _text(content: Any) -> str:
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def _first_line(content: Any) -> str:
    line = (_text(content).strip().splitlines() or [""])[0]
    return line[:120]
