"""The child of the parallel crash test (tests/campaigns/test_parallel_crash.py): runs one reply's calls until SIGKILLed.

Its tools record each body's start as a line in the effects file (flushed: the kill loses no written
line), and the reads named by ``--block`` then wait forever, so the test kills the child while they
run side by side.  ``make_tools`` is the same tool set without blocking, for the resume and the baseline.

Usage: python -m tests.support.parallel_child LOG EFFECTS BASE_URL [--block a,b]
"""

from __future__ import annotations

import argparse
import os
import threading
from pathlib import Path

import anthropic

import nbagent

CALLS = [
    ("note", {"text": "w1"}, "toolu_w1"),
    ("fetch", {"name": "a"}, "toolu_a"),
    ("fetch", {"name": "b"}, "toolu_b"),
    ("fetch", {"name": "c"}, "toolu_c"),
    ("note", {"text": "w2"}, "toolu_w2"),
]


def make_tools(effects: Path, block: frozenset[str] = frozenset()) -> list[nbagent.Tool]:
    """A read (``fetch``) and an un-keyed write (``note``) that record each start in ``effects``."""

    def record(what: str) -> None:
        with effects.open("a") as out:
            out.write(f"{what} {os.getpid()}\n")

    @nbagent.tool(effect="read")
    def fetch(name: str) -> str:
        """Fetch a value.

        Args:
            name: Which value.
        """
        record(f"fetch {name}")
        if name in block:
            threading.Event().wait()  # until the test kills this process
        return f"value of {name}"

    @nbagent.tool
    def note(text: str) -> str:
        """Write a note.

        Args:
            text: The note.
        """
        record(f"note {text}")
        return f"noted {text}"

    return [fetch, note]


def main() -> None:
    """One run of the loop on a new log, its tools blocking as ``--block`` says."""
    parser = argparse.ArgumentParser()
    parser.add_argument("log", type=Path)
    parser.add_argument("effects", type=Path)
    parser.add_argument("base_url")
    parser.add_argument("--block", default="")
    args = parser.parse_args()
    client = anthropic.Anthropic(base_url=args.base_url, api_key="test-key", max_retries=0)
    tools = make_tools(args.effects, frozenset(filter(None, args.block.split(","))))
    with client, nbagent.Session.open(args.log) as session:
        nbagent.run(session, "fetch and note", tools=tools, client=client, model="claude-test", approval="deny")


if __name__ == "__main__":
    main()
