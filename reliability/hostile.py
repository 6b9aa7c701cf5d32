"""Scenarios 12-15, hostile inputs: files, logs and output made by someone else reach every entry point.

Each row runs a table of attacks through one entry point and classes each attack's outcome:
``refused`` (a documented error, nothing changed), ``asked`` (it went to approval, and ran only
where the policy said yes), ``inert`` (read or shown with nothing run and no control sequence or
live link getting through) or ``ran`` (something ran unasked, changed a file, or leaked: must be 0).

* the CLI: ``python -m nbagent ...`` as a subprocess with the victim's own ``NBAGENT_DATA_DIR``;
* ``Session.open`` / ``nbagent.run`` in this (the victim's) process, the model being the real
  ``anthropic`` SDK against ``tests/support/fake_anthropic.py`` on 127.0.0.1;
* exports (``nbagent export``), rendered as a careless Markdown renderer would;
* the notebook: ``%agent`` in an in-process IPython shell.

The hostile logs are written by a second user: ``python -m reliability.attacker`` in a subprocess
with its own ``NBAGENT_DATA_DIR``, hence its own secret.  Every victim file lives in the scenario's
temp folder; the folder is listed (names, sizes, digests) before and after each attack.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic

import nbagent
from nbagent.agent.approval import ApprovalRequest
from nbagent.errors import LogError, NotALogError, UntrustedLogError
from nbagent.record import events as ev
from nbagent.state.decide import UNKNOWN_OUTCOME, UNTRUSTED
from nbagent.tools.decorator import Effect
from tests.support.fake_anthropic import FakeAnthropic, RecordedRequest, Reply, text, tool_use

from . import payloads
from .attacker import call_events, write_log

ROOT = Path(__file__).resolve().parent.parent
OUTCOMES = ("refused", "asked", "inert", "ran")
MARKER_CODE = "open({marker!r}, 'w').write('pwned'); pwned_by_attacker = 1"
DOCUMENTED_SHAPES = ("anthropic", "openai", "openai-project", "aws", "github", "slack", "ANTHROPIC_API_KEY value")


# Bookkeeping ----------------------------------------------------------------------------------------
class Tally:
    """Attacks tried, their outcomes, and failures of one row."""

    def __init__(self) -> None:
        self.outcomes: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self.failures: list[str] = []
        self.checks = 0
        self.gaps: list[str] = []
        self.log: list[tuple[str, str, str]] = []  # (kind, what, outcome) of every attack, for debugging

    def check(self, ok: bool, what: str) -> bool:
        self.checks += 1
        if not ok:
            self.failures.append(what)
        return ok

    def attack(self, kind: str, outcome: str, problems: list[str] | None = None, what: str = "") -> None:
        """One attack: its outcome, and any broken promise (a failure even when nothing ran)."""
        assert outcome in OUTCOMES, outcome
        self.kinds[kind] += 1
        self.log.append((kind, what, outcome))
        self.outcomes[outcome] += 1
        self.checks += 1
        if outcome == "ran":
            self.failures.append(f"[{kind}] {what}: RAN: {'; '.join(problems or [])}")
        elif problems:
            self.failures.append(f"[{kind}] {what}: {'; '.join(problems)}")

    def row(self, scenario: str, checked: str, seed: int, began: float, **details: Any) -> dict[str, Any]:
        attacks = sum(self.outcomes.values())
        counts = ", ".join(f"{name} {self.outcomes[name]}" for name in OUTCOMES)
        return {
            "scenario": scenario,
            "cases": f"{attacks} attacks ({counts})",
            "checked": checked,
            "result": "pass" if not self.failures else f"FAIL ({len(self.failures)})",
            "failures": self.failures[:30],
            "log": self.log,
            "checks": self.checks,
            "attacks": attacks,
            "outcomes": {name: self.outcomes[name] for name in OUTCOMES},
            "details": {
                "attacks by kind": ", ".join(f"{k} {v}" for k, v in sorted(self.kinds.items())),
                "outcomes": counts,
                **({"known gaps": "; ".join(self.gaps)} if self.gaps else {}),
                **details,
            },
            "seed": seed,
            "duration": time.perf_counter() - began,
        }


def listing(folder: Path, skip: tuple[str, ...] = ()) -> dict[str, tuple[str, str]]:
    """Every entry under ``folder`` (not following links): kind and content digest (link target for links)."""
    found: dict[str, tuple[str, str]] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            rel = str(path.relative_to(folder))
            if rel.startswith(skip):
                continue
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISREG(info.st_mode):
                found[rel] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
            elif stat.S_ISDIR(info.st_mode):
                found[rel] = ("dir", "")
            else:
                found[rel] = ("other", oct(info.st_mode))
    return found


def changes(before: dict[str, tuple[str, str]], after: dict[str, tuple[str, str]]) -> list[str]:
    """What differs between two listings."""
    out = [f"new {k!r}" for k in after if k not in before]
    out += [f"gone {k!r}" for k in before if k not in after]
    out += [f"changed {k!r}" for k in before if k in after and before[k] != after[k]]
    return out


@contextlib.contextmanager
def victim(folder: Path) -> Iterator[Path]:
    """This process as the victim: its own data dir (secret), no terminal to ask on, no real API key."""
    saved = {k: os.environ.get(k) for k in ("NBAGENT_DATA_DIR", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "JPY_SESSION_NAME")}
    stdin, cwd = sys.stdin, os.getcwd()
    data = folder / "victim-data"
    os.environ["NBAGENT_DATA_DIR"] = str(data)
    os.environ["ANTHROPIC_API_KEY"] = "test-key"
    os.environ.pop("ANTHROPIC_BASE_URL", None)
    os.environ.pop("JPY_SESSION_NAME", None)
    sys.stdin = io.StringIO("")  # "ask" is headless: nobody can answer
    logger, level = logging.getLogger("nbagent"), logging.getLogger("nbagent").level
    logger.setLevel(logging.ERROR)  # the expected "snapshot ignored" / "torn line cut off" warnings
    try:
        yield data
    finally:
        logger.setLevel(level)
        sys.stdin = stdin
        os.chdir(cwd)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def attacker(folder: Path, attack: str, *args: str) -> None:
    """Run the second user's process: ``python -m reliability.attacker ATTACK FOLDER ARGS`` with its own data dir."""
    env = {**os.environ, "NBAGENT_DATA_DIR": str(folder.parent / "attacker-data")}
    result = subprocess.run(
        [sys.executable, "-m", "reliability.attacker", attack, str(folder), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"the attacker's {attack} failed: {result.stderr[-3000:]}")


def cli(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    """The real command line, as the victim (``NBAGENT_DATA_DIR`` of this process)."""
    return subprocess.run(
        [sys.executable, "-m", "nbagent", *args],
        cwd=cwd,
        env=dict(os.environ),
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        check=False,
    )


def client_for(fake: FakeAnthropic) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=fake.base_url, api_key="test-key", max_retries=0)


class Effects:
    """The victim's tools (read, write, irreversible, un-keyed appender): each records every run of its body."""

    def __init__(self, effects_file: Path | None = None) -> None:
        self.runs: list[tuple[str, dict[str, Any]]] = []
        self.file = effects_file
        self.tools = [
            self._recorded("read_note", "read", "Read a note.", "the note"),
            self._recorded("write_note", "write", "Write a note.", "written"),
            self._recorded("launch", "irreversible", "Launch something that cannot be undone.", "launched"),
            self._recorded("append_line", "write", "Append a line to the effects file (no idempotency key).", "appended", self._append),
        ]

    def _append(self, text: str) -> None:
        """Append a line to the effects file, if there is one."""
        if self.file is not None:
            with self.file.open("a") as f:
                f.write(text + "\n")

    def _recorded(
        self, name: str, effect: Effect, description: str, answer: str, then: Callable[[str], None] | None = None
    ) -> nbagent.Tool:
        """A tool of one ``text`` argument that records each run of its body, then does ``then(text)``."""

        def body(text: str) -> str:
            """Act on a text.

            Args:
                text: The note, the line, or what to launch.
            """
            self.runs.append((name, {"text": text}))
            if then is not None:
                then(text)
            return answer

        return nbagent.tool(effect=effect, name=name, description=description)(body)


class Recorder:
    """An approval callable that records every question and answers ``answer``."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.questions: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> bool:
        self.questions.append(request)
        return self.answer


def answer_text(request: RecordedRequest) -> Reply:
    """The fake model's answer once a turn's calls are settled: plain text."""
    return text("understood")


def last_results(request: RecordedRequest) -> str:
    """The tool_result contents of a model request's last message, as JSON text."""
    messages = request.body.get("messages") or [] if isinstance(request.body, dict) else []
    return json.dumps(messages[-1].get("content") if messages else None)


def own_log(
    path: Path, steps: str, *, tool: str = "write_note", arguments: dict[str, Any] | None = None, call_id: str = "toolu_own"
) -> None:
    """The victim's own signed log: a request and a call; ``steps`` says how far it got (open/started/finished)."""
    events = call_events(tool, arguments or {"text": "the victim's own"}, steps=steps, call_id=call_id)
    write_log(path, events, snapshot=True, snapshot_every=0)


# Attack 1: files that are not logs ----------------------------------------------------------------
def not_a_log_files(folder: Path, rng: random.Random, quick: bool) -> dict[str, Path]:
    """Victim files that are not logs (all inside ``folder``), some named like logs."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "passwd": b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n",
        "binary": bytes(range(256)) * 4,
        "one-space": b" ",
        "one-newline": b"\n",
        "json": b'{"v":2,"seq":1,"ts":1.0,"type":"session_start","session_id":"x","meta":{}}\n',
        "notes": b"# my notes\n\nimportant, do not overwrite\n",
    }
    if not quick:
        for index in range(12):
            files[f"random-{index}"] = rng.randbytes(rng.choice([1, 7, 100, 5000, 70000]))
            files[f"text-{index}"] = "".join(rng.choice('abc{}[]":,\n 0123') for _ in range(rng.randint(1, 3000))).encode()
    paths: dict[str, Path] = {}
    for name, data in files.items():
        for suffix in (".jsonl", ".txt") if not quick or name in ("passwd", "binary") else (".jsonl",):
            path = folder / f"{name}{suffix}"
            path.write_bytes(data)
            paths[path.name] = path
    fifo = folder / "fifo.jsonl"
    os.mkfifo(fifo)
    paths["fifo.jsonl"] = fifo
    directory = folder / "dir.jsonl"
    directory.mkdir()
    paths["dir.jsonl"] = directory
    target = folder / "victim-file.txt"
    target.write_bytes(b"the victim's precious file\n")
    link = folder / "link.jsonl"
    link.symlink_to(target)
    paths["link.jsonl"] = link
    link_log = folder / "link-to-log.jsonl"
    real = folder / "real-log.jsonl.bak"
    real.write_bytes(b"")
    link_log.symlink_to(real)
    paths["link-to-log.jsonl"] = link_log
    return paths


def session_open_not_logs(tally: Tally, folder: Path, paths: dict[str, Path]) -> None:
    for name, path in paths.items():
        before = listing(folder)
        problems = []
        try:
            with nbagent.Session.open(path) as session:
                session.append(ev.NOTE, kind="x", text="written")
            problems.append("opened for writing")
        except NotALogError:
            pass
        except LogError as exc:
            if path.is_symlink():
                pass  # a linked log is refused (a LogError naming the link)
            else:
                problems.append(f"{type(exc).__name__} instead of NotALogError: {exc}")
        except Exception as exc:  # noqa: BLE001
            problems.append(f"undocumented {type(exc).__name__}: {exc}")
        diff = changes(before, listing(folder))
        tally.attack("not a log: Session.open", "ran" if diff or "opened for writing" in problems else "refused", diff + problems, name)


def cli_not_logs(tally: Tally, folder: Path, paths: dict[str, Path], out: Path, quick: bool) -> None:
    for name, path in paths.items():
        commands = [["snapshot"], ["trust", "--yes"], ["show"], ["export", "-o", str(out / f"{name}.md")], ["tail"], ["verify"]]
        for command in commands[:4] if quick else commands:
            before = listing(folder)
            result = cli([command[0], str(path), *command[1:]], folder, timeout=60)
            err = result.stderr.decode("utf-8", "replace")
            problems = []
            if result.returncode == 0:
                problems.append(f"exit 0: {result.stdout[-300:]!r}")
            if "Traceback" in err or len(err.strip().splitlines()) != 1:
                problems.append(f"not a one-line error: {err[-500:]!r}")
            diff = changes(before, listing(folder))
            if command[0] == "export" and (out / f"{name}.md").exists():
                diff.append("an export of it was written")
            tally.attack(f"not a log: nbagent {command[0]}", "ran" if diff else "refused", diff + problems, name)


# Attack 2 and 3: foreign and spliced calls through nbagent.run -------------------------------------
def policies() -> dict[str, Any]:
    """Approval policies a victim may use; only a Recorder(True) is a person saying yes."""
    return {"auto": "auto", "deny": "deny", "ask (headless)": "ask", "callable no": Recorder(False), "callable yes": Recorder(True)}


def resume_foreign(tally: Tally, fake: FakeAnthropic, log: Path, label: str, policy: Any, kind: str, call: str) -> None:
    """Resume a log whose dangling call is not the victim's: refused before anything is sent or asked (issue 20 #11).

    A log the library does continue (the victim's own) is judged as before: only a person's yes may run a call it did not sign.
    """
    effects = Effects()
    work = log.with_name(f"{log.stem}--{label.replace(' ', '_').replace('(', '').replace(')', '')}.jsonl")
    shutil.copyfile(log, work)
    before = work.read_bytes()
    problems = []
    first = len(fake.requests)
    refused: UntrustedLogError | None = None
    try:
        with nbagent.Session.open(work) as session:
            if session.call_trusted(call):
                problems.append("call_trusted() is true")
            nbagent.run(session, tools=effects.tools, client=client_for(fake), model="claude-test", approval=policy)
    except UntrustedLogError as exc:
        refused = exc
    except LogError as exc:
        problems.append(f"{type(exc).__name__}: {exc}")
    asked = policy.questions if isinstance(policy, Recorder) else []
    if refused is not None:
        if "nbagent trust" not in str(refused):
            problems.append(f"the refusal does not say how to trust it: {refused}")
        if asked or len(fake.requests) > first or work.read_bytes() != before:
            problems.append(f"refused only after asking {len(asked)}, sending {len(fake.requests) - first} request(s) or writing")
        if effects.runs:
            problems.append(f"the tool body ran: {effects.runs}")
        tally.attack(kind, "ran" if effects.runs else "refused", problems, f"{log.name} under {label}")
        return
    said_yes = isinstance(policy, Recorder) and policy.answer
    runs = [r for r in effects.runs]
    if isinstance(policy, Recorder):
        if [q.reason for q in asked] != ["untrusted"]:
            problems.append(f"asked {[q.reason for q in asked]} instead of once with reason untrusted")
    if said_yes:
        if len(runs) != 1:
            problems.append(f"approved, but the body ran {len(runs)} times")
        outcome = "asked"
    elif runs:
        outcome = "ran"
        problems.append(f"the tool body ran unasked: {runs}")
    else:
        outcome = "asked" if asked else "refused"
        sent = [last_results(r) for r in fake.requests[first:]]
        if not any(UNTRUSTED[:60] in s for s in sent):
            problems.append(f"the model was not told the call was not run: {sent[:1]}")
    tally.attack(kind, outcome, problems, f"{log.name} under {label}")


def foreign_calls(tally: Tally, fake: FakeAnthropic, folder: Path, chosen: dict[str, Any], quick: bool) -> None:
    attacker(folder, "dangling")
    logs = sorted(folder.glob("foreign-*.jsonl")) + sorted(folder.glob("unsigned-*.jsonl"))
    if quick:
        logs = [
            p
            for p in logs
            if p.name
            in ("foreign-write_note-0.jsonl", "foreign-launch-1.jsonl", "foreign-read_note-0.jsonl", "unsigned-write_note-0.jsonl")
        ]
    for log in logs:
        for label, policy in chosen.items():
            policy = Recorder(policy.answer) if isinstance(policy, Recorder) else policy
            resume_foreign(tally, fake, log, label, policy, "foreign dangling call", "toolu_evil")


def splices(tally: Tally, fake: FakeAnthropic, folder: Path, chosen: dict[str, Any], quick: bool) -> None:
    """The victim's real finished session; logs claiming its id that end in its signed assistant_msg line."""
    folder.mkdir(parents=True, exist_ok=True)
    real = folder / "real.jsonl"
    own_log(real, "finished")
    for mode in ("unsigned", "attacker", "middle"):
        spliced = folder / f"spliced-{mode}.jsonl"
        attacker(folder, "splice", str(real), str(spliced), mode)
        for label, policy in (chosen if not quick or mode == "attacker" else {k: chosen[k] for k in list(chosen)[:2]}).items():
            policy = Recorder(policy.answer) if isinstance(policy, Recorder) else policy
            resume_foreign(tally, fake, spliced, label, policy, "splice", "toolu_own")


# Attack 4: forged snapshots ------------------------------------------------------------------------
def behaviour(fake: FakeAnthropic, log: Path, prompt: str | None) -> dict[str, Any]:
    """What resuming (and a next prompt) does: tool bodies run, model requests, the final state."""
    effects = Effects()
    first = len(fake.requests)
    with nbagent.Session.open(log) as session:
        note = session.snapshot_note
        nbagent.run(session, tools=effects.tools, client=client_for(fake), model="claude-test", approval="auto")
        if prompt:
            nbagent.run(session, prompt, tools=effects.tools, client=client_for(fake), model="claude-test", approval="auto")
        state = session.state
        final = {"messages": json.loads(json.dumps(list(state.messages))), "open_calls": dict(state.open_calls), "status": state.status}
    requests = [r.body.get("messages") for r in fake.requests[first:] if isinstance(r.body, dict)]
    return {"runs": effects.runs, "requests": requests, "state": final, "note": note}


def forged_snapshots(tally: Tally, fake: FakeAnthropic, folder: Path, quick: bool) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    other = folder / "other.jsonl"
    own_log(other, "finished", arguments={"text": "another session"})
    bases = {
        "finished": ("reopen", "history", "history-fixed", "unsigned", "copy"),
        "started": ("started0", "started0-fixed", "history", "unsigned", "copy"),
        "open": ("history-fixed", "unsigned", "copy"),
    }
    if quick:
        bases = {"finished": ("reopen", "history-fixed", "copy"), "started": ("started0", "started0-fixed", "unsigned")}
    for steps, modes in bases.items():
        template = folder / f"template-{steps}.jsonl"
        own_log(template, steps)
        baseline_log = folder / f"baseline-{steps}.jsonl"
        shutil.copyfile(template, baseline_log)
        baseline = behaviour(fake, baseline_log, "and now?")
        for mode in modes:
            log = folder / f"forged-{steps}-{mode}.jsonl"
            shutil.copyfile(template, log)
            shutil.copyfile(nbagent.stores.snapshot.path_for(template), nbagent.stores.snapshot.path_for(log))
            attacker(folder, "forge-snapshot", str(log), mode, str(other))
            problems = []
            try:
                got = behaviour(fake, log, "and now?")
            except Exception as exc:  # noqa: BLE001
                tally.attack(
                    "forged snapshot",
                    "refused" if isinstance(exc, LogError) else "ran",
                    [f"{type(exc).__name__}: {exc}"],
                    f"{steps}/{mode}",
                )
                continue
            if not got["note"]:
                problems.append("the forged snapshot was used (no note)")
            for key in ("runs", "requests", "state"):
                if got[key] != baseline[key]:
                    problems.append(
                        f"{key} differ from the same log without a snapshot: {str(got[key])[:300]} vs {str(baseline[key])[:300]}"
                    )
            ran = len(got["runs"]) > len(baseline["runs"])
            tally.attack("forged snapshot", "ran" if ran else "inert", problems, f"{steps}/{mode}")


# Attack 5: the unknown-outcome repeat -----------------------------------------------------------------
KILL_CHILD = r"""
import os, sys, threading
import anthropic, nbagent
log, effects, base = sys.argv[1:4]

@nbagent.tool(effect="write")
def append_line(text: str) -> str:
    '''Append a line (no idempotency key).

    Args:
        text: The line.
    '''
    with open(effects, "a") as f:
        f.write(text + "\n")
        f.flush()
        os.fsync(f.fileno())
    print("IN", flush=True)
    threading.Event().wait()

with nbagent.Session.open(log) as session:
    nbagent.run(session, "append once", tools=[append_line], client=anthropic.Anthropic(base_url=base, api_key="test-key", max_retries=0),
                model="claude-test", approval="auto")
"""


def unknown_outcome(tally: Tally, fake: FakeAnthropic, folder: Path, quick: bool) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    cases = ["written"] + ([] if quick else ["sigkill", "sigkill"])
    if quick:
        cases.append("sigkill")
    for index, how in enumerate(cases):
        log, effects_file = folder / f"unknown-{index}.jsonl", folder / f"effects-{index}.txt"
        if how == "written":
            own_log(log, "started", tool="append_line", arguments={"text": "once"})
            effects_file.write_text("once\n")  # the effect happened before the (simulated) SIGKILL
        else:
            fake.script(tool_use("append_line", {"text": "once"}, id=f"toolu_kill{index}"))
            proc = subprocess.Popen(
                [sys.executable, "-c", KILL_CHILD, str(log), str(effects_file), fake.base_url],
                cwd=ROOT,
                env=dict(os.environ),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert proc.stdout is not None
            line = proc.stdout.readline()
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc.communicate()
            if line.strip() != "IN":
                tally.check(False, f"the SIGKILL child never reached the tool body: {line!r}")
                continue
        effects = Effects(effects_file)
        first = len(fake.requests)
        problems = []
        with nbagent.Session.open(log) as session:
            nbagent.run(session, tools=effects.tools, client=client_for(fake), model="claude-test", approval="auto")
        applied = effects_file.read_text().splitlines()
        if applied != ["once"]:
            problems.append(f"the effect was applied {len(applied)} times")
        sent = [last_results(r) for r in fake.requests[first:]]
        if not any(UNKNOWN_OUTCOME[:60] in s for s in sent):
            problems.append(f"the model was not told the outcome is unknown: {sent[:1]}")
        tally.attack("unknown outcome under auto", "ran" if len(applied) > 1 else "refused", problems, how)


# Attack 6: terminal escapes through the CLI ------------------------------------------------------------
def escapes(tally: Tally, folder: Path, quick: bool) -> None:
    attacker(folder, "escapes")
    named = folder / f"esc{payloads.NAME}.jsonl"
    runs = [
        ["show", "escapes.jsonl"],
        ["show", "escapes.jsonl", "--full"],
        ["tail", "escapes.jsonl"],
        ["tail", "escapes.jsonl", "--json"],
        ["sessions", "."],
        ["sessions", ".", "--json"],
        ["sessions", ".", "--grep", "pwned"],
        ["verify", "escapes.jsonl"],
        ["verify", "escapes.jsonl", "--json"],
        ["show", named.name],
        ["sessions", ".", "--grep", "\x1b]0"],
    ]
    if not quick:
        runs += [
            ["tail", named.name, "--json"],
            ["verify", named.name],
            ["sessions", named.name],
            ["show", "esc"],
            ["sessions", ".", "--grep", "\x9b31m"],
            ["tail", "escapes.jsonl", "-f", "--idle-exit", "0.3"],
            ["export", "escapes.jsonl", "-o", "out\x1b[2J.md"],
            ["show", "\x1b]0;title\x07"],
        ]
    for argv in runs:
        before = listing(folder, skip=("out",))
        result = cli(argv, folder)
        bad = payloads.controls(result.stdout + result.stderr)
        problems = [f"control characters reached the terminal: {bad}"] if bad else []
        err = result.stderr.decode("utf-8", "replace")
        if "Traceback" in err:
            problems.append(f"a traceback: {err[-300:]!r}")
        if argv[0] in ("show", "tail", "sessions") and argv[1] != "\x1b]0;title\x07" and result.returncode != 0:
            problems.append(f"exit {result.returncode}: {err[-300:]!r}")
        if argv[:2] == ["show", "escapes.jsonl"] and not (b"pwned" in result.stdout and b"\\x1b" in result.stdout):
            problems.append("the hostile text was not shown (escaped) at all: the check would be vacuous")
        diff = changes(before, listing(folder, skip=("out",)))
        tally.attack(
            "terminal escapes", "ran" if bad or diff else "inert", problems + diff, " ".join(argv).encode("unicode_escape").decode()
        )
        if argv[0] == "export":
            for stray in folder.glob("out*"):
                stray.unlink()


# Attack 7: hostile exports ------------------------------------------------------------------------------
def hostile_exports(tally: Tally, folder: Path, quick: bool, rng: random.Random) -> None:
    import nbformat

    markdown = list(payloads.MARKDOWN)
    if not quick:  # seeded variants: random case, entity and %-encoding of the scheme, random nesting
        for _ in range(20):
            scheme = rng.choice(["javascript", "vbscript", "data", "file"])
            spelled = "".join(rng.choice([c, c.upper(), f"&#{ord(c)};", f"&#x{ord(c):x};", f"%{ord(c):02x}"]) for c in scheme)
            sep = rng.choice([":", "\\:", "&colon;", "&#58;", "%3a"])
            markdown.append(
                rng.choice(["[a]({})", "![a]({})", "[a][r]\n\n[r]: {}", "<{}>", "> - [a]({})"]).format(f"{spelled}{sep}alert(1)")
            )
    spec = folder / "payloads.json"
    folder.mkdir(parents=True, exist_ok=True)
    spec.write_text(json.dumps(markdown))
    attacker(folder, "exports", str(spec))
    logs = [folder / "export-all.jsonl"] + ([] if quick else sorted(folder.glob("export-[0-9]*.jsonl")))
    if quick:
        logs += [folder / f"export-{i:03d}.jsonl" for i in (0, 14, 24)]
    for log in logs:
        for fmt in ("md", "ipynb"):
            out = folder / "out" / f"{log.stem}.{fmt}"
            out.parent.mkdir(exist_ok=True)
            result = cli(["export", log.name, "-o", str(out)], folder)
            problems = []
            if result.returncode != 0:
                tally.attack("hostile export", "refused", [f"export failed: {result.stderr[-300:]!r}"], f"{log.name} {fmt}")
                continue
            live = False
            try:
                if fmt == "md":
                    hrefs, _ = payloads.assert_no_live_remote_or_script(out.read_text(encoding="utf-8"))
                    if "https://example.org/docs" not in hrefs:
                        problems.append("an ordinary link did not stay a link: the check would be vacuous")
                else:
                    notebook = nbformat.read(out, as_version=4)
                    for cell in notebook.cells:
                        if cell.cell_type == "markdown":
                            payloads.assert_no_live_remote_or_script(cell.source)
                        for output in cell.get("outputs", []):
                            kinds = set(output.get("data", {})) - {"text/plain", "image/png", "image/jpeg", "image/gif", "image/webp"}
                            if output.get("output_type") not in ("stream", "display_data") or kinds:
                                live = True
                                problems.append(f"an output of type {output.get('output_type')} {sorted(kinds)}")
                    if notebook.metadata.get("trusted") or any(c.metadata.get("trusted") for c in notebook.cells):
                        problems.append("the notebook is marked trusted")
            except AssertionError as exc:
                live = True
                problems.append(str(exc)[:400])
            tally.attack("hostile export", "ran" if live else "inert", problems, f"{log.name} {fmt}")


# Attack 8: hostile files bounded ----------------------------------------------------------------------
def hostile_files(tally: Tally, folder: Path, quick: bool, cli_rows: bool = True, open_rows: bool = True) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    good = []
    for name in ("good-1.jsonl", "good-2.jsonl"):
        own_log(folder / name, "finished")
        good.append(name[:-6])
    attacker(folder, "hostile-files", str(ev.MAX_LINE + (1 << 20)))
    hostile = sorted(p.name[:-6] for p in folder.glob("*.jsonl") if not p.name.startswith("good"))
    if cli_rows:
        before = listing(folder)
        began = time.perf_counter()
        result = cli(["sessions", "."], folder, timeout=300)
        took = time.perf_counter() - began
        out = result.stdout.decode("utf-8", "replace")
        problems = [] if result.returncode == 0 else [f"exit {result.returncode}: {result.stderr[-400:]!r}"]
        lines = out.splitlines()
        for name in good:
            if not any(line.startswith(name + " ") for line in lines):
                problems.append(f"{name} is not listed")
        for name in hostile:
            shown = [line for line in lines if line.startswith(name + " ")]
            if len(shown) != 1:
                problems.append(f"{name} shown on {len(shown)} lines")
            elif name.endswith("-middle") and "damaged" not in shown[0]:
                problems.append(f"{name} not shown as damaged: {shown[0]!r}")
            elif name.endswith("-first") and "not an nbagent log" not in shown[0]:
                problems.append(f"{name} not shown as not a log: {shown[0]!r}")
            elif name.endswith("-last") and "no request yet" not in shown[0] and "damaged" not in shown[0]:
                # a bad last line is a torn tail (what a crash leaves, cut off on open) or, over 16 MiB, damage
                problems.append(f"{name} not shown as a session with its torn last line left out: {shown[0]!r}")
        if os.environ.get("HOSTILE_DEBUG"):
            print(out, file=sys.__stderr__)
        if took > 60:
            problems.append(f"listing took {took:.0f} s")
        if "Traceback" in result.stderr.decode("utf-8", "replace"):
            problems.append("a traceback")
        diff = changes(before, listing(folder))
        tally.attack(
            "hostile files: nbagent sessions",
            "ran" if diff else "inert",
            problems + diff,
            f"{len(hostile)} hostile beside {len(good)} good",
        )
        for name in [n for n in hostile if not quick or n in ("huge-middle", "nested-middle")]:
            for command in (["show", f"{name}.jsonl"], ["verify", f"{name}.jsonl"]):
                result = cli(command, folder, timeout=300)
                err = result.stderr.decode("utf-8", "replace")
                problems = [f"traceback: {err[-300:]!r}"] if "Traceback" in err else []
                if command[0] == "verify" and name.startswith("huge") and result.returncode == 0:
                    gap = "nbagent verify reports OK (exit 0) for a log with a line over 16 MiB, which sessions/show/Session.open refuse as damaged"
                    if gap not in tally.gaps:
                        tally.gaps.append(gap)
                tally.attack("hostile files: nbagent show/verify", "refused" if result.returncode else "inert", problems, " ".join(command))
    if open_rows:
        for name in hostile:
            path = folder / f"{name}.jsonl"
            work = folder / "open" / path.name
            work.parent.mkdir(exist_ok=True)
            shutil.copyfile(path, work)
            if nbagent.stores.snapshot.path_for(path).exists():
                shutil.copyfile(nbagent.stores.snapshot.path_for(path), nbagent.stores.snapshot.path_for(work))
            try:
                with nbagent.Session.open(work) as session:
                    _ = session.state, session.trust
                outcome, problems = "inert", []
            except LogError:
                outcome, problems = "refused", []
            except Exception as exc:  # noqa: BLE001 - anything else is an undocumented error
                outcome, problems = "refused", [f"undocumented {type(exc).__name__}: {str(exc)[:200]}"]
            tally.attack("hostile files: Session.open", outcome, problems, name)


# Attack 9: secrets in tool output ------------------------------------------------------------------------
def fake_secrets() -> dict[str, str]:
    pem_body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + "B" * 40
    return {
        "anthropic": "sk-ant-api03-" + "A" * 40,
        "openai": "sk-" + "C" * 48,
        "openai-project": "sk-proj-" + "D" * 40,
        "aws": "AKIA" + "B" * 16,
        "github": "ghp_" + "E" * 36,
        "slack": "xoxb-" + "1" * 12 + "-" + "F" * 24,
        "ANTHROPIC_API_KEY value": "fake-env-key-" + "G" * 24,
        "PEM private key": f"-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----",
        "AWS secret access key": "aws_secret_access_key = " + "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "H" * 10,
        "Google API key": "AIza" + "I" * 35,
        "JWT": "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiJ4In0" + "." + "J" * 43,
    }


def secrets_in_output(tally: Tally, fake: FakeAnthropic, folder: Path, rows: tuple[str, ...]) -> None:
    """A read tool prints key-shaped fake secrets; the log, snapshot and exports must not hold them."""
    folder.mkdir(parents=True, exist_ok=True)
    values = fake_secrets()
    blob = "\n".join(f"{k}: {v}" for k, v in values.items())

    @nbagent.tool(effect="read")
    def show_config(name: str) -> str:
        """Show a config file.

        Args:
            name: The file.
        """
        return blob

    log = folder / "secrets.jsonl"
    env_key = os.environ.get("ANTHROPIC_API_KEY")
    os.environ["ANTHROPIC_API_KEY"] = values["ANTHROPIC_API_KEY value"]
    try:
        fake.script(tool_use("show_config", {"name": ".env"}, id="toolu_cfg"), text("Here it is:\n" + blob))
        with nbagent.Session.open(log) as session:
            nbagent.run(session, "show me the config", tools=[show_config], client=client_for(fake), model="claude-test", approval="auto")
            session.snapshot()
    finally:
        if env_key is None:
            os.environ.pop("ANTHROPIC_API_KEY", None)
        else:
            os.environ["ANTHROPIC_API_KEY"] = env_key
    places = {"log": log.read_bytes(), "snapshot": nbagent.stores.snapshot.path_for(log).read_bytes()}
    if "exports" in rows:
        for fmt in ("md", "ipynb"):
            out = folder / f"secrets.{fmt}"
            result = cli(["export", log.name, "-o", out.name], folder)
            tally.check(result.returncode == 0, f"export of the secrets session failed: {result.stderr[-300:]!r}")
            places[fmt] = out.read_bytes() if out.exists() else b""
    for shape, value in values.items():
        needle = value.split("\n")[1] if shape == "PEM private key" else value.split(" = ")[-1]
        for where, data in places.items():
            if where in ("md", "ipynb") and "exports" not in rows:
                continue
            leaked = needle.encode() in data or json.dumps(needle)[1:-1].encode() in data
            if leaked and shape not in DOCUMENTED_SHAPES:
                gap = f"{shape} not redacted"
                if gap not in tally.gaps:
                    tally.gaps.append(gap)
                tally.attack("secret in tool output", "inert", [], f"{shape} in the {where} (known gap)")
                continue
            tally.attack(
                "secret in tool output",
                "ran" if leaked else "refused",
                [f"{shape} leaked into the {where}"] if leaked else [],
                f"{shape} / {where}",
            )


# Attack 1, 3 and Run All through the notebook -------------------------------------------------------------
def notebook_attacks(tally: Tally, fake: FakeAnthropic, folder: Path, quick: bool) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    notebook = folder / "analysis.ipynb"
    notebook.write_text("{}")
    os.environ["JPY_SESSION_NAME"] = str(notebook)
    os.environ["ANTHROPIC_BASE_URL"] = fake.base_url
    os.chdir(folder)
    log_folder = folder / ".nbagent" / "analysis.ipynb"
    log_folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    marker = folder / "pwned.txt"
    code = MARKER_CODE.format(marker=str(marker))
    fake.responder = answer_text
    ip = InteractiveShell.instance()
    ip.run_cell("%load_ext nbagent")

    def cell(source: str) -> tuple[bool, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            result = ip.run_cell(source)
        error = result.error_in_exec or result.error_before_exec
        if os.environ.get("HOSTILE_DEBUG"):
            print(f"--- {source}: {result.success} {error!r}\n{out.getvalue()}{err.getvalue()}", file=sys.__stderr__)
        return result.success, type(error).__name__ if error else "", out.getvalue() + err.getvalue()

    def pwned() -> list[str]:
        found = []
        if marker.exists():
            found.append("the attacker's code ran (marker file)")
        if "pwned_by_attacker" in ip.user_ns:
            found.append("the attacker's code ran (variable)")
        return found

    try:
        # Not-a-log files: in the log folder (as names) and elsewhere (as paths), with --resume and %agent_replay.
        elsewhere = not_a_log_files(folder / "elsewhere", random.Random(0), True)
        inside = {}
        for name, data in (("passwd", b"root:x:0:0:root:/root:/bin/bash\n"), ("binary", bytes(range(256)))):
            path = log_folder / f"{name}.jsonl"
            path.write_bytes(data)
            inside[name] = path
        targets = [(name, str(path)) for name, path in inside.items()] + [
            (str(path), str(path))
            for path in [
                p for n, p in elsewhere.items() if not quick or n in ("passwd.txt", "binary.jsonl", "fifo.jsonl", "dir.jsonl", "link.jsonl")
            ]
        ]
        for spec, _ in targets:
            for magic in (f"%agent --resume {spec}", f"%agent --resume {spec} continue please", f"%agent_replay {spec}"):
                before = listing(folder, skip=(".ipython",))
                ok, error, shown = cell(magic)
                diff = changes(before, listing(folder, skip=(".ipython",)))
                problems = [] if not ok and error == "UsageError" else [f"not refused with a UsageError: {ok} {error} {shown[-300:]!r}"]
                if magic.startswith("%agent_replay") and spec.endswith(".txt"):
                    problems = [] if not ok else problems
                tally.attack("notebook: not a log", "ran" if diff else "refused", problems + diff, magic)
        # A cloned notebook's log folder: Run All of the recorded cells, and --resume --restore.
        attacker(log_folder, "notebook", code)
        for source in (
            "%agent make z",
            "%agent make w",
            "%agent --resume cloned --restore",
            "%agent --resume cloned",
            "%agent --restore make z",
        ):
            requests = len(fake.requests)
            ok, error, shown = cell(source)
            problems = pwned()
            if "Traceback" in shown:
                problems.append(f"traceback: {shown[-300:]!r}")
            sent = json.dumps([r.body for r in fake.requests[requests:]])
            if "from the attacker" in sent or "open(" in sent:
                problems.append("the foreign history was sent to the model")
            tally.attack(
                "notebook: cloned session (Run All / --resume)", "ran" if pwned() else ("refused" if not ok else "inert"), problems, source
            )
        # The splice: a log claiming the id of the victim's own notebook session, ending in its signed python call.
        real = log_folder / "real.jsonl"
        own_log(real, "finished", tool="python", arguments={"code": code}, call_id="toolu_py")
        for mode in ("unsigned", "attacker", "middle")[: 2 if quick else 3]:
            spliced = log_folder / f"spliced-{mode}.jsonl"
            attacker(log_folder, "splice", str(real), str(spliced), mode)
            for source in (f"%agent --resume spliced-{mode} --restore", f"%agent --resume spliced-{mode}"):
                ok, error, shown = cell(source)
                problems = pwned()
                tally.attack("notebook: splice", "ran" if problems else ("refused" if not ok else "inert"), problems, source)
    finally:
        ip.run_cell("%unload_ext nbagent")
        for name in [n for n, v in ip.user_ns.items() if isinstance(v, nbagent.Tool)]:
            del ip.user_ns[name]
        ip.user_ns.pop("pwned_by_attacker", None)
        ip.config.pop("Agent", None)
    if not quick:
        kernel_attacks(tally, fake, folder, notebook, marker)
    fake.responder = None


def kernel_attacks(tally: Tally, fake: FakeAnthropic, folder: Path, notebook: Path, marker: Path) -> None:
    """The same cloned and spliced sessions under a real ipykernel (jupyter_client): Run All, --resume, --restore."""
    from tests.support.kernels import Kernel, kernel_env

    cell: dict[str, Any] = {"allow_stdin": True, "timeout": 120}
    kernel = Kernel(folder, kernel_env(fake.base_url, JPY_SESSION_NAME=str(notebook)), timeout=120)
    try:
        status, shown = kernel.try_run("%load_ext nbagent", **cell)
        tally.check(status == "ok", f"%load_ext nbagent in a real kernel: {shown[-300:]}")
        for source in (
            "%agent make z",
            "%agent make w",
            "%agent --resume cloned --restore",
            "%agent --restore make w",
            "%agent --resume spliced-attacker --restore",
            "%agent --resume spliced-middle --restore",
            "%agent --resume " + str(folder / "elsewhere" / "passwd.txt"),
            "%agent_replay " + str(folder / "elsewhere" / "binary.jsonl"),
        ):
            requests = len(fake.requests)
            status, shown = kernel.try_run(source, **cell)
            _, probe = kernel.try_run("print('PWNED' if 'pwned_by_attacker' in globals() else 'CLEAN')", **cell)
            problems = []
            if marker.exists() or "PWNED" in probe:
                problems.append("the attacker's code ran in the kernel")
            if "Traceback" in shown:
                problems.append(f"traceback: {shown[-300:]!r}")
            sent = json.dumps([r.body for r in fake.requests[requests:]])
            if "open(" in sent or "an attacker's request" in sent:
                problems.append("the foreign history was sent to the model")
            ran = bool(problems) and problems[0].startswith("the attacker's code ran")
            tally.attack(
                "real kernel: cloned / spliced session", "ran" if ran else ("refused" if status != "ok" else "inert"), problems, source
            )
    finally:
        kernel.shutdown()


# The rows -------------------------------------------------------------------------------------------------
def _scenario(
    run: Callable[[Tally, Path, FakeAnthropic, bool, random.Random], None], quick: bool, seed: int, title: str, checked: str
) -> dict[str, Any]:
    began = time.perf_counter()
    tally = Tally()
    top = Path(tempfile.mkdtemp(prefix="nbagent-hostile-"))
    folder = top / "victim"
    folder.mkdir()
    try:
        with victim(folder), FakeAnthropic() as fake:
            fake.responder = answer_text
            before_home = _home_listing()
            run(tally, folder, fake, quick, random.Random(seed))
            tally.check(_home_listing() == before_home, "the victim's real data folder changed")
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return tally.row(title, checked, seed, began)


def _home_listing() -> list[str]:
    """The real per-user nbagent data folder (must never be touched by a scenario)."""
    real = Path(os.path.expanduser("~/.local/share/nbagent"))
    return sorted(os.listdir(real)) if real.is_dir() else []


def run_cli(quick: bool, seed: int) -> dict[str, Any]:
    """Scenario 12: the command line."""

    def attacks(tally: Tally, folder: Path, fake: FakeAnthropic, quick: bool, rng: random.Random) -> None:
        paths = not_a_log_files(folder / "files", rng, quick)
        (folder / "out").mkdir()
        chosen = {
            n: p for n, p in paths.items() if not quick or n in ("passwd.jsonl", "binary.jsonl", "fifo.jsonl", "dir.jsonl", "link.jsonl")
        }
        cli_not_logs(tally, folder / "files", chosen, folder / "out", quick)
        escapes(tally, folder / "escapes", quick)
        hostile_files(tally, folder / "hostile", quick, open_rows=False)

    return _scenario(
        attacks,
        quick,
        seed,
        "12. Hostile inputs: the CLI",
        "python -m nbagent snapshot/trust --yes/show/export/tail/verify on files that are not logs (text, binary, "
        "near-empty, FIFO, folder, links to a victim file): refused with one line, no file changed or created; a log "
        "with terminal escapes in every field (and in its file name) through show/tail/sessions/--grep/verify/--json: "
        "no ESC, BEL, CR, C0 or C1 byte in the output; snapshot headers with huge/negative/mistyped lengths, "
        "JSON nested 200,000 deep, a 17 MiB line: `sessions` lists every other session, each hostile one on one line",
    )


def run_session(quick: bool, seed: int, policies_: dict[str, Any] | None = None) -> dict[str, Any]:
    """Scenario 13: Session.open and nbagent.run in the victim's process."""
    chosen = policies_ if policies_ is not None else policies()

    def attacks(tally: Tally, folder: Path, fake: FakeAnthropic, quick: bool, rng: random.Random) -> None:
        paths = not_a_log_files(folder / "files", rng, quick)
        session_open_not_logs(tally, folder / "files", paths)
        foreign_calls(tally, fake, folder / "foreign", chosen, quick)
        splices(tally, fake, folder / "splice", chosen, quick)
        if policies_ is not None:
            return  # a policy experiment: only the approval attacks
        forged_snapshots(tally, fake, folder / "snapshots", quick)
        unknown_outcome(tally, fake, folder / "unknown", quick)
        hostile_files(tally, folder / "hostile", quick, cli_rows=False)
        secrets_in_output(tally, fake, folder / "secrets", ("log", "snapshot"))

    return _scenario(
        attacks,
        quick,
        seed,
        "13. Hostile inputs: Session.open / run",
        "Session.open on not-a-log files raises NotALogError (links: LogError), nothing created or changed; another "
        "user's log (its own process and secret) with a dangling read/write/irreversible call, started or not, and "
        "spliced logs claiming the id of the victim's session around its signed assistant_msg, resumed under auto, "
        "deny, headless ask and a callable: nbagent.run refuses to continue them (UntrustedLogError naming `nbagent "
        "trust`) before anything is asked, sent or written, whatever the policy; forged snapshots (call re-opened, started reset, history replaced, unsigned, copied from "
        "another session) behave exactly like no snapshot (same effects, model requests, state); an un-keyed write "
        "cut by SIGKILL is not repeated under auto and the model is told the outcome is unknown; hostile files "
        "raise only LogError; fake key-shaped secrets absent from the log and snapshot",
    )


def run_exports(quick: bool, seed: int) -> dict[str, Any]:
    """Scenario 14: exports."""

    def attacks(tally: Tally, folder: Path, fake: FakeAnthropic, quick: bool, rng: random.Random) -> None:
        hostile_exports(tally, folder / "exports", quick, rng)
        secrets_in_output(tally, fake, folder / "secrets", ("exports",))

    return _scenario(
        attacks,
        quick,
        seed,
        "14. Hostile inputs: exports",
        "nbagent export to .md and .ipynb of another user's logs holding javascript:/vbscript:/data:/file: links in "
        "every spelling (case, entities, %-encoding, escapes, references) and remote images, rendered with raw HTML on "
        "and no URL filter: no script/data/file link, no remote src; notebook outputs only stream and raster images, "
        "not trusted; fake key-shaped secrets absent from both exports",
    )


def run_notebook(quick: bool, seed: int) -> dict[str, Any]:
    """Scenario 15: the notebook (%agent in an in-process IPython shell)."""

    def attacks(tally: Tally, folder: Path, fake: FakeAnthropic, quick: bool, rng: random.Random) -> None:
        notebook_attacks(tally, fake, folder, quick)

    return _scenario(
        attacks,
        quick,
        seed,
        "15. Hostile inputs: the notebook (%agent)",
        "%agent --resume PATH/NAME and %agent_replay PATH on not-a-log files (in the log folder and elsewhere): a "
        "UsageError, nothing changed; a cloned notebook's log folder (another user's session with a python call, one "
        "turn unfinished): Run All of its %agent cells, --resume, --restore run none of its code and send none of its "
        "history; spliced logs around the victim's own signed python call: --resume --restore runs nothing",
    )


SCENARIOS: dict[str, Callable[[bool, int], dict[str, Any]]] = {
    "cli": run_cli,
    "session": run_session,
    "exports": run_exports,
    "notebook": run_notebook,
}
