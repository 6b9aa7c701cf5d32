"""Scenario 16, the red team of issue 20: eleven attacks on the newest surfaces, each through its real entry point.

Each topic module (``TOPICS``) has ``attacks(ctx) -> list[Finding]``: it makes the attack happen
(a second user's process with its own secret where the attack needs one, a real Jupyter server, a
real PostgreSQL cluster with the documented grants) and says what came of it. The same functions
are what ``tests/test_redteam_*.py`` run, so the campaign and the test suite try the same attacks.
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUTCOMES = ("refused", "inert", "asked", "ran")
TOPICS = (
    "reliability.redteam.trust",  # 1 and 11
    "reliability.redteam.files",  # 2
    "reliability.redteam.postgres",  # 3 and 5
    "reliability.redteam.server",  # 6
    "reliability.redteam.views",  # 7 and 8
    "reliability.redteam.output",  # 10
    "reliability.redteam.labels",  # 4 and 9
)


@dataclass
class Finding:
    """One attack tried: which defect of issue 20, what was done, what came of it, and any promise broken."""

    defect: int
    attack: str
    outcome: str  # one of OUTCOMES; "ran" means something ran, changed or leaked unasked
    problems: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        assert self.outcome in OUTCOMES, self.outcome

    @property
    def held(self) -> bool:
        """The defence held: nothing ran and no promise was broken."""
        return self.outcome != "ran" and not self.problems


class Missing(Exception):
    """A part an attack needs (PostgreSQL, Chromium) is not on this machine."""


class Parts:
    """Parts started on demand and shared by every topic of one run."""

    def __init__(self) -> None:
        self._cluster: Any = None

    def postgres(self) -> Any:
        """A throwaway PostgreSQL cluster (tests/support/pg_harness.py), started once; Missing when none can be."""
        if self._cluster is None:
            from tests.support import pg_harness

            reason = pg_harness.missing()
            if reason:
                raise Missing(reason)
            self._cluster = pg_harness.Cluster()
        return self._cluster

    def close(self) -> None:
        """Stop what was started."""
        if self._cluster is not None:
            self._cluster.stop()
            self._cluster = None


@dataclass
class Context:
    """What an attack module gets: a fresh folder of its own, quick or full, and the shared parts."""

    folder: Path
    quick: bool
    parts: Parts = field(default_factory=Parts)

    def postgres(self) -> Any:
        """The shared PostgreSQL cluster (``.new_database()`` gives a fresh database's DSN)."""
        return self.parts.postgres()

    def sub(self, name: str) -> Context:
        """A context with a fresh sub-folder of its own, sharing the parts."""
        folder = self.folder / name
        folder.mkdir(parents=True, exist_ok=True)
        return Context(folder, self.quick, self.parts)


@contextmanager
def context(quick: bool) -> Iterator[Context]:
    """A Context in a temp folder, removed (and its parts stopped) afterwards."""
    top = Path(tempfile.mkdtemp(prefix="nbagent-redteam-"))
    ctx = Context(top, quick)
    try:
        yield ctx
    finally:
        ctx.parts.close()
        shutil.rmtree(top, ignore_errors=True)


def run_topic(name: str, ctx: Context) -> list[Finding]:
    """One topic module's attacks, in a sub-folder of its own."""
    attacks: Callable[[Context], list[Finding]] = importlib.import_module(name).attacks
    return attacks(ctx.sub(name.rsplit(".", 1)[-1]))


def run_redteam(quick: bool, seed: int) -> dict[str, Any]:
    """Scenario 16: every topic's attacks; a part that is missing here is a gap, not a pass."""
    began = time.perf_counter()
    findings: list[Finding] = []
    gaps: list[str] = []
    with context(quick) as ctx:
        for name in TOPICS:
            if importlib.util.find_spec(name) is None:
                gaps.append(f"{name}: not written")
                continue
            try:
                findings += run_topic(name, ctx)
            except Missing as missing:
                gaps.append(f"{name}: {missing}")
    outcomes = Counter(f.outcome for f in findings)
    defects = sorted({f.defect for f in findings})
    failures = [f"defect {f.defect}, {f.attack}: {f.outcome}; " + "; ".join(f.problems) for f in findings if not f.held]
    failures += [f"not run: {gap}" for gap in gaps]
    cases = f"{len(findings)} attacks on defects {', '.join(map(str, defects))} (" + ", ".join(f"{o} {outcomes[o]}" for o in OUTCOMES) + ")"
    return {
        "scenario": "16. Red team: the newest surfaces (issue 20)",
        "cases": cases,
        "checked": (
            "trust vouches only for the bytes shown; nothing beside a log that is not a regular file is opened and the server "
            "stays responsive; a session's rows are written only by its owner role and existence does not leak; trust labels "
            "come from the signature check; a damaged database row is a one-line error; the server streams a big log in bounded "
            "memory; images from a log are bounded by pixels; no live link into the Jupyter server; thinking is never shown "
            "unredacted nor exported; tool output is bounded while it is read; a foreign log is never continued unasked"
        ),
        "result": "pass" if not failures else "FAIL",
        "failures": failures,
        "seed": seed,
        "duration": time.perf_counter() - began,
        "details": {"findings": [f"#{f.defect} {f.attack}: {f.outcome}" for f in findings]},
    }


SCENARIOS = {"redteam": run_redteam}
