"""The engine's share of a request through the SDK, one tree against another: ``python -m benchmarks.sdk_share [--base REV]``.

Issue 36, item 4. Each loop sends the same growing history through the real SDK over an in-process
transport (the SDK's HTTP library's ``MockTransport`` answering a 60-word reply in 20 text deltas, its
``input_tokens`` the body's bytes / 4), so ``time.process_time`` is the client's CPU alone and no
socket or other process adds noise. Loops, taking turns in blocks of 25 requests, in one child process
per tree and round, the trees alternating which goes first:

- the floors: ``client.messages.stream()`` (plain) and ``client.beta.messages.stream()`` with the betas and
  ``context_management`` nbagent's server compaction sends (beta); the SDK's part is beta − plain; and the leanest
  loop that still keeps the reply, ``client.messages.create(stream=True)`` with the text joined from its deltas
  (lean): a loop without the helper's snapshot and per-delta events, as nbagent's adapter has been since issue 36;
- ``nbagent.run`` with the default settings (compaction "auto": the beta endpoint on every request before issue 36,
  since then only from half the compaction trigger on, which these 300 requests never reach) and with
  ``compact="off"`` (always the plain endpoint), fsync="never". nbagent's own part is each against the floor
  on the endpoint its requests went to (recorded by the transport).

``--split`` runs the working tree alone: a run of a model without the SDK (the same reply in the same 20 deltas) by
itself, and right after a bare SDK call (less that call), with the default flusher and the condition one in turn
(nbagent/agent/flusher.py): what the engine costs warm, and after the SDK has run.

``--tool-input KB ...`` times one reply that is a single tool call whose input (a file of KB kilobytes) streams in
deltas of 100 characters, through ``AnthropicModel.stream`` and through the SDK's ``messages.stream()`` helper with
``get_final_message()``, in turns, 5 each: the helper parses the input's JSON so far again at every delta.

Garbage collection: what the imports and the warm-up made is frozen (``gc.freeze``), and a full collection runs,
untimed, before each block. A full collection scans every loop's history in the process; left to trigger by
itself it cost about 100 ms, charged to whichever loop happened to allocate at that moment (a third of a
millisecond per request of that loop). The young generations still collect, timed, in the loop that fills them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from .cases import REPO

_CHILD = r"""
import gc, json, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
requests, block = int(sys.argv[2]), int(sys.argv[3])
split = sys.argv[4] if len(sys.argv) > 4 else ""  # the engine alone and after an SDK call, with this flusher
import anthropic
try:
    import httpx2 as httpx
except ImportError:
    import httpx
import nbagent
from nbagent.agent import deltas
from nbagent.state import context as ctx
if split == "condition":  # the flusher other systems than Linux get (a tree before it had only this one)
    from nbagent.agent import flusher
    deltas.FLUSHER = flusher.ConditionFlusher()

MODEL = "claude-test"
WORDS = " ".join(f"word{i}" for i in range(60)).split(" ")
PIECES = [" ".join(WORDS[i * 3:(i + 1) * 3]) + " " for i in range(20)]
endpoint = {}  # per loop: every (path, anthropic-beta) its requests went to

def sse(name, data):
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"

TAIL = "".join(
    [sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})]
    + [sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}) for p in PIECES]
    + [sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
       sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 80}}),
       sse("message_stop", {"type": "message_stop"})]
).encode()

def handle(request):
    endpoint.setdefault(current, set()).add(
        (request.url.path + ("?" + request.url.query.decode() if request.url.query else ""), request.headers.get("anthropic-beta", ""))
    )
    tokens = len(request.content) // 4
    start = sse("message_start", {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": MODEL,
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": tokens, "output_tokens": 1}}})
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=start.encode() + TAIL)

client = anthropic.Anthropic(api_key="bench-key", base_url="http://fake.invalid", max_retries=0,
                             http_client=httpx.Client(transport=httpx.MockTransport(handle)))
class TextModel:  # the fake's reply in the same 20 deltas, without the SDK: the engine's own work
    name = MODEL
    def stream(self, request, on_delta):
        for piece in PIECES:
            on_delta({"index": 0, "text": piece})
        return {"id": "msg_1", "model": MODEL, "content": [{"type": "text", "text": "".join(PIECES)}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 100, "output_tokens": 80}}

folder = Path(tempfile.mkdtemp())
runs = ("text", "plain+text") if split else ("auto", "off")
sessions = {name: nbagent.Session.open(folder / f"{name.replace('+', '_')}.jsonl", fsync="never") for name in runs}
options = {"auto": {"client": client, "model": MODEL}, "off": {"client": client, "model": MODEL, "context": nbagent.ContextSettings(compact="off")},
           "text": {"model": TextModel()}, "plain+text": {"model": TextModel()}}
histories = {"plain": [], "beta": [], "lean": [], "plain+text": []}
beta = {"betas": [ctx.COMPACT_BETA], "context_management": ctx.context_management(ctx.ContextSettings().for_model(MODEL))}
cpu = {name: [] for name in (("plain", "text", "plain+text") if split else ("plain", "beta", "lean", "auto", "off"))}
for first in range(-block, requests, block):  # the first block warms up and is not counted
    if first == 0:
        gc.collect()
        gc.freeze()  # what the imports and the warm-up made: never scanned by a timed collection
    for current in cpu:
        gc.collect()  # untimed: a full collection scans every loop's history, and would fall on whichever loop triggered it
        for number in range(first, min(first + block, requests)):
            prompt = f"Request {number + block}: please look at item {number} and say what you find."
            began = time.process_time()
            if current in histories:
                sent = histories[current]
                sent.append({"role": "user", "content": prompt})
                params = {"model": MODEL, "max_tokens": 8192, "messages": sent, "cache_control": {"type": "ephemeral"}}
                if current == "lean":
                    pieces = []
                    with client.messages.create(stream=True, **params) as events:
                        for event in events:
                            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                                pieces.append(event.delta.text)
                    sent.append({"role": "assistant", "content": [{"type": "text", "text": "".join(pieces)}]})
                else:
                    messages = client.beta.messages if current == "beta" else client.messages
                    with messages.stream(**params, **(beta if current == "beta" else {})) as stream:
                        for _ in stream:
                            pass
                        message = stream.get_final_message()
                    sent.append({"role": "assistant", "content": [b.model_dump(mode="json", exclude_none=True) for b in message.content]})
            if current in sessions:
                nbagent.run(sessions[current], prompt, **options[current])
            if number >= 0:
                cpu[current].append(time.process_time() - began)
for name, kept in [*((n, s.messages) for n, s in sessions.items()), *histories.items()]:
    if kept and [m["content"] for m in kept] != [m["content"] for m in histories["plain"]]:
        raise SystemExit(f"{name}: another history than the floor's")
for session in sessions.values():
    session.close()
endpoints = {k: sorted(v) for k, v in endpoint.items()}
print(json.dumps({"sdk": anthropic.__version__, "endpoint": endpoints, "flusher": type(deltas.FLUSHER).__name__,
                  "cpu_us": {k: sum(v) / len(v) * 1e6 for k, v in cpu.items()}}))
"""


def child(tree: Path, requests: int, block: int, split: str = "") -> dict:
    """One round of every loop importing nbagent from ``tree``: its SDK release, endpoints and CPU µs per request."""
    command = [sys.executable, "-c", _CHILD, str(tree), str(requests), str(block), *([split] if split else [])]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench(base: str, rounds: int, requests: int, block: int = 25) -> dict[str, list[dict]]:
    """``rounds`` rounds of ``base`` (a commit, exported read-only with ``git archive``) and the working tree, alternating."""
    with tempfile.TemporaryDirectory() as scratch:
        old = Path(scratch) / "base"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", base], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        trees = {f"base ({base})": old, "this tree": REPO}
        out: dict[str, list[dict]] = {name: [] for name in trees}
        for number in range(rounds):
            order = list(trees) if number % 2 == 0 else list(reversed(trees))
            for name in order:
                out[name].append(child(trees[name], requests, block))
                print(name, json.dumps(out[name][-1]), file=sys.stderr, flush=True)
        return out


def table(results: dict[str, list[dict]]) -> str:
    """The medians over the rounds, as a Markdown table."""
    lines = [
        "| tree | SDK | floor: plain | floor: beta | SDK's part (beta − plain) | floor: lean | nbagent.run, auto: endpoint | CPU "
        "| own (vs that floor) | over the plain floor | over the lean floor | nbagent.run, compact off | own (vs plain floor) "
        "| over the lean floor |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, rounds in results.items():

        def med(key: str, rounds: list[dict] = rounds) -> float:
            return statistics.median(r["cpu_us"][key] for r in rounds)

        def own(key: str, floor: str, rounds: list[dict] = rounds) -> float:
            return statistics.median(r["cpu_us"][key] - r["cpu_us"][floor] for r in rounds)

        used = rounds[0]["endpoint"]["auto"]
        auto_floor = "beta" if all(betas for _, betas in used) else "plain"
        where = ", ".join(f"`{path}`{' + `anthropic-beta: ' + betas + '`' if betas else ''}" for path, betas in used)
        lines.append(
            f"| {name} | {rounds[0]['sdk']} | {med('plain'):,.0f} µs | {med('beta'):,.0f} µs | {own('beta', 'plain'):,.0f} µs "
            f"| {med('lean'):,.0f} µs | {where} | {med('auto'):,.0f} µs | {own('auto', auto_floor):,.0f} µs "
            f"| {own('auto', 'plain'):,.0f} µs | {own('auto', 'lean'):,.0f} µs | {med('off'):,.0f} µs "
            f"| {own('off', 'plain'):,.0f} µs | {own('off', 'lean'):,.0f} µs |"
        )
    return "\n".join(lines)


def split(rounds: int, requests: int, block: int = 25) -> str:
    """The working tree's engine alone and right after a bare SDK call, with each flusher in turn: a Markdown table."""
    out: dict[str, list[dict]] = {"default": [], "condition": []}
    for number in range(rounds):
        for mode in list(out) if number % 2 == 0 else reversed(list(out)):
            out[mode].append(child(REPO, requests, block, mode))
            print(mode, json.dumps(out[mode][-1]), file=sys.stderr, flush=True)
    lines = ["| flusher | engine alone | engine after an SDK call | after / alone |", "|---|---:|---:|---:|"]
    for results in out.values():
        alone = statistics.median(r["cpu_us"]["text"] for r in results)
        after = statistics.median(r["cpu_us"]["plain+text"] - r["cpu_us"]["plain"] for r in results)
        lines.append(f"| `{results[0]['flusher']}` | {alone:,.0f} µs | {after:,.0f} µs | {after / alone:.2f}x |")
    return "\n".join(lines)


_TOOL_INPUT = r"""
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
import anthropic
try:
    import httpx2 as httpx
except ImportError:
    import httpx
from nbagent.model.claude import AnthropicModel, ModelRequest

MODEL, HI = "claude-test", [{"role": "user", "content": "hi"}]

def sse(data):
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"

out = []
for kb in map(int, sys.argv[2:]):
    sent = json.dumps({"path": "big.py", "content": "x = 1\n" * (kb * 1000 // 6)})
    pieces = [sent[i:i + 100] for i in range(0, len(sent), 100)]
    body = "".join(
        [sse({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": MODEL, "content": [],
              "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
         sse({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {}}})]
        + [sse({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": p}}) for p in pieces]
        + [sse({"type": "content_block_stop", "index": 0}),
           sse({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 80}}),
           sse({"type": "message_stop"})]
    ).encode()
    reply = lambda request: httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)
    client = anthropic.Anthropic(api_key="bench-key", base_url="http://fake.invalid", max_retries=0,
                                 http_client=httpx.Client(transport=httpx.MockTransport(reply)))
    model = AnthropicModel(MODEL, client=client)

    def helper():
        with client.messages.stream(model=MODEL, max_tokens=8192, messages=HI, cache_control={"type": "ephemeral"}) as stream:
            for _ in stream:
                pass
            return stream.get_final_message().content[0].input

    def adapter():
        return model.stream(ModelRequest(HI), lambda delta: None)["content"][0]["input"]

    if not helper() == adapter() == json.loads(sent):
        raise SystemExit("another tool input than the one sent")
    cpu = {"helper": [], "adapter": []}
    for _ in range(5):
        for name, way in (("helper", helper), ("adapter", adapter)):
            began = time.process_time()
            way()
            cpu[name].append(time.process_time() - began)
    out.append({"kb": kb, "deltas": len(pieces), **{k: statistics.median(v) * 1e3 for k, v in cpu.items()}})
print(json.dumps({"sdk": anthropic.__version__, "rows": out}))
"""


def tool_input(sizes: list[int]) -> str:
    """One tool call's streamed input of each size in KB, through nbagent's adapter and the SDK's helper: a Markdown table."""
    done = subprocess.run([sys.executable, "-c", _TOOL_INPUT, str(REPO), *map(str, sizes)], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    lines = [
        "| tool input | deltas | SDK | `messages.stream()` + `get_final_message()` | `AnthropicModel.stream` | helper / adapter |",
        "|---:|---:|---|---:|---:|---:|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['kb']:,} KB | {row['deltas']:,} | {result['sdk']} | {row['helper']:,.1f} ms | {row['adapter']:,.1f} ms "
            f"| {row['helper'] / row['adapter']:.1f}x |"
        )
    return "\n".join(lines)


def main() -> None:
    """Run and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD", help="the commit to compare the working tree with (default HEAD)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument(
        "--split",
        action="store_true",
        help="instead: this tree's engine (a model without the SDK, the same 20 deltas) alone and after a bare SDK call, with each flusher",
    )
    parser.add_argument(
        "--tool-input",
        type=int,
        nargs="+",
        metavar="KB",
        help="instead: one tool call's streamed input of each size, adapter against helper",
    )
    args = parser.parse_args()
    if args.tool_input:
        print(tool_input(args.tool_input))
    elif args.split:
        print(split(args.rounds, args.requests))
    else:
        print(table(bench(args.base, args.rounds, args.requests)))


if __name__ == "__main__":
    main()
