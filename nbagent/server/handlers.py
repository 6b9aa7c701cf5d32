"""The JSON API and the event stream under ``{base_url}nbagent/``, behind Jupyter's authentication and authorization.

- ``api/sessions?path=<folder or notebook>``: the session listing (``nbagent sessions --json`` rows, with ``links``
  and ``open_turn``: the running turn a notebook page shows live, :mod:`.open_turn`);
- ``api/sessions/<notebook>/<session>/events?since=N``: the events after seq N;
- ``api/sessions/<notebook>/<session>/stream``: Server-Sent Events from the shared tail (:mod:`.tail`);
- ``api/tails``: the tails being followed, their clients and reads.

``<notebook>`` is the notebook's API path URL-encoded as one segment (``/`` as ``%2F``); a session of
the database store (the ``store`` setting) is named by its notebook as stored, an absolute path,
encoded the same way.  Every answer to bad input is a 4xx with a JSON body ``{"message": ...}``, an
unreachable database a 503 with one; nothing is written, locked or created: the logs are only read.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import quote

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web
from tornado.iostream import StreamClosedError

from ..errors import LogError
from ..history.summary import json_row, summarize
from ..record import redact, trust
from .open_turn import open_turn, stored_open_turn
from .paging import Page, read_page, read_stored_page
from .paths import Refused, Roots, Stored, Unavailable
from .pool import Pool
from .present import Frame, sse_notice
from .server_config import NbagentServer
from .source import DAMAGE, Batch
from .tail import BATCH_BYTES, Client, Tail, Tails

MAX_SEQ = 10**15  # no log has more events; a bigger number is refused before it is compared with anything
MAX_LIMIT = 10_000
_NUMBER = re.compile(r"[0-9]{1,16}")
T = TypeVar("T")
log = logging.getLogger("nbagent.server")


@dataclass
class Extension:
    """What the handlers share: where logs are, the settings, the tails, and the threads that read."""

    roots: Roots
    settings: NbagentServer
    tails: Tails
    pool: Pool = field(default_factory=lambda: Pool(4, 10.0))


def parse_seq(value: str | None, name: str) -> int:
    """A seq from a request (``since``, ``Last-Event-ID``): a whole number from 0 to 10^15, else a 400."""
    if value is None or value == "":
        return 0
    value = value.strip()
    if not _NUMBER.fullmatch(value) or int(value) > MAX_SEQ:
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise Refused(400, f"{name} must be a whole number of events from 0 to {MAX_SEQ} (got {shown!r})")
    return int(value)


def session_links(base_url: str, notebook: str, session: str) -> dict[str, str]:
    """The API and page URLs of one session."""
    api = f"{base_url}nbagent/api/sessions/{quote(notebook, safe='')}/{quote(session, safe='')}"
    page = f"{base_url}nbagent/sessions?notebook={quote(notebook, safe='')}&session={quote(session, safe='')}"
    return {"events": f"{api}/events", "stream": f"{api}/stream", "page": page}


class Handler(APIHandler):
    """A read-only nbagent API handler (the contents resource: who may read files may read their sessions)."""

    auth_resource = "contents"

    @property
    def nbagent(self) -> Extension:
        """The extension's shared state."""
        return cast(Extension, self.settings["nbagent"])

    def refuse(self, refused: Refused) -> None:
        """Answer ``{"message": ...}`` with the refusal's status (a 4xx: the access log's line is the only log line; a 503 says why in one more)."""
        if refused.status >= 500:
            self.log.warning("nbagent: %s", refused.message)
        self.set_status(refused.status)
        self.set_header("Content-Type", "application/json")
        self.finish({"message": refused.message, "status": refused.status})

    async def in_thread(self, work: Callable[[], T]) -> T:
        """Run blocking reads off the event loop, on nbagent's own bounded threads (all busy: a 503, see :mod:`.pool`)."""
        return await self.nbagent.pool.run(work)


class SessionsHandler(Handler):
    """``api/sessions?path=``: every session of a notebook, or of the notebooks below a folder."""

    @web.authenticated
    @authorized(action="read")
    async def get(self) -> None:
        api_path = self.get_argument("path", "")
        roots = self.nbagent.roots
        limit = self.nbagent.settings.store_listing
        try:
            rows = await self.in_thread(lambda: self._rows(roots, api_path, limit))
        except Refused as refused:
            self.refuse(refused)
            return
        self.finish({"path": api_path if api_path.startswith("/") else api_path.strip("/"), "sessions": rows})

    def _rows(self, roots: Roots, api_path: str, limit: int) -> list[dict[str, Any]]:
        user = trust.user_signer_or_none()
        rows = []
        files = roots.store is None or not api_path.startswith("/") or roots.in_root(api_path)
        try:
            found = roots.logs_under(api_path) if files else []
        except Refused as refused:
            if roots.store is None or refused.status != 404:
                raise
            files, found = False, []
        for notebook, log in found:
            summary = summarize(log, user=user)
            row = json_row(summary)
            row["notebook"], row["path"] = notebook, roots.shown_path(log)
            row["links"] = session_links(self.base_url, notebook, row["name"])
            row["open_turn"] = open_turn(summary, log)
            rows.append(row)
        if roots.store is not None:  # from the database's index (trust: who signed the first line); events only of an open turn
            for summary in roots.stored_under(api_path, limit):
                row = json_row(summary)
                row["store"] = roots.store.url
                row["links"] = session_links(self.base_url, summary.notebook, summary.name)
                row["open_turn"] = stored_open_turn(summary, roots.store, Stored(roots.store, summary.notebook, summary.name).path)
                rows.append(row)
            if not rows and not files:
                raise Refused(
                    404, f"{api_path!r}: no such notebook or folder under the server's root, and no such notebook in {roots.store.url}"
                )
        return sorted(rows, key=lambda r: (r["last_ts"], r["notebook"], r["name"]))


class EventsHandler(Handler):
    """``api/sessions/<notebook>/<session>/events?since=N&limit=M``: the events after N, as shown (thinking redacted), with the log's labels."""

    @web.authenticated
    @authorized(action="read")
    async def get(self, notebook: str, session: str) -> None:
        roots = self.nbagent.roots
        try:
            since = parse_seq(self.get_argument("since", "0"), "since")
            limit = parse_seq(self.get_argument("limit", str(MAX_LIMIT)), "limit")
            if not 1 <= limit <= MAX_LIMIT:
                raise Refused(400, f"limit must be from 1 to {MAX_LIMIT} (got {limit})")
            found = await self.in_thread(lambda: roots.session(notebook, session))
            if isinstance(found, Stored):
                stored = found
                reply = await self.in_thread(lambda: self._read_stored(stored, since, limit))
            else:
                path = found
                reply = await self.in_thread(lambda: self._read(path, since, limit))
        except Refused as refused:
            self.refuse(refused)
            return
        self.finish({"notebook": notebook, "session": session, **reply})

    @staticmethod
    def _read(path: Path, since: int, limit: int) -> dict[str, Any]:
        page = read_page(path, since, limit)  # reads up to the page's end only
        events = page.events + [{}] if page.more else page.events  # _reply's `more` is len(events) > limit
        return EventsHandler._reply(since, page.last_seq, limit, events, page.trust, page.status, page.batch)

    @staticmethod
    def _read_stored(stored: Stored, since: int, limit: int) -> dict[str, Any]:
        """A page of a database session: its rows after ``since`` (the primary key), its labels from its rows a batch at a time."""
        try:
            page = read_stored_page(stored.store, stored.path, stored.where, since, limit)
        except DAMAGE as exc:
            page = Page([], False, 0, "", "", Batch(problem=str(exc), damaged=True))
        except LogError as exc:
            raise Unavailable(exc) from None
        events = page.events + [{}] if page.more else page.events
        return EventsHandler._reply(since, page.last_seq, limit, events, page.trust, page.status, page.batch)

    @staticmethod
    def _reply(since: int, last: int, limit: int, events: list[Any], verdict: str, status: str, problem: Batch) -> dict[str, Any]:
        """The events reply; ``problem`` says why reading stopped early, if it did (its events are not used)."""
        if since > last:
            raise Refused(400, f"since {since} is after the session's last event ({last})")
        return {
            "since": since,
            "last_seq": last,
            "events": [redact.shown_event(e) for e in events[:limit]],  # thinking redacted, as everywhere it is shown
            "more": len(events) > limit,
            "trust": verdict,
            "status": status,
            "problem": problem.problem,  # why the reading stopped early ('' if it did not)
            "damaged": problem.damaged,  # ... because the log is damaged (else it could not be read now)
            "torn": problem.torn,  # the last line is unfinished (being written, or cut short by a crash)
        }


class StreamHandler(Handler):
    """``api/sessions/<notebook>/<session>/stream``: one SSE message per event (``id: <seq>``), heartbeats, never ending on its own."""

    _track_activity = False  # an open stream is not user activity (the server may still cull idle kernels)

    @web.authenticated
    @authorized(action="read")
    async def get(self, notebook: str, session: str) -> None:
        ext = self.nbagent
        try:
            header = self.request.headers.get("Last-Event-ID")
            since = parse_seq(header, "Last-Event-ID") if header is not None else parse_seq(self.get_argument("since", "0"), "since")
            found = await self.in_thread(lambda: ext.roots.session(notebook, session))
        except Refused as refused:
            self.refuse(refused)
            return
        path, store = (found.path, found.store) if isinstance(found, Stored) else (found, None)
        tail = ext.tails.get(path, store)
        client = Client(ext.settings.client_queue, on_drop=self._drop)
        self._client = client
        try:
            await tail.ready.wait()
            if since > tail.last_seq:
                await tail.refresh()
            if since > tail.last_seq:
                self.refuse(Refused(400, f"Last-Event-ID / since {since} is after the session's last event ({tail.last_seq})"))
                return
            until = tail.subscribe(client)
            await self._stream(tail, client, since, until)
        except StreamClosedError:
            pass
        finally:
            ext.tails.release(path, client, store)

    async def _stream(self, tail: Tail, client: Client, since: int, until: int) -> None:
        settings = self.nbagent.settings
        self.set_header("Content-Type", "text/event-stream; charset=utf-8")
        self.set_header("Cache-Control", "no-cache, no-store")
        self.set_header("X-Accel-Buffering", "no")
        self.write(b"retry: %d\n\n" % settings.retry_ms)
        notice = {"last_seq": until, "trust": tail.trust, "problem": tail.problem, "damaged": tail.damaged, "torn": tail.torn}
        self.write(sse_notice("session", notice))
        await self.flush()
        backlog = tail.backlog(since, until)
        if backlog is not None:
            await self._send_frames(backlog)
        else:  # older than the frames the tail keeps: a replay from the log's start, page by page, shared
            replay, reading = tail.catch_up(client, since, until)
            try:
                while frames := await replay.take(reading):
                    await self._send_frames(frames)
            finally:
                tail.caught_up(replay, reading)
        problem = tail.problem
        while not (client.dropped or client.closed):
            frames = await client.next(settings.heartbeat)
            if client.dropped or client.closed:
                break
            chunks = [f.data for f in frames] or [b": heartbeat\n\n"]
            if tail.problem != problem:
                problem = tail.problem
                chunks.append(sse_notice("problem", {"problem": problem, "damaged": tail.damaged, "last_seq": tail.last_seq}))
            await self._send(chunks)

    async def _send_frames(self, frames: list[Frame]) -> None:
        """Frames in writes of about BATCH_BYTES, each flushed before the next (a client that does not read holds one)."""
        chunk: list[bytes] = []
        size = 0
        for frame in frames:
            chunk.append(frame.data)
            size += len(frame.data)
            if size >= BATCH_BYTES:
                await self._send(chunk)
                chunk, size = [], 0
        if chunk:
            await self._send(chunk)

    async def _send(self, chunks: list[bytes]) -> None:
        """Write and flush; a client that takes nothing for ``send_timeout`` seconds is disconnected (it holds this write only)."""
        self.write(b"".join(chunks))
        try:
            await asyncio.wait_for(self.flush(), self.nbagent.settings.send_timeout)
        except asyncio.TimeoutError:
            self._drop()
            raise StreamClosedError() from None

    def _drop(self) -> None:
        """A client too far behind: close its connection (it resumes from its Last-Event-ID)."""
        connection: Any = self.request.connection
        if connection is not None:
            connection.close()

    def on_connection_close(self) -> None:
        """The client went away."""
        client = getattr(self, "_client", None)
        if client is not None:
            client.close()


class TailsHandler(Handler):
    """``api/tails``: the sessions being followed, with their clients and how many events each tail read."""

    @web.authenticated
    @authorized(action="read")
    async def get(self) -> None:
        roots = self.nbagent.roots
        rows = [
            {
                "log": roots.shown_path(path) if isinstance(path, Path) else path,
                "clients": len(tail.clients),
                "last_seq": tail.last_seq,
                "events_read": tail.events_read,
                "reads": getattr(tail.source, "reads", None),
                "kept": len(tail.recent),
                "problem": tail.problem,
                "damaged": tail.damaged,
            }
            for path, tail in self.nbagent.tails.tails.items()
        ]
        self.finish({"tails": rows})


def handlers(base_url: str) -> list[tuple[str, type[Handler]]]:
    """The API routes."""
    api = f"{base_url}nbagent/api/"
    one = r"sessions/([^/]+)/([^/]+)"
    return [
        (api + "sessions", SessionsHandler),
        (api + one + "/events", EventsHandler),
        (api + one + "/stream", StreamHandler),
        (api + "tails", TailsHandler),
    ]
