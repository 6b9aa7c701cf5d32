"""``nbagent demo``: the product in one terminal run — a live agent turn, a real crash, an exactly-once resume.

Without ``ANTHROPIC_API_KEY`` the replies come from the offline :class:`~nbagent.model.claude.DemoModel`,
which says on every line that it is not Claude; with a key they come from Claude.  The demo shows the
log file on disk, so it always uses the file store, even when ``NBAGENT_STORE`` names a database.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

from .. import history, terminal
from ..agent.loop import Loop
from ..agent.session import Session
from ..errors import NbagentError
from ..model.claude import DEFAULT_MODEL, AnthropicModel, DemoModel, Model, ModelRequest
from ..render.parts import tokens_words
from ..stores import ENV, FILES
from ..stores import folders as store
from ..tools.decorator import Tool, tool

DEFAULT_FOLDER = "nbagent-demo"
MARKER = ".nbagent-demo"  # marks a folder the demo created, so --fresh only ever deletes demo files
NOTEBOOK = "demo.ipynb"  # the (virtual) notebook whose log folder the demo uses
NOTES = "notes.txt"
SYSTEM = (
    "You are the agent in the nbagent demo, working in a small folder. Use the tools to do what is asked, "
    "then answer in at most two sentences."
)
REQUESTS = (
    "What files are in the workspace? Use the list_files tool.",
    "Use the append_note tool to add a note saying that the nbagent demo ran.",
)
SAMPLE_FILES = {
    "data.csv": "month,total\n2026-01,120\n2026-02,135\n2026-03,161\n",
    "README.txt": "A scratch folder made by `nbagent demo`. Safe to delete.\n",
}


class DemoError(NbagentError):
    """The demo cannot run as asked (a usage problem)."""


class CountingModel:
    """Wraps a model and counts how often it is really called."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls = 0

    def stream(self, request: ModelRequest, on_delta: Any) -> dict[str, Any]:
        """Count, then delegate."""
        self.calls += 1
        return self.inner.stream(request, on_delta)


def make_tools(folder: Path, runs: Counter[str], *, crash_after_write: bool = False) -> tuple[Tool, Tool]:
    """The demo's two tools: a read tool that lists files and a keyed write tool that appends a note."""
    root = folder.resolve()

    @tool(effect="read")
    def list_files(path: str = ".") -> str:
        """List the files in a folder of the demo workspace, with their sizes in bytes."""
        runs["list_files"] += 1
        target = (root / path).resolve()
        if target != root and root not in target.parents:
            raise ValueError(f"{path!r} is outside the demo workspace")
        entries = sorted(p for p in target.iterdir() if not p.name.startswith("."))
        return "\n".join(f"{p.name}/" if p.is_dir() else f"{p.name} ({p.stat().st_size} bytes)" for p in entries) or "(empty)"

    @tool(effect="write")
    def append_note(text: str = "The nbagent demo ran.", idempotency_key: str = "") -> str:
        """Append one line of text to notes.txt in the demo workspace."""
        runs["append_note"] += 1
        notes = root / NOTES
        if idempotency_key and notes.exists() and idempotency_key in notes.read_text(encoding="utf-8"):
            return f"notes.txt already has this note (idempotency key {idempotency_key[-8:]}); not written again."
        with open(notes, "a", encoding="utf-8") as handle:
            handle.write(f"{text} [key {idempotency_key}]\n")
            handle.flush()
            os.fsync(handle.fileno())
        if crash_after_write:
            # The demo's staged crash: the side effect happened, its result is not yet in the log.
            os.kill(os.getpid(), signal.SIGKILL)
        return f"Appended to notes.txt: {text}"

    return list_files, append_note


def choose_model(name: str | None) -> tuple[Model, str]:
    """Claude when ANTHROPIC_API_KEY is set, else the offline demo model; and a line saying which."""
    if os.environ.get("ANTHROPIC_API_KEY"):
        model = AnthropicModel(name or DEFAULT_MODEL)
        return model, f"Model: Claude ({model.name}) through the Anthropic API, because ANTHROPIC_API_KEY is set."
    return DemoModel(delay=0.02), (
        f"Model: {DemoModel.name}. No ANTHROPIC_API_KEY is set, so a scripted offline stand-in answers; "
        "it is NOT Claude. Set ANTHROPIC_API_KEY to run this demo with Claude."
    )


def where(folder: Path) -> str:
    """The line said before anything is written: the folder, absolute, and what the demo puts there (DemoError: not there)."""
    if folder.exists():
        if not folder.is_dir():
            raise DemoError(f"{folder} is a file; choose another --folder.")
        if not (folder / MARKER).exists() and any(folder.iterdir()):
            raise DemoError(f"{folder} already holds files that the demo did not make; choose another --folder (an empty or new one).")
    if (folder / MARKER).exists():
        kind = "an earlier demo's folder: this run adds a session"
    else:
        kind = "an empty folder" if folder.exists() else "a new folder"
    return (
        f"Writing to {folder.absolute()}{os.sep} ({kind}; --folder DIR writes elsewhere): two sample files, notes.txt, "
        f"the session log in {store.STORE_DIR}{os.sep} and two exported transcripts.\n"
    )


def prepare(folder: Path, *, fresh: bool) -> None:
    """Create the demo folder (or clear a previous demo's files with ``fresh``); refuse folders the demo did not make."""
    if folder.exists():
        where(folder)  # a file, or a folder of someone else's files: refused before anything is written
        if fresh and (folder / MARKER).exists():
            shutil.rmtree(folder / store.STORE_DIR, ignore_errors=True)
            for name in (NOTES, "demo-transcript.ipynb", "demo-transcript.md"):
                (folder / name).unlink(missing_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).write_text("made by nbagent demo\n", encoding="utf-8")
    for name, text in SAMPLE_FILES.items():
        if not (folder / name).exists():
            (folder / name).write_text(text, encoding="utf-8")


def _rule(out: TextIO, title: str) -> None:
    out.write(f"\n== {title} " + "=" * max(0, 70 - len(title)) + "\n")
    out.flush()


def _run_crashing_turn(log: Path, folder: Path, model_name: str | None, out: TextIO) -> int:
    """Run the second turn in a child process whose keyed tool SIGKILLs it mid-call; relay its output; return its exit code."""
    command = [sys.executable, "-m", "nbagent.cli.demo", "--crash-turn", str(log), str(folder)]
    if model_name:
        command += ["--model", model_name]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert child.stdout is not None
    while chunk := os.read(child.stdout.fileno(), 4096):
        out.write(chunk.decode("utf-8", "replace"))
        out.flush()
    return child.wait()


def run_demo(
    folder: str | os.PathLike[str] = DEFAULT_FOLDER, *, fresh: bool = False, model_name: str | None = None, out: TextIO = sys.stdout
) -> int:
    """Run the whole demo; returns 0 when every durability check held."""
    workspace = Path(folder)
    said = where(workspace)  # first: where it writes (a folder it may not write to is refused before anything is written)
    model, label = choose_model(model_name)
    out.write("nbagent demo: an agent session that is an append-only log on disk.\n" + label + "\n" + said)
    out.flush()
    if model_name and isinstance(model, DemoModel):
        out.write(f"(--model {model_name} is ignored: it picks a Claude model, which needs ANTHROPIC_API_KEY.)\n")
    prepare(workspace, fresh=fresh)
    log = store.log_path(store.log_dir_for(workspace / NOTEBOOK), store.new_name())
    out.write(f"Workspace: {workspace}/   Session log: {log}\n")
    if os.environ.get(ENV, "").strip():
        out.write(f"({ENV} is set, but the demo keeps its session in the log file above, to show what is on disk.)\n")

    runs: Counter[str] = Counter()
    _rule(out, f"1. A live turn: {REQUESTS[0]!r}")
    with Session.open(log, meta={"source": "nbagent demo"}, store=FILES) as session:
        printer = history.Printer(out, stamps=False)
        session.subscribe(printer)
        Loop(session, tools=make_tools(workspace, runs), model=model, approval="deny", system=SYSTEM).run(REQUESTS[0])
        printer.finish()

    _rule(out, f"2. A crash: {REQUESTS[1]!r}")
    out.write(
        "This turn runs in a child process. Its append_note tool writes the note and then the process is\n"
        "killed with SIGKILL, before the tool's result reaches the log (the worst moment to crash).\n"
    )
    code = _run_crashing_turn(log, workspace, model_name, out)
    killed = code == -signal.SIGKILL
    out.write(f"\nchild process exit: {'killed by SIGKILL' if killed else f'code {code}'}\n")
    if code not in (0, -signal.SIGKILL):
        out.write("The crash step failed for another reason (see its output above); the demo stops here.\n")
        return 1
    if not killed:
        out.write("The model did not call append_note, so no crash was staged; the resume below has nothing to recover.\n")

    _rule(out, "3. Resume in this process from the log alone")
    runs_before = sum(runs.values())
    with Session.open(log, store=FILES) as session:
        state = session.state
        started = sum(1 for c in state.open_calls.values() if c["started"])
        repaired = f"; cut off a torn tail of {session.repair.length} bytes" if session.repair else ""
        out.write(
            f"Reopened: {session.seq} events, {state.turns} turns, next step: {state.frontier}; "
            f"{len(state.open_calls)} open tool call(s), {started} of them started before the crash{repaired}.\n"
        )
        counting = CountingModel(model)
        printer = history.Printer(out, stamps=False)
        session.subscribe(printer, since=session.seq)
        Loop(session, tools=make_tools(workspace, runs), model=counting, approval="deny", system=SYSTEM).run()
        printer.finish()
        resume_calls, resume_runs = counting.calls, sum(runs.values()) - runs_before
    out.write(
        f"Resume: {resume_calls} model call(s), {resume_runs} tool run(s) "
        "(the interrupted keyed call re-ran with the same idempotency key).\n"
    )

    _rule(out, "4. Open it once more: a finished session replays from the log")
    runs_before = sum(runs.values())
    with Session.open(log, store=FILES) as session:
        counting = CountingModel(model)
        final = Loop(session, tools=make_tools(workspace, runs), model=counting, approval="deny", system=SYSTEM).run()
        replay_runs = sum(runs.values()) - runs_before
    out.write(f"Resume of the finished session: {counting.calls} model calls, {replay_runs} tool runs. Last reply, from the log:\n")
    out.write(history.clip("    " + " ".join(final.split()), 300) + "\n")

    _rule(out, "5. What is on disk")
    summary = history.summarize(log)
    report = history.verify(log)
    notes = (workspace / NOTES).read_text(encoding="utf-8").splitlines() if (workspace / NOTES).exists() else []
    events = history.read_all(log)
    keys = {e["idempotency_key"] for e in events if e["type"] == "tool_started" and e.get("idempotency_key")}
    effects = {key: sum(1 for line in notes if line.endswith(f"[key {key}]")) for key in keys}
    from . import export  # nbformat is imported only here

    notebook = export.export(events, workspace / "demo-transcript.ipynb", source=log)
    markdown = export.export(events, workspace / "demo-transcript.md", source=log)
    out.write(
        f'sessions: {summary.name}  {summary.turns} turns  {tokens_words(summary.figures) or "no tokens"}  {summary.status}  "{history.shorten(summary.title, 50)}"\n'
    )
    verdict = "OK" if report.ok else "PROBLEMS: " + "; ".join(str(p) for p in report.problems)
    out.write(f"verify:   {verdict} ({report.events} events, {report.size} bytes; {'; '.join(report.notes)})\n")
    once = all(count == 1 for count in effects.values())
    out.write(
        f"notes.txt: {sum(effects.values())} line(s) from {len(keys)} keyed call(s) of this session: "
        + ("each took effect exactly once, despite the crash\n" if once else f"NOT exactly once: {effects}\n")
    )
    out.write(f"exported: {notebook} and {markdown}\n")
    # A session name resolves under the current folder; elsewhere give the path.
    spec = summary.name if Path.cwd() in workspace.absolute().parents else str(log)
    out.write(f"\nTry: nbagent sessions {workspace}   nbagent show {spec}   nbagent verify {spec}\n")
    checks = [report.ok, summary.complete, once, counting.calls == 0, replay_runs == 0]
    if not all(checks):
        out.write("The demo's durability checks did NOT all hold; see above.\n")
        return 1
    return 0


def _crash_turn(log: Path, folder: Path, model_name: str | None) -> None:
    """The child side of step 2: run the second request; the keyed tool kills this process."""
    model, _ = choose_model(model_name)
    with Session.open(log, store=FILES) as session:
        printer = history.Printer(terminal.wrap(sys.stdout), stamps=False)
        session.subscribe(printer, since=session.seq)
        tools = make_tools(folder, Counter(), crash_after_write=True)  # the request names append_note: the offline model calls it
        Loop(session, tools=tools, model=model, approval="deny", system=SYSTEM).run(REQUESTS[1])
        printer.finish()


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "--crash-turn":
        try:
            _crash_turn(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[5] if len(sys.argv) >= 6 and sys.argv[4] == "--model" else None)
        except NbagentError as exc:
            sys.exit(f"nbagent demo: {' '.join(str(exc).split())}")
    else:
        sys.exit("usage: nbagent demo (this module's own entry point is internal)")
