"""Keep nbagent's widgets answering on the kernel's main shell, whatever subshell JupyterLab sends their messages on.

JupyterLab 4.6 sends widget messages on a kernel subshell of its own (its ``commsOverSubshells`` setting, one subshell
per comm target by default), deletes that subshell when the last of those comms closes and makes a new one for the
next. A comm already open may keep sending with the deleted subshell's id. ipykernel 7.4 routes a widget's next
message to the shell that last sent on that widget's comm, taken from the request being handled when it sent. So once
a message with a deleted subshell's id makes nbagent update a widget (a search updating the match list's "Show"
buttons), the next click on that widget goes to the deleted subshell and is dropped ("Unknown subshell_id" in the
kernel's log). The churn is what nbagent does: the panel's widgets close as each turn ends while the next cell's open.

nbagent's widgets need no subshell (the pump handles their clicks while a cell runs), so each message they get is
handled as part of the cell that made them, whose request names no subshell: what they send back is then routed to
the main shell. This reads the kernel's private parent identity, as the pump does, and only on the ipykernel versions
the pump was written for; elsewhere widgets are left as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .pump import current_kernel, ipykernel_version, pump_supported


def keep_on_main_shell(root: Any) -> None:
    """Handle every message to ``root`` and the widgets in it as part of the cell running now (called from that cell)."""
    kernel = current_kernel()
    if kernel is None or not pump_supported(ipykernel_version()) or not hasattr(kernel, "_shell_parent_ident"):
        return
    parent = kernel.get_parent("shell")
    if not parent or parent.get("header", {}).get("subshell_id"):
        return  # made outside a cell, or by one that runs on a subshell: leave its routing alone
    ident = kernel._get_shell_context_var(kernel._shell_parent_ident)
    for widget in _widgets(root):
        comm, handle = getattr(widget, "comm", None), getattr(widget, "_handle_msg", None)
        if comm is not None and handle is not None:
            comm.on_msg(_as_part_of(kernel, ident, parent, handle))


def _as_part_of(kernel: Any, ident: Any, parent: dict[str, Any], handle: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``handle``, run with the kernel's current request set to ``parent`` (and put back after)."""

    def run(msg: Any) -> Any:
        before, before_ident = kernel.get_parent("shell"), kernel._get_shell_context_var(kernel._shell_parent_ident)
        kernel.set_parent(ident, parent, channel="shell")
        try:
            return handle(msg)
        finally:
            kernel.set_parent(before_ident, before, channel="shell")

    return run


def _widgets(root: Any) -> Iterator[Any]:
    """``root`` and every widget inside it (through ``children``)."""
    yield root
    for child in getattr(root, "children", ()) or ():
        yield from _widgets(child)
