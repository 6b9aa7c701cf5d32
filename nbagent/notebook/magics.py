"""The notebook front end: the ``%agent``, ``%%agent``, ``%agent_sessions`` and ``%agent_replay`` magics, and loading the extension."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand

from ..agent.session import Session
from ..errors import Interrupted
from ..record import events as ev
from ..render.parts import Start
from ..state.budget import BudgetReached
from . import build, interpolate, mcp_servers, model_kind, outcomes, restart, restore, rewind
from . import kernel as nbkernel
from .agent_cells import AgentCells
from .budget_settings import options as budget_options
from .cell_view import View
from .foreign import untrusted_warning
from .notebook_context import NotebookContext
from .output import CellOutput
from .place import print_sessions, replay_of
from .registry import SessionRegistry
from .reopen_comm import Reopen, live_run, outputs, unseen_line
from .settings import Agent
from .syntax import OPTIONS, agent_arguments, check_agent_line, keep_question_marks, split_request
from .usage import parse_options, usage_errors


@magics_class
class AgentMagics(Magics):
    """``%agent``, ``%%agent``, ``%agent_sessions`` and ``%agent_replay``."""

    shell: InteractiveShell  # IPython types it optional; an extension is always loaded into a shell

    def __init__(self, shell: Any, settings: Agent) -> None:
        super().__init__(shell)
        self.settings = settings
        self.tracker = nbkernel.CellTracker(shell)
        self.context = NotebookContext(shell, paused=lambda: self.tracker.paused)
        self.sessions = SessionRegistry(shell, settings)
        self.replay: Any = None  # the last replay shown (its widgets stay live)
        self.cells = AgentCells(self.sessions, self.tracker)  # the turns' work as notebook cells (agent_cells.py)
        self.reopen = Reopen(self._transcript)  # finished turns written into a reopened page's cells (reopen_comm.py)
        self.cells.bridge.fills = self.reopen
        self.cells.proposals.log = self.context.cells  # an applied edit fixes its cell's error: {Err} is the next one

    # Magics ---------------------------------------------------------------------------------------
    @agent_arguments
    @line_cell_magic
    @no_var_expand  # nbagent's own fields are the only expansion (interpolate.py): IPython's would paste str(x), unbounded
    def agent(self, line: str, cell: str | None = None) -> None:
        """Ask the Claude agent to do something; the cell runs until the agent's turn ends.

        %agent REQUEST asks in one line; in a %%agent cell the body is the request
        (options go on the %%agent line). The session is a log beside the notebook
        (%agent_sessions lists them), so it survives kernel restarts: re-running
        this notebook's %agent cells after a restart shows the recorded turns
        again without calling the model. Settings: %config Agent lists them.
        More in docs/notebook.md.
        """
        options, request = split_request(line)
        args = parse_options(self.agent, options, OPTIONS)
        if cell is not None:
            request = (request + "\n" + cell).strip()
        self.cells.proposals.fixing = self.context.cells.last_error() if args.fix else None  # the error this --fix is about
        if args.fix:  # with the extension, the fix is proposed as an edit of the failing cell (docs/cells.md)
            request = interpolate.fix_request(request, propose=self.cells.bridge.present)
        check_agent_line(args, request)
        with usage_errors():
            try:
                if args.compact:
                    self._compact(args)
                elif args.drop_thinking:
                    self._drop_thinking(args)
                else:  # no notebook path (nbconvert, nbclient): the one whose logs hold the requests (headless.py)
                    unknown = self.sessions.locate("" if rewind.asked(args) or args.resume or args.session else request)
                    if rewind.asked(args):  # a fork becomes current (after a restart: the one this cell made)
                        rewind.switch(self.sessions, args, self.tracker.cell_id)
                        if not request:
                            return
                    problem = build.problem(self.settings, args)  # no key, settings that do not fit: before anything is created
                    if problem is not None and unknown:
                        problem = type(problem)(f"{problem}\n\nnbagent: {unknown}")
                    prompt = interpolate.prepare(request, interpolate.of_magics(self), fix=args.fix)
                    session = self.sessions.for_cell(args, problem or prompt.problem)
                    # after a restart: a turn a rewind left out is shown, not asked again
                    if not rewind.show_rewound(self.sessions, session, args, request, self.tracker.cell_id, self._static_view):
                        self._serve(session, args, request, problem, prompt)
            except Interrupted:
                pass  # the panel shows the interruption and the next step; running the cell again continues the session
            except (outcomes.NoKey, BudgetReached) as outcome:  # not a mistake: said calmly, with how to go on
                outcomes.say(self.shell, outcome)

    @line_magic
    @no_var_expand
    def agent_sessions(self, line: str = "") -> None:
        """List this notebook's agent sessions (its log folder, or the database's index): name, turns, last activity, status, who wrote it, title."""
        place = self.sessions.place()
        notes = [f"nbagent: {unseen_line(run)}." for run in self.reopen.unseen(self.cells.bridge.running())]
        notebook = str(nbkernel.notebook_path(self.shell) or "")
        html = getattr(self.shell, "kernel", None) is not None  # a notebook shows an HTML table; a terminal keeps the text
        print_sessions(place, self.sessions.current_in(place), notebook, self.sessions.sessions(), notes=notes, html=html)

    @line_magic
    @no_var_expand  # a path or URL may hold $ or braces
    def agent_replay(self, line: str = "") -> None:
        """Replay a past session, read-only: play/pause, speed, a slider over its events, previous/next turn, search.

        %agent_replay shows this notebook's most recent session; %agent_replay SESSION
        takes a name from %agent_sessions, a path to a .jsonl log or a database session's
        URL. Nothing is executed and no model is called; a session another kernel is writing is
        followed as it is written.
        """
        replay = replay_of(self.sessions.place(), line.strip().strip("'\""))
        if self.replay is not None:
            self.replay.pause()
            self.replay.stop_following("Not following new events: a newer replay does. Reload reads them.")
        self.replay = replay
        replay.show()

    # One cell ---------------------------------------------------------------------------------------
    def _serve(
        self,
        session: Session,
        args: Any,
        request: str,
        problem: UsageError | None = None,
        prompt: interpolate.Expansion | None = None,
        switched: str = "",
    ) -> None:
        """Do what the restart rule plans for this cell: show, restore, finish, switch session, ask.

        ``problem``: why no model call can start; raised, with no panel, if the plan needs one. ``prompt``: the
        request with its fields expanded (its problem is raised, with no panel, if the plan asks it). ``switched``:
        the line to print if the request is asked here (it left a session the other kind of model wrote: model_kind.py).
        """
        prompt = prompt or interpolate.Expansion(request, request)
        path, key = session.path, session.where
        index = self.sessions.index(session)
        turns = index.update(session)
        cell = restart.Cell(
            request,
            self.tracker.cell_id,
            new=args.new,
            resume=bool(args.resume),
            session=bool(args.session),
            restore=args.restore or self.settings.restore_kernel_state,
        )
        # A session not written by this user is never continued: that would run or send another person's record.
        plan = restart.plan(
            turns,
            cell,
            trusted=session.trusted,
            frontier=session.state.frontier,
            kernel=nbkernel.KERNEL_ID,
            claims=self.sessions.claims(key),
            positions=index.positions,
        )
        if plan.refuse:
            raise UsageError(
                f"{untrusted_warning(session)} To continue it, trust it first: `nbagent trust {key}` in a "
                "terminal shows what it would run and asks you. Or start your own: `%agent --new ...`."
            )
        live = plan.ask or plan.unfinished == "continue"  # else the cell only shows what the log holds
        if live and problem is not None:
            raise problem  # before the claims, the panel and the restore: the cell can be run again as it is
        if plan.ask and prompt.problem is not None:
            raise prompt.problem  # an unknown {name}, no such cell: nothing sent or logged
        if plan.ask and session.trusted and not switched:  # the demo model and a real one never share a session
            named = bool(args.resume or args.session or rewind.asked(args))
            other = model_kind.session_for(self.sessions, session, self.settings.demo, named=named)
            if other is not None:  # planned again there: a Run All after a restart finds the cell's recorded turn
                return self._serve(other[0], args, request, problem, prompt, switched=other[1])
        if switched and plan.ask:
            print(switched, flush=True)
        self.sessions.claim(key, plan.claims)
        title = interpolate.panel_title(request, self.cells.proposals.fixing if live else None)  # --fix: the user's words
        view = build.view(self.shell, title or session.state.title or path.stem, live=live, session=session)
        if live and isinstance(view, CellOutput) and self.sessions.finder.note:  # the notebook's path is unknown: say so
            view.origin = self.sessions.finder.note
        if live and isinstance(view, CellOutput):  # a turn of this session another page ran and nobody saw: say so once
            missed = self.reopen.unseen(self.cells.bridge.running(), path.stem)
            if missed:
                view.origin = unseen_line(missed[-1])
                self.reopen.acknowledged.update(run.marker for run in missed)
        try:
            self._show(session, plan, view, index)
            if plan.show or plan.show_all:
                view.recorded(restart.after_recorded(plan, turns, nbkernel.KERNEL_ID, self.sessions.restored(key)))
            if not live:
                view.finish()  # a re-rendered turn is static: shown now, above anything the steps below print
            calls = restore.rerun(self.shell, session, plan.restore, self.sessions.restored(key), self.tracker) if plan.restore else 0
            if plan.unfinished == "continue":
                self._run(session, None, args, view)  # an unfinished turn of the user's own continues, once
            elif plan.unfinished == "explain":
                print(
                    f"nbagent: the recorded turns of {path.name} were shown, but its unfinished turn was not "
                    f"continued: this session was not written by you. To continue it: `nbagent trust {key}` "
                    "in a terminal, then run this cell again.",
                    flush=True,
                )
            if plan.new_session:
                session = self._switch_to_new_session(session)  # so nobody else's history reaches the model
            if plan.ask:
                self._ask(session, args, prompt, view, note=plan.note, mention_restore=plan.mention_restore)
            elif plan.restore_only and not calls:
                print("nbagent: nothing to restore (no python code recorded by an earlier kernel in this session).")
        finally:
            view.finish()
            self.cells.after(session, view, live=live)  # the "Insert as cells" output; Agent.cells 'code' inserts now
            if live:  # what the cell showed, for a page that reopens the notebook (docs/cells.md)
                self.reopen.ran(live_run(view, session, request, self.tracker.cell_id, self.cells.bridge.running()))

    def _show(self, session: Session, plan: restart.Plan, view: View, index: nbkernel.TurnIndex) -> None:
        """Re-render recorded events: all of them, or the cell's turns', each in order (no model call, no tool re-run).

        The view starts where the session stood before the first turn's request (the calls still open, the
        notes the fold put before it: an interruption, a restart), so only the turns' own events are read;
        a later turn adds the names of the calls open before it (another cell's turns in between are not shown).
        """
        if plan.show_all:
            for event in session.events():
                view(event)
        for turn in plan.show:
            view.begin(index.start(turn.seq))
            kept = index.events(turn)
            for event in kept if kept is not None else session.events(since=turn.seq - 1):
                if event["seq"] > turn.end:
                    break
                view(event)

    def _transcript(self, run: Any) -> list[dict[str, Any]] | None:
        """The outputs a finished run's cell would show (reopen_comm.outputs), if its session is open in this kernel."""
        session = self.sessions.named(run.session)
        if session is None:
            return None
        return outputs(session, run, self.sessions.index(session), button=self.settings.cells != "off")

    def _static_view(self, title: str, session: Session) -> View:
        """A view of recorded events only (rewind.py shows a rewound turn in one)."""
        return build.view(self.shell, title, live=False, session=session)

    def _switch_to_new_session(self, foreign: Session) -> Session:
        """Open a new session of this user's beside a foreign one, make it current, and say so."""
        place = self.sessions.place()  # the foreign session is current, so it is of this place
        path = place.new_path()
        session = self.sessions.opened(place, path)
        self.sessions.make_current(place, path)
        print(
            f"nbagent: {foreign.path.name} was not written by you, so this request starts a new session of yours, "
            f"{path.stem}; nothing of the other session is sent to the model. To continue that one instead, run "
            f"`nbagent trust {foreign.where}` in a terminal.",
            flush=True,
        )
        return session

    def _ask(self, session: Session, args: Any, prompt: interpolate.Expansion, view: View, *, note: bool, mention_restore: bool) -> None:
        restart_note = ""
        if note:
            restored = len(self.sessions.restored(session.where))
            detail = (
                f" The kernel state was restored by re-running the agent's earlier python code ({restored} turn(s))."
                if mention_restore and restored
                else ""
            )
            restart_note = restart.RESTART_NOTE.format(restored=detail)
        # "request" is the cell's own text (a rerun cell is matched by it); the content sent is the expansion
        meta = {"request": prompt.template, "kernel": nbkernel.KERNEL_ID, **prompt.meta()}
        if self.tracker.cell_id:
            meta["cell_id"] = self.tracker.cell_id
        self._run(session, prompt.text, args, view, meta=meta, note=restart_note)

    def _compact(self, args: Any) -> None:
        """``%agent --compact``: summarise the session's earlier conversation now (the local path), shown in a panel."""
        if not self.sessions.has_any(args):
            raise UsageError("There is no session to compact yet in this notebook: `%agent --compact` works on an existing one.")
        problem = build.problem(self.settings, args)
        if problem is not None:
            raise problem
        session = self.sessions.for_cell(args)
        if not session.trusted:
            raise UsageError(f"{untrusted_warning(session)} Compacting it would send its history to the model; trust it first.")
        view = build.view(self.shell, f"Compacting {session.path.stem}", session=session)
        loop = build.loop(self.shell, self.settings, self.context, session, args, view)
        view.begin(Start.of_state(session.state))
        unsubscribe = session.subscribe(view, since=session.seq)
        done = True
        try:
            done = loop.compact("request")
        except KeyboardInterrupt:  # the intent is logged: the next request (or --compact) goes on from the last part logged
            print("nbagent: compaction interrupted; the next request finishes it.", flush=True)
        finally:
            unsubscribe()
            view.finish()
        if not done:
            print(f"nbagent: nothing to compact in {session.path.stem}: its conversation is already short.", flush=True)

    def _drop_thinking(self, args: Any) -> None:
        """``%agent --drop-thinking``: the session's thinking blocks so far are left out of its later requests (a note in the log)."""
        if not self.sessions.has_any(args):
            raise UsageError("There is no session yet in this notebook: `%agent --drop-thinking` works on an existing one.")
        session = self.sessions.for_cell(args)
        build.loop(self.shell, self.settings, self.context, session, args, None).drop_thinking()
        print(f"nbagent: {session.path.stem}'s thinking blocks so far are left out of its later requests; the log keeps them.")

    def _run(self, session: Session, prompt: Any, args: Any, view: View, *, meta: dict[str, Any] | None = None, note: str = "") -> None:
        """Run the loop with ``view`` subscribed; ``note``: a note to the model, which the fold puts before the request."""
        budgets = budget_options(self.settings, resume=prompt is None)  # a resume keeps its logged budgets unless set here
        loop = build.loop(self.shell, self.settings, self.context, session, args, view, budgets=budgets, request=prompt is not None)
        if note:  # a note event, not part of the request: every view shows it as a note, never as the user's words
            session.append(ev.NOTE, kind=ev.NOTE_KERNEL_RESTARTED, to_model=note)
        told = self.context.gather(self.settings, restarted=bool(note)) if prompt is not None else None
        if told is not None:  # a new turn: what the notebook did since the last one, logged (fsynced) before it is sent
            session.append(ev.NOTE, **told.event())
        view.begin(Start.of_state(session.state))  # e.g. the names of the calls this run settles first
        unsubscribe = session.subscribe(view, since=session.seq)
        self.tracker.paused = True
        try:
            loop.run(prompt, meta=meta)
        finally:
            self.tracker.paused = False
            unsubscribe()
            if prompt is not None:  # after a resume (another kernel's turn) the user's cells and variables are still news
                self.context.mark()  # the agent's own changes, and the cells so far, are not news next turn

    def close(self) -> None:
        """Close every open session (releasing their locks)."""
        self.sessions.close()


_state: dict[int, AgentMagics] = {}


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext nbagent``: register the magics, the ``Agent`` settings and the input transformer."""
    if id(ipython) in _state:
        return
    settings = Agent(parent=ipython)
    ipython.configurables.append(settings)
    magics = AgentMagics(ipython, settings)
    ipython.register_magics(magics)
    for part in (magics.tracker, magics.context, magics.cells):
        part.register()
    ipython.input_transformers_cleanup.append(keep_question_marks)
    ipython.register_magics(mcp_servers.McpMagics(ipython, settings))  # %agent_mcp
    _state[id(ipython)] = magics


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext nbagent``: close sessions and remove what was registered."""
    magics = _state.pop(id(ipython), None)
    if magics is None:
        return
    magics.close()
    if magics.replay is not None:
        magics.replay.pause()
        magics.replay.stop_following()
    for part in (magics.tracker, magics.context, magics.cells):
        part.unregister()
    if keep_question_marks in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.remove(keep_question_marks)
    if magics.settings in ipython.configurables:
        ipython.configurables.remove(magics.settings)
    for kind, names in (("line", ("agent", "agent_sessions", "agent_replay", "agent_mcp")), ("cell", ("agent",))):
        for name in names:
            ipython.magics_manager.magics[kind].pop(name, None)


def magics_for(ipython: Any) -> AgentMagics | None:
    """The loaded ``AgentMagics`` of a shell (for tests and embedding)."""
    return _state.get(id(ipython))
