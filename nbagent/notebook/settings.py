"""The ``Agent`` settings of the notebook front end (traitlets): ``%config Agent.<name> = ...`` or a config file."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from IPython.core.error import UsageError
from traitlets import Bool, Dict, Enum, Float, Int, List, TraitError, Unicode, Union, validate
from traitlets.config import Configurable

from ..agent.parallel import DEFAULT_BOUND
from ..errors import NbagentError
from ..model.claude import DEFAULT_MODEL
from ..state import model_table as models
from ..state.approval_rule import APPROVAL_MODES
from ..state.context import COMPACT_MODES, DEFAULT_RESULT_BUDGET, CompactMode, ContextSettings
from ..state.providers import PROVIDERS
from . import python_tool as pytool
from .budget_settings import BudgetSettings

DEFAULT_SYSTEM_PROMPT = (
    "You are an assistant working inside the user's Jupyter notebook. Use the `python` tool to run code in the "
    "notebook's kernel (its variables are shared with the user's cells) and the file tools to look at files. "
    "Be concise; show results rather than describing them."
)
DEFAULT_NOTEBOOK_BUDGET, MIN_NOTEBOOK_BUDGET, MAX_NOTEBOOK_BUDGET = 4_000, 1_000, 100_000  # characters
# The notebook tools' names are notebook_tools.NAMES (not imported here: that module is loaded when a turn first needs it).
BUILTIN_TOOLS = (
    pytool.NAME,
    *("notebook_history", "inspect_variable", "read_notebook", "propose_cell_edit"),  # the last only with the extension (docs/cells.md)
    *("read_file", "write_file", "edit_file", "list_files", "shell"),
)


class Agent(BudgetSettings, Configurable):  # the budget and price settings: budget_settings.py
    """Settings of the notebook agent: ``%config Agent.<name> = ...`` or ``c.Agent.<name> = ...`` in a config file."""

    model = Unicode(DEFAULT_MODEL, help="Claude model name to use (overridden per cell by --model).").tag(config=True)
    provider = Enum(
        PROVIDERS,
        "anthropic",
        help="Where Claude runs: 'anthropic' (the Claude API, ANTHROPIC_API_KEY), 'bedrock' (Amazon Bedrock: AWS credentials "
        "and region as the AWS CLI takes them), 'vertex' (Google Vertex AI: Application Default Credentials, CLOUD_ML_REGION, "
        "ANTHROPIC_VERTEX_PROJECT_ID), 'foundry' (Microsoft Foundry: ANTHROPIC_FOUNDRY_API_KEY or Entra ID, "
        "ANTHROPIC_FOUNDRY_RESOURCE), 'aws' (Claude Platform on AWS: ANTHROPIC_AWS_WORKSPACE_ID, a workspace key or AWS "
        "credentials) or 'google' (Claude Models on Google Cloud: ADC, ANTHROPIC_GOOGLE_CLOUD_WORKSPACE_ID). See docs/providers.md.",
    ).tag(config=True)
    max_tokens = Int(8192, help="Maximum tokens in one model reply.").tag(config=True)
    system_prompt = Unicode(DEFAULT_SYSTEM_PROMPT, help="System prompt sent with every model call.").tag(config=True)
    approval = Enum(
        APPROVAL_MODES,
        "ask",
        help="Who approves irreversible tool calls and repeats of interrupted calls: 'ask' (buttons in the panel; "
        "declined where nobody can answer, e.g. nbclient/papermill), 'auto' (yes to your own new calls; a proposed "
        "cell edit still asks), 'deny' (always no).",
    ).tag(config=True)
    fsync = Enum(
        ("always", "turn", "never"),
        "turn",
        help="When the log is fsynced: every event, at each durable step of a turn (default), or never.",
    ).tag(config=True)
    log_dir = Unicode(
        "",
        help="Folder for session logs. Empty (default): '.nbagent/<notebook name>/' beside the notebook; "
        "otherwise '<log_dir>/<notebook name>/'.",
    ).tag(config=True)
    notebook = Unicode(
        "",
        help="The notebook this kernel runs, a path ending in .ipynb (relative to the kernel's working folder): its log "
        "folder is used. Empty (default): as the frontend says (JPY_SESSION_NAME), else, run headless (nbconvert, nbclient, "
        "papermill), the one notebook here whose logs hold the cells' requests. See docs/notebook.md, 'Agent notebooks in CI'.",
    ).tag(config=True)
    store = Unicode(
        "",
        help="Where sessions live: empty (default) for NBAGENT_STORE, or the log files beside the notebook when that is "
        "unset; or a postgresql:// URL (a team's database: see docs/postgres.md).",
    ).tag(config=True)
    demo = Bool(False, help="Use the offline demo model (not Claude) instead of the Anthropic API; for trying nbagent without a key.").tag(
        config=True
    )
    tools = List(
        Unicode(),
        list(BUILTIN_TOOLS),
        help=f"Built-in tools offered to the model, a subset of {', '.join(BUILTIN_TOOLS)}.",
    ).tag(config=True)
    user_tools = Bool(True, help="Also offer the @nbagent.tool functions defined in the notebook's namespace.").tag(config=True)
    workspace = Unicode(
        "",
        help="Folder the file tools (read_file, write_file, edit_file, list_files) work in. Empty (default): the "
        "notebook's folder. A path outside it asks first under 'ask', runs under 'auto', is refused under 'deny'; "
        "the log folder .nbagent/ is never read or written by them. The python and shell tools are not confined.",
    ).tag(config=True)
    restore_kernel_state = Bool(
        False,
        help="After a kernel restart, re-run the agent's recorded `python` tool code (never other tools) "
        "to restore the variables it made; per cell with --restore.",
    ).tag(config=True)
    retries = Int(
        4, help="Extra attempts for a model call that fails with a retryable error (nbagent's only retries: the SDK client does none)."
    ).tag(config=True)
    max_retry_wait = Float(
        0,
        help="Seconds at most to wait where the API asks to wait (retry-after) before a retry; a longer wait is not made: the "
        "cell stops and says when to try again. 0 (default): no cap, every wait the API asks for is made (interruptible).",
    ).tag(config=True)
    parallel_tools = Int(
        DEFAULT_BOUND,
        help="Read-only tool calls of one reply run side by side, at most this many at once; the calls that change things run "
        "one at a time, in the reply's order (docs/notebook.md). 1: every call one at a time.",
    ).tag(config=True)
    # The context window (docs/notebook.md, "Long sessions"): the log keeps everything; only the request is compacted.
    compact = Enum(
        COMPACT_MODES,
        "auto",
        help="How a long session is kept inside the context window: 'auto' (the API compacts where the model supports it, "
        "else a local summary), 'server' (the API only), 'local' (a summary made by a model call, logged as a "
        "compaction event), 'off' (never: a request past the window fails).",
    ).tag(config=True)
    compact_trigger = Int(
        0, help="Input tokens at which the conversation is compacted; 0 (default): a safe margin under the context window."
    ).tag(config=True)
    context_window = Int(
        0,
        help="The model's context window in tokens (shown as 'context 143k / 1M'). 0 (default): the model's own, from "
        "nbagent's model table (200,000 for a model it does not know).",
    ).tag(config=True)
    tool_result_budget = Int(
        DEFAULT_RESULT_BUDGET,
        help="Characters of one tool result sent to the model; the rest is cut with a note (the log keeps it whole). 0: no clipping.",
    ).tag(config=True)
    clear_tool_results = Int(
        0, help="Keep only this many latest tool results in the request (older ones become a short note; the log keeps them). 0: off."
    ).tag(config=True)
    thinking = Union(
        [Unicode(), Int()],
        default_value="off",
        help="Thinking: 'off' (default: the least thinking the model allows: none, 'disabled', 'between_tools' on Claude "
        "Sonnet 5.5, or effort 'low' where thinking is always on), 'adaptive' (the model decides; an error on a model "
        "that takes only budgets), or a token budget of at least 1024 below Agent.max_tokens (adaptive, with a note, "
        "where the model takes no budget). Shown collapsed in the panel, redacted wherever shown or exported.",
    ).tag(config=True)
    # What the model is told at each new turn about the notebook (docs/notebook.md, "What the agent knows of the notebook").
    notebook_context = Enum(
        ("auto", "off"),
        "auto",
        help="At each new turn, tell the model what happened in the kernel since its last turn: the cells the user ran "
        "(source, result, error), the variables new or changed and the names gone ('auto', default), or nothing ('off').",
    ).tag(config=True)
    notebook_context_budget = Int(
        DEFAULT_NOTEBOOK_BUDGET,
        help=f"Characters of that note at most ({MIN_NOTEBOOK_BUDGET:,} to {MAX_NOTEBOOK_BUDGET:,}); what does not fit is "
        "counted in a line saying so.",
    ).tag(config=True)
    cells = Enum(
        ("off", "ask", "code", "code+summary"),
        "ask",
        help="The agent's python calls as notebook cells (docs/cells.md): 'ask' (default: an \"Insert as cells\" button "
        "under each turn), 'code' (inserted as each turn ends), 'code+summary' (also the final answer as a markdown "
        "cell), 'off' (no button). Needs nbagent's JupyterLab / Notebook 7 extension; elsewhere %agent_cells.",
    ).tag(config=True)
    notebook_context_exclude = List(
        Unicode(), [], help="Variable names never told to the model, as fnmatch patterns (e.g. ['tmp_*', 'raw'])."
    ).tag(config=True)
    mcp_servers = Dict(
        {},
        help="MCP servers whose tools the agent may call, in Claude's format: {'name': {'command': ..., 'args': [...], 'env': "
        "{...}}} (stdio) or {'name': {'type': 'http', 'url': ..., 'headers': {...}}}; per server 'effects' overrides a tool's "
        "effect. A .mcp.json beside the notebook is used once you approve it. See docs/mcp.md.",
    ).tag(config=True)

    @validate("notebook")
    def _notebook(self, proposal: Any) -> str:
        value = str(proposal["value"]).strip()
        if value and (not value.endswith(".ipynb") or Path(value).name == ".ipynb"):
            raise TraitError(
                f"Agent.notebook is the notebook this kernel runs, a path ending in .ipynb such as 'analysis.ipynb' "
                f"(relative to the kernel's working folder), not {value!r}; empty: as the frontend says."
            )
        return value

    @validate("tools")
    def _known_tools(self, proposal: Any) -> list[str]:
        unknown = sorted(set(proposal["value"]) - set(BUILTIN_TOOLS))
        if unknown:
            raise TraitError(f"Agent.tools has unknown names {unknown}; choose from {', '.join(BUILTIN_TOOLS)}.")
        return proposal["value"]

    @validate("parallel_tools")
    def _parallel(self, proposal: Any) -> int:
        if proposal["value"] < 1:
            raise TraitError(
                f"Agent.parallel_tools is how many read calls run at once: 1 or more, not {proposal['value']} (1: one at a time)."
            )
        return int(proposal["value"])

    @validate("compact_trigger", "tool_result_budget", "clear_tool_results")
    def _not_negative(self, proposal: Any) -> int:
        value = proposal["value"]
        if value < 0:
            raise TraitError(f"Agent.{proposal['trait'].name} must be 0 or more, not {value} (0 means: {ZERO[proposal['trait'].name]}).")
        return int(value)

    @validate("max_retry_wait")
    def _max_wait(self, proposal: Any) -> float:
        if not proposal["value"] >= 0:
            raise TraitError(f"Agent.max_retry_wait is in seconds and must be 0 or more, not {proposal['value']} (0: no cap).")
        return float(proposal["value"])

    @validate("context_window")
    def _window(self, proposal: Any) -> int:
        if proposal["value"] and proposal["value"] < MIN_WINDOW:
            raise TraitError(
                f"Agent.context_window is in tokens and must be at least {MIN_WINDOW:,}, not {proposal['value']} (0: the model's own)."
            )
        return int(proposal["value"])

    @validate("notebook_context_budget")
    def _notebook_budget(self, proposal: Any) -> int:
        value = proposal["value"]
        if not MIN_NOTEBOOK_BUDGET <= value <= MAX_NOTEBOOK_BUDGET:
            raise TraitError(
                f"Agent.notebook_context_budget is in characters and must be from {MIN_NOTEBOOK_BUDGET:,} to "
                f"{MAX_NOTEBOOK_BUDGET:,}, not {value} (Agent.notebook_context = 'off' tells nothing)."
            )
        return int(value)

    @validate("notebook_context_exclude")
    def _patterns(self, proposal: Any) -> list[str]:
        empty = [p for p in proposal["value"] if not p.strip()]
        if empty:
            raise TraitError("Agent.notebook_context_exclude takes name patterns such as 'tmp_*'; an empty pattern matches nothing.")
        return list(proposal["value"])

    @validate("thinking")
    def _thinking(self, proposal: Any) -> int | str:
        return thinking_value(proposal["value"])

    @validate("mcp_servers")
    def _mcp_servers(self, proposal: Any) -> dict[str, Any]:
        from ..tools.mcp.config import McpConfigError, parse  # no SDK import: the servers start when a turn needs them

        try:
            parse(proposal["value"], origin="Agent.mcp_servers")
        except McpConfigError as exc:
            raise TraitError(str(exc)) from None
        return dict(proposal["value"])


MIN_WINDOW = 1_000
MIN_THINKING = 1_024
ZERO = {"compact_trigger": "a margin under the window", "tool_result_budget": "no clipping", "clear_tool_results": "keep them all"}


def thinking_value(value: Any) -> int | str:
    """An ``Agent.thinking`` value checked: 'off', 'adaptive', or a budget of at least 1024 tokens (a numeric string too)."""
    if isinstance(value, str):
        word = value.strip().lower()
        if word in ("off", "adaptive"):
            return word
        if word.isdigit():
            value = int(word)
    if isinstance(value, int) and not isinstance(value, bool) and value >= MIN_THINKING:
        return value
    raise TraitError(f"Agent.thinking must be 'off', 'adaptive' or a token budget of at least {MIN_THINKING} (e.g. 4096), not {value!r}.")


def context_settings(agent: Agent, model: str = "") -> ContextSettings:
    """The run's context settings from the ``Agent`` traitlets (a trigger must be under the window: the setting's, else the model's)."""
    window = agent.context_window or models.lookup(model or agent.model).window
    if agent.compact_trigger and agent.compact_trigger >= window:
        where = "Agent.context_window" if agent.context_window else f"the context window of {model or agent.model}"
        raise TraitError(
            f"Agent.compact_trigger ({agent.compact_trigger:,}) must be below {where} ({window:,}); 0 picks a safe margin under the window."
        )
    return ContextSettings(
        compact=cast(CompactMode, agent.compact),
        window=agent.context_window,
        trigger=agent.compact_trigger or None,
        result_budget=agent.tool_result_budget or None,
        keep_tool_results=agent.clear_tool_results,
    )


def thinking_setting(agent: Agent, model: str = "") -> int | str | None:
    """The run's thinking setting (None: off); a budget must be below ``Agent.max_tokens``, and the model must take it."""
    value = thinking_value(agent.thinking)
    if isinstance(value, int) and value >= agent.max_tokens:
        raise TraitError(
            f"Agent.thinking ({value:,} tokens) must be below Agent.max_tokens ({agent.max_tokens:,}): raise max_tokens or lower it."
        )
    try:  # before any request: 'adaptive' on a model that takes only budgets
        models.thinking_request(value, model or agent.model, agent.max_tokens, name="Agent.thinking")
    except NbagentError as exc:
        raise UsageError(str(exc)) from None
    return None if value == "off" else value
