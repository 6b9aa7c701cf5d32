"""The page at ``{base_url}nbagent/sessions``: a session browser, and a read-only live view of one session.

The page is static (this HTML and ``static/sessions.js``); what it shows comes from the JSON API and
the event stream.  Each event's HTML is rendered and sanitized on the server by the project's one
renderer (:mod:`nbagent.render.html`), so the browser runs no second sanitizer; streamed text is set
as text only.  A Content-Security-Policy allowing only this server's own script keeps even a
sanitizer miss inert.
"""

from __future__ import annotations

import html
from pathlib import Path

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import JupyterHandler
from tornado import web

from .._version import __version__
from ..render.style import STYLE

STATIC = Path(__file__).resolve().parent / "static"
CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",  # the renderer's one <style> block (no style attribute survives the sanitizer)
        "img-src 'self' data:",  # tool-result images are data: URIs the renderer builds from checked base64
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'self'",
    ]
)

# The page is a tab of its own, outside JupyterLab: it sets JupyterLab's theme variables itself (the values of
# JupyterLab Light and Dark), which the one stylesheet (render/style.py) and the rules below read.  The script picks
# the theme from the user's JupyterLab setting (``html[data-theme]``); without one, the system's colour scheme decides.
LIGHT = {
    "layout-color0": "#fff",
    "layout-color1": "#fff",
    "layout-color2": "#eee",
    "border-color1": "#bdbdbd",
    "border-color2": "#e0e0e0",
    "content-font-color1": "rgba(0,0,0,.87)",
    "content-font-color2": "rgba(0,0,0,.54)",
    "ui-font-color1": "rgba(0,0,0,.87)",
    "ui-font-color2": "rgba(0,0,0,.54)",
    "content-link-color": "#0d47a1",
    "brand-color1": "#1976d2",
    "error-color1": "#d32f2f",
    "warn-color0": "#e65100",
    "success-color1": "#388e3c",
    "mirror-editor-keyword-color": "#008000",
    "mirror-editor-string-color": "#ba2121",
    "mirror-editor-number-color": "#080",
    "mirror-editor-builtin-color": "#008000",
    "mirror-editor-def-color": "#00f",
    "mirror-editor-property-color": "#05a",
    "mirror-editor-operator-color": "#7800c2",
    "nbagent-ok": "#2e7d32",
    "nbagent-warn": "#b00020",
}
DARK = {
    "layout-color0": "#111",
    "layout-color1": "#212121",
    "layout-color2": "#424242",
    "border-color1": "#616161",
    "border-color2": "#424242",
    "content-font-color1": "#fff",
    "content-font-color2": "rgba(255,255,255,.7)",
    "ui-font-color1": "rgba(255,255,255,.87)",
    "ui-font-color2": "rgba(255,255,255,.54)",
    "content-link-color": "#64b5f6",
    "brand-color1": "#2196f3",
    "error-color1": "#f44336",
    "warn-color0": "#f57c00",
    "success-color1": "#4caf50",
    "mirror-editor-keyword-color": "#4caf50",
    "mirror-editor-string-color": "#ff7070",
    "mirror-editor-number-color": "#66bb6a",
    "mirror-editor-builtin-color": "#43a047",
    "mirror-editor-def-color": "#1e88e5",
    "mirror-editor-property-color": "#42a5f5",
    "mirror-editor-operator-color": "#d48fff",
    "nbagent-ok": "#81c784",
    "nbagent-warn": "#ff8a80",
}


def theme_css(values: dict[str, str], scheme: str) -> str:
    """One theme's variables (``--jp-<name>``, the page's own ``--nbagent-<name>``), and the scheme the browser draws its own parts in."""
    variables = (f"--{name}" if name.startswith("nbagent-") else f"--jp-{name}" for name in values)
    return "".join(f"{variable}:{value};" for variable, value in zip(variables, values.values())) + f"color-scheme:{scheme}"


THEME_CSS = (
    f":root{{{theme_css(LIGHT, 'light')}}}"
    f"@media (prefers-color-scheme:dark){{:root:not([data-theme=light]){{{theme_css(DARK, 'dark')}}}}}"
    f":root[data-theme=dark]{{{theme_css(DARK, 'dark')}}}"
)
PAGE_CSS = """
html{overflow-anchor:none}
body{margin:0;font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:14px;background-color:var(--jp-layout-color0);color:var(--jp-content-font-color1)}
a{color:var(--jp-content-link-color)}
header.nbagent-page{padding:8px 16px;border-bottom:1px solid var(--jp-border-color1);display:flex;gap:16px;align-items:baseline;flex-wrap:wrap}
header.nbagent-page h1{font-size:1.2em;margin:0}
main{padding:8px 16px;max-width:1100px}
table.nbagent-sessions{border-collapse:collapse;width:100%}
table.nbagent-sessions th,table.nbagent-sessions td{border-bottom:1px solid var(--jp-border-color2);padding:4px 8px;text-align:left;vertical-align:top}
.nbagent.nbagent-page-main .nbagent-header.nbagent-live-header{position:sticky;top:0;z-index:1;background-color:var(--jp-layout-color0);padding:6px 0 4px;margin-bottom:8px}
.nbagent-title{font-size:1.1em}
.nbagent-connection{font-size:0.9em;padding:1px 6px;border:1px solid var(--jp-border-color1);border-radius:3px}
.nbagent-connection[data-state=live][data-running=true]{border-color:var(--nbagent-ok);color:var(--nbagent-ok)}
.nbagent-connection[data-state=reconnecting]{border-color:var(--nbagent-warn);color:var(--nbagent-warn)}
.nbagent-label-warn{color:var(--nbagent-warn);font-weight:bold}
.nbagent-streaming{white-space:pre-wrap}
.nbagent-error-box{color:var(--nbagent-warn)}
.nbagent-turn{border-top:2px solid var(--jp-border-color1);margin-top:16px;padding-top:4px}
.nbagent-turn-start:empty+.nbagent-turn{border-top:none;margin-top:0}
.nbagent-turn-heading{font-size:0.9em;font-weight:bold;color:var(--jp-content-font-color2);margin:0 0 4px}
.nbagent-jump{position:fixed;right:24px;bottom:24px;z-index:2;padding:4px 12px;border:1px solid var(--jp-border-color1);border-radius:12px;background-color:var(--jp-layout-color2);color:var(--jp-ui-font-color1);cursor:pointer}
.nbagent-jump[hidden]{display:none}
"""


def page_html(base_url: str) -> str:
    """The page: an empty frame the script fills in (nothing from the request is put in it but the escaped base URL)."""
    base = html.escape(base_url, quote=True)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>nbagent sessions</title>{STYLE}<style>{THEME_CSS}{PAGE_CSS}</style></head>"
        f'<body data-base-url="{base}"><header class="nbagent-page"><h1><a href="{base}nbagent/sessions">nbagent sessions</a></h1>'
        '<span id="nbagent-where"></span></header><main id="nbagent-main" class="nbagent nbagent-page-main"></main>'
        f'<script src="{base}nbagent/static/sessions.js?v={html.escape(__version__)}"></script></body></html>'
    )


class PageHandler(JupyterHandler):
    """``{base_url}nbagent/sessions``: the browser (``?path=<folder>``) or a live view (``?notebook=...&session=...``)."""

    auth_resource = "contents"

    @property
    def content_security_policy(self) -> str:
        """Only this server's script, no inline script, no remote anything."""
        return CSP

    @web.authenticated
    @authorized(action="read")
    def get(self) -> None:
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-cache")
        self.finish(page_html(self.base_url))


class StaticHandler(web.StaticFileHandler):
    """The page's script (public, like Jupyter's own static files)."""

    def set_extra_headers(self, path: str) -> None:
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Cache-Control", "no-cache")


def handlers(base_url: str) -> list[tuple[str, type[web.RequestHandler], dict[str, str]] | tuple[str, type[web.RequestHandler]]]:
    """The page's routes."""
    return [
        (f"{base_url}nbagent/sessions", PageHandler),
        (f"{base_url}nbagent/static/(.*)", StaticHandler, {"path": str(STATIC)}),
    ]
