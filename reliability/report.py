"""Run every scenario module that exists and render RELIABILITY.md: one table, details, and what is not guaranteed."""

from __future__ import annotations

import datetime
import importlib
import importlib.util
import os
import platform
import re
import subprocess
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Scenario modules, in the order of issue 5; a module that does not exist (yet) is skipped.
MODULES = (
    "reliability.storage",
    "reliability.killloop",
    "reliability.locks",
    "reliability.replay",
    "reliability.security",
    "reliability.hostile",
    "reliability.redteam",
)
Row = dict[str, Any]
Scenario = Callable[[bool, int], Row]

NOT_GUARANTEED = """\
- **An un-keyed side effect interrupted mid-way has an unknown outcome.** If a process dies after a
  write tool without an `idempotency_key` has started and before its result is logged, nbagent cannot
  know whether the effect happened. It never repeats such a call on its own: it asks (approval reason
  `unknown_outcome`), and if declined the model gets an error result saying the outcome is unknown. The
  effect happened zero or one times; deciding which is left to the user or the model. Give write tools
  an `idempotency_key` parameter (and a service that honours it) to get exactly-once.
- **Exactly-once for keyed tools is only as good as the tool.** nbagent passes the same key on every
  attempt of a call; the tool (or the service behind it) must apply each key once.
- **Read tools may run more than once** after a crash (they are re-run, by design).
- **`fsync="never"` gives no durability** against power loss or an OS crash: the kernel may drop any
  write not yet flushed. `fsync="turn"` (the default) makes the durable event types (user messages,
  assistant messages, tool results, approvals, the `tool_started` intent of non-read tools, ...) reach the
  disk before the engine acts on them; stream deltas and `model_call` markers are not fsynced and may
  be lost on power failure (the reply is then requested again).
- **A torn tail loses the last event.** A write cut short by a crash leaves a partial last line; opening
  the log cuts it off (keeping the bytes in `<log>.torn-<offset>`), so that event is gone. Under
  `fsync="turn"` it can only be an event nobody was told was durable.
- **The kill loop kills processes, not machines.** A SIGKILL keeps the page cache, so it proves the
  replay rules and the write ordering, not the fsyncs; lost unsynced writes are simulated by the
  storage scenarios (4, 5, 7, 10) with a fault-injecting file layer, not by cutting power.
- **Damage before the tail is refused, not repaired.** A checksum mismatch followed by valid lines
  stops `Session.open` with `LogCorruptError` (the file is left as it was); there is no automatic repair.
- **Prefix damage behind a snapshot is not noticed by `open`.** When a valid snapshot covers the start
  of the log, open reads only the tail after it; damage in the covered prefix is found by
  `nbagent verify`, not by open.
- **The lock is advisory and local.** It is an `flock` on `<log>.lock`: it keeps nbagent writers apart on
  one machine; other programs writing the file, or network file systems without working `flock`, are not
  covered. Deleting the `.lock` file while a writer holds it lets a second writer in.
- **A tool the code no longer has cannot be replayed.** A recorded call to a renamed or removed tool gets
  an error result naming the tools offered (and a `note` event plus a logged warning); nbagent does not
  guess which new tool was meant.
- **The model is not deterministic.** Resuming reuses every recorded reply; only calls that never
  completed are made again, and the real model may then answer differently than it would have.
"""


def discover(names: Iterable[str] = MODULES) -> list[tuple[str, Scenario]]:
    """Every scenario function of every scenario module present: ``SCENARIOS`` if the module has it, else its ``run_*``."""
    found: list[tuple[str, Scenario]] = []
    for name in names:
        if importlib.util.find_spec(name) is None:
            continue
        module = importlib.import_module(name)
        table = getattr(module, "SCENARIOS", None)
        if isinstance(table, dict):
            found += [(f"{name}:{key}", func) for key, func in table.items()]
        else:
            found += [
                (f"{name}:{attr[4:]}", getattr(module, attr))
                for attr in sorted(vars(module))
                if attr.startswith("run_") and callable(getattr(module, attr)) and getattr(getattr(module, attr), "__module__", "") == name
            ]
    return found


def run_all(quick: bool, seed: int, only: str = "", progress: Callable[[str], None] = print) -> list[Row]:
    """Run the scenarios (those whose name contains ``only``); a scenario that raises becomes an ERROR row."""
    rows = []
    for name, scenario in discover():
        if only and only not in name:
            continue
        progress(f"running {name} ({'quick' if quick else 'full'}, seed {seed}) ...")
        began = time.perf_counter()
        try:
            row = dict(scenario(quick, seed))
        except Exception as exc:  # noqa: BLE001 - a crashing scenario is a finding, reported in the table
            row = {
                "scenario": name,
                "cases": 0,
                "checked": "",
                "result": "ERROR",
                "failures": [f"{type(exc).__name__}: {exc}", traceback.format_exc()[-3000:]],
            }
        row.setdefault("seed", seed)
        row.setdefault("duration", time.perf_counter() - began)
        row["source"] = name
        progress(f"  {row['result']} in {row['duration']:.1f} s: {row['cases']}")
        rows.append(row)
    return sorted(rows, key=_order)


def _order(row: Row) -> tuple[int, str]:
    match = re.match(r"\s*(\d+)", str(row.get("scenario", "")))
    return (int(match.group(1)) if match else 99, str(row.get("scenario")))


def passed(rows: list[Row]) -> bool:
    """Whether every scenario passed."""
    return all(str(row.get("result")).lower() == "pass" for row in rows)


def machine() -> str:
    """One line about where the campaign ran."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "nbagent"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    return (
        f"{platform.system()} {platform.release()}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, nbagent at commit {commit or '?'}{' (engine modified)' if dirty else ''}"
    )


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def render(rows: list[Row], *, quick: bool, seed: int, elapsed: float) -> str:
    """The Markdown of RELIABILITY.md."""
    command = "python -m reliability" + (" --quick" if quick else "") + (f" --seed {seed}" if seed else "")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "# Reliability figures",
        "",
        f"Generated by `{command}` ({'quick variant' if quick else 'full campaign'}) on {now} in {elapsed / 60:.1f} min.",
        f"Machine: {machine()}.",
        "",
        "Each scenario is seeded and reproducible with the same command and seed; the scenarios are those of",
        "issue 5 (numbered as there). A quick variant of each runs in the normal test suite",
        "(`tests/campaigns/test_reliability.py` and the storage scenario tests). Overall: "
        + ("**every scenario passed**." if passed(rows) else "**some scenarios FAILED** (see below)."),
        "",
        "| Scenario | Cases run | What was checked | Result | Seed | Duration |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        out.append(
            f"| {_cell(row['scenario'])} | {_cell(row['cases'])} | {_cell(row['checked'])} | "
            f"{_cell(row['result'])} | {_cell(row.get('seed', seed))} | {float(row.get('duration', 0)):.1f} s |"
        )
    out += ["", "## Details", ""]
    for row in rows:
        out.append(f"### {row['scenario']}")
        out.append("")
        out.append(f"Source: `{row.get('source', '?')}`" + (f"; {row['checks']} individual checks." if row.get("checks") else "."))
        for key, value in (row.get("details") or {}).items():
            out.append(f"- {key}: {value}")
        for failure in row.get("failures") or []:
            out.append(f"- FAILURE: `{_cell(failure)[:1500]}`")
        out.append("")
    out += ["## What is not guaranteed", "", NOT_GUARANTEED]
    return "\n".join(out)
