"""Storage fault scenarios of issue 5 (1-7 and 10): truncation, torn tails, damage, lost writes, snapshot crashes,
I/O errors, failures during recovery, and fsync ordering.

Each ``run_<scenario>(quick, seed) -> dict`` returns a table row: scenario, cases, checked,
result ("pass"/"fail"), failures (the first few), details, seed, duration.  Faults come from
the fault-injecting file layer in ``tests/support/faults.py``; sessions are driven by the real
:class:`nbagent.agent.loop.Loop` with a scripted model and real tools that keep their own record.
Run one: ``python -m reliability.storage truncation --quick``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbagent.agent.loop import Loop
from nbagent.agent.session import Session
from nbagent.errors import LogCorruptError, LogError, LogWriteError, NotALogError
from nbagent.model.claude import ModelRequest
from nbagent.record import events as ev
from nbagent.record import line_codec
from nbagent.record.log_reader import read_events, scan
from nbagent.state import fold
from nbagent.stores.writer import FileOps
from nbagent.tools.decorator import Tool, tool
from tests.support.faults import NO_SYNC, Crash, Fault, FaultyFiles

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "v1_session.jsonl"
PROMPTS = ("Charge 5, look it up and note it.", "Now charge 7.")


# Results ---------------------------------------------------------------------------------------------
@dataclass
class Tally:
    """Cases run, checks made and failures seen by one scenario."""

    cases: int = 0
    checks: int = 0
    failures: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def check(self, ok: bool, what: str) -> bool:
        self.checks += 1
        if not ok:
            self.failures.append(what)
        return ok

    def count(self, key: str, n: int = 1) -> None:
        self.details[key] = self.details.get(key, 0) + n


def _row(name: str, checked: str, tally: Tally, seed: int, began: float) -> dict[str, Any]:
    return {
        "scenario": name,
        "cases": tally.cases,
        "checked": checked,
        "checks": tally.checks,
        "result": "pass" if not tally.failures else "fail",
        "failures": tally.failures[:20],
        "details": tally.details,
        "seed": seed,
        "duration": round(time.perf_counter() - began, 2),
    }


@contextlib.contextmanager
def _workdir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="nbagent-storage-"))
    logger = logging.getLogger("nbagent")
    level = logger.level
    logger.setLevel(logging.CRITICAL)  # thousands of expected repair warnings
    try:
        yield folder
    finally:
        logger.setLevel(level)
        shutil.rmtree(folder, ignore_errors=True)


def _line_ends(data: bytes) -> list[int]:
    return [i + 1 for i, byte in enumerate(data) if byte == 0x0A]


def _fresh(folder: Path, name: str = "s.jsonl") -> Path:
    """An empty case folder; returns the log path in it."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder / name


def _side_files(path: Path, kind: str) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.{kind}-*"))


# 1. Every truncation point -----------------------------------------------------------------------------
def run_truncation(quick: bool, seed: int) -> dict[str, Any]:
    """Cut a real session log at every byte offset; opening recovers exactly the longest prefix of whole events."""
    began, tally = time.perf_counter(), Tally()
    data = FIXTURE.read_bytes()
    ends = [0, *_line_ends(data)]
    whole = [line_codec.decode(line) for line in data.splitlines()]
    rng = random.Random(seed)
    offsets = list(range(len(data) + 1))
    if quick:  # every offset of the first three lines and the last one, and a seeded sample of the rest
        keep = set(range(ends[3] + 1)) | set(range(ends[-2], len(data) + 1))
        offsets = sorted(keep | set(rng.sample(offsets, 300)))
    with _workdir() as work:
        for cut in offsets:
            tally.cases += 1
            path = _fresh(work / "case")
            path.write_bytes(data[:cut])
            kept_lines = sum(1 for end in ends[1:] if end <= cut)
            prefix_end = ends[kept_lines]
            try:
                with Session.open(path, snapshot_every=0, ops=NO_SYNC) as session:
                    got = list(session.events())
                    seq = session.seq
            except Exception as exc:  # noqa: BLE001 - anything raised is a failure here
                tally.check(False, f"cut at {cut}: open raised {type(exc).__name__}: {exc}")
                continue
            if kept_lines == 0:
                tally.check(seq == 1 and got[0]["type"] == ev.SESSION_START, f"cut at {cut}: an empty prefix did not start a new session")
            else:
                tally.check(
                    seq == kept_lines and [e["crc"] for e in got] == [e["crc"] for e in whole[:kept_lines]],
                    f"cut at {cut}: recovered {seq} events, expected {kept_lines}",
                )
                tally.check(path.read_bytes() == data[:prefix_end], f"cut at {cut}: the log was not cut back to {prefix_end}")
            torn = _side_files(path, "torn")
            if cut > prefix_end:
                tally.check(
                    len(torn) == 1 and torn[0].read_bytes() == data[prefix_end:cut], f"cut at {cut}: the torn tail was not kept aside"
                )
            else:
                tally.check(not torn, f"cut at {cut}: a torn file was made for a clean cut")
    tally.details.update({"log": f"{FIXTURE.name} ({len(data)} bytes, {len(whole)} events, from a real run)"})
    return _row(
        "1. Every truncation point",
        "open never raises; exactly the whole events before the cut; log cut back there; the partial line kept aside byte for byte",
        tally,
        seed,
        began,
    )


# 2. Torn tail ----------------------------------------------------------------------------------------------
def run_torn_tail(quick: bool, seed: int) -> dict[str, Any]:
    """Overwrite the last k bytes with zeros or random bytes: only the events touched are lost; appends read back."""
    began, tally = time.perf_counter(), Tally()
    data = FIXTURE.read_bytes()
    ends = [0, *_line_ends(data)]
    last_len = ends[-1] - ends[-2]
    rng = random.Random(seed)
    ks = list(range(1, last_len + 2)) + list(range(last_len + 2, min(len(data), 2000), 7 if quick else 1))
    if quick:
        ks = sorted(set(ks[::3]) | {1, 2, last_len - 1, last_len, last_len + 1})
    fills = ("zeros", "random") if quick else ("zeros", "random", "random", "random")
    with _workdir() as work:
        for k in ks:
            for fill in fills:
                tally.cases += 1
                path = _fresh(work / "case")
                junk = bytes(k) if fill == "zeros" else rng.randbytes(k)
                torn = data[:-k] + junk
                path.write_bytes(torn)
                changed = next((i for i in range(len(data) - k, len(data)) if torn[i] != data[i]), len(data))
                untouched = sum(1 for end in ends[1:] if end <= changed)
                if (
                    changed + 1 == ends[-2] and torn[changed + 1 :] == data[changed + 1 :]
                ):  # only a newline between two whole lines changed: damage
                    try:
                        Session.open(path, snapshot_every=0, ops=NO_SYNC).close()
                        tally.check(False, f"k={k} {fill}: a whole line lost its newline and was cut off as torn")
                    except LogCorruptError as err:
                        tally.check(err.kept is not None and path.read_bytes() == torn, f"k={k} {fill}: refused without a copy")
                    tally.count("newline of an earlier whole line overwritten: refused as damage")
                    continue
                try:
                    with Session.open(path, snapshot_every=0, ops=NO_SYNC) as session:
                        seq = session.seq
                        if k <= last_len:
                            tally.check(seq >= len(ends) - 2, f"k={k} {fill}: more than the last event was lost")
                        tally.check(seq == max(untouched, 1), f"k={k} {fill}: kept {seq} events, {untouched} were untouched")
                        session.append(ev.NOTE, text="after the repair")
                        session.append(ev.NOTE, text="and another")
                    back = list(read_events(path))
                    tally.check(
                        [e["seq"] for e in back] == list(range(1, seq + 3)) and back[-1]["text"] == "and another",
                        f"k={k} {fill}: appends after the repair did not read back",
                    )
                    kept = _side_files(path, "torn")
                    cut = ends[untouched]
                    tally.check(
                        untouched == 0 or (len(kept) == 1 and kept[0].read_bytes() == torn[cut:]),
                        f"k={k} {fill}: the torn tail was not kept aside",
                    )
                except Exception as exc:  # noqa: BLE001
                    tally.check(False, f"k={k} {fill}: {type(exc).__name__}: {exc}")
    return _row(
        "2. Torn tail",
        "only the events whose bytes were overwritten are lost (only the last one when k <= its length); tail kept aside; two appends read back",
        tally,
        seed,
        began,
    )


# 3. Damage before the tail -----------------------------------------------------------------------------
def _damaged_variants(data: bytes, quick: bool, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    ends = [0, *_line_ends(data)]
    body_end = ends[-2]  # damage must be followed by the valid last line
    positions = range(0, body_end) if not quick else sorted(rng.sample(range(body_end), 400))
    for pos in positions:
        flipped = bytearray(data)
        flipped[pos] ^= 1 << rng.randrange(8)
        yield f"bit flip at {pos}", bytes(flipped)
    for start in range(0, body_end, 512 if not quick else 1536):
        if start + 512 <= ends[-2] + 1:
            zeroed = bytearray(data)
            zeroed[start : start + 512] = bytes(512)
            yield f"zeroed block at {start}", bytes(zeroed)
    for i in range(1, len(ends) - 2):
        yield f"lines {i} and {i + 1} glued", data[: ends[i] - 1] + data[ends[i] :]
    for i in range(1, len(ends) - 2, 1 if not quick else 5):
        line = data[ends[i - 1] : ends[i]]
        quote = line.rfind(b'","crc"')  # inside the last string value of a line? fall back to the type string
        at = line.find(b'"type":"') + 9 if quote < 0 else quote - 1
        raw = line[:at] + "\u2028".encode() + line[at:]
        yield f"raw U+2028 in line {i + 1}", data[: ends[i - 1]] + raw + data[ends[i] :]


def run_damage(quick: bool, seed: int) -> dict[str, Any]:
    """Damage before the tail is refused with LogCorruptError and a copy kept; never silently skipped."""
    began, tally = time.perf_counter(), Tally()
    data = FIXTURE.read_bytes()
    rng = random.Random(seed)
    with _workdir() as work:
        for label, damaged in _damaged_variants(data, quick, rng):
            tally.cases += 1
            tally.count("glued lines" if "glued" in label else label.split(" at ")[0].split(" in line")[0])
            path = _fresh(work / "case")
            path.write_bytes(damaged)
            try:
                Session.open(path, snapshot_every=0, ops=NO_SYNC).close()
                tally.check(False, f"{label}: opened without an error")
                continue
            except LogCorruptError as err:
                kept = Path(err.kept) if err.kept else None
                tally.check(kept is not None and kept.read_bytes() == damaged and str(kept) in str(err), f"{label}: no copy kept")
                tally.check(path.read_bytes() == damaged, f"{label}: the damaged log was changed")
                tally.check(f"line {err.line}" in str(err) and "damaged" in str(err), f"{label}: unclear message {err}")
            except Exception as exc:  # noqa: BLE001
                tally.check(False, f"{label}: {type(exc).__name__}: {exc}")
                continue
            try:
                list(read_events(path))
                tally.check(False, f"{label}: read_events skipped the damage")
            except LogCorruptError:
                tally.checks += 1
            except Exception as exc:  # noqa: BLE001
                tally.check(False, f"{label}: read_events raised {type(exc).__name__}")
    return _row(
        "3. Damage before the tail",
        "open raises LogCorruptError naming line and offset, the file is unchanged, a byte-exact copy is kept and named in the message; read_events refuses too",
        tally,
        seed,
        began,
    )


# The scripted session (scenarios 4, 6, 10) -----------------------------------------------------------
class ScriptedModel:
    """A model whose reply depends only on how many assistant messages the request holds; streams its text."""

    name = "scripted"

    def __init__(self, hook: Callable[[], None] | None = None) -> None:
        self.hook = hook
        self.calls = 0

    def stream(self, request: ModelRequest, on_delta: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        self.calls += 1
        if self.hook is not None:
            self.hook()
        turn = sum(1 for m in request.messages if m["role"] == "assistant")
        content = SCRIPT[turn]
        for index, block in enumerate(content):
            if block["type"] == "text":
                words = block["text"].split(" ")
                for i, word in enumerate(words):
                    on_delta({"index": index, "text": word + (" " if i < len(words) - 1 else "")})
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        return {
            "id": f"msg_{turn}",
            "model": "scripted",
            "content": json.loads(json.dumps(content)),
            "stop_reason": stop,
            "usage": {"output_tokens": 3},
        }


def _use(tool_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": arguments}


SCRIPT: list[list[dict[str, Any]]] = [
    [
        {"type": "text", "text": "I will charge and look it up."},
        _use("toolu_1", "charge", amount=5),
        _use("toolu_2", "lookup", q="balance"),
    ],
    [_use("toolu_3", "note", text="charged 5")],
    [{"type": "text", "text": "Done with the first request."}],
    [{"type": "text", "text": "Charging again."}, _use("toolu_4", "charge", amount=7)],
    [{"type": "text", "text": "All done now."}],
]
FINAL_TEXT = "All done now."


class Effects:
    """The tools' own record of what they did (outside the log, like a payment provider's)."""

    def __init__(self, hook: Callable[[str], None] | None = None) -> None:
        self.charges: dict[str, list[int]] = {}  # idempotency key -> amounts charged (applied once per key)
        self.attempts: dict[str, int] = {}
        self.notes: list[str] = []
        self.hook = hook
        self.calls = 0

    def tools(self) -> list[Tool]:
        @tool(effect="read")
        def lookup(q: str) -> str:
            """Look something up."""
            self.calls += 1
            return f"{q}: ok"

        @tool
        def charge(amount: int, idempotency_key: str) -> str:
            """Charge an amount."""
            self.calls += 1
            if self.hook is not None:
                self.hook("charge")
            self.attempts[idempotency_key] = self.attempts.get(idempotency_key, 0) + 1
            self.charges.setdefault(idempotency_key, [])
            if not self.charges[idempotency_key]:
                self.charges[idempotency_key].append(amount)
            return f"charged {amount}"

        @tool
        def note(text: str) -> str:
            """Write a note (not idempotent)."""
            self.calls += 1
            if self.hook is not None:
                self.hook("note")
            self.notes.append(text)
            return "noted"

        return [lookup, charge, note]


def drive(
    path: Path,
    *,
    ops: FileOps | None,
    fsync: str,
    effects: Effects,
    model: ScriptedModel | None = None,
    snapshot_every: int = 8,
    on_event: Callable[[ev.Event], None] | None = None,
) -> Session:
    """Open (or resume) the scripted session and run it to the end; returns the session, still open."""
    session = Session.open(path, fsync=fsync, snapshot_every=snapshot_every, ops=ops)  # type: ignore[arg-type]
    try:
        if on_event is not None:
            session.subscribe(on_event)
        loop = Loop(session, tools=effects.tools(), model=model or ScriptedModel(), approval="deny")
        if session.state.frontier in ("model", "tools"):
            loop.run()
        for prompt in PROMPTS[session.state.turns :]:
            loop.run(prompt)
    except BaseException as exc:
        exc.session = session  # type: ignore[attr-defined]
        raise
    return session


def check_finished(path: Path, effects: Effects, tally: Tally, label: str) -> None:
    """The log scans whole, the transcript is finished, keyed effects once, un-keyed at most once."""
    data = path.read_bytes()
    try:
        result = scan(data, path=str(path))
    except LogError as exc:
        tally.check(False, f"{label}: the final log does not scan: {exc}")
        return
    tally.check(not result.torn, f"{label}: the final log has a torn tail ({result.torn_reason})")
    state = fold.fold(result.events)
    tally.check(
        state.frontier == "done" and state.turns == 2 and state.final_text == FINAL_TEXT,
        f"{label}: the session did not finish ({state.frontier}, {state.turns} turns)",
    )
    tally.check(sorted(sum(effects.charges.values(), [])) == [5, 7] and len(effects.charges) == 2, f"{label}: charges {effects.charges}")
    tally.check(len(effects.notes) <= 1, f"{label}: the un-keyed note ran {len(effects.notes)} times")
    if not effects.notes:
        unknown = [e for e in result.events if e["type"] == ev.TOOL_RESULT and e["tool_use_id"] == "toolu_3"]
        tally.check(
            bool(unknown) and all(isinstance(e["content"], str) for e in unknown), f"{label}: the note neither ran nor was reported"
        )
    results = [e["tool_use_id"] for e in result.events if e["type"] == ev.TOOL_RESULT]
    tally.check(len(results) == len(set(results)) == 4, f"{label}: tool results {results}")


def _close_quietly(session: Session | None) -> None:
    if session is not None:
        with contextlib.suppress(LogError, Crash, OSError):
            session.close()
        if not session.closed:  # a crash inside close: release the handle and lock anyway
            with contextlib.suppress(Exception):
                session._log.ops.close(session._log.fileno())  # noqa: SLF001 - the simulated machine died
            with contextlib.suppress(Exception):
                session._log._lock.release()  # noqa: SLF001


# 4. Lost unsynced writes ---------------------------------------------------------------------------------
def run_lost_writes(quick: bool, seed: int) -> dict[str, Any]:
    """Crash at every step of a scripted session, keeping/dropping/garbling unsynced writes; acked durable events survive."""
    began, tally = time.perf_counter(), Tally()
    plans = [("turn", ("keep", "drop", "garble", "prefix", "each")), ("always", ("drop", "prefix", "each"))]
    seeds = 1 if quick else 4
    rng = random.Random(seed)
    refused = first_line_lost = 0
    with _workdir() as work:
        for fsync, modes in plans:
            total = FaultyFiles()
            drive(_fresh(work / "count"), ops=total, fsync=fsync, effects=Effects()).close()
            steps = total.steps
            tally.details[f"steps in one session (fsync={fsync})"] = steps
            stride = (3 if fsync == "turn" else 4) if quick else 1
            for crash_at in range(1 + rng.randrange(stride), steps + 2, stride):
                folder = work / "run"
                path = _fresh(folder)
                ops = FaultyFiles(crash_at=crash_at)
                acked: list[ev.Event] = []
                effects = Effects()
                session = None
                try:
                    session = drive(path, ops=ops, fsync=fsync, effects=effects, on_event=acked.append)
                    session.close()
                except Crash as crash:
                    session = getattr(crash, "session", None)
                _close_quietly(session)
                ops.crashed = True
                durable = [e for e in acked if fsync == "always" or ev.is_durable(e["type"], e)]
                for mode in modes:
                    for _ in range(seeds if mode in ("garble", "prefix", "each") else 1):
                        tally.cases += 1
                        label = f"fsync={fsync} crash at step {crash_at}/{steps} ({ops.trace[-1][0] if ops.trace else 'start'}) {mode}"
                        image = ops.crash_image(mode, rng.randrange(1 << 30))  # type: ignore[arg-type]
                        after = _fresh(work / "after")
                        placed = ops.write_image(image, after)
                        log = placed.get(str(path), after / path.name)
                        resumed = Effects()
                        resumed.charges = {k: list(v) for k, v in effects.charges.items()}
                        resumed.notes = list(effects.notes)
                        try:
                            with Session.open(log, ops=NO_SYNC, snapshot_every=0) as reopened:
                                got = {e["seq"]: e for e in reopened.events()}
                                state = reopened.state.to_dict()
                            missing = [e["seq"] for e in durable if got.get(e["seq"], {}).get("crc") != e["crc"]]
                            tally.check(not missing, f"{label}: acknowledged durable events lost: {missing}")
                            by_seq = {e["seq"]: e for e in acked}
                            invented = [s for s, e in got.items() if s in by_seq and by_seq[s]["crc"] != e["crc"]]
                            tally.check(not invented, f"{label}: events that were never written: {invented}")
                            tally.check(state == fold.fold(got.values()).to_dict(), f"{label}: the snapshot and the log disagree")
                            drive(log, ops=NO_SYNC, fsync="turn", effects=resumed).close()
                            check_finished(log, resumed, tally, label)
                        except LogCorruptError as err:
                            # Possible only when unsynced writes persist out of order (a hole of lost writes followed
                            # by kept ones): nothing acknowledged is lost, but opening refuses (with a copy kept).
                            refused += 1
                            durable_end = max((e["seq"] for e in durable), default=0)
                            tally.check(mode == "each" and err.line > durable_end and err.kept is not None, f"{label}: refused: {err}")
                        except NotALogError:
                            # The crash garbled the first line before it was ever synced: nothing was acknowledged,
                            # and a file that does not begin like a log is refused, untouched (the not-a-log rule).
                            first_line_lost += 1
                            tally.check(not durable, f"{label}: refused as not a log after a durable event")
                        except Exception as exc:  # noqa: BLE001
                            tally.check(False, f"{label}: {type(exc).__name__}: {exc}")
    tally.details["crash states refused as not a log (the first line garbled before it was ever synced)"] = first_line_lost
    tally.details["crash states refused as damaged (out-of-order persistence only, after every durable event)"] = refused
    return _row(
        "4. Lost unsynced writes",
        "crash at every file operation of a scripted two-turn session with tools and snapshots; each crash state "
        "(unsynced writes kept, dropped, garbled, persisted as a torn prefix, or each independently) reopens with "
        "every acknowledged durable event (same seq and crc), no invented event, snapshot == log; resuming finishes "
        "the session with keyed charges once and the un-keyed note at most once",
        tally,
        seed,
        began,
    )


# 5. Snapshots ----------------------------------------------------------------------------------------------
def run_snapshot_crash(quick: bool, seed: int) -> dict[str, Any]:
    """Crash after each step of writing a snapshot: the session opens to the old or the new snapshot, never a mix."""
    began, tally = time.perf_counter(), Tally()
    rng = random.Random(seed)
    modes = ("keep", "drop", "garble", "prefix", "each")
    seeds = 3 if quick else 20
    with _workdir() as work:
        base = _fresh(work / "base")
        with Session.open(base, fsync="never", snapshot_every=0) as session:
            session.append(ev.USER_MSG, content="first")
            session.append(ev.ASSISTANT_MSG, content=[{"type": "text", "text": "one"}], stop_reason="end_turn", usage={})
            session.snapshot()
            old = (base.parent / (base.name + ".snapshot")).read_bytes()
            for i in range(6):
                session.append(ev.USER_MSG, content=f"more {i}")
                session.append(ev.ASSISTANT_MSG, content=[{"type": "text", "text": f"answer {i}"}], stop_reason="end_turn", usage={})
        reference = _fresh(work / "reference")
        shutil.copy(base, reference)
        shutil.copy(str(base) + ".snapshot", str(reference) + ".snapshot")
        with Session.open(reference, snapshot_every=0) as session:
            session.snapshot()
        new = Path(str(reference) + ".snapshot").read_bytes()
        expected = fold.fold(read_events(base)).to_dict()
        counter = FaultyFiles()
        steps = None
        for crash_at in range(1, 64):
            path = _fresh(work / "case")
            shutil.copy(base, path)
            shutil.copy(str(base) + ".snapshot", str(path) + ".snapshot")
            ops = FaultyFiles()
            session = Session.open(path, snapshot_every=0, ops=ops)
            ops.arm_crash(crash_at)
            finished = False
            try:
                session.snapshot()
                finished = True
            except Crash:
                pass
            step = ops.trace[-1][0] if ops.trace else "-"
            _close_quietly(session)
            ops.crashed = True
            for mode in modes:
                for _ in range(seeds if mode in ("garble", "prefix", "each") else 1):
                    tally.cases += 1
                    label = f"crash at snapshot step {crash_at} (after {step}) {mode}"
                    after = _fresh(work / "after")
                    ops.write_image(ops.crash_image(mode, rng.randrange(1 << 30)), after)  # type: ignore[arg-type]
                    snap = after / (path.name + ".snapshot")
                    found = snap.read_bytes() if snap.exists() else None
                    tally.check(found in (old, new), f"{label}: the snapshot is neither the old nor the new one")
                    try:
                        with Session.open(after / path.name, snapshot_every=0, ops=NO_SYNC) as reopened:
                            tally.check(reopened.state.to_dict() == expected, f"{label}: opened to a different state")
                            tally.check(reopened.snapshot_note == "", f"{label}: {reopened.snapshot_note}")
                    except Exception as exc:  # noqa: BLE001
                        tally.check(False, f"{label}: {type(exc).__name__}: {exc}")
            if finished:
                steps = crash_at - 1
                break
        del counter
    tally.details["steps in one snapshot write"] = steps
    return _row(
        "5. Snapshot crashes",
        "crash at every step of a snapshot write (log sync, temp create, writes, fsync, rename, folder fsync); each crash state of unsynced data and folder entries leaves the old or the new snapshot byte for byte, and opens to the state folded from the log",
        tally,
        seed,
        began,
    )


# 6. I/O errors -----------------------------------------------------------------------------------------------
def run_io_errors(quick: bool, seed: int) -> dict[str, Any]:
    """Fail the N-th write or fsync (EIO, ENOSPC; once, persistently; short writes) until a session completes."""
    began, tally = time.perf_counter(), Tally()
    kinds: list[tuple[str, int, bool, bool]] = [
        ("write", errno.EIO, False, False),
        ("fsync", errno.EIO, False, False),
        ("fsync", errno.EIO, True, False),
        ("write", errno.ENOSPC, False, True),
    ]
    if not quick:
        kinds += [
            ("write", errno.ENOSPC, True, False),
            ("write", errno.ENOSPC, True, True),
            ("write", errno.ENOSPC, False, False),
            ("write", errno.EIO, True, False),
            ("fsync", errno.ENOSPC, False, False),
            ("fsync", errno.ENOSPC, True, False),
            ("write", errno.EIO, False, True),
        ]
    with _workdir() as work:
        for op, code, persistent, short in kinds:
            kind = f"{op} {errno.errorcode[code]} {'persistent' if persistent else 'once'}{' short' if short else ''}"
            nth = 0
            while True:
                nth += 1
                tally.cases += 1
                label = f"{kind}, N={nth}"
                path = _fresh(work / "case")
                fault = Fault(op, nth, code, persistent, short)
                ops = FaultyFiles(faults=[fault])
                effects = Effects()
                session = None
                try:
                    session = drive(path, ops=ops, fsync="turn", effects=effects)
                    session.close()
                    if not fault.fired:
                        break  # the whole session ran before the N-th call: done with this kind
                    tally.count("faults absorbed (snapshot writes)")
                except LogError as err:
                    session = getattr(err, "session", None)
                    tally.count(f"{type(err).__name__} raised")
                    if session is not None and isinstance(err, LogWriteError) and not session.closed:
                        writes = ops.counts["write"]
                        try:
                            session.append(ev.NOTE, text="after the failure")
                            tally.check(False, f"{label}: the log took a write after a failed {op}")
                        except LogError:
                            tally.check(ops.counts["write"] == writes, f"{label}: the refused append still wrote")
                except Exception as exc:  # noqa: BLE001
                    tally.check(False, f"{label}: undocumented {type(exc).__name__}: {exc}")
                    session = getattr(exc, "session", None)
                _close_quietly(session)
                if persistent:  # still failing: reopening and resuming must fail cleanly
                    try:
                        drive(path, ops=ops, fsync="turn", effects=effects).close()
                    except LogError as err:
                        _close_quietly(getattr(err, "session", None))
                    except Exception as exc:  # noqa: BLE001
                        tally.check(False, f"{label}: resuming on a failing disk raised {type(exc).__name__}: {exc}")
                        _close_quietly(getattr(exc, "session", None))
                ops.faults.clear()
                ops._fail_next_write = None  # noqa: SLF001 - the disk has room again
                try:
                    drive(path, ops=ops, fsync="turn", effects=effects).close()
                    check_finished(path, effects, tally, label)
                except Exception as exc:  # noqa: BLE001
                    tally.check(False, f"{label}: reopening after the fault raised {type(exc).__name__}: {exc}")
                    _close_quietly(getattr(exc, "session", None))
            tally.details[f"N tried for {kind}"] = nth
    return _row(
        "6. I/O errors",
        "the N-th write or fsync fails (EIO/ENOSPC, once or persistently, or a short write then ENOSPC) for N = 1, 2, ... "
        "until the session completes untouched: only LogError subclasses reach the caller; after a failed write or fsync the "
        "log refuses appends without writing; reopening (after the disk recovers) finishes the session; the final log scans "
        "whole (no fused partial line); keyed charges once, the un-keyed note at most once",
        tally,
        seed,
        began,
    )


# 7. Failure during recovery -----------------------------------------------------------------------------
def run_recovery_faults(quick: bool, seed: int) -> dict[str, Any]:
    """Crash or fail while a torn tail is being cut off and kept; recovering again gives the same result."""
    began, tally = time.perf_counter(), Tally()
    rng = random.Random(seed)
    data = FIXTURE.read_bytes()
    ends = _line_ends(data)
    tears = [ends[-2] + (ends[-1] - ends[-2]) // 2, ends[-1] - 1] + ([] if quick else [ends[-2] + 1, ends[-1] - 40])
    with _workdir() as work:
        for tear in tears:
            torn_log = data[:tear]
            reference = _fresh(work / "reference")
            reference.write_bytes(torn_log)
            with Session.open(reference, snapshot_every=0) as session:
                want_events = [e["crc"] for e in session.events()]
            want_log = reference.read_bytes()
            want_side = torn_log[len(want_log) :]
            plans: list[tuple[str, Any]] = [("crash", k) for k in range(1, 12)]
            plans += [
                ("fault", Fault(op, n, code, persistent))
                for op in ("write", "fsync")
                for n in range(1, 4)
                for code in (errno.EIO, errno.ENOSPC)
                for persistent in (False, True)
            ]
            for kind, plan in plans:
                path = _fresh(work / "case")
                path.write_bytes(torn_log)
                ops = FaultyFiles(crash_at=plan if kind == "crash" else None, faults=[plan] if kind == "fault" else [])
                try:
                    Session.open(path, snapshot_every=0, ops=ops).close()
                except (Crash, LogError) as exc:
                    tally.count(f"recovery stopped by {type(exc).__name__}")
                except Exception as exc:  # noqa: BLE001
                    tally.check(False, f"tear {tear} {kind} {plan}: undocumented {type(exc).__name__}: {exc}")
                if kind == "fault" and not plan.fired:
                    continue
                ops.crashed = True
                for mode in ("keep", "drop", "prefix", "each") if kind == "crash" else ("keep",):
                    for _ in range(1 if mode in ("keep", "drop") else (2 if quick else 8)):
                        tally.cases += 1
                        label = f"tear {tear} {kind} {plan} {mode}"
                        after = _fresh(work / "after")
                        image = ops.crash_image(mode, rng.randrange(1 << 30)) if kind == "crash" else {str(path): path.read_bytes()}  # type: ignore[arg-type]
                        if kind == "fault":
                            for side in _side_files(path, "torn"):
                                image[str(side)] = side.read_bytes()
                        ops.write_image(image, after)
                        log = after / path.name
                        try:
                            for attempt in (1, 2):  # recovering twice changes nothing more
                                with Session.open(log, snapshot_every=0, ops=NO_SYNC) as session:
                                    got = [e["crc"] for e in session.events()]
                                tally.check(
                                    got == want_events and log.read_bytes() == want_log, f"{label}: recovery {attempt} gave another log"
                                )
                                sides = _side_files(log, "torn")
                                tally.check(
                                    len(sides) == 1 and sides[0].read_bytes() == want_side,
                                    f"{label}: the torn tail was not kept (attempt {attempt})",
                                )
                        except Exception as exc:  # noqa: BLE001
                            tally.check(False, f"{label}: {type(exc).__name__}: {exc}")
    return _row(
        "7. Failure during recovery",
        "crash at every step of cutting off a torn tail (side file create, write, fsync, folder fsync, truncate, fsync) with unsynced changes kept/dropped/torn, or EIO/ENOSPC on the N-th write or fsync: only LogError or the crash escapes; recovering again (twice) yields the same log bytes and events, with the torn bytes kept aside",
        tally,
        seed,
        began,
    )


# 10. Ordering ---------------------------------------------------------------------------------------------
def ordering_violations(ops: FaultyFiles, path: Path) -> list[int]:
    """Seqs of events that must be durable (durable types, and non-read tool_started) but are not on disk yet."""
    durable = ops.durable_bytes(path) or b""
    on_disk = {e["seq"] for e in scan(durable, path=str(path)).events} if durable else set()
    written = scan(path.read_bytes(), path=str(path)).events
    return [e["seq"] for e in written if ev.is_durable(e["type"], e) and e["seq"] not in on_disk]


def run_ordering(quick: bool, seed: int, *, fsync: str = "turn") -> dict[str, Any]:
    """The intent line of a non-read tool is fsynced before its body; every tool result before the next model call."""
    began, tally = time.perf_counter(), Tally()
    rounds = 3 if quick else 50
    seen: dict[str, int] = {}
    with _workdir() as work:
        for policy in (fsync,) if fsync != "turn" else ("turn", "always"):
            for _ in range(rounds):
                tally.cases += 1
                path = _fresh(work / "case")
                ops = FaultyFiles()

                def check(where: str, ops: FaultyFiles = ops, path: Path = path, policy: str = policy) -> None:
                    seen[where] = seen.get(where, 0) + 1
                    late = ordering_violations(ops, path)
                    tally.check(not late, f"fsync={policy}: events {late} not yet durable when {where} was called")

                effects = Effects(hook=lambda name: check(f"tool {name}"))
                drive(path, ops=ops, fsync=policy, effects=effects, model=ScriptedModel(hook=lambda: check("the model"))).close()
    tally.details.update({f"checks at {k}": v for k, v in seen.items()})
    return _row(
        "10. Ordering",
        "at every model call and inside every non-read tool body, every event that must be durable (user_msg, assistant_msg, tool_result, non-read tool_started, ...) is already in the fault layer's fsynced image of the log (fsync=turn and always)",
        tally,
        seed,
        began,
    )


SCENARIOS: dict[str, Callable[[bool, int], dict[str, Any]]] = {
    "truncation": run_truncation,
    "torn_tail": run_torn_tail,
    "damage": run_damage,
    "lost_writes": run_lost_writes,
    "snapshot_crash": run_snapshot_crash,
    "io_errors": run_io_errors,
    "recovery_faults": run_recovery_faults,
    "ordering": run_ordering,
}


def main(argv: list[str]) -> int:
    """``python -m reliability.storage [SCENARIO ...] [--quick] [--seed N]``: print each row as JSON."""
    quick = "--quick" in argv
    seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 0
    names = [a for a in argv if a in SCENARIOS] or list(SCENARIOS)
    failed = False
    for name in names:
        row = SCENARIOS[name](quick, seed)
        failed |= row["result"] != "pass"
        print(json.dumps(row, indent=1), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
