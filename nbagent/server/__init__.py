"""The Jupyter Server extension (``nbagent.server``), enabled on install by ``jupyter-config/``.

It does two things: a notebook saved while an nbagent view is live keeps that view's static
copy and drops the live widget reference (:mod:`nbagent.render.live_views`), so reopening it without
its kernel shows no broken widget; and it serves the sessions and their live event stream to the
browser under ``{base_url}nbagent/`` (see :mod:`.app`, docs/server.md).

May import: ``history``, ``render``, ``agent`` and every floor below, ``jupyter_server`` and ``tornado``; never
``notebook`` (the magics link to the page through :mod:`nbagent.render.page_links`, and import nothing of this package).
"""

from __future__ import annotations

from typing import Any

from ..render.live_views import pre_save
from .kernel_status import untrack_subshell_requests


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Where Jupyter Server finds the extension."""
    return [{"module": "nbagent.server"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Register the pre-save hook with the server's contents manager (its public hook list), and the session API and page."""
    serverapp.contents_manager.register_pre_save_hook(pre_save)
    serverapp.log.info("nbagent: live agent views are saved as their static copies")
    if untrack_subshell_requests(serverapp):
        serverapp.log.info("nbagent: a kernel's subshell requests no longer set its status in the browser (docs/notebook.md)")
    from .app import load_api

    load_api(serverapp)
