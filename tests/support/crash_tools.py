"""The one tool set of the crash children (tests/support/crash_child.py, reliability/child.py) and their kill points.

Each tool keeps an independent record of what it did: one fsynced JSON line per effect in the
effects file, never in the log.  ``charge`` takes an idempotency key and, like a payment API,
applies each key once (every attempt is recorded too); ``append_note`` is an un-keyed write;
``lookup`` is a read.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path
from typing import Any

import nbagent
from tests.support.forkserver import block, record


def read_effects(effects: Path) -> list[dict[str, Any]]:
    """Every effect recorded so far (a line cut short by a kill is ignored; records are fsynced one by one)."""
    if not effects.exists():
        return []
    found = []
    for line in effects.read_text().splitlines():
        with contextlib.suppress(ValueError):
            found.append(json.loads(line))
    return found


def child_arguments() -> argparse.ArgumentParser:
    """What both children take: ``LOG EFFECTS BASE_URL [--pause-after TYPE[:N]] [--block-in TOOL[:N]]``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("log", type=Path)
    parser.add_argument("effects", type=Path)
    parser.add_argument("base_url")
    parser.add_argument("--pause-after")
    parser.add_argument("--block-in")
    return parser


class KillPoint:
    """``NAME[:N]``: blocks (printing ``READY <where> NAME``) when this process reaches NAME for the Nth time."""

    def __init__(self, spec: str | None, where: str) -> None:
        name, _, nth = (spec or "").partition(":")
        self.name, self.nth, self.where, self.seen = name, int(nth or 1), where, 0

    def reached(self, name: str) -> None:
        """Count one arrival at ``name``; block at the Nth."""
        if name == self.name:
            self.seen += 1
            if self.seen == self.nth:
                block(f"{self.where} {name}")


def make_tools(effects: Path, kill_in: KillPoint) -> list[nbagent.Tool]:
    """A keyed payment, an un-keyed ledger write and a read; each records its effects, then ``kill_in`` may block it."""

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
        kill_in.reached("charge")
        return f"charged {amount} for {order}"

    @nbagent.tool
    def append_note(text: str) -> str:
        """Append a line to the ledger (no idempotency key: a repeat writes it twice).

        Args:
            text: The line.
        """
        record(effects, tool="append_note", kind="applied", key=None, args={"text": text})
        kill_in.reached("append_note")
        return f"noted: {text}"

    @nbagent.tool(effect="read")
    def lookup(name: str) -> str:
        """Read a value.

        Args:
            name: Which value.
        """
        record(effects, tool="lookup", kind="read", key=None, args={"name": name})
        kill_in.reached("lookup")
        return f"{name} is 42"

    return [charge, append_note, lookup]
