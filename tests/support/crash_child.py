"""The child process of the crash tests: runs nbagent.run on a log against the fake server, until it is SIGKILLed or done.

Its tools (tests/support/crash_tools.py, shared with the kill loop's child) record every side effect
as an fsynced JSON line in the effects file: ``charge`` (keyed, applied once per key),
``append_note`` (an un-keyed write), ``lookup`` (a read).  Two hooks let the test kill it at
an exact point, both printing a ``READY ...`` line first: ``--pause-after TYPE:N`` blocks (in
a session subscriber, so after the event is on disk) once the Nth event of that type is
logged; ``--block-in TOOL[:N]`` makes that tool block after its effect (in its Nth call).

Usage: python -m tests.support.crash_child LOG EFFECTS BASE_URL [--prompt TEXT] [--approval deny|auto] [--pause-after TYPE:N]
       [--block-in TOOL[:N]]
       python -m tests.support.crash_child --zygote

With ``--zygote`` it imports everything once and then, for each JSON line
``{"argv": [...], "stderr": PATH}`` on stdin, forks a fresh process for that
run, prints ``PID <pid>``, and ``EXIT <pid> <code>`` when it ends (``-9`` when
SIGKILLed): importing the SDK and building its models takes seconds,
forking takes milliseconds.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from typing import Any

import anthropic

import nbagent
from tests.support.crash_tools import KillPoint, child_arguments, make_tools
from tests.support.forkserver import say, serve_forks


def main(argv: list[str] | None = None) -> None:
    """One run of the loop on a log, as the arguments say."""
    parser = child_arguments()
    parser.add_argument("--prompt")
    parser.add_argument("--approval", default="deny")
    parser.add_argument("--trigger", type=int, help="compact locally past this many tokens (keeping about 50)")
    args = parser.parse_args(argv)
    context = nbagent.ContextSettings(compact="local", trigger=args.trigger, keep_tokens=50) if args.trigger else None

    client = anthropic.Anthropic(base_url=args.base_url, api_key="test-key", max_retries=0)
    with client, nbagent.Session.open(args.log) as session:
        if args.pause_after:
            pause = KillPoint(args.pause_after, "after")

            def reached(event: dict[str, Any]) -> None:
                pause.reached(event["type"])

            session.subscribe(reached, since=session.seq)
        tools = make_tools(args.effects, KillPoint(args.block_in, "in"))
        final = nbagent.run(session, args.prompt, tools=tools, client=client, model="claude-test", approval=args.approval, context=context)
        say(f"DONE session={session.id} final={json.dumps(final)}")


def warm_up() -> None:
    """Run a small job once here, so the SDK's lazily built pydantic models are ready in every fork."""
    from tests.support.fake_anthropic import FakeAnthropic, text, tool_uses

    with tempfile.TemporaryDirectory() as folder, FakeAnthropic() as fake:
        calls = [("charge", {"order": "o", "amount": 1}), ("append_note", {"text": "t"}), ("lookup", {"name": "n"})]
        fake.script(tool_uses(calls, "warm"), text("up"))
        with contextlib.redirect_stdout(io.StringIO()):
            main([f"{folder}/log.jsonl", f"{folder}/effects.jsonl", fake.base_url, "--prompt", "warm up"])


if __name__ == "__main__":
    if sys.argv[1:] == ["--zygote"]:
        serve_forks(main, warm_up)
    else:
        main()
