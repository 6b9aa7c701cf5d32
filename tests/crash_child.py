"""The child process of the crash tests: runs nbagent.run on a log against the fake server, until it is SIGKILLed or done.

Its tools record every side effect as an fsynced JSON line in the effects file:
``charge`` takes an idempotency key and, like a payment API, applies each key
once (every attempt is recorded too); ``append_note`` is an un-keyed write;
``lookup`` is a read.  Two hooks let the test kill it at an exact point, both
printing a ``READY ...`` line first: ``--pause-after TYPE:N`` blocks (in a
session subscriber, so after the event is on disk) once the Nth event of that
type is logged; ``--block-in TOOL`` makes that tool block after its effect.

Usage: crash_child.py LOG EFFECTS BASE_URL [--prompt TEXT] [--approval deny|auto] [--pause-after TYPE:N] [--block-in TOOL]
       crash_child.py --zygote

With ``--zygote`` it imports everything once and then, for each JSON line
``{"argv": [...], "stderr": PATH}`` on stdin, forks a fresh process for that
run, prints ``PID <pid>``, and ``EXIT <pid> <code>`` when it ends (``-9`` when
SIGKILLed): importing the SDK and building its models takes seconds,
forking takes milliseconds.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anthropic
from forkserver import block, record, serve_forks  # tests/ is sys.path[0] when run as a script

import nbagent


def applied_keys(effects: Path) -> set[str]:
    """Keys the pretend payment API has already applied."""
    if not effects.exists():
        return set()
    lines = [json.loads(line) for line in effects.read_text().splitlines()]
    return {e["key"] for e in lines if e["tool"] == "charge" and e["kind"] == "applied"}


def make_tools(effects: Path, block_in: str | None) -> list[nbagent.Tool]:
    """The three tools, each recording its effects in ``effects``."""

    @nbagent.tool
    def charge(amount: int, idempotency_key: str) -> str:
        """Charge an amount once per key.

        Args:
            amount: Cents to charge.
        """
        record(effects, tool="charge", kind="attempt", key=idempotency_key, args={"amount": amount})
        if idempotency_key not in applied_keys(effects):
            record(effects, tool="charge", kind="applied", key=idempotency_key, args={"amount": amount})
        if block_in == "charge":
            block("tool charge")
        return f"charged {amount}"

    @nbagent.tool
    def append_note(text: str) -> str:
        """Append a note to the ledger.

        Args:
            text: The note.
        """
        record(effects, tool="append_note", kind="applied", key=None, args={"text": text})
        if block_in == "append_note":
            block("tool append_note")
        return f"noted {text}"

    @nbagent.tool(effect="read")
    def lookup(name: str) -> str:
        """Read a value.

        Args:
            name: Which value.
        """
        record(effects, tool="lookup", kind="read", key=None, args={"name": name})
        if block_in == "lookup":
            block("tool lookup")
        return f"{name} is 42"

    return [charge, append_note, lookup]


def main(argv: list[str] | None = None) -> None:
    """One run of the loop on a log, as the arguments say."""
    parser = argparse.ArgumentParser()
    parser.add_argument("log", type=Path)
    parser.add_argument("effects", type=Path)
    parser.add_argument("base_url")
    parser.add_argument("--prompt")
    parser.add_argument("--approval", default="deny")
    parser.add_argument("--pause-after")
    parser.add_argument("--block-in")
    args = parser.parse_args(argv)

    client = anthropic.Anthropic(base_url=args.base_url, api_key="test-key", max_retries=0)
    with client, nbagent.Session.open(args.log) as session:
        if args.pause_after:
            kind, _, nth = args.pause_after.partition(":")
            seen = [0]

            def pause(event: dict[str, Any]) -> None:
                if event["type"] == kind:
                    seen[0] += 1
                    if seen[0] == int(nth or 1):
                        block(f"after {kind}")

            session.subscribe(pause, since=session.seq)
        tools = make_tools(args.effects, args.block_in)
        final = nbagent.run(session, args.prompt, tools=tools, client=client, model="claude-test", approval=args.approval)
        print(f"DONE session={session.id} final={json.dumps(final)}", flush=True)


def warm_up() -> None:
    """Run a small job once here, so the SDK's lazily built pydantic models are ready in every fork."""
    from fake_anthropic import FakeAnthropic, text, tool_uses  # tests/ is sys.path[0] when run as a script

    with tempfile.TemporaryDirectory() as folder, FakeAnthropic() as fake:
        fake.script(tool_uses([("charge", {"amount": 1}), ("append_note", {"text": "t"}), ("lookup", {"name": "n"})], "warm"), text("up"))
        with contextlib.redirect_stdout(io.StringIO()):
            main([f"{folder}/log.jsonl", f"{folder}/effects.jsonl", fake.base_url, "--prompt", "warm up"])


if __name__ == "__main__":
    if sys.argv[1:] == ["--zygote"]:
        serve_forks(main, warm_up)
    else:
        main()
