"""The notebook front end: the ``Agent`` settings (traitlets) and the ``%agent``, ``%%agent``, ``%agent_sessions``, ``%agent_replay`` magics."""

from __future__ import annotations

import datetime
import re
import sys
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Bool, Enum, Int, List, Unicode
from traitlets.config import Configurable

from .. import approval as approvals
from .. import events as ev
from .. import history, store, toolkit, trust
from ..approval import APPROVAL_MODES
from ..errors import Interrupted, LogCorruptError, LogError, LogLockedError, LogVersionError, ModelError, NbagentError
from ..log import make_folder
from ..loop import Loop
from ..model import DEFAULT_MODEL, AnthropicModel, DemoModel, Model
from ..session import Session
from ..tools import Tool
from . import kernel as nbkernel
from .python_tool import python_tool, run_code

DEFAULT_SYSTEM_PROMPT = (
    "You are an assistant working inside the user's Jupyter notebook. Use the `python` tool to run code in the "
    "notebook's kernel (its variables are shared with the user's cells) and the file tools to look at files. "
    "Be concise; show results rather than describing them."
)
RESTART_NOTE = (
    "[nbagent note: the Jupyter kernel was restarted since the previous turn, so variables, imports and "
    "functions defined earlier in the kernel (by you or by the user) are gone unless re-created.{restored}]"
)
BUILTIN_TOOLS = ("python", "read_file", "write_file", "edit_file", "list_files", "shell")
_VALUE_OPTIONS = ("--session", "--model", "--approval", "--resume")


class Agent(Configurable):
    """Settings of the notebook agent: ``%config Agent.<name> = ...`` or ``c.Agent.<name> = ...`` in a config file."""

    model = Unicode(DEFAULT_MODEL, help="Claude model name to use (overridden per cell by --model).").tag(config=True)
    max_tokens = Int(8192, help="Maximum tokens in one model reply.").tag(config=True)
    system_prompt = Unicode(DEFAULT_SYSTEM_PROMPT, help="System prompt sent with every model call.").tag(config=True)
    approval = Enum(
        APPROVAL_MODES,
        "ask",
        help="Who approves irreversible tool calls and repeats of interrupted calls: 'ask' (buttons in the panel; "
        "declined where nobody can answer, e.g. nbclient/papermill), 'auto' (always yes), 'deny' (always no).",
    ).tag(config=True)
    fsync = Enum(
        ("always", "turn", "never"),
        "turn",
        help="When the log is fsynced: every event, at each durable step of a turn (default), or never.",
    ).tag(config=True)
    log_dir = Unicode(
        "",
        help="Folder for session logs. Empty (default): '.nbagent/<notebook name>/' beside the notebook; "
        "otherwise '<log_dir>/<notebook name>/'.",
    ).tag(config=True)
    demo = Bool(False, help="Use the offline demo model (not Claude) instead of the Anthropic API; for trying nbagent without a key.").tag(
        config=True
    )
    tools = List(
        Unicode(),
        list(BUILTIN_TOOLS),
        help=f"Built-in tools offered to the model, a subset of {', '.join(BUILTIN_TOOLS)}.",
    ).tag(config=True)
    user_tools = Bool(True, help="Also offer the @nbagent.tool functions defined in the notebook's namespace.").tag(config=True)
    workspace = Unicode(
        "",
        help="Folder the file tools (read_file, write_file, edit_file, list_files) work in. Empty (default): the "
        "notebook's folder. A path outside it asks first under 'ask', runs under 'auto', is refused under 'deny'; "
        "the log folder .nbagent/ is never read or written by them. The python and shell tools are not confined.",
    ).tag(config=True)
    restore_kernel_state = Bool(
        False,
        help="After a kernel restart, re-run the agent's recorded `python` tool code (never other tools) "
        "to restore the variables it made; per cell with --restore.",
    ).tag(config=True)
    retries = Int(2, help="Extra attempts for a model call that fails with a retryable error.").tag(config=True)


def split_request(line: str) -> tuple[str, str]:
    """Split ``--options`` at the start of a magic line from the free-text request after them.

    The request is kept verbatim (quotes, apostrophes and all); ``--`` ends the options.
    """
    position = 0
    expect_value = False
    for match in re.finditer(r"\S+", line):
        token = match.group()
        if expect_value:
            expect_value = False
        elif token == "--":
            return line[: match.start()], line[match.end() :].strip()
        elif token.startswith("-") and len(token) > 1:
            expect_value = token in _VALUE_OPTIONS
        else:
            return line[: match.start()], line[match.start() :].strip()
        position = match.end()
    return line[:position], ""


def _age(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "-"


@magics_class
class AgentMagics(Magics):
    """``%agent``, ``%%agent``, ``%agent_sessions`` and ``%agent_replay``."""

    def __init__(self, shell: Any, settings: Agent) -> None:
        super().__init__(shell)
        self.settings = settings
        self.tracker = nbkernel.CellTracker(shell)
        self.sessions: dict[Path, Session] = {}
        self.current: Path | None = None
        self.current_folder: Path | None = None
        self.indexes: dict[Path, nbkernel.TurnIndex] = {}
        self.matchers: dict[Path, nbkernel.Matcher] = {}
        self.restored: dict[Path, set[int]] = {}
        self.replay: Any = None  # the last replay shown (its widgets stay live)

    # Magics ---------------------------------------------------------------------------------------
    @magic_arguments()
    @argument("--new", action="store_true", help="Start a new session for this request.")
    @argument("--session", metavar="NAME", help="Use (or create) the session called NAME in this notebook's log folder.")
    @argument(
        "--resume",
        metavar="SESSION",
        help="Continue a past session (a name from %%agent_sessions, or a log path), re-rendering its history first.",
    )
    @argument("--model", metavar="NAME", help="Claude model for this request (default: Agent.model).")
    @argument("--approval", choices=APPROVAL_MODES, help="Approval for this request (default: Agent.approval).")
    @argument(
        "--restore", action="store_true", help="After a kernel restart, re-run the agent's recorded python code to restore its variables."
    )
    @argument("request", nargs="*", help="What you want the agent to do. A request may end with '?'.")
    @line_cell_magic
    def agent(self, line: str, cell: str | None = None) -> None:
        """Ask the Claude agent to do something; the cell runs until the agent's turn ends.

        ``%agent <request>`` or a ``%%agent`` cell whose body is the request. The
        session is a log beside the notebook (see ``%agent_sessions``), so it
        survives kernel restarts: re-running this notebook's ``%agent`` cells
        after a restart shows the recorded turns again without calling the model.
        """
        options, request = split_request(line)
        args = parse_argstring(self.agent, options)
        if cell is not None:
            request = (request + "\n" + cell).strip()
        if not request and not (args.resume or args.restore):
            raise UsageError("The request is empty: write what you want the agent to do, e.g. `%agent summarize data.csv`.")
        if args.new and (args.session or args.resume):
            raise UsageError("--new starts a fresh session; it cannot be combined with --session or --resume.")
        session = self._session(args)
        try:
            self._serve(session, args, request)
        except Interrupted:
            pass  # the panel shows the interruption; the next %agent continues the session
        except ModelError as err:
            raise UsageError(f"{err} The session is saved; run %agent again to retry.") from None
        except (LogCorruptError, LogVersionError) as err:
            raise UsageError(f"{err} Start a new session with `%agent --new ...`; nothing was deleted.") from None
        except LogError as err:
            raise UsageError(str(err)) from None

    @line_magic
    def agent_sessions(self, line: str = "") -> None:
        """List this notebook's agent sessions: name, turns, last activity, status, who wrote it, title."""
        folder = self.folder()
        found = store.list_sessions(folder)
        if not found:
            print(f"No agent sessions yet in {folder}.")
            return
        user = trust.user_signer_or_none()
        rows = [("", "session", "turns", "last activity", "status", "written by", "title")]
        for stored in found:
            # The CLI's listing: snapshot summary plus the events after it, not a fold of the whole log.
            summary = history.summarize(stored.path, user=user)
            readable = bool(summary.session_id)
            rows.append(
                (
                    "*" if stored.path == self.current else "",
                    stored.name,
                    str(summary.turns) if readable else "?",
                    _age(summary.last_ts or stored.modified),
                    summary.status if readable else f"unreadable: {summary.pending}",
                    summary.trust or "?",
                    summary.title,
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(6)]
        print(f"Sessions in {folder} (* = current):")
        for row in rows:
            print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[6])

    @line_magic
    def agent_replay(self, line: str = "") -> None:
        """Replay a past session, read-only: play/pause, speed, a slider over its events, previous/next turn, search.

        ``%agent_replay`` shows this notebook's most recent session; ``%agent_replay SESSION``
        takes a name from ``%agent_sessions`` or a path to a ``.jsonl`` log. Nothing is
        executed and no model is called; a log another kernel is writing can be replayed too.
        """
        from .replay import Replay

        name = line.strip().strip("'\"")
        folder = self.folder()
        if not name:
            found = store.list_sessions(folder)
            if not found:
                raise UsageError(f"No agent sessions in {folder} to replay. Give a log path: `%agent_replay path/to/session.jsonl`.")
            path = found[-1].path
        else:
            try:
                path = self._find(folder, name, write=False)
            except NbagentError as err:
                raise UsageError(f"{err} See %agent_sessions, or give the path of a .jsonl log.") from None
        try:
            replay = Replay.from_path(path)
        except NbagentError as err:  # a damaged or newer-schema log, or one with no events yet
            raise UsageError(str(err)) from None
        except OSError as err:
            raise UsageError(f"Cannot read the session log {path}: {err.strerror or err}.") from None
        if self.replay is not None:
            self.replay.pause()
        self.replay = replay
        replay.show()

    # Where the logs are ---------------------------------------------------------------------------
    def folder(self) -> Path:
        """The folder of this notebook's session logs (refused if it, or ``.nbagent``, is a symbolic link)."""
        notebook = nbkernel.notebook_path(self.shell)
        try:
            return store.check_folder(store.log_dir_for(notebook, base=self.settings.log_dir or None))
        except NbagentError as err:
            raise UsageError(str(err)) from None

    def _session(self, args: Any) -> Session:
        folder = self.folder()
        if self.current is not None and self.current_folder != folder:
            self.current = None  # Agent.log_dir (or the notebook) changed: its own sessions apply
        try:
            if args.resume:
                path = self._find(folder, args.resume, write=True)
            elif args.session:
                path = store.log_path(folder, args.session)
            elif args.new or (self.current is None and not store.list_sessions(folder)):
                path = store.log_path(folder, store.new_name())
            elif self.current is not None:
                path = self.current
            else:
                path = store.list_sessions(folder)[-1].path
        except NbagentError as err:
            raise UsageError(str(err)) from None
        session = self.sessions.get(path)
        if session is None or session.closed:
            session = self._open(path)
            self.sessions[path] = session
        self.current, self.current_folder = path, folder
        return session

    def _find(self, folder: Path, name: str, *, write: bool) -> Path:
        path = store.resolve(name, folder, write=write)
        if not path.is_file():
            known = ", ".join(s.name for s in store.list_sessions(folder)) or "none"
            raise UsageError(f"No session named {name!r} in {folder} (sessions: {known}). See %agent_sessions.")
        return path

    def _open(self, path: Path) -> Session:
        try:
            make_folder(path.parent)  # .nbagent too is owner-only (mkdir(parents=True) gives parents the umask's mode)
        except OSError as err:
            raise UsageError(
                f"Cannot create the log folder {path.parent}: {err.strerror}. Choose a writable folder with "
                "`%config Agent.log_dir = '/some/writable/folder'`."
            ) from None
        try:
            session = Session.open(path, fsync=self.settings.fsync, meta={"notebook": str(nbkernel.notebook_path(self.shell) or "")})
        except LogLockedError as err:
            raise UsageError(f"{err} (`%agent --new ...` starts a separate session.)") from None
        except (LogCorruptError, LogVersionError) as err:
            raise UsageError(f"{err} Start a new session with `%agent --new ...`; nothing was deleted.") from None
        except PermissionError as err:
            raise UsageError(
                f"Cannot write the session log {path}: {err.strerror}. Choose a writable folder with "
                "`%config Agent.log_dir = '/some/writable/folder'`."
            ) from None
        except NbagentError as err:
            raise UsageError(str(err)) from None
        if not session.trusted:
            print(untrusted_warning(session), file=sys.stdout, flush=True)
        return session

    # One cell ---------------------------------------------------------------------------------------
    def _serve(self, session: Session, args: Any, request: str) -> None:
        path = session.path
        index = self.indexes.setdefault(path, nbkernel.TurnIndex())
        matcher = self.matchers.setdefault(path, nbkernel.Matcher())
        turns = index.update(session)
        restore = args.restore or self.settings.restore_kernel_state
        foreign = not session.trusted  # continuing it would run or send another person's record: only after `nbagent trust`
        if foreign and request and (args.resume or args.session):
            raise UsageError(
                f"{untrusted_warning(session)} To continue it, trust it first: `nbagent trust {path}` in a "
                "terminal shows what it would run and asks you. Or start your own: `%agent --new ...`."
            )
        view = self._view(request or session.state.title or path.stem)
        try:
            if args.resume:
                for event in session.events():
                    view(event)
                matcher.claim_all(turns)
                if restore:
                    self._restore(session, turns, view)
                if session.state.frontier in ("model", "tools") and not request:
                    self._continue(session, args, view, foreign)
                if request:
                    self._ask(session, args, request, turns, view, restore=False)
                return
            matched = None if args.new or not request else matcher.match(turns, request, self.tracker.cell_id)
            if matched is not None:
                # A cell recorded before a restart: show what it did; no model call, no tool re-run.
                for event in session.events(since=matched.seq - 1):
                    if event["seq"] > matched.end:
                        break
                    view(event)
                if restore:
                    self._restore(session, [matched], view)
                if matched is turns[-1] and session.state.frontier in ("model", "tools"):
                    self._continue(session, args, view, foreign)  # an unfinished turn of the user's own continues, once
                return
            if foreign and request:
                # Not a recorded turn: a new session of this user's, so nobody else's history reaches the model.
                session = self._switch_to_new_session(session)
                turns = self.indexes.setdefault(session.path, nbkernel.TurnIndex()).update(session)
            restored = self._restore(session, turns, view) if restore else 0
            if request:
                self._ask(session, args, request, turns, view, restore=restore)
            elif not restored:
                print("nbagent: nothing to restore (no python code recorded by an earlier kernel in this session).")
        finally:
            finish = getattr(view, "finish", None)
            if finish is not None:
                finish()

    def _continue(self, session: Session, args: Any, view: Any, foreign: bool) -> None:
        """Finish an unfinished turn, unless the session is not the user's: then say how to continue it."""
        if foreign:
            print(
                f"nbagent: the recorded turns of {session.path.name} were shown, but its unfinished turn was not "
                f"continued: this session was not written by you. To continue it: `nbagent trust {session.path}` "
                "in a terminal, then run this cell again.",
                flush=True,
            )
            return
        self._run(session, None, args, view)

    def _switch_to_new_session(self, foreign: Session) -> Session:
        """Open a new session of this user's beside a foreign one, make it current, and say so."""
        path = store.log_path(foreign.path.parent, store.new_name())
        session = self.sessions[path] = self._open(path)
        self.current = path
        print(
            f"nbagent: {foreign.path.name} was not written by you, so this request starts a new session of yours, "
            f"{path.stem}; nothing of the other session is sent to the model. To continue that one instead, run "
            f"`nbagent trust {foreign.path}` in a terminal.",
            flush=True,
        )
        return session

    def _ask(self, session: Session, args: Any, request: str, turns: list[nbkernel.Turn], view: Any, *, restore: bool) -> None:
        content: str | list[dict[str, Any]] = request
        if nbkernel.recorded_by_another_kernel(turns):
            restored = len(self.restored.get(session.path, ()))
            detail = (
                f" The kernel state was restored by re-running the agent's earlier python code ({restored} turn(s))."
                if restore and restored
                else ""
            )
            content = [{"type": "text", "text": RESTART_NOTE.format(restored=detail)}, {"type": "text", "text": request}]
        meta = {"request": request, "kernel": nbkernel.KERNEL_ID}
        if self.tracker.cell_id:
            meta["cell_id"] = self.tracker.cell_id
        self._run(session, content, args, view, meta=meta)

    def _run(self, session: Session, prompt: Any, args: Any, view: Any, *, meta: dict[str, Any] | None = None) -> None:
        loop = Loop(
            session,
            tools=self._tools(),
            model=self._model(args),
            approval=self._approval(args, view),
            system=self.settings.system_prompt,
            max_tokens=self.settings.max_tokens,
            retries=self.settings.retries,
        )
        unsubscribe = session.subscribe(view, since=session.seq)
        self.tracker.paused = True
        try:
            loop.run(prompt, meta=meta)
        finally:
            self.tracker.paused = False
            unsubscribe()

    def _restore(self, session: Session, turns: list[nbkernel.Turn], view: Any) -> int:
        """Re-run the recorded python tool code of these turns (each turn once per kernel), in order."""
        done = self.restored.setdefault(session.path, set())
        todo = [t for t in turns if t.kernel != nbkernel.KERNEL_ID and t.seq not in done]
        unsigned = _calls_not_signed_by_user(session)
        calls = failed = skipped = 0
        self.tracker.paused = True
        try:
            for turn in todo:
                done.add(turn.seq)
                for tool_use_id, code in turn.python_calls:
                    if tool_use_id in turn.failed_calls:
                        continue
                    if tool_use_id in unsigned:
                        skipped += 1  # recorded in a line this user did not write: never run unasked
                        continue
                    calls += 1
                    _, error = run_code(self.shell, code)
                    failed += error is not None
        finally:
            self.tracker.paused = False
        if skipped:
            print(
                f"nbagent: did not re-run {skipped} recorded python call(s): they come from log lines not written by you "
                "(see the warning above). Run that code yourself if you trust it."
            )
        if calls:
            session.append(ev.NOTE, kind="kernel_state_restored", python_calls=calls, failed=failed)
            message = f"nbagent: restored kernel state by re-running {calls} recorded python call(s)"
            print(message + (f"; {failed} failed." if failed else "."))
        return calls

    # Parts of a run -------------------------------------------------------------------------------
    def _view(self, title: str) -> Any:
        from .panel import Panel, TextView

        if getattr(self.shell, "kernel", None) is not None:
            panel = Panel(title)
            panel.show()
            return panel
        return TextView(stream=sys.stdout)

    def _model(self, args: Any) -> Model:
        if self.settings.demo:
            return DemoModel()
        try:
            return AnthropicModel(args.model or self.settings.model)
        except NbagentError:
            raise UsageError(
                "No Anthropic API key: set ANTHROPIC_API_KEY in the kernel's environment (e.g. `%env ANTHROPIC_API_KEY=...`), "
                "or try the offline demo model (not Claude) with `%config Agent.demo = True`."
            ) from None

    def _approval(self, args: Any, view: Any) -> Any:
        """The run's approval policy: the panel's buttons are the person who answers where there is one."""
        mode = args.approval or self.settings.approval
        ask = getattr(view, "ask", None)
        if mode == "deny" or ask is None:
            return mode
        # "auto" approves the user's own new calls; a foreign call or a repeat of unknown outcome still needs a click.
        return approvals.auto(ask) if mode == "auto" else ask

    def _tools(self) -> list[Tool]:
        wanted = set(self.settings.tools)
        unknown = wanted - set(BUILTIN_TOOLS)
        if unknown:
            raise UsageError(f"Agent.tools has unknown names {sorted(unknown)}; choose from {', '.join(BUILTIN_TOOLS)}.")
        chosen: dict[str, Tool] = {}
        if "python" in wanted:
            chosen["python"] = python_tool(self.shell)
        notebook = nbkernel.notebook_path(self.shell)
        root = Path(self.settings.workspace).expanduser() if self.settings.workspace else (notebook.parent if notebook else Path.cwd())
        protected = [Path(self.settings.log_dir).expanduser()] if self.settings.log_dir else []
        for builtin in toolkit.default_tools(root=root, protected=protected):
            if builtin.name in wanted:
                chosen[builtin.name] = builtin
        if self.settings.user_tools:
            for name, value in list(self.shell.user_ns.items()):
                if isinstance(value, Tool) and not name.startswith("_"):
                    chosen[value.name] = value  # the user's own tool wins over a built-in of the same name
        return list(chosen.values())

    def close(self) -> None:
        """Close every open session (releasing their locks)."""
        for session in self.sessions.values():
            session.close()
        self.sessions.clear()


def untrusted_warning(session: Session) -> str:
    """The line shown when a notebook opens a session log this user did not write."""
    return (
        f"nbagent: WARNING: the session log {session.path.name} was not written by you ({session.trust.describe()}); "
        "it may come from a cloned or downloaded notebook. Its recorded tool calls will not run without your "
        "approval, and its recorded python code is not re-run to restore kernel state."
    )


def _calls_not_signed_by_user(session: Session) -> set[str]:
    """Tool-use ids requested by assistant messages in lines this user did not sign."""
    report = session.trust
    if report.trusted:
        return set()
    return {
        str(block.get("id"))
        for event in session.events(since=report.trusted_upto)
        if event["type"] == ev.ASSISTANT_MSG
        for block in event.get("content") or []
        if isinstance(block, dict) and block.get("type") == "tool_use"
    }


# Requests ending in '?' ----------------------------------------------------------------------------
_QUESTION_LINE = re.compile(r"^(?P<indent>[ \t]*)%agent(?P<rest>[ \t]+\S.*?)[ \t]*$")


def keep_question_marks(lines: list[str]) -> list[str]:
    """Input transformer: ``%agent ... ?`` is a request, not a help lookup (only a bare ``%agent?`` is help).

    IPython's help transformer runs before the magic one and would turn
    ``%agent what is in data.csv?`` into ``help(data.csv)``; this runs first
    (a cleanup transformer) and writes the magic call out in full.
    """
    if lines and lines[0].lstrip().startswith("%%"):
        return lines  # a cell magic's body is its own business
    out = []
    for line in lines:
        body = line.rstrip("\r\n")
        match = _QUESTION_LINE.match(body)
        if match and body.endswith("?"):
            call = f"get_ipython().run_line_magic('agent', {match.group('rest').strip()!r})"
            line = match.group("indent") + call + line[len(body) :]
        out.append(line)
    return out


_state: dict[int, AgentMagics] = {}


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext nbagent``: register the magics, the ``Agent`` settings and the input transformer."""
    if id(ipython) in _state:
        return
    settings = Agent(parent=ipython)
    ipython.configurables.append(settings)
    magics = AgentMagics(ipython, settings)
    ipython.register_magics(magics)
    magics.tracker.register()
    ipython.input_transformers_cleanup.append(keep_question_marks)
    _state[id(ipython)] = magics


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext nbagent``: close sessions and remove what was registered."""
    magics = _state.pop(id(ipython), None)
    if magics is None:
        return
    magics.close()
    if magics.replay is not None:
        magics.replay.pause()
    magics.tracker.unregister()
    if keep_question_marks in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.remove(keep_question_marks)
    if magics.settings in ipython.configurables:
        ipython.configurables.remove(magics.settings)
    for kind, names in (("line", ("agent", "agent_sessions", "agent_replay")), ("cell", ("agent",))):
        for name in names:
            ipython.magics_manager.magics[kind].pop(name, None)


def magics_for(ipython: Any) -> AgentMagics | None:
    """The loaded ``AgentMagics`` of a shell (for tests and embedding)."""
    return _state.get(id(ipython))
