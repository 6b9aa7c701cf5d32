"""Session history, read from the logs on disk: finding, summarising, searching, printing, verifying, compacting.

Everything here only reads, except :func:`compact` (which writes a snapshot
through :class:`~nbagent.session.Session`).  No IPython.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from . import events as ev
from . import fold, snapshot, store, trust
from .errors import LogCorruptError, LogVersionError, NbagentError, NotALogError
from .log import Scan, check_start, iter_events, scan

NOTEBOOK_SUFFIX = ".ipynb"
# Folders never searched for session logs (besides hidden ones other than .nbagent).
_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", "venv"})


class HistoryError(NbagentError):
    """A history request cannot be served; ``usage`` says whether the user asked for something wrong."""

    def __init__(self, message: str, *, usage: bool = True) -> None:
        super().__init__(message)
        self.usage = usage


# Finding logs ------------------------------------------------------------------------------------
def _log_folders_below(root: Path) -> Iterator[Path]:
    """Every ``.nbagent/<notebook>/`` folder below ``root`` (hidden and vendored folders are skipped)."""
    for top, dirs, _files in os.walk(root):
        if os.path.basename(top) == store.STORE_DIR:
            for name in sorted(dirs):
                yield Path(top) / name
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if (d == store.STORE_DIR or not d.startswith(".")) and d not in _SKIP_DIRS)


def find_logs(path: str | os.PathLike[str]) -> list[Path]:
    """Session logs under ``path``: a log file, a notebook, a log folder, or a folder holding notebooks."""
    target = Path(path).expanduser()
    if not target.exists():
        raise HistoryError(f"{target}: no such file or folder.")
    if target.is_file():
        if target.name.endswith(store.LOG_SUFFIX):
            return [target]
        if target.suffix == NOTEBOOK_SUFFIX:
            return [s.path for s in store.list_sessions(store.log_dir_for(target))]
        raise HistoryError(f"{target} is neither a notebook (.ipynb) nor a session log (.jsonl).")
    if not os.access(target, os.R_OK | os.X_OK):
        raise HistoryError(f"{target}: permission denied (cannot read this folder).")
    found = [s.path for s in store.list_sessions(target)]  # the folder itself may be a log folder
    for child in sorted(target.glob("*" + NOTEBOOK_SUFFIX)):  # or a configured log root (Agent.log_dir)
        if child.is_dir() and not child.is_symlink():
            found.extend(s.path for s in store.list_sessions(child))
    for folder in _log_folders_below(target):
        found.extend(s.path for s in store.list_sessions(folder))
    return list(dict.fromkeys(found))


def session_name(path: Path) -> str:
    """The session's name: its log file name without ``.jsonl``."""
    return path.name[: -len(store.LOG_SUFFIX)] if path.name.endswith(store.LOG_SUFFIX) else path.name


def notebook_of(path: Path) -> str:
    """The notebook a log belongs to (``<folder>/.nbagent/<notebook>/<session>.jsonl``), or ''."""
    folder = path.parent
    if folder.parent.name == store.STORE_DIR:
        return str(folder.parent.parent / folder.name)
    return ""


# Summaries ---------------------------------------------------------------------------------------
@dataclass
class Summary:
    """What a session listing shows about one session."""

    name: str
    path: str
    notebook: str = ""
    session_id: str = ""
    title: str = ""
    created: float = 0.0
    last_ts: float = 0.0
    turns: int = 0
    events: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    complete: bool = False
    pending: str = ""  # what an unfinished session waits for, or why it cannot be read
    source: str = "log"  # "snapshot" (header + tail) or "log" (full read)
    trust: str = ""  # who wrote the lines: yours | unsigned | other key | altered | mixed ('' if unreadable)

    @property
    def tokens(self) -> int:
        """Input plus output tokens (cache reads and writes included in input)."""
        return sum(int(v) for v in self.usage.values())

    @property
    def status(self) -> str:
        """``complete``, or ``unfinished: <what is pending>``."""
        if self.complete:
            return "complete"
        return f"unfinished: {self.pending}" if self.pending else "unfinished"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with ``status`` and ``tokens`` filled in."""
        data = asdict(self)
        data["status"], data["tokens"] = self.status, self.tokens
        return data


def _pending(status: str, frontier: str, open_calls: int, model_errors: bool = False) -> tuple[bool, str]:
    if frontier == "done" and status != "interrupted":
        return True, ""
    if frontier == "empty":
        return False, "no request yet"
    waiting = f"{open_calls} tool call{'s' if open_calls != 1 else ''}" if frontier == "tools" else "model reply"
    if frontier == "done":
        waiting = ""
    if status == "interrupted":
        return False, "interrupted" + (f" ({waiting} pending)" if waiting else "")
    if status == "error" or model_errors:
        return False, f"{waiting} (last model call failed)"
    return False, waiting


def _from_state(summary: Summary, state: fold.State) -> Summary:
    summary.session_id, summary.title, summary.created = state.session_id, state.title, state.created
    summary.last_ts, summary.turns, summary.events, summary.usage = state.last_ts, state.turns, state.seq, dict(state.usage)
    summary.complete, summary.pending = _pending(state.status, state.frontier, len(state.open_calls), state.status == "error")
    return summary


def _snapshot_usable(handle: Any, header: dict[str, Any], header_body: bytes, size: int, user: trust.Signer | None) -> bool:
    """Whether the snapshot's last line is really in this log and it was written by this user for this log (small reads)."""
    def read(start: int, end: int) -> bytes:
        handle.seek(start)
        return handle.read(end - start)

    summary = header.get("summary")
    if header.get("v") != snapshot.VERSION or not isinstance(summary, dict) or "session_id" not in summary:
        return False
    return not (snapshot.disagreement(header, read, size) or snapshot.unauthentic(header, header_body, user, read))


_NO_USER = object()


def summarize(path: Path, *, user: trust.Signer | None | object = _NO_USER) -> Summary:
    """Summarise one session: snapshot header plus the events after it, or a full read without one; and who wrote it.

    A damaged or newer-schema log gives a summary that says so instead of raising.
    """
    if user is _NO_USER:
        user = trust.user_signer_or_none()
    assert user is None or isinstance(user, trust.Signer)
    summary = _summarize(path, user)
    if not summary.session_id:
        return summary  # not a readable log: nobody's
    try:
        summary.trust = trust_of(path, user=user).verdict
    except OSError:
        pass
    return summary


def trust_of(path: Path, *, user: trust.Signer | None | object = _NO_USER) -> trust.Report:
    """Who signed the lines of a log, for listings (checked against this user's key; no secret is created).

    A snapshot header signed by this user records who signed the lines before it, so
    only the lines after it are checked; ``verify`` checks every line.
    """
    if user is _NO_USER:
        user = trust.user_signer_or_none()
    assert user is None or isinstance(user, trust.Signer)
    found = snapshot.read_header_bytes(path)
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if found is not None and _snapshot_usable(handle, *found, size, user) and _prefix_matches(handle, found[0]):
            header = found[0]
            chain = trust.Chain(int(header["seq"]), int(header["offset"]), header["line_sig"].encode("ascii"))
            handle.seek(chain.offset)

            def prefix_sha256(end: int) -> str:
                handle.seek(0)
                return hashlib.sha256(handle.read(end)).hexdigest()

            return trust.check_log(
                handle.read(), user=user, session_id=header["summary"]["session_id"], start=chain,
                before=trust.Report.from_dict(header["trust"]), prefix_sha256=prefix_sha256,
            )
        handle.seek(0)
        return trust.check_log(handle.read(), user=user)


def _prefix_matches(handle: Any, header: dict[str, Any]) -> bool:
    """Whether the log before the snapshot is the one its trust record was made from."""
    handle.seek(0)
    return hashlib.sha256(handle.read(int(header["offset"]))).hexdigest() == header.get("prefix_sha256")


def _summarize(path: Path, user: trust.Signer | None) -> Summary:
    summary = Summary(session_name(path), str(path), notebook_of(path))
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            found = snapshot.read_header_bytes(path)
            header = found[0] if found is not None else None
            if found is not None and header is not None and _snapshot_usable(handle, *found, size, user):
                offset = int(header["offset"])
                handle.seek(offset)
                tail = handle.read()
                tail_events = list(_checked(iter_events(tail, path=str(path)), path))
                head = header["summary"]
                if not tail_events:
                    summary.session_id, summary.title = head["session_id"], head.get("title", "")
                    summary.created, summary.last_ts = head.get("created", 0.0), head.get("last_ts", 0.0)
                    summary.turns, summary.events = head.get("turns", 0), int(header["seq"])
                    summary.usage = dict(head.get("usage") or {})
                    summary.complete, summary.pending = _pending(head.get("status", ""), head.get("frontier", ""), head.get("open_calls", 0))
                    summary.source = "snapshot"
                    return summary
                loaded, _why = snapshot.load(path)
                if loaded is not None:
                    try:
                        if tail_events[0]["seq"] == loaded.seq + 1:  # a summary needs only the state line, not the messages
                            summary.source = "snapshot"
                            return _from_state(summary, fold.fold(tail_events, loaded.state()))
                    except (OSError, ValueError, TypeError, KeyError):
                        pass
            handle.seek(0)
            data = handle.read()
        return _from_state(summary, fold.fold(_checked(scan(data, path=str(path)).events, path)))  # scan: the not-a-log rule too
    except LogCorruptError as exc:
        summary.pending = f"damaged log (line {exc.line}, byte {exc.offset}): run nbagent verify"
    except LogVersionError:
        summary.pending = "written by a newer nbagent (upgrade to read it)"
    except NotALogError as exc:
        summary.pending = f"not an nbagent log ({exc.reason})"
    except OSError as exc:
        summary.pending = f"unreadable ({exc.strerror or exc})"
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        summary.pending = f"damaged log ({type(exc).__name__}): run nbagent verify"
    return summary


def list_summaries(path: str | os.PathLike[str]) -> list[Summary]:
    """Summaries of every session under ``path``, oldest activity first."""
    user = trust.user_signer_or_none()
    summaries = [summarize(p, user=user) for p in find_logs(path)]
    return sorted(summaries, key=lambda s: (s.last_ts, s.name))


# Resolving a SESSION argument --------------------------------------------------------------------
def resolve(spec: str, *, root: str | os.PathLike[str] = ".", write: bool = False) -> Path:
    """Turn a SESSION argument into the path of a valid log (``write``: one with at least its header line).

    The rule: an existing ``.jsonl`` file is that log; an existing notebook means
    its most recently active session; anything else is a session name (the log
    file name without ``.jsonl``), a unique prefix of one, or a unique prefix (at
    least 4 characters) of a session id, searched for in every log folder under ``root``.
    Whatever it names must begin like an nbagent log (:func:`nbagent.log.check_start`):
    nothing else is read further or written.
    """
    path = _resolve(spec, root)
    check_start(path)
    if write and path.stat().st_size == 0:
        raise NotALogError(str(path), "it is empty")
    return path


def _resolve(spec: str, root: str | os.PathLike[str]) -> Path:
    target = Path(spec).expanduser()
    if target.is_dir():
        raise HistoryError(f"{spec} is a folder; give a session log (.jsonl), a notebook, or a session name.")
    if target.exists():
        if target.name.endswith(store.LOG_SUFFIX):
            if not os.access(target, os.R_OK):
                raise HistoryError(f"{spec}: permission denied (cannot read this log).")
            return target
        if target.suffix == NOTEBOOK_SUFFIX:
            summaries = list_summaries(target)
            if not summaries:
                raise HistoryError(f"{spec} has no agent sessions (looked in {store.log_dir_for(target)}).")
            return Path(summaries[-1].path)
        raise HistoryError(f"{spec} is neither a notebook (.ipynb) nor a session log (.jsonl).")
    if "/" in spec or spec.endswith((store.LOG_SUFFIX, NOTEBOOK_SUFFIX)):
        raise HistoryError(f"{spec}: no such file.")
    logs = find_logs(root)
    exact = [p for p in logs if session_name(p) == spec]
    if len(exact) == 1:
        return exact[0]
    candidates = exact or [p for p in logs if session_name(p).startswith(spec)]
    if not candidates and len(spec) >= 4:
        candidates = [p for p in logs if summarize(p).session_id.startswith(spec)]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise HistoryError(
            f"unknown session {spec!r}: no session of that name or id under {Path(root).absolute()} "
            "(run `nbagent sessions` to list them, or give the log's path)."
        )
    names = ", ".join(str(p) for p in candidates[:5]) + (" ..." if len(candidates) > 5 else "")
    raise HistoryError(f"session {spec!r} is ambiguous: it matches {names}; give the log's path.")


def read_log(path: Path) -> Scan:
    """Read and check a whole log without locking it: its events, and any torn tail (raises on damage before it)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise HistoryError(f"cannot read {path}: {exc.strerror or exc}.") from None
    return scan(data, path=str(path))


def read_all(path: Path) -> list[ev.Event]:
    """Every event of a log (raises LogCorruptError / LogVersionError on damage), without locking it."""
    return read_log(path).events


def _checked(events: Iterable[ev.Event], path: Path) -> Iterator[ev.Event]:
    for event in events:
        check_version(event, path)
        yield event


def check_version(event: ev.Event, path: Path) -> None:
    """Raise LogVersionError for an event from a newer log schema."""
    version = event.get("v")
    if not isinstance(version, int) or version > ev.SCHEMA_VERSION:
        raise LogVersionError(
            f"{path} line {event.get('seq')} uses log schema v{version}, but this nbagent reads up to "
            f"v{ev.SCHEMA_VERSION}. Upgrade nbagent (pip install -U nbagent) to read it."
        )


# Searching ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Match:
    """One place where a search text occurs."""

    name: str
    path: str
    seq: int
    where: str  # request | reply | tool call | tool result
    snippet: str


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            parts.append(f"{block.get('name')}({json.dumps(block.get('input'), ensure_ascii=False)})")
        elif block.get("type") == "tool_result":
            parts.append(_text_of(block.get("content")))
        elif block.get("type") == "image":
            parts.append("[image]")
    return "\n".join(parts)


def searchable(event: ev.Event) -> Iterator[tuple[str, str]]:
    """The (where, text) pairs of an event that a search looks at."""
    kind = event["type"]
    if kind == ev.USER_MSG:
        yield "request", _text_of(event.get("content"))
    elif kind == ev.ASSISTANT_MSG:
        for block in event.get("content") or []:
            if block.get("type") == "text":
                yield "reply", str(block.get("text", ""))
            elif block.get("type") == "tool_use":
                yield "tool call", f"{block.get('name')} {json.dumps(block.get('input'), ensure_ascii=False)}"
    elif kind == ev.TOOL_RESULT:
        yield "tool result", _text_of(event.get("content"))


def _snippet(text: str, at: int, length: int, width: int = 100) -> str:
    start = max(0, at - (width - length) // 2)
    piece = " ".join(text[start : start + width].split())
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")


def grep(paths: Iterable[Path], needle: str) -> Iterator[Match]:
    """Case-insensitive search of requests, replies and tool input/output across sessions (damaged logs are skipped)."""
    wanted = needle.casefold()
    for path in paths:
        try:
            data = path.read_bytes()
            for event in _checked(iter_events(data, path=str(path)), path):
                for where, text in searchable(event):
                    at = text.casefold().find(wanted)
                    if at >= 0:
                        yield Match(session_name(path), str(path), event["seq"], where, _snippet(text, at, len(needle)))
        except (OSError, LogCorruptError, LogVersionError):
            continue


# Printing ------------------------------------------------------------------------------------------
def when(ts: float) -> str:
    """A timestamp as local date and time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def clip(text: str, limit: int) -> str:
    """At most ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit} more characters]"


def shorten(text: str, limit: int) -> str:
    """At most ``limit`` characters on one line, ending in an ellipsis when cut."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines() or [""])


def _content_preview(content: Any, limit: int) -> str:
    text = _text_of(content)
    return clip(text, limit)


class Printer:
    """Writes events to a terminal as a readable transcript; streamed text is written as it arrives.

    Call it with each event in order (it is a session subscriber).  ``deltas``
    says whether streamed text is shown live; when it was, the finished
    assistant message does not repeat it.
    """

    def __init__(self, out: TextIO, *, result_limit: int = 600, deltas: bool = True, stamps: bool = True) -> None:
        self.out = out
        self.result_limit = result_limit
        self.deltas = deltas
        self.stamps = stamps
        self._streamed = False  # text deltas were printed since the last model_call
        self._mid_line = False
        self._last_ts = 0.0
        self._names: dict[str, str] = {}

    def _line(self, text: str, ts: float | None = None) -> None:
        self._end_stream_line()
        stamp = ""
        if self.stamps and ts:
            gap = f" +{ts - self._last_ts:.1f}s" if self._last_ts and ts - self._last_ts >= 1 else ""
            stamp = f"[{time.strftime('%H:%M:%S', time.localtime(ts))}{gap}] "
            self._last_ts = ts
        self.out.write(stamp + text + "\n")
        self.out.flush()

    def _end_stream_line(self) -> None:
        if self._mid_line:
            self.out.write("\n")
            self._mid_line = False

    def __call__(self, event: ev.Event) -> None:
        kind, ts = event["type"], event.get("ts")
        if kind == ev.SESSION_START:
            self._line(f"session {event.get('session_id', '')[:12]} started", ts)
        elif kind == ev.USER_MSG:
            self._line("request:", ts)
            self.out.write(_indent(_text_of(event.get("content"))) + "\n")
        elif kind == ev.MODEL_CALL:
            self._streamed = False
            attempt = event.get("attempt", 1)
            self._line(f"calling {event.get('model', 'the model')}" + (f" (attempt {attempt})" if attempt != 1 else ""), ts)
        elif kind == ev.DELTA:
            if self.deltas and event.get("text"):
                if not self._mid_line:
                    self.out.write("  assistant> ")
                self.out.write(event["text"])
                self.out.flush()
                self._streamed = self._mid_line = True
        elif kind == ev.ASSISTANT_MSG:
            self._assistant(event, ts)
        elif kind == ev.MODEL_ERROR:
            self._line(f"model error: {event.get('message', '')}" + (" (will retry)" if event.get("retryable") else ""), ts)
        elif kind == ev.APPROVAL:
            name = self._names.get(event.get("tool_use_id", ""), "tool")
            if event.get("decision") == "pending":
                self._line(f"approval asked for {name}: {event.get('question', '')}", ts)
            else:
                note = f" ({event['note']})" if event.get("note") else ""
                self._line(f"approval {event.get('decision')} by {event.get('by', '?')} for {name}{note}", ts)
        elif kind == ev.TOOL_STARTED:
            self._names[event.get("tool_use_id", "")] = str(event.get("name"))
            key = " [idempotency key]" if event.get("idempotency_key") else ""
            attempt = event.get("attempt", 1)
            again = f" (attempt {attempt}: an earlier attempt left no result, e.g. the process was killed)" if attempt != 1 else ""
            self._line(f"running {event.get('name')} ({event.get('effect')}){key}{again}", ts)
        elif kind == ev.TOOL_RESULT:
            name = self._names.get(event.get("tool_use_id", ""), "tool")
            label = "error from" if event.get("is_error") else "result of"
            self._line(f"{label} {name}:", ts)
            self.out.write(_indent(_content_preview(event.get("content"), self.result_limit)) + "\n")
        elif kind == ev.INTERRUPTED:
            pending = event.get("open_calls") or []
            extra = f", {len(pending)} tool call(s) open" if pending else ""
            self._line(f"interrupted (during {event.get('during', '?')}{extra})", ts)
        elif kind == ev.NOTE:
            body = {k: v for k, v in event.items() if k not in ("v", "seq", "ts", "type", "crc")}
            self._line(f"note: {clip(json.dumps(body, ensure_ascii=False), 200)}", ts)
        else:
            self._line(f"{kind} (event {event['seq']})", ts)
        self.out.flush()

    def _assistant(self, event: ev.Event, ts: float | None) -> None:
        streamed = self._streamed and self.deltas
        self._end_stream_line()
        usage = event.get("usage") or {}
        tokens = f"{usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out tokens"
        self._line(f"assistant ({event.get('stop_reason') or 'no stop reason'}; {tokens})", ts)
        for block in event.get("content") or []:
            if block.get("type") == "text" and not streamed:
                self.out.write(_indent(str(block.get("text", ""))) + "\n")
            elif block.get("type") == "tool_use":
                self._names[block.get("id", "")] = str(block.get("name"))
                arguments = clip(json.dumps(block.get("input"), ensure_ascii=False), 400)
                self.out.write(f"    -> {block.get('name')}({arguments})\n")
        self._streamed = False

    def finish(self) -> None:
        """End a half-written streamed line."""
        self._end_stream_line()
        self.out.flush()


def transcript(events: Iterable[ev.Event], out: TextIO, *, result_limit: int = 600) -> None:
    """Write a finished session's transcript (streamed text shown once, from the final messages)."""
    printer = Printer(out, result_limit=result_limit, deltas=False)
    for event in events:
        if event["type"] != ev.DELTA:
            printer(event)
    printer.finish()


# Verifying -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Problem:
    """One thing wrong with a log or its snapshot, and exactly where."""

    file: str
    line: int | None
    offset: int | None
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f", line {self.line}"
        if self.offset is not None:
            where += f" (byte offset {self.offset})"
        return f"{where}: {self.message}"


@dataclass
class Report:
    """What :func:`verify` found."""

    path: str
    events: int = 0
    size: int = 0
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    trust: str = ""  # who wrote the log's lines, as a sentence

    @property
    def ok(self) -> bool:
        """No problem found."""
        return not self.problems


def _later_line_is_valid(data: bytes, pos: int) -> bool:
    while (nl := data.find(b"\n", pos)) >= 0:
        try:
            ev.decode(data[pos:nl])
            return True
        except ev.BadLine:
            pos = nl + 1
    return False


def _check_event_shape(event: ev.Event) -> str:
    kind = event.get("type")
    if kind not in ev.EVENT_TYPES:
        return f"unknown event type {kind!r}"
    if not isinstance(event.get("ts"), (int, float)):
        return "event has no timestamp"
    return ""


def verify(path: str | os.PathLike[str]) -> Report:
    """Check a log and its snapshot without changing either: checksums, sequence, schema, torn tail, snapshot agreement."""
    log_path = Path(path)
    report = Report(str(log_path))
    try:
        with open(log_path, "rb") as handle:  # read-only: verify never repairs
            data = handle.read()
    except FileNotFoundError:
        raise HistoryError(f"{log_path}: no such file.") from None
    except OSError as exc:
        raise HistoryError(f"cannot read {log_path}: {exc.strerror or exc}.") from None
    report.size = len(data)
    problems, name = report.problems, str(log_path)
    good: list[ev.Event] = []
    line_starts: dict[int, tuple[int, str]] = {}  # seq -> (line start, crc)
    state = fold.State()
    fold_ok, damaged = True, False
    pos, line_no, expected = 0, 1, 1
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if (nl if nl >= 0 else len(data)) - pos > ev.MAX_LINE:
            problems.append(Problem(name, line_no, pos, f"the line is longer than the {ev.MAX_LINE >> 20} MiB limit; "
                                    "nbagent refuses to read it"))
            damaged = True
            break
        if nl < 0:
            problems.append(Problem(name, line_no, pos, f"torn tail: the last {len(data) - pos} bytes have no newline "
                                    "(a write was cut short); opening the session will cut them off and keep them in a .torn file"))
            break
        try:
            event = ev.decode(data[pos:nl])
        except ev.BadLine as bad:
            if _later_line_is_valid(data, nl + 1):
                problems.append(Problem(name, line_no, pos, f"damaged line: {bad}"))
                damaged = True
            else:
                problems.append(Problem(name, line_no, pos, f"torn tail: {bad} (nothing valid follows; opening the "
                                        "session will cut it off and keep it in a .torn file)"))
            pos, line_no = nl + 1, line_no + 1
            expected += 1
            continue
        version = event.get("v")
        if not isinstance(version, int) or version > ev.SCHEMA_VERSION:
            problems.append(Problem(name, line_no, pos, f"schema version v{version} is newer than this nbagent reads "
                                    f"(v{ev.SCHEMA_VERSION}); upgrade nbagent to check this log"))
            damaged = True
            break
        if event["seq"] != expected:
            problems.append(Problem(name, line_no, pos, f"sequence break: expected seq {expected}, found seq {event['seq']}"))
            damaged = True
        shape = _check_event_shape(event)
        if shape:
            problems.append(Problem(name, line_no, pos, shape))
        elif line_no == 1 and event["type"] != ev.SESSION_START:
            problems.append(Problem(name, line_no, pos, f"first event is {event['type']!r}, not 'session_start'"))
        if fold_ok:
            try:
                fold.apply(state, event)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                problems.append(Problem(name, line_no, pos, f"event does not fit schema v{ev.SCHEMA_VERSION}: {type(exc).__name__} {exc}"))
                fold_ok = False
        good.append(event)
        line_starts[event["seq"]] = (pos, event["crc"])
        expected = event["seq"] + 1
        pos, line_no = nl + 1, line_no + 1
    report.events = len(good)
    report.trust = trust.check_log(data, user=trust.user_signer_or_none()).describe()
    for side in sorted(log_path.parent.glob(log_path.name + ".torn-*")):
        report.notes.append(f"{side.name}: a torn tail cut off by an earlier repair is kept here")
    for side in sorted(log_path.parent.glob(log_path.name + ".damaged-*")):
        report.notes.append(f"{side.name}: a copy of this log kept when damage was found on opening")
    _verify_snapshot(log_path, data, good, line_starts, report, fold_ok and not damaged)
    return report


def _verify_snapshot(log_path: Path, data: bytes, good: list[ev.Event], line_starts: dict[int, tuple[int, str]],
                     report: Report, can_fold: bool) -> None:
    target = snapshot.path_for(log_path)
    if not target.exists():
        report.notes.append("no snapshot (opening replays the whole log)")
        return
    name = str(target)
    loaded, why = snapshot.load(log_path)
    if loaded is None:
        report.problems.append(Problem(name, 1, 0, f"snapshot header unusable: {why} (opening ignores it and replays the log)"))
        return
    header = loaded.header
    for line, read in ((2, loaded.state_line), (3, loaded.messages_line)):
        try:
            read()
        except (OSError, ValueError) as exc:
            report.problems.append(Problem(name, line, None, f"{exc} (opening ignores it and replays the log)"))
            return
    seq, offset = loaded.seq, loaded.offset
    where = line_starts.get(seq)
    if where is None:
        report.problems.append(Problem(name, 1, 0, f"snapshot is of event {seq}, which is not a valid event of the log"))
        return
    start, crc = where
    line_end = data.find(b"\n", start) + 1
    if start != header["line_start"] or line_end != offset or crc != header["line_crc"]:
        report.problems.append(Problem(name, 1, 0, f"snapshot says event {seq} is at bytes {header['line_start']}-{offset} "
                                       f"with crc {header['line_crc']}, but the log has it at {start}-{line_end} with crc {crc}"))
        return
    if not can_fold:
        report.notes.append("snapshot state not compared: the log itself has problems")
        return
    try:
        saved = loaded.state().to_dict()
    except (ValueError, TypeError, KeyError) as exc:
        report.problems.append(Problem(name, None, None, f"snapshot does not hold a state ({exc})"))
        return
    expected_state = fold.fold(e for e in good if e["seq"] <= seq)
    expected = json.loads(json.dumps(expected_state.to_dict()))
    if saved != expected:
        differing = sorted(k for k in set(saved) | set(expected) if saved.get(k) != expected.get(k))
        report.problems.append(Problem(name, 2, None, f"snapshot state differs from a full fold of events 1-{seq} in: {', '.join(differing)}"))
        return
    head = json.loads(json.dumps(snapshot.summary(expected_state)))
    if header.get("summary") != head:
        report.problems.append(Problem(name, 1, 0, "snapshot header summary differs from its state"))
        return
    after = len(good) - seq
    report.notes.append(f"snapshot agrees with the log (events 1-{seq}" + (f"; {after} events after it" if after else "") + ")")


def compact(path: Path) -> tuple[Path, int]:
    """Write a fresh snapshot of a log (opening it as the writer: a torn tail is repaired); returns it and the seq."""
    from .session import Session

    with Session.open(path, snapshot_every=0) as session:
        written = session.snapshot()
        return written, session.seq
