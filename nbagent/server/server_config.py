"""The server extension's settings (``c.NbagentServer.<name>`` in a Jupyter Server config, or ``--NbagentServer.<name>=...``)."""

from __future__ import annotations

import os
from typing import Any

from traitlets import Float, Int, Unicode, default
from traitlets.config import Configurable


class NbagentServer(Configurable):
    """Where the server finds session logs, and how it streams them."""

    log_dir = Unicode(
        "",
        help="The folder of session logs kept under a custom Agent.log_dir ('<log_dir>/<notebook name>/<session>.jsonl'), "
        "searched after '.nbagent/' beside each notebook. Empty (default): only beside the notebooks.",
    ).tag(config=True)
    store = Unicode(
        help="A PostgreSQL store (a postgresql:// URL) whose sessions are served besides the files: listed from its index, "
        "read and followed through LISTEN/NOTIFY. Default: the NBAGENT_STORE environment variable; empty: the files only.",
    ).tag(config=True)
    store_listing = Int(
        1000, min=1, help="Database sessions in one listing at most (the most recently active; the files are all listed)."
    ).tag(config=True)
    poll_interval = Float(0.02, min=0.001, help="Seconds between two checks of a followed log for new lines.").tag(config=True)
    heartbeat = Float(15.0, min=0.05, help="Seconds of quiet after which an event stream sends a comment line (a heartbeat).").tag(
        config=True
    )
    client_queue = Int(
        1000,
        min=1,
        help="Events of earlier reads queued for one stream client at most; a client further behind is disconnected and "
        "resumes from its last id.",
    ).tag(config=True)
    send_timeout = Float(
        60.0,
        min=0.05,
        help="Seconds one write to a stream client may take; a client that reads nothing for that long is disconnected "
        "(it resumes from its last id), so it never holds the server's memory.",
    ).tag(config=True)
    buffer = Int(5000, min=1, help="Recent events of a followed session kept in memory for clients that reconnect.").tag(config=True)
    linger = Float(30.0, min=0.0, help="Seconds a session's shared tail is kept after its last client leaves.").tag(config=True)
    retry_ms = Int(1000, min=0, help="The reconnection delay a stream asks browsers to use, in milliseconds.").tag(config=True)
    read_threads = Int(
        4, min=1, help="Threads of nbagent's own that read logs and the database for requests (Jupyter's threads are never used)."
    ).tag(config=True)
    read_wait = Float(
        10.0, min=0.0, help="Seconds a request waits for a free reading thread before it is answered 503 (try again later)."
    ).tag(config=True)

    @default("store")
    def _store_from_environment(self) -> str:
        return os.environ.get("NBAGENT_STORE", "").strip()

    def database(self) -> Any:
        """The database store :attr:`store` names (not connected yet), or None for the files only; NbagentError if it names none."""
        from ..errors import NbagentError
        from ..stores import get_store, is_url

        if self.store in ("", "files", "file"):
            return None
        if not is_url(self.store):
            raise NbagentError(f"NbagentServer.store must be a postgresql:// URL (or empty for the log files only); got {self.store!r}")
        return get_store(self.store)
