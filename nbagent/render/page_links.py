"""Links to the server's session page, for views inside the kernel.

A relative link works where the page showing it is served by the same Jupyter Server: JupyterLab and
Notebook 7 pages live at ``{base_url}lab/...``, ``{base_url}notebooks/...`` and ``{base_url}tree/...``.
Text output needs a whole URL to be clickable: :func:`kernel_server` finds the Jupyter Server that
started this kernel from the file every server writes in its runtime folder (``jpserver-<pid>.json``:
its URL, base URL and root), the folder the kernel's own connection file is in.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

PAGE = "nbagent/sessions"


@dataclass(frozen=True)
class ServerInfo:
    """Where the Jupyter Server that runs this kernel answers: ``url`` (with its base URL, ending in ``/``) and ``root_dir``."""

    url: str
    root_dir: str = ""


def page_url(notebook: str = "", session: str = "", *, base_url: str = "/", folder: str = "") -> str:
    """The session page: one session's live view (``notebook`` is its API path), else the browser of ``folder``."""
    base = base_url if base_url.endswith("/") else base_url + "/"
    if notebook and session:
        return f"{base}{PAGE}?notebook={quote(notebook, safe='')}&session={quote(session, safe='')}"
    return f"{base}{PAGE}" + (f"?path={quote(folder, safe='')}" if folder else "")


def notebook_api_path(environ: Mapping[str, str] | None = None) -> str:
    """The notebook's API path as Jupyter Server gave it to the kernel (``JPY_SESSION_NAME``, relative to the root), or ''."""
    value = (os.environ if environ is None else environ).get("JPY_SESSION_NAME", "")
    return "" if not value or os.path.isabs(value) else value.lstrip("/")


def base_url_guess(environ: Mapping[str, str] | None = None) -> str:
    """The server's base URL as a kernel can guess it: JupyterHub's ``JUPYTERHUB_SERVICE_PREFIX`` (e.g. ``/user/ana/``), else ``/``."""
    prefix = (os.environ if environ is None else environ).get("JUPYTERHUB_SERVICE_PREFIX", "") or "/"
    return prefix if prefix.startswith("/") else "/"


def kernel_page_url(notebook: str, session: str, environ: Mapping[str, str] | None = None) -> str:
    """The live view's link as a view inside the kernel can give it: a path on the same server.

    JupyterLab and Notebook 7 leave output links that begin with ``/`` alone; the server takes the
    notebook's absolute path (what the kernel knows) when it is inside its root.
    """
    return page_url(notebook, session, base_url=base_url_guess(environ))


def server_from_file(path: Path) -> ServerInfo | None:
    """The server a ``jpserver-<pid>.json`` describes, if it answers over http(s) (not over a Unix socket)."""
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    url = info.get("url") if isinstance(info, dict) else None
    if not isinstance(url, str) or info.get("sock") or urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
        return None
    root = info.get("root_dir")
    return ServerInfo(url if url.endswith("/") else url + "/", root if isinstance(root, str) else "")


def find_server(folders: Iterable[Path], pids: Iterable[int]) -> ServerInfo | None:
    """The server of the first of ``pids`` (this kernel's parent, then its ancestors) with a ``jpserver-<pid>.json`` in ``folders``."""
    places = list(dict.fromkeys(folders))
    for pid in pids:
        for folder in places:
            found = server_from_file(folder / f"jpserver-{pid}.json")
            if found is not None:
                return found
    return None


def _ancestors(pid: int, limit: int = 8) -> list[int]:
    """``pid`` and its ancestors, as far as ``/proc`` tells (just ``pid`` where there is no ``/proc``)."""
    chain = [pid]
    while len(chain) < limit:
        try:
            stat = Path(f"/proc/{chain[-1]}/stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if parent <= 1 or parent in chain:
            break
        chain.append(parent)
    return chain


def _runtime_folders(environ: Mapping[str, str]) -> list[Path]:
    """Where servers write ``jpserver-*.json``: the folder of this kernel's connection file, then Jupyter's runtime folder."""
    folders = []
    kernelapp = sys.modules.get("ipykernel.kernelapp")  # only if this is a running ipykernel: nothing is imported here
    app = getattr(kernelapp, "IPKernelApp", None)
    if app is not None and app.initialized():
        connection = getattr(app.instance(), "abs_connection_file", "")
        if connection:
            folders.append(Path(connection).parent)
    if environ.get("JUPYTER_RUNTIME_DIR"):
        folders.append(Path(environ["JUPYTER_RUNTIME_DIR"]))
    else:
        try:
            from jupyter_core.paths import jupyter_runtime_dir
        except ImportError:
            pass
        else:
            folders.append(Path(jupyter_runtime_dir()))
    return folders


def kernel_server(environ: Mapping[str, str] | None = None) -> ServerInfo | None:
    """The Jupyter Server this kernel runs under, as a browser reaches it; None when it cannot be known.

    Under JupyterHub the server's own address is internal: ``JUPYTERHUB_PUBLIC_URL`` is used if the hub
    sets it (``c.JupyterHub.public_url``), else the address is not known.
    """
    environ = os.environ if environ is None else environ
    if environ.get("JUPYTERHUB_SERVICE_PREFIX"):
        public = environ.get("JUPYTERHUB_PUBLIC_URL", "")
        if urlsplit(public).scheme in ("http", "https") and urlsplit(public).hostname:
            return ServerInfo(public if public.endswith("/") else public + "/")
        return None
    return find_server(_runtime_folders(environ), _ancestors(os.getppid()))


def notebook_for(notebook: str, server: ServerInfo | None) -> str:
    """The notebook as the page's link names it: relative to the server's root when it is inside it, else as given."""
    if server is None or not server.root_dir or not os.path.isabs(notebook):
        return notebook
    try:
        relative = Path(notebook).relative_to(Path(server.root_dir).expanduser())
    except ValueError:
        return notebook
    return relative.as_posix()


def where_to_open(
    notebook: str, session: str = "", *, environ: Mapping[str, str] | None = None, server: ServerInfo | None | bool = True
) -> str:
    """A line telling where the live view is, for text output: a whole URL when the server is known, else in words.

    ``server``: the server (None: not known); True finds it (:func:`kernel_server`).
    """
    found = kernel_server(environ) if server is True else server if isinstance(server, ServerInfo) else None
    shown = notebook_for(notebook, found) if notebook else ""
    if found is not None:
        url = page_url(shown, session, base_url=found.url)
        return f"{'Live view' if shown and session else 'Sessions'} in the browser: {url}"
    path = kernel_page_url(shown, session, environ) if shown and session else page_url(base_url=base_url_guess(environ))
    what = "the live view of this session" if shown and session else "the sessions"
    return f"In the browser, {what} is at {path} on the Jupyter server this notebook runs on (the kernel does not know its address)."
