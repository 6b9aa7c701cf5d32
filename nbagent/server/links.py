"""Links to the server's session page, for views inside the kernel (pure functions: the kernel knows no server URL).

A relative link works where the page showing it is served by the same Jupyter Server: JupyterLab and
Notebook 7 pages live at ``{base_url}lab/...``, ``{base_url}notebooks/...`` and ``{base_url}tree/...``.
"""

from __future__ import annotations

import os
from urllib.parse import quote

PAGE = "nbagent/sessions"


def page_url(notebook: str = "", session: str = "", *, base_url: str = "/", folder: str = "") -> str:
    """The session page: one session's live view (``notebook`` is its API path), else the browser of ``folder``."""
    base = base_url if base_url.endswith("/") else base_url + "/"
    if notebook and session:
        return f"{base}{PAGE}?notebook={quote(notebook, safe='')}&session={quote(session, safe='')}"
    return f"{base}{PAGE}" + (f"?path={quote(folder, safe='')}" if folder else "")


def notebook_api_path(environ: dict[str, str] | None = None) -> str:
    """The notebook's API path as Jupyter Server gave it to the kernel (``JPY_SESSION_NAME``, relative to the root), or ''."""
    value = (os.environ if environ is None else environ).get("JPY_SESSION_NAME", "")
    return "" if not value or os.path.isabs(value) else value.lstrip("/")


def base_url_guess(environ: dict[str, str] | None = None) -> str:
    """The server's base URL as a kernel can guess it: JupyterHub's ``JUPYTERHUB_SERVICE_PREFIX`` (e.g. ``/user/ana/``), else ``/``."""
    prefix = (os.environ if environ is None else environ).get("JUPYTERHUB_SERVICE_PREFIX", "") or "/"
    return prefix if prefix.startswith("/") else "/"


def kernel_page_url(notebook: str, session: str, environ: dict[str, str] | None = None) -> str:
    """The live view's link as a view inside the kernel can give it: a path on the same server.

    JupyterLab and Notebook 7 leave output links that begin with ``/`` alone; the server takes the
    notebook's absolute path (what the kernel knows) when it is inside its root.
    """
    return page_url(notebook, session, base_url=base_url_guess(environ))


def where_to_open(notebook: str, session: str = "", *, environ: dict[str, str] | None = None) -> str:
    """A line telling where the live view is, for text output: ``<server>{kernel_page_url}``."""
    if not notebook:
        return "Sessions in the browser: open nbagent/sessions on the Jupyter server (e.g. http://localhost:8888/nbagent/sessions)."
    return f"Live view in the browser: <server>{kernel_page_url(notebook, session, environ)} (<server> is this Jupyter server's address)."
