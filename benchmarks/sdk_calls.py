"""The cost of one request through the SDK, and nbagent's overhead over a floor that sends the same history.

The fake API (tests/support/fake_anthropic.py) runs in a child process, so the client's CPU time
(``time.process_time``) is the client's alone; it is told to forget its simulated prompt cache on each
request (it compares each request with every earlier one, which would grow with the run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
from anthropic.lib.streaming import _beta_messages, _messages

import nbagent
from nbagent.agent.deltas import DeltaWriter
from nbagent.model.claude import AnthropicModel, ModelRequest
from nbagent.state import context as ctx

from .cases import REPO

MODEL = "claude-test"
_CHILD = """
import sys
from tests.support.fake_anthropic import FakeAnthropic, text
words, chunks = int(sys.argv[1]), int(sys.argv[2])
fake = FakeAnthropic().start()
def respond(request):
    fake._cached_prefixes.clear()  # the simulated cache compares each request with every earlier one: forget them
    fake.requests.clear()
    return text(" ".join(f"word{i}" for i in range(words)), chunks=chunks)
fake.responder = respond
print(fake.base_url, flush=True)
sys.stdin.read()
fake.stop()
"""


@contextmanager
def fake_process(words: int, chunks: int) -> Iterator[anthropic.Anthropic]:
    """A client of a fake API in a child process that answers every request with ``words`` words in ``chunks`` text deltas."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(words), str(chunks)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        if not url.startswith("http"):
            raise RuntimeError("the fake API did not start")
        with anthropic.Anthropic(base_url=url, api_key="bench-key", max_retries=0) as client:
            yield client
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(60)  # a loaded machine can take seconds to stop a child


# 5a. One request: the stream() helper vs create(stream=True) -------------------------------------------------
def _reply(message: Any) -> dict[str, Any]:
    """What nbagent keeps of a reply (as nbagent.model.claude.AnthropicModel returns it)."""
    return {
        "content": [b.model_dump(mode="json", exclude_none=True) for b in message.content],
        "stop_reason": message.stop_reason,
        "usage": message.usage.model_dump(mode="json", exclude_none=True),
    }


def _sink(delta: dict[str, Any]) -> None:
    """The delta callback (nbagent's DeltaWriter does more; the same for every way)."""


def _deltas(event: Any) -> None:
    if event.type == "content_block_delta":
        if event.delta.type == "text_delta":
            _sink({"index": event.index, "text": event.delta.text})
        elif event.delta.type == "input_json_delta":
            _sink({"index": event.index, "partial_json": event.delta.partial_json})


def via_helper(messages: Any, params: dict[str, Any]) -> dict[str, Any]:
    """``messages.stream()``: iterate its events, then ``get_final_message()`` (nbagent today)."""
    with messages.stream(**params) as stream:
        for event in stream:
            _deltas(event)
        return _reply(stream.get_final_message())


def via_accumulate(messages: Any, params: dict[str, Any]) -> dict[str, Any]:
    """``messages.create(stream=True)`` and the SDK's own ``accumulate_event`` (a private module of the SDK)."""
    beta = "betas" in params
    json_bufs: dict[int, bytes] = {}
    snapshot: Any = None
    with messages.create(stream=True, **params) as stream:
        for event in stream:
            _deltas(event)
            if beta:
                headers = stream.response.request.headers
                snapshot = _beta_messages.accumulate_event(
                    event=event, current_snapshot=snapshot, json_bufs=json_bufs, request_headers=headers
                )
            else:
                snapshot = _messages.accumulate_event(event=event, current_snapshot=snapshot, json_bufs=json_bufs)
    return _reply(snapshot)


def via_own(messages: Any, params: dict[str, Any]) -> dict[str, Any]:
    """``messages.create(stream=True)``, the message built from its typed events here (public API only)."""
    blocks: list[dict[str, Any]] = []
    buffers: dict[int, str] = {}
    usage: dict[str, Any] = {}
    stop_reason = None
    with messages.create(stream=True, **params) as stream:
        for event in stream:
            kind = event.type
            if kind == "content_block_delta":
                _deltas(event)
                delta, block = event.delta, blocks[event.index]
                if delta.type == "text_delta":
                    block["text"] += delta.text
                elif delta.type == "input_json_delta":
                    buffers[event.index] = buffers.get(event.index, "") + delta.partial_json
                elif delta.type == "thinking_delta":
                    block["thinking"] += delta.thinking
                elif delta.type == "signature_delta":
                    block["signature"] = delta.signature
                elif delta.type == "compaction_delta":
                    block["content"] = (block.get("content") or "") + (delta.content or "")
            elif kind == "content_block_start":
                blocks.append(event.content_block.model_dump(mode="json", exclude_none=True))
            elif kind == "content_block_stop" and event.index in buffers:
                blocks[event.index]["input"] = json.loads(buffers.pop(event.index) or "{}")
            elif kind == "message_start":
                usage = event.message.usage.model_dump(mode="json", exclude_none=True)
            elif kind == "message_delta":
                stop_reason = event.delta.stop_reason
                usage.update(event.usage.model_dump(mode="json", exclude_none=True))
    return {"content": blocks, "stop_reason": stop_reason, "usage": usage}


def via_events_only(messages: Any, params: dict[str, Any]) -> dict[str, Any]:
    """``messages.create(stream=True)``, its events parsed and nothing accumulated (a floor, not a way to get the reply)."""
    with messages.create(stream=True, **params) as stream:
        for event in stream:
            _deltas(event)
    return {}


WAYS: dict[str, Callable[[Any, dict[str, Any]], dict[str, Any]]] = {
    "`messages.stream()` helper, events + `get_final_message()` (nbagent today)": via_helper,
    "`messages.create(stream=True)` + the SDK's `accumulate_event` (private module)": via_accumulate,
    "`messages.create(stream=True)` + the message built from its typed events (public API)": via_own,
    "`messages.create(stream=True)`, events parsed, nothing accumulated (floor)": via_events_only,
}
REPLIES = {"short reply (60 words, 20 text deltas)": (60, 20), "long reply (600 words, 200 text deltas)": (600, 200)}


def history(turns: int = 10) -> list[dict[str, Any]]:
    """A fixed conversation of ``turns`` questions and answers."""
    out: list[dict[str, Any]] = []
    for n in range(turns):
        out.append({"role": "user", "content": f"Question {n}: what does column {n} of the table hold?"})
        out.append({"role": "assistant", "content": [{"type": "text", "text": f"Answer {n}: " + "it holds readings. " * 12}]})
    return [*out, {"role": "user", "content": "And the last one?"}]


@dataclass
class Way:
    """Per-request times of one way of making the call (seconds)."""

    reply: str
    api: str
    name: str
    wall: list[float]
    cpu: list[float]


def bench_ways(requests: int) -> list[Way]:
    """Each way, ``requests`` times per reply size and API (plain and beta), round robin, against one child fake per reply size."""
    out = []
    for reply, (words, chunks) in REPLIES.items():
        with fake_process(words, chunks) as client:
            base = {"model": MODEL, "max_tokens": 2048, "messages": history(), "cache_control": {"type": "ephemeral"}}
            beta = dict(
                base,
                betas=[ctx.COMPACT_BETA],
                context_management=ctx.context_management(ctx.ContextSettings(trigger=100_000)),  # never reached
            )
            apis = {"Messages": (client.messages, base), "beta Messages (compaction)": (client.beta.messages, beta)}
            cases = [(api, name, fn) for api in apis for name, fn in WAYS.items() if api == "Messages" or fn is not via_events_only]
            times: dict[tuple[str, str], tuple[list[float], list[float]]] = {(a, n): ([], []) for a, n, _ in cases}
            expected: dict[str, dict[str, Any]] = {}
            for number in range(requests + 2):  # the first two rounds warm up and are not counted
                for api, name, fn in cases:
                    messages, params = apis[api]
                    wall, cpu = time.perf_counter(), time.process_time()
                    got = fn(messages, params)
                    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                    if got and expected.setdefault(api, got)["content"] != got["content"]:
                        raise AssertionError(f"{name} built another reply than the helper")
                    if number >= 2:
                        times[(api, name)][0].append(wall)
                        times[(api, name)][1].append(cpu)
            out += [Way(reply, api, name, *times[(api, name)]) for api, name, _ in cases]
    return out


# 5b. nbagent's overhead per request over a floor sending the same history --------------------------------------
LOOPS = {
    "floor": "floor: `client.messages.stream()`, the reply appended to a list",
    "adapter": "`AnthropicModel.stream` alone (nbagent's adapter, a no-op delta callback, no log)",
    "deltas": '`AnthropicModel.stream` + `DeltaWriter` (the deltas logged, fsync="never", nothing else)',
    "never": 'nbagent.run, fsync="never"',
    "turn": 'nbagent.run, fsync="turn"',
}
BLOCK = 25


def bench_overhead(requests: int, workdir: Path) -> dict[str, tuple[list[float], list[float]]]:
    """Per-request (wall, CPU) seconds of each of ``LOOPS``, taking turns in blocks of ``BLOCK`` requests."""
    sessions = {name: nbagent.Session.open(workdir / f"overhead-{name}.jsonl", fsync=name) for name in ("turn", "never")}  # type: ignore[arg-type]
    deltas_log = nbagent.Session.open(workdir / "overhead-deltas.jsonl", fsync="never")
    histories: dict[str, list[dict[str, Any]]] = {name: [] for name in ("floor", "adapter", "deltas")}
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in LOOPS}
    settings = ctx.ContextSettings(compact="off")  # the plain Messages call, as the floor's
    try:
        with fake_process(60, 20) as client:
            adapter = AnthropicModel(MODEL, client=client)
            for first in range(-BLOCK, requests, BLOCK):  # the first block warms up and is not counted
                for name in LOOPS:
                    for number in range(first, min(first + BLOCK, requests)):
                        prompt = f"Request {number + BLOCK}: please look at item {number} and say what you find."
                        wall, cpu = time.perf_counter(), time.process_time()
                        if name in sessions:
                            nbagent.run(sessions[name], prompt, client=client, model=MODEL, context=settings)
                        else:
                            sent = histories[name]
                            sent.append({"role": "user", "content": prompt})
                            if name == "floor":
                                params = {"model": MODEL, "max_tokens": 8192, "messages": sent, "cache_control": {"type": "ephemeral"}}
                                with client.messages.stream(**params) as stream:
                                    for _ in stream:
                                        pass
                                    content = _reply(stream.get_final_message())["content"]
                            else:
                                writer = DeltaWriter(deltas_log) if name == "deltas" else _sink
                                content = adapter.stream(ModelRequest(sent), writer)["content"]
                                if isinstance(writer, DeltaWriter):
                                    writer.close(complete=True)
                            sent.append({"role": "assistant", "content": content})
                        if number >= 0:
                            times[name][0].append(time.perf_counter() - wall)
                            times[name][1].append(time.process_time() - cpu)
        for messages in [*(s.messages for s in sessions.values()), *histories.values()]:
            if messages != histories["floor"]:
                raise AssertionError("a loop sent another history than the floor")
    finally:
        for session in (*sessions.values(), deltas_log):
            session.close()
    return times
