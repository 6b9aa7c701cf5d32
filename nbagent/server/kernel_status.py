"""The kernel's status in the browser: a request to make, list or delete a subshell is not the kernel's work.

JupyterLab 4 and Notebook 7 (``@jupyterlab/services``) take every iopub ``status`` message as the kernel's
state, except one answering a request type that the server lists in ``MappingKernelManager.untracked_message_types``
(handed to the page as ``untracked_message_types``; jupyter_server reads the same list for its own
``execution_state``).  ipykernel 7 answers every control request with busy, then idle, on iopub; JupyterLab 4.4+
sends a ``create_subshell_request`` when the first widget of a kernel appears (widget comms run on a subshell), so
a cell that is still running reads "Idle" from then on.  jupyter_server's default list names the other control
requests (interrupt, shutdown, debug) and says it should hold every type not sent on the shell channel, but
predates subshells (JEP 91): this adds them, through the public, configurable trait.
"""

from __future__ import annotations

from typing import Any

SUBSHELL_MESSAGES = (
    "create_subshell_request",
    "create_subshell_reply",
    "delete_subshell_request",
    "delete_subshell_reply",
    "list_subshell_request",
    "list_subshell_reply",
)


def untrack_subshell_requests(serverapp: Any) -> list[str]:
    """Add the subshell requests to the server's untracked message types (and the page's copy, if made); those added."""
    manager: Any = getattr(serverapp, "kernel_manager", None)
    current = getattr(manager, "untracked_message_types", None)
    if current is None:  # a kernel manager without the trait: nothing to extend
        return []
    added = [kind for kind in SUBSHELL_MESSAGES if kind not in current]
    if added:
        manager.untracked_message_types = [*current, *added]
    web_app = getattr(serverapp, "web_app", None)
    page = web_app.settings.get("page_config_data") if web_app is not None else None
    if isinstance(page, dict) and "untracked_message_types" in page:  # a front end extension loaded before this one
        page["untracked_message_types"] = list(manager.untracked_message_types)
    return added
