"""What the fold rewrites in the request's history, the log staying whole: old tool results cleared, images past the
request's limits left out, thinking blocks whose history changed, a refused turn.

Each takes the fold's state and changes it in place (see nbagent/state/fold.py, which calls them); thinking blocks
after a rewrite are left out only where the request cannot ask the API to drop them (nbagent/state/binding.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import binding
from .context import MAX_IMAGE_DATA, MAX_IMAGES, cleared_result, drop_images, image_data, images_to_drop

if TYPE_CHECKING:
    from .fold import State


def drop_turn(state: State) -> None:
    """Leave the refused turn out of later requests: its messages go, with the results and images noted in them."""
    start = min(state.turn_start, len(state.messages))
    state.messages = list(state.messages)[:start]
    state.unbound_to = min(state.unbound_to, start)
    state.results = [entry for entry in state.results if entry[0] < start]
    state.images = [entry for entry in state.images if entry[0] < start]


def clear_old_results(state: State, seq: int) -> None:
    """Keep the latest ``keep_tool_results`` results whole; the oldest one beyond them is replaced by a note."""
    message = len(state.messages) - 1
    state.results.append([message, len(state.messages[message]["content"]) - 1, seq])
    if len(state.results) > state.keep_tool_results:
        index, position, old = state.results.pop(0)
        content = list(state.messages[index]["content"])
        content[position] = dict(content[position], content=cleared_result(old))
        state.messages[index] = dict(state.messages[index], content=content)
        state.images = [entry for entry in state.images if entry[:2] != [index, position]]
        unbind_after(state, index)


def keep_images(state: State, seq: int, count: int) -> None:
    """Note the latest result's images; beyond ``MAX_IMAGES`` or ``MAX_IMAGE_DATA`` in all, the oldest go in as notes (the log keeps them)."""
    message = len(state.messages) - 1
    position = len(state.messages[message]["content"]) - 1
    state.images.append([message, position, seq, count, image_data(state.messages[message]["content"][position]["content"])])
    excess = sum(entry[3] for entry in state.images) - MAX_IMAGES
    over = sum(entry[4] for entry in state.images) - MAX_IMAGE_DATA
    while excess > 0 or over > 0:
        entry = state.images[0]
        index, position, old, held, size = entry
        content = list(state.messages[index]["content"])
        dropped = images_to_drop(content[position]["content"], excess, over)
        content[position] = dict(content[position], content=drop_images(content[position]["content"], dropped, old))
        state.messages[index] = dict(state.messages[index], content=content)
        left = image_data(content[position]["content"])
        unbind_after(state, index)
        excess, over = excess - dropped, over - (size - left)
        if dropped == held:
            state.images.pop(0)
        else:
            entry[3], entry[4] = held - dropped, left


def unbind_after(state: State, index: int, every: bool = False) -> None:
    """A rewrite at message ``index`` unbound every later thinking block: leave them out where requests can't ask the API to."""
    if not every and not binding.fold_drops(state.model, state.thinking_binding):
        return
    for position in range(max(index + 1, 0 if every else state.unbound_to), len(state.messages)):
        message = state.messages[position]
        state.messages[position] = without_thinking(message)
        if state.messages[position] is not message:
            state.thinking_dropped += sum(1 for b in message["content"] if b.get("type") in ("thinking", "redacted_thinking"))
    state.unbound_to = len(state.messages)


def without_thinking(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant message without its thinking blocks (one that held nothing else says so, never empty)."""
    content = message.get("content")
    if message.get("role") != "assistant" or not isinstance(content, list):
        return message
    kept = [b for b in content if not (isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking"))]
    if len(kept) == len(content):
        return message
    return dict(message, content=kept or [{"type": "text", "text": "(thinking left out)"}])
