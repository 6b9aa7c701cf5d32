"""Tools: plain Python functions declared the SDK's way (``anthropic.beta_tool``), plus an effect.

The effect says what replay may do with a call whose outcome is unknown:
``"read"`` is safe to repeat; ``"write"`` (the default) has a side effect;
``"irreversible"`` also needs approval before it runs at all.

A tool may also carry a *guard*: a function of the model's arguments, called by
the loop before the call starts, that returns a reason to ask for approval
(e.g. ``"outside_workspace"``) or None.  ``@tool`` makes tools without one.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import inspect
import json
from collections.abc import Callable, Iterable
from typing import Any, Literal, overload

Effect = Literal["read", "write", "irreversible"]
EFFECTS: tuple[str, ...] = ("read", "write", "irreversible")
KEY_PARAMETER = "idempotency_key"
ToolContent = str | list[dict[str, Any]]
Guard = Callable[[dict[str, Any]], str | None]

_current_key: contextvars.ContextVar[str] = contextvars.ContextVar("nbagent_idempotency_key")


def idempotency_key(session_id: str, tool_use_id: str) -> str:
    """The key a tool call gets: the same for that call across crashes and resumes."""
    return "nbagent-" + hashlib.sha256(f"{session_id}:{tool_use_id}".encode()).hexdigest()[:32]


class Tool:
    """A function the model may call, with its schema (from type hints and docstring) and effect."""

    # Runs only on the loop's own thread, never beside another call (parallel.py): set for a read that waits on
    # something only that thread delivers, such as a reply the kernel's comm pump reads while the cell runs.
    alone: bool = False

    claims: str = ""  # what the tool's provider says of it (an MCP server's annotations), shown in the approval question
    about: str = ""  # nbagent's own words on those claims (what they count for), shown apart from them
    # Rewrites what the user wrote (propose_cell_edit): its calls are asked under approval "ask" and "auto" alike
    # (nbagent/state/approval_rule.py), never approved by a mode alone.
    asks_always: bool = False
    origin: dict[str, str] | None = None  # where its calls go ({"server", "tool"} for an MCP tool), logged with tool_started

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        effect: Effect = "write",
        name: str | None = None,
        description: str | None = None,
        guard: Guard | None = None,
    ) -> None:
        if effect not in EFFECTS:
            raise ValueError(f"effect must be one of {', '.join(EFFECTS)}; got {effect!r}")
        self.func = func
        self.effect: Effect = effect
        # Called by the loop with the model's arguments before the call starts (never after):
        # a reason to ask for approval first (e.g. "outside_workspace"), or None. It must not
        # raise or have side effects. Calls to refuse outright are refused by the tool body.
        self.guard: Guard | None = guard
        signature = inspect.signature(func)
        self.takes_key = KEY_PARAMETER in signature.parameters
        shown: Callable[..., Any] = func
        if self.takes_key:
            # The model never sees the key: it is filled in by the loop, stable per tool_use_id.
            def shown(**arguments: Any) -> Any:
                return func(**arguments, **{KEY_PARAMETER: _current_key.get()})

            functools.update_wrapper(shown, func)
            del shown.__wrapped__  # type: ignore[attr-defined]
            shown.__signature__ = signature.replace(  # type: ignore[attr-defined]
                parameters=[p for p in signature.parameters.values() if p.name != KEY_PARAMETER]
            )
            shown.__annotations__ = {k: v for k, v in func.__annotations__.items() if k != KEY_PARAMETER}
        import anthropic  # here: the SDK takes over a second to import, and the log readers (the CLI) never need it

        self._sdk_tool = anthropic.beta_tool(shown, name=name, description=description)
        self.name: str = self._sdk_tool.name
        functools.update_wrapper(self, func)

    def to_dict(self) -> dict[str, Any]:
        """The tool definition sent to the Messages API."""
        return dict(self._sdk_tool.to_dict())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the plain function (so a decorated function stays usable by hand)."""
        return self.func(*args, **kwargs)

    def invoke(self, arguments: dict[str, Any], key: str) -> tuple[ToolContent, bool]:
        """Validate the model's arguments and run; any exception becomes an ``is_error`` result."""
        from anthropic.lib.tools import ToolError

        token = _current_key.set(key)
        try:
            return to_content(self._sdk_tool.call(arguments)), False
        except ToolError as exc:
            return to_content(exc.content), True
        except Exception as exc:  # the loop never dies of a tool
            cause = exc.__cause__ if isinstance(exc, ValueError) and exc.__cause__ is not None else None
            detail = f"{exc}\n{cause}" if cause is not None else str(exc)
            return f"{type(exc).__name__}: {detail}", True
        finally:
            _current_key.reset(token)

    def __repr__(self) -> str:
        return f"<nbagent.Tool {self.name} effect={self.effect}>"


def to_content(value: Any) -> ToolContent:
    """Turn what a tool returned into tool_result content (text or content blocks)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, list) and all(isinstance(b, dict) and "type" in b for b in value):
        return [dict(b) for b in value]
    try:
        return json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        return repr(value)


_JSON = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))


def _encoded_size(value: Any) -> int:
    return len(_JSON.encode(value))


def fit_content(content: ToolContent, budget: int) -> ToolContent:
    """``content`` clipped so that its JSON (as the log writes it) takes at most ``budget`` bytes, with a note saying so.

    Text is cut; an image that does not fit is replaced by a line saying it was left out.
    The log never holds a line it cannot read back (see ``events.MAX_LINE``).
    """
    size = _encoded_size(content)
    if size <= budget:
        return content
    room = budget - 200
    if isinstance(content, str):
        return _clip_text(content, room, size)
    kept: list[dict[str, Any]] = []
    for block in content:
        cost = _encoded_size(block) + 1
        if cost <= room:
            kept.append(block)
            room -= cost
        elif block.get("type") == "text" and room > 200:
            clipped = _clip_text(str(block.get("text", "")), room - 50, cost)
            kept.append({**block, "text": clipped})
            room -= _encoded_size(clipped) + 50
        else:
            kept.append(
                {
                    "type": "text",
                    "text": f"[a {block.get('type', 'content')} block of {cost} bytes was left out: it does not fit in one log line]",
                }
            )
            room -= 120
    return kept


def _clip_text(text: str, room: int, size: int) -> str:
    """``text`` cut so that its JSON fits in ``room`` bytes (``size``: the JSON size now), ending in a note."""
    keep = max(0, int(len(text) * room / size))
    while keep and _encoded_size(text[:keep]) > room:
        keep = int(keep * 0.9)
    return text[:keep] + f"\n[... {len(text) - keep} more characters not logged: the result is over the log's line limit]"


@overload
def tool(func: Callable[..., Any], /) -> Tool: ...
@overload
def tool(*, effect: Effect = "write", name: str | None = None, description: str | None = None) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    func: Callable[..., Any] | None = None, /, *, effect: Effect = "write", name: str | None = None, description: str | None = None
) -> Any:
    """Declare a function as a tool: ``@tool`` or ``@tool(effect="read")``."""
    if func is not None:
        return Tool(func, effect=effect, name=name, description=description)
    return lambda f: Tool(f, effect=effect, name=name, description=description)


class Toolbox:
    """The tools of one run, by name."""

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self.tools: dict[str, Tool] = {}
        for item in tools:
            declared = item if isinstance(item, Tool) else Tool(item)
            if declared.name in self.tools:
                raise ValueError(f"two tools are named {declared.name!r}; give one of them another name with @tool(name=...)")
            self.tools[declared.name] = declared

    def get(self, name: str) -> Tool | None:
        """The tool of that name, if offered."""
        return self.tools.get(name)

    def definitions(self) -> list[dict[str, Any]]:
        """Tool definitions for the API request."""
        return [t.to_dict() for t in self.tools.values()]
