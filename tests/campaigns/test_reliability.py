"""Quick variants of the reliability campaign (issue 5: scenarios 8, 9, 11) and its report generator."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reliability import killloop, locks, replay, report
from tests.support.crash_tools import read_effects
from tests.support.fake_anthropic import FakeAnthropic

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # quick runs of the reliability campaign: seconds each


def assert_passed(row: dict) -> None:
    assert row["result"] == "pass", "\n".join(row["failures"])


def test_kill_loop_quick() -> None:
    row = killloop.run_killloop(quick=True, seed=0)
    assert_passed(row)
    assert int(row["cases"].split()[0]) >= 40
    assert row["details"]["durable events checked"] > 0


@pytest.fixture(scope="module")
def one_worker() -> Iterator[tuple[killloop.Zygote, FakeAnthropic]]:
    with FakeAnthropic() as fake:
        fake.responder = killloop.respond
        fake._httpd.handle_error = lambda *_: None  # a killed child resets its connection
        zygote = killloop.Zygote()
        yield zygote, fake
        zygote.close()


def test_kill_loop_checks_catch_a_repeated_effect_and_a_lost_event(one_worker, tmp_path: Path) -> None:
    """The checks are not vacuous: a second application of a keyed charge, or a durable event gone, is reported."""
    zygote, fake = one_worker
    baseline = killloop.make_baseline(zygote, tmp_path, fake.base_url)
    folder = tmp_path / "case"
    folder.mkdir()
    plan = killloop.Plan("tool", "in charge", ("--block-in", "charge:1"))
    child, killed = killloop.run_job(zygote, folder, plan, fake.base_url, 0)
    assert killed
    child, killed = killloop.run_job(zygote, folder, None, fake.base_url, 1)
    assert not killed and child.wait() == 0
    log, effects = folder / "session.jsonl", folder / "effects.jsonl"

    result = killloop.CaseResult()
    killloop.check_case(result, log.read_bytes(), log, effects, baseline, {}, {}, set())
    assert result.failures == [] and result.keyed_retries == 1  # killed inside charge: attempted twice, applied once

    applied = next(e for e in read_effects(effects) if e["kind"] == "applied" and e["tool"] == "charge")
    with effects.open("a") as f:
        f.write(json.dumps(applied, sort_keys=True) + "\n")
    result = killloop.CaseResult()
    killloop.check_case(result, log.read_bytes(), log, effects, baseline, {99999: ("tool_result", "00000000")}, {}, set())
    assert any("applied 2 times" in f for f in result.failures)
    assert any("durable event seq 99999" in f for f in result.failures)

    result = killloop.CaseResult()  # an un-keyed write claimed interrupted must end with the unknown-outcome result
    killloop.check_case(result, log.read_bytes(), log, effects, baseline, {}, {}, {"toolu_t1_note"})
    assert any("unknown-outcome result False" in f for f in result.failures)


def test_kill_plans_are_seeded() -> None:
    counts = {"delta": 60, "tool_result": 6}
    first = [killloop.choose_plan(random.Random("7:1"), counts, 0.5) for _ in range(3)]
    assert first == [killloop.choose_plan(random.Random("7:1"), counts, 0.5) for _ in range(3)]


@pytest.mark.kernel  # two ipykernels on one notebook
def test_locks_quick() -> None:
    row = locks.run_locks(quick=True, seed=0)
    assert_passed(row)


def test_replay_when_tools_changed() -> None:
    row = replay.run_replay(quick=True, seed=0)
    assert_passed(row)


def test_report_lists_every_scenario_module_present() -> None:
    names = [name for name, _ in report.discover()]
    assert {"reliability.killloop:killloop", "reliability.locks:locks", "reliability.replay:replay"} <= set(names)
    rows = [
        {"scenario": "11. Replay", "cases": 3, "checked": "a|b", "result": "pass", "seed": 1, "duration": 0.5},
        {
            "scenario": "8. Kill loop",
            "cases": "1000 kills",
            "checked": "x",
            "result": "FAIL (1)",
            "failures": ["boom"],
            "details": {"kills by point": "delay 3"},
            "seed": 1,
            "duration": 2.0,
        },
    ]
    rows.sort(key=report._order)
    text = report.render(rows, quick=False, seed=1, elapsed=60)
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert table[1].startswith("| 8. Kill loop | 1000 kills | x | FAIL (1) | 1 | 2.0 s |")
    assert "a\\|b" in table[2] and "**some scenarios FAILED**" in text
    assert "- FAILURE: `boom`" in text and "- kills by point: delay 3" in text
    assert "## What is not guaranteed" in text and "unknown outcome" in text
    assert not report.passed(rows)


def test_python_m_reliability_quick_runs_as_a_command(tmp_path: Path) -> None:
    out = tmp_path / "R.md"
    proc = subprocess.run(
        [sys.executable, "-m", "reliability", "--quick", "--only", "replay", "--output", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "Generated by `python -m reliability --quick`" in text
    assert "| 11. Replay when the tools changed |" in text and "| pass |" in text


@pytest.mark.parametrize("name", ["cli", "session", "exports", "notebook"])
def test_hostile_inputs_quick(name: str) -> None:
    """Scenarios 12-15 (quick): every attack is refused, asked or inert; none ran."""
    from reliability import hostile

    row = hostile.SCENARIOS[name](True, 0)
    assert_passed(row)
    assert row["attacks"] > 0 and row["outcomes"]["ran"] == 0
    assert row["outcomes"]["refused"] + row["outcomes"]["inert"] > 0
    if name == "session":
        # Issue 20 #11: nbagent.run refuses a foreign or spliced log before any policy is asked (it used to ask, reason untrusted).
        assert row["outcomes"]["asked"] == 0


def test_no_approval_policy_reaches_a_foreign_call() -> None:
    """An approval that says yes to everything is never consulted: every foreign and spliced log is refused first."""
    from reliability import hostile

    row = hostile.run_session(True, 0, policies_={"vulnerable": lambda request: True})
    assert_passed(row)
    assert row["outcomes"]["ran"] == row["outcomes"]["asked"] == 0 and row["outcomes"]["refused"] > 0


def test_hostile_checks_catch_a_call_that_runs(tmp_path: Path) -> None:
    """Not vacuous: a log the library does continue (the victim's own), resumed through the same check, reports 'ran'."""
    from reliability import hostile
    from reliability.attacker import dangling_call
    from tests.support.fake_anthropic import text

    log = tmp_path / "own.jsonl"
    dangling_call(log)
    tally = hostile.Tally()
    with FakeAnthropic() as fake:
        fake.script(text("done"))
        hostile.resume_foreign(tally, fake, log, "vulnerable", lambda request: True, "foreign dangling call", "toolu_1")
    assert tally.outcomes["ran"] == 1 and any("RAN" in failure for failure in tally.failures)
