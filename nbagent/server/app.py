"""Wiring the session API and page into a running Jupyter Server: settings, roots, tails, routes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import NbagentError
from . import handlers, page
from .paths import Roots
from .pool import Pool
from .server_config import NbagentServer
from .tail import Tails


def load_api(serverapp: Any) -> handlers.Extension:
    """Add the routes under ``{base_url}nbagent/`` to the server's web app (its public ``add_handlers``)."""
    settings = NbagentServer(parent=serverapp)
    log_dir = Path(settings.log_dir).expanduser().absolute() if settings.log_dir else None
    contents = serverapp.contents_manager
    try:
        store = settings.database()
    except NbagentError as exc:
        serverapp.log.error(f"nbagent: {exc}; serving the log files only")
        store = None
    roots = Roots(Path(serverapp.root_dir).expanduser().absolute(), log_dir, bool(getattr(contents, "allow_hidden", False)), store)
    tails = Tails(poll=settings.poll_interval, buffer=settings.buffer, linger=settings.linger)
    extension = handlers.Extension(roots, settings, tails, Pool(settings.read_threads, settings.read_wait))
    web_app = serverapp.web_app
    web_app.settings["nbagent"] = extension
    base_url = web_app.settings.get("base_url", "/")
    web_app.add_handlers(".*$", [*handlers.handlers(base_url), *page.handlers(base_url)])
    where = (f" and {log_dir}" if log_dir else "") + (f", and the database {store.url}" if store is not None else "")
    serverapp.log.info(f"nbagent: sessions at {base_url}nbagent/sessions (logs beside the notebooks{where})")
    return extension
