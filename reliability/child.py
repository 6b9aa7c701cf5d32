"""The kill loop's child: runs a scripted two-turn session against the fake server until it is done or SIGKILLed.

Every event the session logs is announced on stdout as ``EV <seq> <type> <crc> <durable>``
from a subscriber, that is after ``append`` wrote it (and, for durable events under
fsync="turn", fsynced it).  The tools (tests/support/crash_tools.py, shared with the crash tests'
child) keep an independent record of what they did in the effects file, never in the log.

Kill hooks (each prints ``READY ...`` and blocks until the parent kills the process):
``--pause-after TYPE:N`` in the subscriber once this process has logged the Nth event of
that type; ``--block-in TOOL:N`` inside that tool's Nth call in this process, after its effect.

Run one job: ``python -m reliability.child LOG EFFECTS BASE_URL [hooks]``.
``python -m reliability.child --zygote`` imports and warms up once, then forks one fresh
process per JSON line ``{"argv": [...], "stderr": PATH}`` on stdin, printing
``PID <pid>`` and ``EXIT <pid> <code>`` (``-9`` when SIGKILLed).
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile

import anthropic

import nbagent
from nbagent.record import events as ev
from tests.support.crash_tools import KillPoint, child_arguments, make_tools
from tests.support.forkserver import say, serve_forks

PROMPTS = (
    "Charge the first order, note it in the ledger, and check the balance.",
    "Now charge the second order, note it too, and check the balance again.",
)
MODEL = "claude-test"


def main(argv: list[str] | None = None) -> None:
    """Resume the session at LOG (or start it) and run the scripted turns to the end."""
    parser = child_arguments()
    args = parser.parse_args(argv)
    pause = KillPoint(args.pause_after, "after")

    def announce(event: ev.Event) -> None:
        durable = ev.is_durable(event["type"], event)
        say(f"EV {event['seq']} {event['type']} {event['crc']} {int(durable)}")
        pause.reached(event["type"])

    client = anthropic.Anthropic(base_url=args.base_url, api_key="test-key", max_retries=0)
    tools = make_tools(args.effects, KillPoint(args.block_in, "in"))
    with client, nbagent.Session.open(args.log, fsync="turn") as session:
        session.subscribe(announce, since=session.seq)
        # approval="deny": a write whose outcome is unknown is never repeated, only reported.
        if session.state.frontier not in ("empty", "done"):
            nbagent.run(session, tools=tools, client=client, model=MODEL, approval="deny")
        while session.state.turns < len(PROMPTS):
            nbagent.run(session, PROMPTS[session.state.turns], tools=tools, client=client, model=MODEL, approval="deny")
        say(f"DONE {session.id}")


def warm_up() -> None:
    """Run the whole job once, so the SDK's lazily built models are ready in every fork."""
    from reliability.killloop import respond
    from tests.support.fake_anthropic import FakeAnthropic

    with tempfile.TemporaryDirectory() as folder, FakeAnthropic() as fake:
        fake.responder = respond
        with contextlib.redirect_stdout(io.StringIO()):
            main([f"{folder}/log.jsonl", f"{folder}/effects.jsonl", fake.base_url])


if __name__ == "__main__":
    if sys.argv[1:] == ["--zygote"]:
        serve_forks(main, warm_up)
    else:
        main()
