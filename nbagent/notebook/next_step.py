"""What an interrupted panel tells the user to do next, from the fold at the interruption (pure; tests/notebook/test_next_step.py).

Running the same cell again continues its request (the restart rule, restart.py); what then becomes of each call left
open is the replay rule's (state/decide.py): a call interrupted while it ran is run again unasked only if it is safe to
repeat (a read, or given its idempotency key), else only with a person's approval; a call that had not started goes
ahead as any call. A new request instead answers every open call to the model as not run (agent/tool_calls.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..state.fold import State

AGAIN = "Run this cell again to continue this request"
NEW = "Or make a new request in another cell"


def _names(calls: Sequence[Mapping[str, Any]]) -> str:
    """The tools of some calls, in words: 'python', 'python and shell', 'python, shell and read_file'."""
    names = [str(call.get("name") or "tool") for call in calls]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _verb(calls: Sequence[Mapping[str, Any]], one: str, many: str) -> str:
    return one if len(calls) == 1 else many


def after_interrupt(state: State) -> str:
    """The next step after an interruption ('' when the request had already ended: nothing is left to continue)."""
    if state.status != "interrupted" or state.frontier == "done":
        return ""
    calls = list(state.open_calls.values())
    if not calls:
        return f"{AGAIN} (Claude is asked again from where it stopped). {NEW}."
    unsure = [c for c in calls if c.get("started") and not (c.get("read") or c.get("keyed"))]
    safe = [c for c in calls if c.get("started") and (c.get("read") or c.get("keyed"))]
    waiting = [c for c in calls if not c.get("started")]
    said = []
    if unsure:
        said.append(
            f"{_names(unsure)} {_verb(unsure, 'was', 'were')} interrupted while running and may or may not have taken effect, "
            f"so {_verb(unsure, 'it runs', 'they run')} again only if you approve it in the panel"
        )
    if safe:
        said.append(f"{_names(safe)} {_verb(safe, 'runs', 'run')} again (safe to repeat)")
    if waiting:
        said.append(f"{_names(waiting)} had not started and {_verb(waiting, 'goes', 'go')} ahead (asking you first where needed)")
    return f"{AGAIN}: {'; '.join(said)}. {NEW}: the open calls are then not run, and Claude is told so."
