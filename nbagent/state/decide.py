"""The replay and approval rule: what the loop does with an open call at the frontier (pure; see tests/state/test_decide.py).

The loop only adapts it: it reads the call from the state and the tool from its
toolbox, calls :func:`decide`, then does what the verdict says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .approval_rule import Reason

UNKNOWN_OUTCOME = "This call was interrupted while it was running, so its outcome is unknown; it was not repeated."
UNTRUSTED = (
    "This call was not run: it was recorded in a session log that this user did not write (unsigned or signed "
    "by another key), and running it was not approved."
)
NOT_APPROVED = "The call was not approved."
OUTSIDE_WORKSPACE = "Not run: the path is outside the workspace and the call was not approved."


@dataclass(frozen=True)
class Call:
    """An open call as the log has it: how often it was started, and what those attempts were recorded as."""

    id: str
    name: str
    attempts: int = 0
    read: bool | None = None  # every attempt was recorded as a read (None: not recorded, e.g. never started)
    keyed: bool | None = None  # every attempt was given an idempotency key


@dataclass(frozen=True)
class Offered:
    """The tool of the call's name offered now: its effect and whether it takes an idempotency key."""

    effect: str
    keyed: bool = False


@dataclass(frozen=True)
class Run:
    """Run the call now."""


@dataclass(frozen=True)
class Ask:
    """Run the call only if approved for ``reason``; otherwise answer the model with ``refusal``."""

    reason: Reason
    refusal: str


@dataclass(frozen=True)
class Refuse:
    """Do not run the call: answer the model with ``text`` (an error) and warn the user with ``warning``."""

    text: str
    warning: str


RUN = Run()


def decide(call: Call, tool: Offered | None, *, offered: Sequence[str] = (), trusted: bool, guard: str | None = None) -> Run | Ask | Refuse:
    """What to do with an open call at the frontier.

    ``tool``: the tool of that name offered now, ``None`` if none is (``offered``: the names that are);
    ``trusted``: requested by a line in this user's trusted prefix (or by this process);
    ``guard``: the tool's own reason to ask for these arguments (``outside_workspace``), or ``None``.
    """
    if tool is None:
        names = ", ".join(offered) or "none"
        return Refuse(
            f"Tool {call.name!r} is not available in this run (tools offered: {names}); it may have been renamed "
            "or removed since the call was recorded. The call was not run.",
            f"The recorded call {call.id} of tool {call.name!r} was not run: no tool of that name is "
            f"offered now (tools: {names}); the model is told so.",
        )
    if not trusted:
        return Ask("untrusted", UNTRUSTED)  # whatever the effect: a log from elsewhere runs nothing unasked
    if call.attempts:
        return RUN if safe_to_repeat(call, tool) else Ask("unknown_outcome", UNKNOWN_OUTCOME)  # the first attempt was approved
    if tool.effect == "irreversible":
        return Ask("irreversible", "")
    if guard == "outside_workspace":
        return Ask("outside_workspace", OUTSIDE_WORKSPACE)
    return RUN


def safe_to_repeat(call: Call, tool: Offered) -> bool:
    """Whether a started call may run again unasked: a read then and now, or given its key then and now."""
    was_read = tool.effect == "read" if call.read is None else call.read
    was_keyed = tool.keyed if call.keyed is None else call.keyed
    return (tool.effect == "read" and was_read) or (tool.keyed and was_keyed)


def changed(call: Call, tool: Offered | None) -> str | None:
    """The warning for the user when the tool changed kind since the call started, else ``None``."""
    if tool is None or not call.attempts or call.read is None:
        return None
    then, now = _kind(call.read, bool(call.keyed)), _kind(tool.effect == "read", tool.keyed)
    if then == now:
        return None
    outcome = "it runs again." if safe_to_repeat(call, tool) else "its outcome is treated as unknown."
    return f"Tool {call.name!r} changed since call {call.id} started: it was recorded as {then}, now it is {now}; {outcome}"


def _kind(read: bool, keyed: bool) -> str:
    return "a read" if read else ("a write with an idempotency key" if keyed else "a write without an idempotency key")


def refuse_continuing(*, opened: int, trusted_upto: int, broken_trust: int, keyed: bool) -> str:
    """Why a session must not be continued: '' (it may), "changed", "no key" or "not yours" (table: tests/security/test_redteam_trust.py).

    Only the ``opened`` lines it had when it was opened count: the lines written since are this process's own.
    """
    if trusted_upto >= opened:
        return ""
    if broken_trust:
        return "changed"
    return "not yours" if keyed else "no key"


def continue_refusal_text(why: str, where: str, described: str) -> str:
    """The error for a refusal of :func:`refuse_continuing`: what is wrong, that nothing was sent or run, and what to do."""
    if why == "changed":
        return (
            f"{where}: lines you trusted with `nbagent trust` were changed afterwards ({described}), so it is not continued; "
            "nothing was sent to the model or run. Find out who else can write to it (`nbagent verify` shows the lines); "
            "`nbagent trust` shows it as it is now if you want to vouch for that."
        )
    if why == "no key":
        return (
            f"{where}: nbagent cannot tell whether you wrote this session, since this user has no readable signing key "
            "(see the warning above), so it is not continued; nothing was sent to the model or run."
        )
    return (
        f"{where} was not written by you ({described}); it may come from a cloned or downloaded notebook. Continuing it "
        "would send its history to the model and could run its calls, so it is not continued; nothing was sent or run. "
        f"To continue it, trust it first: `nbagent trust {where}` in a terminal shows every text and call it vouches for "
        "and asks you. Or start a session of your own."
    )
