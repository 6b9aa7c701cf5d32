"""``%agent --restore``: the kernel state of recorded turns rebuilt by re-running their python tool code, once per kernel."""

from __future__ import annotations

from typing import Any

from ..agent.session import Session
from ..record import events as ev
from .foreign import calls_not_signed_by_user
from .kernel import CellTracker
from .python_tool import run_code
from .restart import Turn


def rerun(shell: Any, session: Session, turns: tuple[Turn, ...], done: set[int], tracker: CellTracker) -> int:
    """Re-run the recorded python tool code of these turns, in order, each turn once per kernel (``done``: the turns already re-run).

    Calls recorded in lines this user did not sign are never run; what was re-run is a note in the log.
    """
    todo = [t for t in turns if t.seq not in done]
    unsigned = calls_not_signed_by_user(session)
    calls = failed = skipped = 0
    tracker.paused = True
    try:
        for turn in todo:
            done.add(turn.seq)
            for tool_use_id, code in turn.python_calls:
                if tool_use_id in turn.failed_calls:
                    continue
                if tool_use_id in unsigned:
                    skipped += 1  # recorded in a line this user did not write: never run unasked
                    continue
                calls += 1
                _, error = run_code(shell, code)
                failed += error is not None
    finally:
        tracker.paused = False
    if skipped:
        print(
            f"nbagent: did not re-run {skipped} recorded python call(s): they come from log lines not written by you "
            "(see the warning above). Run that code yourself if you trust it."
        )
    if calls:
        session.append(ev.NOTE, kind=ev.NOTE_KERNEL_STATE_RESTORED, python_calls=calls, failed=failed)
        message = f"nbagent: restored kernel state by re-running {calls} recorded python call(s)"
        print(message + (f"; {failed} failed." if failed else "."))
    return calls
