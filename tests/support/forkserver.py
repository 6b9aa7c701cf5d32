"""What the crash tests' child and the kill loop's child share: the effect record, kill hooks, and the fork server.

A child imports the SDK and warms up once, then forks one fresh process per run:
importing and building the SDK's models takes seconds, forking takes milliseconds.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nbagent.agent import deltas


def record(effects: Path, **entry: Any) -> None:
    """Append one side effect to the independent record and make it durable before going on."""
    fd = os.open(effects, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, (json.dumps(entry, sort_keys=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def say(line: str) -> None:
    """Print one line to the zygote's pipe in one write, which its children share.

    ``print`` writes the text and its newline apart; with ``PYTHONUNBUFFERED`` set each is its own write, so a child's
    line could land between the zygote's ``PID <pid>`` and its newline (seen in CI: ``PID 3590EV 1 ...``).
    """
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def block(what: str) -> None:
    """Say where we are, then wait to be killed."""
    say(f"READY {what}")
    threading.Event().wait()


def serve_forks(run: Callable[[list[str]], None], warm_up: Callable[[], None]) -> None:
    """Warm up, then fork a fresh process per JSON line ``{"argv": [...], "stderr": PATH}`` on stdin that calls ``run(argv)``.

    Prints ``READY zygote`` once warm, ``PID <pid>`` per run and ``EXIT <pid> <code>``
    when it ends (``-9`` when SIGKILLed), one run at a time.
    """
    warm_up()
    deltas.FLUSHER.stop()  # the stream-delta flusher thread; each run starts its own
    assert threading.active_count() == 1, "a thread survived the warm-up; forking now would be unsafe"
    say("READY zygote")
    for line in sys.stdin:
        command = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the run's own process: nothing of a previous run is in it
            code = 1
            try:
                fd = os.open(command["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(fd, 2)
                run(command["argv"])
                code = 0
            except SystemExit as exit:
                code = exit.code if isinstance(exit.code, int) else 1
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        say(f"PID {pid}")
        _, status = os.waitpid(pid, 0)
        # A leading newline ends any line the killed child left unfinished.
        say(f"\nEXIT {pid} {os.waitstatus_to_exitcode(status)}")
    os._exit(0)  # nothing to clean up; skip a slow interpreter teardown
