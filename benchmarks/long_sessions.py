"""Long sessions: request size with and without compaction, resume and snapshot cost with periodic compaction.

Request sizes come from one scripted session run twice through the real SDK against the fake API
(tests/support/fake_anthropic.py) with a small window: once compacting on the server, once locally; the
same session without compaction is the fold of the server run's log with the compaction taken out,
computed and never sent.  Resume and snapshot costs are measured on logs built by appending events
through ``nbagent.Session`` (fsync="never"), with a server ``compaction`` block every ``every`` events
and without any, side by side.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic

import nbagent
from nbagent.record import events as ev
from nbagent.state import context as ctx
from nbagent.state import fold
from nbagent.stores import snapshot

# The SDK's own body encoder settings (anthropic._utils._json.openapi_dumps): the request's bare encode.
ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
MODEL = "claude-test"
WINDOW, TRIGGER, KEEP = 6_000, 4_000, 1_000  # tokens: small, so that a 1,000-request session compacts often
ROWS = "\n".join(f"{i:4d}  sensor-{i % 7}  {i * 3.14159:10.4f}  {i * 2.71828:10.4f}  2026-01-{i % 28 + 1:02d}  ok" for i in range(18))


def encode(value: Any) -> bytes:
    """``value`` as the SDK encodes a request body."""
    return ENCODER.encode(value).encode()


def p95(values: list[float]) -> float:
    """The 95th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[max(0, -(-len(ordered) * 95 // 100) - 1)]


# 1. Request size per request, with and without compaction -----------------------------------------------
@dataclass
class Sizes:
    """Per-request sizes of one kind of session (bytes of the request body, estimated tokens)."""

    name: str
    body_bytes: list[int]
    tokens: list[int]
    compactions: int = 0
    summary_requests: int = 0


def _is_summary(body: dict[str, Any]) -> bool:
    return ctx.SUMMARY_INSTRUCTIONS in json.dumps(body.get("messages"))


def _responder(counter: list[int]) -> Any:
    from tests.support.fake_anthropic import RecordedRequest, Reply, text, tool_use

    def respond(request: RecordedRequest) -> Reply:
        if _is_summary(request.body):
            return text("Summary: the user asked about numbered sensors; each was inspected and described. " * 3)
        counter[0] += 1
        number = counter[0]  # counts the session's own requests only, so both runs get the same replies
        last = request.body["messages"][-1]
        answering = isinstance(last["content"], list) and any(b.get("type") == "tool_result" for b in last["content"])
        if answering:
            return text(f"Reply {number}: sensor readings look steady; " + "the mean and spread are within range. " * 6)
        return tool_use("inspect", {"sensor": number}, id=f"toolu_{number:06d}", text=f"Let me inspect sensor {number}.")

    return respond


@nbagent.tool(effect="read")
def inspect(sensor: int) -> str:
    """Show the latest readings of a sensor."""
    return f"sensor {sensor}: 18 rows\n{ROWS}"


def _session(requests: int, path: Path, settings: ctx.ContextSettings) -> tuple[list[Any], int]:
    """Run the scripted session to ``requests`` model requests; the fake's requests that it answered, and its summary calls."""
    from tests.support import fake_context
    from tests.support.fake_anthropic import FakeAnthropic

    counter = [0]
    with FakeAnthropic() as fake:
        fake.responder, fake.window = _responder(counter), settings.window
        client = anthropic.Anthropic(base_url=fake.base_url, api_key="bench-key", max_retries=0)
        with nbagent.Session.open(path, fsync="never") as session:
            number = 0
            while counter[0] < requests:
                number += 1
                nbagent.run(
                    session,
                    f"Request {number}: how is sensor {number} doing?",
                    tools=[inspect],
                    client=client,
                    model=MODEL,
                    context=settings,
                )
        answered = [r for r in fake.requests if fake_context.problem(r.body, r.headers, fake.window) is None]
    main = [r for r in answered if not _is_summary(r.body)]
    return main[:requests], len(answered) - len(main)


def _without_compaction(path: Path, bodies: list[dict[str, Any]]) -> Sizes:
    """The same session's requests with no compaction: the fold of its log with every compaction taken out (not sent)."""
    state = fold.State()
    cache: dict[int, tuple[Any, int]] = {}  # message id -> (message, its JSON length): each message encoded once
    body_bytes, tokens = [], []
    for event in nbagent.read_events(path):
        if event["type"] in (ev.COMPACTION, ev.COMPACTION_STARTED):
            continue
        if event["type"] == ev.ASSISTANT_MSG:
            if len(body_bytes) < len(bodies):
                body = bodies[len(body_bytes)]
                lengths = []
                for message in state.messages:
                    known = cache.get(id(message))
                    if known is None or known[0] is not message:
                        known = cache[id(message)] = (message, len(encode(message)))
                    lengths.append(known[1])
                messages_len = sum(lengths) + max(0, len(lengths) - 1) + 2
                rest = {k: v for k, v in body.items() if k not in ("messages", "context_management")}
                body_bytes.append(len(encode(rest)) + len(',"messages":') + messages_len)
                fixed = sum(len(json.dumps(body[k], separators=(",", ":"))) for k in ("system", "tools") if body.get(k))
                tokens.append((fixed + messages_len) // ctx.CHARS_PER_TOKEN)
            event = dict(event, content=[b for b in event["content"] if b.get("type") != "compaction"])
        fold.apply(state, event)
    return Sizes("no compaction (the fold, not sent)", body_bytes, tokens)


def bench_request_sizes(requests: int, workdir: Path) -> list[Sizes]:
    """Request sizes of the scripted session: server compaction, local compaction, and neither (computed)."""
    from tests.support import fake_context

    out, logs = [], {}
    for name, settings in (
        ("server compaction (sent)", ctx.ContextSettings(window=WINDOW, trigger=TRIGGER)),
        ("local compaction (sent)", ctx.ContextSettings(compact="local", window=WINDOW, trigger=TRIGGER, keep_tokens=KEEP)),
    ):
        path = workdir / f"sizes-{name.split()[0]}.jsonl"
        sent, summaries = _session(requests, path, settings)
        with nbagent.Session.open(path, fsync="never", snapshot_every=0) as session:
            count = session.state.compactions
        out.append(Sizes(name, [len(r.raw) for r in sent], [fake_context.tokens(r.body) for r in sent], count, summaries))
        logs[name] = (path, [r.body for r in sent])
    server_path, server_bodies = logs["server compaction (sent)"]
    local_path, local_bodies = logs["local compaction (sent)"]
    none = _without_compaction(server_path, server_bodies)
    if _without_compaction(local_path, local_bodies).tokens != none.tokens:
        raise AssertionError("the two runs are not the same session once their compaction is taken out")
    first = next((i for i, body in enumerate(server_bodies) if body["messages"][0]["role"] == "assistant"), len(server_bodies))
    plain = {k: v for k, v in server_bodies[0].items() if k != "context_management"}
    if none.tokens[:first] != out[0].tokens[:first] or none.body_bytes[0] != len(encode(plain)):
        raise AssertionError("the computed request differs from the sent one before the first compaction")
    return [*out, none]


# 2-4. Resume and snapshot with periodic compaction ---------------------------------------------------------
TOOL_DEFINITION = {"name": "inspect", "description": "Show the latest readings of a sensor.", "input_schema": {"type": "object"}}


def turn_events(count: int, every: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """``count`` events: turns of user_msg, assistant_msg (tool call), tool_result, assistant_msg (answer).

    With ``every``, the first answer after each event number ``every/2 + k*every`` starts with a server
    ``compaction`` block (so a log of 1k, 10k or 100k events ends about ``every/2`` events after one).
    """
    produced, turn, due = 0, 0, every // 2 if every else 0
    while True:
        turn += 1
        tool_id = f"toolu_{turn:08d}"
        answer: list[dict[str, Any]] = [{"type": "text", "text": f"Reply {turn}: " + "the readings are steady and within range. " * 6}]
        if every and produced + 3 >= due:
            answer.insert(0, {"type": "compaction", "content": f"Summary up to turn {turn}: sensors 1 to {turn} inspected. " * 8})
            due += every
        usage = {"input_tokens": 30_000, "output_tokens": 120}
        for item in (
            ("user_msg", {"content": f"Request {turn}: how is sensor {turn} doing? Please check the latest readings."}),
            (
                "assistant_msg",
                {
                    "content": [
                        {"type": "text", "text": f"Let me inspect sensor {turn}."},
                        {"type": "tool_use", "id": tool_id, "name": "inspect", "input": {"sensor": turn}},
                    ],
                    "stop_reason": "tool_use",
                    "usage": usage,
                },
            ),
            ("tool_result", {"tool_use_id": tool_id, "content": f"sensor {turn}: 18 rows\n{ROWS}", "effect": "read"}),
            ("assistant_msg", {"content": answer, "stop_reason": "end_turn", "usage": usage}),
        ):
            if produced == count:
                return
            produced += 1
            yield item


def build_logs(sizes: list[int], every: int, workdir: Path) -> dict[tuple[int, bool], tuple[Path, Path]]:
    """(size, compacted) -> the same log with a snapshot beside it and without one."""
    built = {}
    for size in sizes:
        for compacted in (True, False):
            name = f"{'compacted' if compacted else 'plain'}-{size}"
            with_snapshot, without = workdir / f"with-{name}" / "s.jsonl", workdir / f"without-{name}" / "s.jsonl"
            # One snapshot at the end: a snapshot every 1,000 events would rewrite a growing uncompacted history each time.
            with nbagent.Session.open(with_snapshot, fsync="never", snapshot_every=0) as session:
                for kind, payload in turn_events(size - 1, every if compacted else 0):  # session_start is the first event
                    session.append(kind, **payload)
                session.snapshot()
            without.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(with_snapshot, without)
            built[(size, compacted)] = (with_snapshot, without)
    return built


def request_body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The body the adapter sends for these messages (as nbagent.model.claude.AnthropicModel builds it)."""
    return {"model": MODEL, "max_tokens": 8192, "messages": messages, "cache_control": {"type": "ephemeral"}, "tools": [TOOL_DEFINITION]}


def time_resume(path: Path, use_snapshot: bool) -> tuple[float, float, float, float, int, int]:
    """Seconds: open; + every message as a list; + the request encoded; the bare encode again. Messages, body bytes."""
    started = time.perf_counter()
    session = nbagent.Session.open(path, snapshot_every=1000 if use_snapshot else 0)
    opened = time.perf_counter()
    messages = list(session.messages)
    listed = time.perf_counter()
    body = encode(request_body(messages))
    encoded = time.perf_counter()
    session.close()  # writes nothing: the snapshot (if any) is current; snapshot_every=0 writes none
    again = time.perf_counter()
    encode(request_body(messages))  # what the request costs to encode anyway, the messages in memory
    bare = time.perf_counter() - again
    return opened - started, listed - started, encoded - started, bare, len(messages), len(body)


@dataclass
class Resume:
    """Median resume times (seconds) of one log, one way."""

    events: int
    compacted: bool
    snapshot: bool
    open: float
    messages: float
    request: float
    encode: float
    message_count: int
    body_bytes: int

    @property
    def over_encode(self) -> float:
        """(open + messages) / the bare encode of the request."""
        return self.messages / self.encode


SNAPSHOT_SAMPLES = 5  # resumes from a snapshot take milliseconds: this many per round, to steady their median on a busy machine


def bench_resume(logs: dict[tuple[int, bool], tuple[Path, Path]], repeats: int) -> list[Resume]:
    """Median of ``repeats`` rounds, interleaved (warm page cache): a full replay once a round, a snapshot resume ``SNAPSHOT_SAMPLES`` times."""
    samples: dict[tuple[int, bool, bool], list[tuple[float, float, float, float, int, int]]] = {}
    for paths in logs.values():  # a warm-up round, not counted (imports, page cache)
        time_resume(paths[0], True)
        time_resume(paths[1], False)
    for _ in range(repeats):
        for (size, compacted), paths in logs.items():
            for use_snapshot, path in zip((True, False), paths):
                for _ in range(SNAPSHOT_SAMPLES if use_snapshot else 1):
                    samples.setdefault((size, compacted, use_snapshot), []).append(time_resume(path, use_snapshot))
    return [
        Resume(size, compacted, use_snapshot, *(statistics.median(s[i] for s in got) for i in range(4)), got[0][4], got[0][5])
        for (size, compacted, use_snapshot), got in samples.items()
    ]


@dataclass
class SnapshotCost:
    """A snapshot of one log: its size, and the median seconds to write one after a resume and after a full replay."""

    events: int
    compacted: bool
    file_bytes: int
    messages: int
    after_resume: float  # the first after opening: it also checks, once, that the log before the old snapshot is unchanged
    after_replay: float
    next_write: float  # the next snapshot in the same run: only what came since is hashed
    log_bytes: int
    log_sha256: float  # seconds to hash the whole log, as every snapshot does for its trust record (prefix_sha256)


def bench_snapshots(logs: dict[tuple[int, bool], tuple[Path, Path]], repeats: int, workdir: Path) -> list[SnapshotCost]:
    """Snapshot writes (fsync="never": the CPU and the write, no disk wait) on copies of the logs."""
    out = []
    for (size, compacted), (with_snapshot, _) in logs.items():
        times: dict[bool, list[float]] = {True: [], False: []}
        later: list[float] = []
        for number in range(repeats):
            for resumed in (True, False):
                target = workdir / f"snap-{size}-{compacted}-{number}-{resumed}" / "s.jsonl"
                target.parent.mkdir(parents=True)
                shutil.copyfile(with_snapshot, target)
                if resumed:
                    shutil.copyfile(snapshot.path_for(with_snapshot), snapshot.path_for(target))
                with nbagent.Session.open(target, fsync="never", snapshot_every=0) as session:
                    session.append(ev.NOTE, kind="bench", text="one more event, so that the snapshot is not current")
                    _ = session.state.messages  # the fold is ready: only the snapshot is timed
                    started = time.perf_counter()
                    session.snapshot()
                    times[resumed].append(time.perf_counter() - started)
                    count = len(session.state.messages)
                    if resumed:  # a running session snapshots every snapshot_every events: the next one
                        session.append(ev.NOTE, kind="bench", text="and one more")
                        _ = session.state.messages
                        started = time.perf_counter()
                        session.snapshot()
                        later.append(time.perf_counter() - started)
                shutil.rmtree(target.parent)
        data = with_snapshot.read_bytes()
        hashing = []
        for _ in range(repeats):
            started = time.perf_counter()
            hashlib.sha256(data).hexdigest()
            hashing.append(time.perf_counter() - started)
        out.append(
            SnapshotCost(
                size,
                compacted,
                snapshot.path_for(with_snapshot).stat().st_size,
                count,
                statistics.median(times[True]),
                statistics.median(times[False]),
                statistics.median(later),
                len(data),
                statistics.median(hashing),
            )
        )
    return out
