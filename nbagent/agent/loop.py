"""The agent loop: read the frontier of the log, do the one thing it calls for, log it, repeat.

Everything behind the frontier is recorded fact and is reused as it is; only
the frontier runs.  Resuming after a crash and starting a new turn are the
same loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from ..errors import Interrupted, ModelError, NbagentError, RefusedRequestError, UntrustedLogError
from ..model.claude import DEFAULT_MODEL, AnthropicModel, Model, ModelRequest, Reply
from ..model.retries import wait_for, waited_too_long
from ..record import events as ev
from ..state import binding, prices, providers, stops, thinking_display
from ..state import budget as budgets
from ..state import context as ctx
from ..state import model_table as models
from ..state.fold import DROP_THINKING, SERVER_REFUSED
from ..tools.decorator import Tool, Toolbox
from . import approval as approvals
from . import compaction
from . import parallel as parallel_calls
from .deltas import DELTA_INTERVAL, DeltaWriter
from .session import Session
from .tool_calls import Calls, settle_abandoned

if TYPE_CHECKING:
    import anthropic
    from typing_extensions import Unpack  # typing's from Python 3.11 on


class Options(TypedDict, total=False):
    """The settings :class:`Loop` and :func:`run` both take, each optional (the default after its name)."""

    tools: Iterable[Tool | Callable[..., Any]]  # (): the tools offered to the model
    provider: str | None  # None ("anthropic"): where Claude runs (docs/providers.md)
    approval: approvals.ApprovalPolicy | str  # "ask": "auto", "deny" or a callable (nbagent/state/approval_rule.py)
    system: str  # "": the system prompt
    max_tokens: int  # 8192: a reply's tokens at most
    retries: int  # 4: extra attempts for a model call that fails with a retryable error
    max_retry_wait: float | None  # None: a retry-after is waited for however long; longer than this stops the run (retries.py)
    max_turns: int | None | budgets.Keep  # KEEP: the budget the session last logged (budget.py); None lifts it
    max_cost: float | None | budgets.Keep  # KEEP
    max_session_cost: float | None | budgets.Keep  # KEEP
    delta_interval: float  # DELTA_INTERVAL: streamed text is logged at most this often (seconds)
    context: ctx.ContextSettings | None  # None: the default settings, the window the model's
    thinking: int | str | None  # None: the model's default ("off", "adaptive" or a token budget)
    parallel: int | bool  # True: a reply's read calls run side by side, 4 at once (parallel.py); False: one at a time
    mcp_servers: Mapping[str, Any] | ToolSource | None  # None: MCP servers' tools, in Claude's format (nbagent/tools/mcp)
    setting_names: str  # "{name}": how the errors name a budget option (the notebook: "Agent.{name}")


OPTIONS: frozenset[str] = Options.__optional_keys__


class Loop:
    """One run's configuration: the session, its tools, the model, the approval policy (:class:`Options`: the rest)."""

    def __init__(self, session: Session, *, model: Model | str, **options: Unpack[Options]) -> None:
        unknown = sorted(set(options) - OPTIONS)
        if unknown:
            raise TypeError(f"Loop() got an unexpected keyword argument {unknown[0]!r}")
        self.session = session
        # MCP servers' tools (nbagent/mcp): read before each request, started when first needed, after the trust check.
        self.mcp = _tool_source(options.get("mcp_servers"))
        tools = options.get("tools", ())
        self._own_tools = tools if isinstance(tools, Toolbox) else Toolbox(tools)
        self.parallel = parallel_calls.bound(options.get("parallel", True))  # read calls of a reply run side by side, this many at most
        self.delta_interval = options.get("delta_interval", DELTA_INTERVAL)
        self.toolbox = self._own_tools
        self.model = _model(model, options.get("provider"))
        model = self.model
        # A cloud without the betas nbagent uses falls back as a model without them does (providers.py).
        self.offers_betas = providers.lookup(getattr(model, "provider", None)).betas
        self.ask = approvals.resolve(options.get("approval", "ask"))
        self.system = options.get("system", "")
        self.max_tokens = max_tokens = options.get("max_tokens", 8192)
        self.retries = options.get("retries", 4)
        self.max_wait = options.get("max_retry_wait")  # None: no cap on the wait a retry-after asks for
        # Budgets (budget.py): an option left out keeps the one the session last logged; None lifts it.
        self.budgets = {
            "max_turns": options.get("max_turns", budgets.KEEP),
            "max_cost": options.get("max_cost", budgets.KEEP),
            "max_session_cost": options.get("max_session_cost", budgets.KEEP),
        }
        self.setting_names = options.get("setting_names", "{name}")
        self._prices: dict[str, prices.Price] | None = None  # the price table a run's dollar budgets use (_set_budget)
        # The window: the setting's, else the model table's.
        self.context = (options.get("context") or ctx.ContextSettings()).for_model(model.name)
        # Checked before any request is sent; asks the API to drop thinking blocks a rewrite unbound (binding.py).
        wanted = models.thinking_request(options.get("thinking"), model.name, max_tokens)
        wanted = binding.request(wanted, model.name) if self.offers_betas else wanted
        self.thinking = thinking_display.summarized(wanted, model.name)  # the text between tool calls, shown (thinking_display.py)

    def run(self, prompt: str | list[dict[str, Any]] | None = None, *, meta: Mapping[str, Any] | None = None) -> str:
        """Add ``prompt`` as a new turn (if given), then act at the frontier until the model ends its turn."""
        if prompt is not None:
            if isinstance(prompt, str) and not prompt.strip():
                raise NbagentError("The request is empty: say what you want the agent to do.")
        self._check_trusted()
        self._set_budget()
        self._drop_foreign_thinking()
        self._refresh_tools()  # never before the trust check: a log this user did not write starts no server
        try:
            if prompt is not None:
                settle_abandoned(self.session)
                self._record_context()
                if self.thinking.note:  # a budget on a model that takes none runs as adaptive: say so
                    self.session.append(ev.NOTE, kind=ev.NOTE_THINKING, text=self.thinking.note)
                self.session.append(ev.USER_MSG, content=prompt, **({"meta": dict(meta)} if meta else {}))
            while True:
                state = self.session.state
                if state.stop_note and not state.stop_noted:  # the stop rule's decision, for people (once, even across a crash)
                    self.session.append(ev.NOTE, kind=ev.NOTE_STOP, action=state.stop_action, text=state.stop_note)
                if state.frontier == "tools":
                    Calls(self.session, self.toolbox, self.ask, self.parallel).run()
                elif state.frontier == "model":
                    self._check_budget()  # a safe point: every call of the last reply has its result
                    if state.refused:  # never the same refused request again: something must change first
                        raise RefusedRequestError.of(state.refused)
                    if state.stop_action == "compact":  # the last reply filled the context window
                        self.compact("context_window_exceeded")
                    elif state.compacting is not None or ctx.needs_compaction(self.context, self._server(), self._estimate):
                        self.compact("trigger")
                    self._call_model()
                elif state.frontier == "done":
                    return state.final_text
                else:
                    raise NbagentError("This session has no request yet: pass a prompt to start it.")
        except KeyboardInterrupt:
            state = self.session.state
            self.session.append(ev.INTERRUPTED, during=state.status, open_calls=list(state.open_calls))
            raise Interrupted("interrupted; the session is saved and the next run continues it") from None

    def _set_budget(self) -> None:
        """The run's budgets, logged when they change; BudgetError (nothing sent or logged) if one can't be kept."""
        state = self.session.state
        budget = budgets.chosen(budgets.of_state(state.budget), **self.budgets)
        # A dollar budget is kept at the prices read now, for the whole run: a tool call cannot lift it (budget.py).
        self._prices = dict(prices.table()) if budget.dollars else None
        refusal = budgets.refusal(
            budget, self.model.name, self._prices, setting=self.setting_names, provider=getattr(self.model, "provider", None)
        )
        if refusal:
            raise budgets.BudgetError(refusal)
        if budget != budgets.of_state(state.budget):
            self.session.append(ev.NOTE, **budget.event())

    def _check_budget(self) -> None:
        """Stop before the next model call if a budget is reached: logged once (a crash after it stops here again)."""
        state = self.session.state
        hit = budgets.check(state.budget, state.turn_replies, state.turn_spend, state.spend, self._prices)
        if hit is None:
            return
        if not state.budget_stopped:
            self.session.append(ev.NOTE, kind=budgets.REACHED, reached=hit.name, text=hit.text)
        raise budgets.BudgetReached(f"{hit.text}. {budgets.advice(hit, setting=self.setting_names)}", hit.name)

    def _drop_foreign_thinking(self) -> None:
        """Leave out thinking another user's key wrote where the model binds it to that account and requests can't say so."""
        state = self.session.state
        carried = binding.carries(self.thinking.param)
        report = self.session.trust
        all_mine = not (report.foreign or report.unsigned or report.altered)  # trusted or not, some lines another key wrote
        if binding.drops_foreign(self.model.name, carried, all_mine, state.foreign_thinking_dropped):
            if binding.has_thinking(state.messages):
                text = "thinking blocks written under another user's key are left out of later requests; the log keeps them"
                self.session.append(ev.NOTE, kind=DROP_THINKING, reason="foreign", text=text)

    def _refresh_tools(self) -> None:
        """The run's tools with its MCP servers' as they are now; a changed list is logged (a new request prefix: binding.py)."""
        if self.mcp is None:
            return
        offered = self.mcp.tools()
        for text in self.mcp.notes():
            self.session.append(ev.NOTE, kind=ev.NOTE_MCP, text=text)
        toolbox = Toolbox([*self._own_tools.tools.values(), *offered])
        if toolbox.definitions() != self.toolbox.definitions():
            self.toolbox = toolbox
            if self.session.state.messages:  # mid-session: the next request starts differently (a new turn logs it anyway)
                self._record_context()

    def _check_trusted(self) -> None:
        """The notebook's rule: a session this user did not write is not continued (nothing sent, nothing run) until trusted."""
        refusal = self.session.continue_refusal()
        if refusal:
            raise UntrustedLogError(refusal)

    # The model ---------------------------------------------------------------------------------
    def _request(self) -> ModelRequest:
        """The next request: the fold's messages, and what the settings ask of the API."""
        state = self.session.state
        room = stops.more_room(self.max_tokens, models.lookup(self.model.name)) if state.stop_action == "again" else self.max_tokens
        thinking = self.thinking
        request = ModelRequest(
            state.messages,
            self.toolbox.definitions(),
            self.system,
            room,
            thinking=thinking.param,
            output_config=thinking.output_config,
            betas=thinking.betas,
        )
        # The beta endpoint only once the server could compact this request: the plain one is cheaper per request.
        if self._server() and ctx.asks_compaction(self.context, state.messages, lambda: self._input_estimate(request)):
            request.context_management = ctx.context_management(self.context)
            request.betas = (ctx.COMPACT_BETA, *thinking.betas)
        else:  # a server compaction block is never sent where the beta is not asked for
            request.messages = ctx.plain_history(state.messages)
        return request

    def _server(self) -> bool:
        server = ctx.uses_server(self.context, self.model.name, self.session.state.server_refused)
        return server and (self.offers_betas or self.context.compact == "server")

    def _call_model(self) -> None:
        state = self.session.state
        if state.thinking_dropped > state.thinking_noted:  # the fold left unbound thinking blocks out: say so, once
            left = state.thinking_dropped - state.thinking_noted
            self.session.append(ev.NOTE, kind=binding.NOTE_KIND, dropped=state.thinking_dropped, text=binding.note(left))
        self._refresh_tools()
        request = self._request()
        attempt = compacted = 0
        while True:
            attempt += 1
            self.session.append(ev.MODEL_CALL, model=self.model.name, attempt=attempt, **providers.served(self.model))
            reply = self._stream(request)
            if isinstance(reply, ModelError):
                err = reply
                again = err.retryable and attempt <= self.retries
                wait = wait_for(attempt, err.retry_after, self.max_wait) if again else None
                self.session.append(
                    ev.MODEL_ERROR,
                    message=str(err),
                    status=err.status,
                    kind=err.kind,
                    retryable=err.retryable,
                    attempt=attempt,
                    **({"retry_in": round(wait, 3)} if wait is not None else {}),
                    **({"retry_after": err.retry_after} if again and wait is None else {}),  # past max_retry_wait: not waited for
                )
                if again and wait is None:  # the API asks for longer than max_retry_wait: stop, saying when to try again
                    raise waited_too_long(err, self.max_wait, time.time(), self.setting_names.format(name="max_retry_wait")) from err
                if request.context_management and ctx.refuses_compaction(err.kind, err.status, str(err), self.model.name):
                    # This model or gateway has no server-side compaction: the session compacts locally from now on.
                    self.session.append(
                        ev.NOTE, kind=SERVER_REFUSED, text=f"the API refused server-side compaction ({err}); nbagent compacts locally"
                    )
                    request = self._request()
                    continue
                if ctx.is_prompt_too_long(err.kind, err.status, str(err)) and not compacted and self.context.compact != "off":
                    compacted += 1  # once: if the compacted request is still too long, say so
                    if self.compact("too_long"):
                        request = self._request()
                        continue
                if wait is not None:
                    time.sleep(wait)
                    continue
                if self.session.state.refused:
                    raise RefusedRequestError.of(str(err), status=err.status, kind=err.kind) from err
                raise err
            if not reply["content"]:
                # The API refuses an empty assistant turn in a later request; record a placeholder.
                reply["content"] = [{"type": "text", "text": "(the model replied with no content)"}]
            self.session.append(
                ev.ASSISTANT_MSG,
                message_id=reply.get("id"),
                model=reply.get("model"),
                content=reply["content"],
                stop_reason=reply.get("stop_reason"),
                usage=reply.get("usage") or {},
                **({"stop_details": reply["stop_details"]} if reply.get("stop_details") else {}),
                **providers.billed(self.model),
            )
            return

    def drop_thinking(self) -> None:
        """Leave every thinking block so far out of later requests (the log keeps them): the way out of a refused history."""
        self._check_trusted()
        self.session.append(ev.NOTE, kind=DROP_THINKING, text="thinking blocks so far are left out of later requests; the log keeps them")

    # The context window ------------------------------------------------------------------------------
    def _record_context(self) -> None:
        """Log the context settings the fold needs (tool-result budget, results kept) when they differ from the session's."""
        state, settings = self.session.state, self.context
        carried = binding.carries(self.thinking.param)  # the fold drops unbound thinking blocks where requests can't
        prefix = binding.prefix(self.system, self.toolbox.definitions())  # a changed tool list or prompt unbinds thinking
        recorded = (state.result_budget, state.window, state.keep_tool_results, state.thinking_binding, state.model or self.model.name)
        wanted = (settings.result_budget, settings.window, settings.keep_tool_results, carried, self.model.name)
        if (*recorded, state.prefix) != (*wanted, prefix):
            self.session.append(
                ev.CONTEXT,
                result_budget=settings.result_budget,
                keep_tool_results=settings.keep_tool_results,
                window=settings.window,
                trigger=settings.threshold,
                compact=settings.compact,
                thinking_binding=carried,
                model=self.model.name,
                prefix=prefix,
            )

    def _estimate(self) -> int:
        """Tokens the next request takes: the API's count for the last reply, plus an estimate of what came since."""
        state = self.session.state
        if not state.context_tokens or not state.messages:
            return ctx.estimate_tokens(list(state.messages), self.model.name)
        last = state.messages[-1]
        return state.context_tokens + (ctx.estimate_tokens(last, self.model.name) if last["role"] == "user" else 0)

    def _input_estimate(self, request: ModelRequest) -> int:
        """The request's input tokens for :func:`ctx.asks_compaction`: :meth:`_estimate`, plus its system prompt and tools before a reply counted them."""
        known = self.session.state.context_tokens  # the last reply's usage counted them
        return self._estimate() + (0 if known else ctx.estimate_tokens([request.system, request.tools], self.model.name))

    def compact(self, reason: str = "request") -> bool:
        """Summarise the oldest messages with model calls, each logged before the next request uses it (compaction.py).

        False: nothing to compact. A crash resumes a compaction where it stopped.
        """
        self._check_trusted()
        return compaction.compact(
            self.session, self.model, self.context, reason=reason, max_tokens=self.max_tokens, retries=self.retries, max_wait=self.max_wait
        )

    def _stream(self, request: ModelRequest) -> Reply | ModelError:
        """One model call; its deltas are written out before this returns (held-back runs only if the reply ended)."""
        deltas = DeltaWriter(self.session, self.delta_interval)
        complete = False
        try:
            reply = self.model.stream(request, deltas)
            complete = True
            return reply
        except ModelError as err:
            return err
        finally:
            deltas.close(complete=complete)


class ToolSource(Protocol):
    """Tools that come and go during a run (MCP servers: nbagent.tools.mcp.McpServers): read before each request."""

    def tools(self) -> list[Tool]: ...
    def notes(self) -> list[str]: ...


def _tool_source(servers: Mapping[str, Any] | ToolSource | None) -> ToolSource | None:
    """``mcp_servers`` as a tool source: a mapping in Claude's format is parsed (McpConfigError if it cannot be used)."""
    if servers is None or (isinstance(servers, Mapping) and not servers):
        return None
    if isinstance(servers, Mapping):
        from ..tools.mcp import McpServers

        return McpServers(servers)
    return servers


def _model(model: Model | str, provider: str | None) -> Model:
    """A model name becomes Claude through ``provider``'s client; a Model object is used as it is."""
    if isinstance(model, str):
        return AnthropicModel(model, provider=provider)
    if provider is not None and providers.lookup(provider).name != getattr(model, "provider", None):
        raise NbagentError(f"provider={provider!r} does not apply to the model object given: build it with that provider instead.")
    return model


def run(
    session: Session,
    prompt: str | list[dict[str, Any]] | None = None,
    *,
    model: str | Model | None = None,
    client: anthropic.Anthropic | None = None,
    meta: Mapping[str, Any] | None = None,
    **options: Unpack[Options],
) -> str:
    """Run the agent on ``session`` until the model ends its turn; return its final text.

    With a ``prompt`` a new turn starts; without one the session resumes from
    its frontier (after a crash, an interrupt or a restart).  ``model`` is a
    Claude model name or any object following the :class:`~nbagent.model.claude.Model`
    protocol; ``client`` an ``anthropic.Anthropic`` (or a cloud's client) to use; ``provider`` where Claude runs:
    "anthropic" (default), "bedrock", "vertex" or "foundry" (docs/providers.md).  Every other option is
    :class:`Loop`'s (:class:`Options`).
    """
    if model is None or isinstance(model, str):
        model = AnthropicModel(model or DEFAULT_MODEL, client=client, provider=options.get("provider"))
    return Loop(session, model=model, **options).run(prompt, meta=meta)
