"""The child of the budget crash test: a tool loop with max_turns=2 that SIGKILLs itself once a given event is logged.

Usage: python -m tests.support.budget_child LOG BASE_URL KILL_AT   (KILL_AT: an event type, or note:<kind>; the Nth: TYPE:N)
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import anthropic

import nbagent
from tests.state.test_budget import MODEL, lookup


def main(argv: list[str]) -> None:
    """Run until killed at ``KILL_AT`` (a subscriber sees each event once it is written)."""
    log, base_url, kill_at = argv
    what, _, nth = kill_at.partition(":") if not kill_at.startswith("note:") else (kill_at, "", "")
    wanted, seen = int(nth or 1), [0]

    def watch(event: dict[str, Any]) -> None:
        name = f"note:{event.get('kind')}" if event["type"] == "note" else event["type"]
        if name == what:
            seen[0] += 1
            if seen[0] == wanted:
                os.kill(os.getpid(), signal.SIGKILL)

    client = anthropic.Anthropic(base_url=base_url, api_key="test-key", max_retries=0)
    with nbagent.Session.open(log) as session:
        session.subscribe(watch, since=session.seq)
        nbagent.run(session, "look up three things", tools=[lookup], client=client, model=MODEL, approval="auto", max_turns=2)
    print("DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
