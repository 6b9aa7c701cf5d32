"""The kill loop's child: runs a scripted two-turn session against the fake server until it is done or SIGKILLed.

Every event the session logs is announced on stdout as ``EV <seq> <type> <crc> <durable>``
from a subscriber, that is after ``append`` wrote it (and, for durable events under
fsync="turn", fsynced it).  The tools keep an independent record of what they did: one
fsynced JSON line per effect in the effects file, never in the log.

Kill hooks (each prints ``READY ...`` and blocks until the parent kills the process):
``--pause-after TYPE:N`` in the subscriber once this process has logged the Nth event of
that type; ``--block-in TOOL:N`` inside that tool's Nth call in this process, after its effect.

Run one job: ``python -m reliability.child LOG EFFECTS BASE_URL [hooks]``.
``python -m reliability.child --zygote`` imports and warms up once, then forks one fresh
process per JSON line ``{"argv": [...], "stderr": PATH}`` on stdin, printing
``PID <pid>`` and ``EXIT <pid> <code>`` (``-9`` when SIGKILLed).
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

import nbagent
from nbagent import events as ev
from tests.forkserver import block, record, serve_forks

PROMPTS = (
    "Charge the first order, note it in the ledger, and check the balance.",
    "Now charge the second order, note it too, and check the balance again.",
)
MODEL = "claude-test"


def read_effects(effects: Path) -> list[dict[str, Any]]:
    """Every effect recorded so far (a line cut short by a kill is ignored; records are fsynced one by one)."""
    if not effects.exists():
        return []
    found = []
    for line in effects.read_text().splitlines():
        with contextlib.suppress(ValueError):
            found.append(json.loads(line))
    return found


class Blocker:
    """Counts this process's calls of one tool and blocks in the Nth, after its effect."""

    def __init__(self, spec: str | None) -> None:
        name, _, nth = (spec or "").partition(":")
        self.name, self.nth, self.calls = name, int(nth or 1), 0

    def after_effect(self, tool: str) -> None:
        if tool == self.name:
            self.calls += 1
            if self.calls == self.nth:
                block(f"in {tool}")


def make_tools(effects: Path, blocker: Blocker) -> list[nbagent.Tool]:
    """A keyed payment, an un-keyed ledger write and a read, each recording its effects in ``effects``."""

    @nbagent.tool
    def charge(order: str, amount: int, idempotency_key: str) -> str:
        """Charge an order; the payment service applies each idempotency key once.

        Args:
            order: The order id.
            amount: Cents to charge.
        """
        record(effects, tool="charge", kind="attempt", key=idempotency_key, args={"order": order, "amount": amount})
        applied = {e["key"] for e in read_effects(effects) if e["tool"] == "charge" and e["kind"] == "applied"}
        if idempotency_key not in applied:
            record(effects, tool="charge", kind="applied", key=idempotency_key, args={"order": order, "amount": amount})
        blocker.after_effect("charge")
        return f"charged {amount} for {order}"

    @nbagent.tool
    def append_note(text: str) -> str:
        """Append a line to the ledger (no idempotency key: a repeat writes it twice).

        Args:
            text: The line.
        """
        record(effects, tool="append_note", kind="applied", key=None, args={"text": text})
        blocker.after_effect("append_note")
        return f"noted: {text}"

    @nbagent.tool(effect="read")
    def lookup(name: str) -> str:
        """Read a value.

        Args:
            name: Which value.
        """
        record(effects, tool="lookup", kind="read", key=None, args={"name": name})
        blocker.after_effect("lookup")
        return f"{name} is 42"

    return [charge, append_note, lookup]


def main(argv: list[str] | None = None) -> None:
    """Resume the session at LOG (or start it) and run the scripted turns to the end."""
    parser = argparse.ArgumentParser()
    parser.add_argument("log", type=Path)
    parser.add_argument("effects", type=Path)
    parser.add_argument("base_url")
    parser.add_argument("--pause-after")
    parser.add_argument("--block-in")
    args = parser.parse_args(argv)
    kind, _, nth = (args.pause_after or "").partition(":")
    seen = [0]

    def announce(event: ev.Event) -> None:
        durable = ev.is_durable(event["type"], event)
        print(f"EV {event['seq']} {event['type']} {event['crc']} {int(durable)}", flush=True)
        if event["type"] == kind:
            seen[0] += 1
            if seen[0] == int(nth or 1):
                block(f"after {kind}")

    client = anthropic.Anthropic(base_url=args.base_url, api_key="test-key", max_retries=0)
    tools = make_tools(args.effects, Blocker(args.block_in))
    with client, nbagent.Session.open(args.log, fsync="turn") as session:
        session.subscribe(announce, since=session.seq)
        # approval="deny": a write whose outcome is unknown is never repeated, only reported.
        if session.state.frontier not in ("empty", "done"):
            nbagent.run(session, tools=tools, client=client, model=MODEL, approval="deny")
        while session.state.turns < len(PROMPTS):
            nbagent.run(session, PROMPTS[session.state.turns], tools=tools, client=client, model=MODEL, approval="deny")
        print(f"DONE {session.id}", flush=True)


def warm_up() -> None:
    """Run the whole job once, so the SDK's lazily built models are ready in every fork."""
    from reliability.killloop import respond
    from tests.fake_anthropic import FakeAnthropic

    with tempfile.TemporaryDirectory() as folder, FakeAnthropic() as fake:
        fake.responder = respond
        with contextlib.redirect_stdout(io.StringIO()):
            main([f"{folder}/log.jsonl", f"{folder}/effects.jsonl", fake.base_url])


if __name__ == "__main__":
    if sys.argv[1:] == ["--zygote"]:
        serve_forks(main, warm_up)
    else:
        main()
