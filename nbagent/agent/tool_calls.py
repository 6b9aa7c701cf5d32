"""The tool calls at the frontier: each checked by the replay rule, asked about if it must be, started, answered.

The rule (nbagent/state/decide.py) decides from the log whether a call runs, is asked about or is refused;
this module carries the decision out. A call's start is logged (durable for all but reads) before its
body runs, so a crash in between leaves an unknown outcome that is never silently repeated.
"""

from __future__ import annotations

import logging
from typing import Any

from ..record import events as ev
from ..state.decide import NOT_APPROVED, UNKNOWN_OUTCOME, Ask, Call, Offered, Refuse, Run, changed, decide
from ..tools.decorator import Tool, Toolbox, fit_content, idempotency_key
from ..tools.image_fit import fit_images
from . import approval as approvals
from . import parallel as parallel_calls
from .session import Session

logger = logging.getLogger("nbagent")

RESULT_BUDGET = ev.MAX_LINE - (64 << 10)  # room for the rest of a tool_result line
Verdict = Run | Ask | Refuse


class Calls:
    """The open calls of a session's last reply, run with the tools offered now and the user's approval policy."""

    def __init__(self, session: Session, toolbox: Toolbox, ask: approvals.Ask, parallel: int) -> None:
        self.session = session
        self.toolbox = toolbox
        self.ask = ask
        self.parallel = parallel  # reads at most at once (parallel.py); 1: one call at a time

    def run(self) -> None:
        """The open calls in the reply's order: reads that need no asking side by side, each other call alone."""
        calls = list(self.session.state.open_calls.items())
        checked = {tool_use_id: self._check(tool_use_id, call) for tool_use_id, call in calls}
        slots = [parallel_calls.Slot(i, c["name"], runs_beside(*checked[i][2:])) for i, c in calls]
        for group in parallel_calls.groups(slots, self.parallel):
            if len(group) == 1:
                self._run_one(group[0], *checked[group[0]])
                continue
            jobs = []
            for tool_use_id in group:
                recorded, warning, tool, _ = checked[tool_use_id]
                if warning:
                    self._warn(tool_use_id, warning)
                assert tool is not None  # only a read offered now runs side by side
                jobs.append(self._job(recorded, tool, self.session.state.open_calls[tool_use_id]["input"]))
            parallel_calls.run_group(jobs, self.parallel)

    def _check(self, tool_use_id: str, call: dict[str, Any]) -> tuple[Call, str | None, Tool | None, Verdict]:
        """The call as recorded, the warning if its tool changed kind, the tool of its name offered now, and the rule's verdict."""
        name, arguments = call["name"], call["input"]
        recorded = Call(tool_use_id, name, call["started"], call.get("read"), call.get("keyed"))
        tool = self.toolbox.get(name)
        offered = None if tool is None else Offered(tool.effect, tool.takes_key)
        verdict = decide(
            recorded,
            offered,
            offered=list(self.toolbox.tools),
            trusted=self.session.call_trusted(tool_use_id),
            guard=tool.guard(arguments) if tool is not None and tool.guard is not None else None,
        )
        return recorded, changed(recorded, offered), tool, verdict

    def _job(self, recorded: Call, tool: Tool, arguments: dict[str, Any]) -> parallel_calls.Job:
        """A read call run beside others: its start and result are logged from the thread that runs it."""
        tool_use_id = recorded.id
        key = idempotency_key(self.session.id, tool_use_id)

        def finish(outcome: tuple[Any, bool]) -> None:
            content, is_error = outcome
            self._result(tool_use_id, content, is_error=is_error, effect=tool.effect)

        return parallel_calls.Job(lambda: self._start(recorded, tool, key), lambda: tool.invoke(arguments, key), finish)

    def _start(self, recorded: Call, tool: Tool, key: str) -> None:
        """Log that the call's body starts: durable (for non-read tools) before it runs."""
        started: dict[str, Any] = {"tool_use_id": recorded.id, "name": tool.name, "effect": tool.effect, "attempt": recorded.attempts + 1}
        if tool.takes_key:
            started["idempotency_key"] = key
        if tool.origin:
            started["mcp"] = dict(tool.origin)
        self.session.append(ev.TOOL_STARTED, **started)

    def _run_one(self, tool_use_id: str, recorded: Call, warning: str | None, tool: Tool | None, verdict: Verdict) -> None:
        arguments = self.session.state.open_calls[tool_use_id]["input"]
        if warning:
            self._warn(tool_use_id, warning)
        if isinstance(verdict, Refuse):
            self._warn(tool_use_id, verdict.warning)
            self._result(tool_use_id, verdict.text, is_error=True)
            return
        assert tool is not None  # only a missing tool is refused
        if isinstance(verdict, Ask):
            decision = self._approve(tool_use_id, tool, arguments, verdict.reason)
            if not decision.approved:
                self._result(tool_use_id, f"{verdict.refusal} {decision.note}".strip() or NOT_APPROVED, is_error=True)
                return
        key = idempotency_key(self.session.id, tool_use_id)
        self._start(recorded, tool, key)
        content, is_error = tool.invoke(arguments, key)
        self._result(tool_use_id, content, is_error=is_error, effect=tool.effect)

    def _warn(self, tool_use_id: str, text: str) -> None:
        """Tell the user (a note in the log, a logged warning) that the code's tools disagree with the record."""
        logger.warning("%s: %s", self.session.path, text)
        self.session.append(ev.NOTE, kind=ev.NOTE_REPLAY_MISMATCH, tool_use_id=tool_use_id, text=text)

    def _approve(self, tool_use_id: str, tool: Tool, arguments: dict[str, Any], reason: approvals.Reason) -> approvals.Decision:
        request = approvals.ApprovalRequest(
            tool_use_id, tool.name, arguments, tool.effect, reason, tool.claims, tool.asks_always, tool.about
        )
        # The arguments are in the assistant_msg that made the call: the event names it by its id.
        before = self.session.seq
        try:
            self.session.append(ev.APPROVAL, tool_use_id=tool_use_id, reason=reason, decision="pending", question=request.describe())
            decision = self.ask(request)
        except KeyboardInterrupt:  # logged (durable) before it propagates: re-running the cell asks the same call again
            if self.session.seq > before:  # the question was logged (views that follow the log may be showing it)
                self.session.append(ev.APPROVAL, tool_use_id=tool_use_id, reason=reason, decision="interrupted")
            raise
        self.session.append(
            ev.APPROVAL,
            tool_use_id=tool_use_id,
            reason=reason,
            decision="approved" if decision.approved else "declined",
            by=decision.by,
            note=decision.note,
        )
        return decision

    def _result(self, tool_use_id: str, content: Any, *, is_error: bool, effect: str | None = None) -> None:
        payload: dict[str, Any] = {"tool_use_id": tool_use_id, "content": fit_content(fit_images(content), RESULT_BUDGET)}
        if is_error:
            payload["is_error"] = True
        if effect is not None:
            payload["effect"] = effect
        self.session.append(ev.TOOL_RESULT, **payload)


def runs_beside(tool: Tool | None, verdict: Verdict) -> bool:
    """Whether a call may run beside others: a read offered now that runs without asking (and need not run alone)."""
    return tool is not None and tool.effect == "read" and not tool.alone and isinstance(verdict, Run)


def settle_abandoned(session: Session) -> None:
    """Answer the open calls of a turn the user has moved on from, so the history stays valid."""
    for tool_use_id, call in list(session.state.open_calls.items()):
        if call["started"]:
            text, why = f"{UNKNOWN_OUTCOME} The user moved on to a new request.", "unknown_outcome"
        else:
            text, why = "Not run: the user moved on to a new request before this call started.", "not_started"
        # abandoned: views show it as a note of the request it belonged to, not as this one's tool error
        session.append(ev.TOOL_RESULT, tool_use_id=tool_use_id, content=text, is_error=True, abandoned=why)
