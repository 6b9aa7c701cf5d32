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

from .. import __version__
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

PAGE_CSS = """
body{margin:0;font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:14px}
header.nbagent-page{padding:8px 16px;border-bottom:1px solid #ccc;display:flex;gap:16px;align-items:baseline;flex-wrap:wrap}
header.nbagent-page h1{font-size:1.2em;margin:0}
main{padding:8px 16px;max-width:1100px}
table.nbagent-sessions{border-collapse:collapse;width:100%}
table.nbagent-sessions th,table.nbagent-sessions td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
.nbagent-connection{font-size:0.9em;padding:1px 6px;border:1px solid #999;border-radius:3px}
.nbagent-connection[data-state=live]{border-color:#2e7d32;color:#2e7d32}
.nbagent-connection[data-state=reconnecting]{border-color:#b00020;color:#b00020}
.nbagent-label-warn{color:#b00020;font-weight:bold}
.nbagent-streaming{white-space:pre-wrap}
.nbagent-error-box{color:#b00020}
"""


def page_html(base_url: str) -> str:
    """The page: an empty frame the script fills in (nothing from the request is put in it but the escaped base URL)."""
    base = html.escape(base_url, quote=True)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>nbagent sessions</title>{STYLE}<style>{PAGE_CSS}</style></head>"
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
