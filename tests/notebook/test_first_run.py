"""The first hour with nbagent (issue 22, points 3 and 4): no key, a mistyped option, the demo model, ``%agent?``, a restart.

Real kernels (jupyter_client) with no ``ANTHROPIC_API_KEY`` in their environment, as a new user's; the restart
line with the fake API; the store side (files and PostgreSQL) in the in-process shell of tests/notebook/test_magics.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent.cli.demo import REQUESTS
from nbagent.history.summary import notebook_sessions
from nbagent.model.claude import DemoModel
from nbagent.notebook import restart
from nbagent.notebook.restart import Claims, Plan, Turn
from nbagent.notebook.syntax import OPTIONS
from nbagent.notebook.usage import unknown_options
from nbagent.stores import get_store
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use
from tests.support.kernels import Kernel, errors, kernel_env, shown, stream
from tests.support.store_fixtures import STORES, use_store

ROOT = Path(__file__).resolve().parents[2]


# Rules --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("message", "said"),
    [
        ("unrecognized arguments: --modle", "unrecognized option --modle: did you mean --model?"),
        ("unrecognized arguments: --modle=x", "unrecognized option --modle=x: did you mean --model?"),
        ("unrecognized arguments: --drop_thinking", "unrecognized option --drop_thinking: did you mean --drop-thinking?"),
        ("unrecognized arguments: --resotre", "unrecognized option --resotre: did you mean --restore?"),
        (
            "unrecognized arguments: --modle --aproval",
            "unrecognized option --modle: did you mean --model? unrecognized option --aproval: did you mean --approval?",
        ),
        ("unrecognized arguments: --bogus", "unrecognized option --bogus. The options are " + ", ".join(OPTIONS) + "."),
        ("argument --approval: invalid choice: 'maybe'", "argument --approval: invalid choice: 'maybe'"),
    ],
)
def test_an_unknown_option_names_the_nearest_one(message: str, said: str) -> None:
    assert unknown_options(message, OPTIONS) == said


PY = (("toolu_1", "x = 42"),)
EARLIER = Turn(1, 5, "make x", kernel="old", python_calls=PY)
NO_CODE = Turn(6, 8, "read it", kernel="old")
FAILED = Turn(9, 12, "try", kernel="old", python_calls=PY, failed_calls=frozenset({"toolu_1"}))


@pytest.mark.parametrize(
    ("plan", "restored", "said"),
    [
        (Plan(Claims(), show=(EARLIER,)), set(), f"not run again; {restart.VARIABLES_GONE}"),
        (Plan(Claims(), show=(EARLIER,), restore=(EARLIER,)), set(), f"not run again; {restart.VARIABLES_RESTORED}"),
        (Plan(Claims(), show=(EARLIER,)), {1}, f"not run again; {restart.VARIABLES_RESTORED}"),  # restored earlier in this kernel
        (Plan(Claims(), show=(NO_CODE,)), set(), "not run again"),  # no python: no variables to lose
        (Plan(Claims(), show=(FAILED,)), set(), "not run again"),  # its code failed: it made nothing
        (Plan(Claims(), show=(EARLIER,), unfinished="continue"), set(), f"its unfinished turn continues below; {restart.VARIABLES_GONE}"),
        (Plan(Claims(), show_all=True, ask=True), set(), f"a new request follows; {restart.VARIABLES_GONE}"),
    ],
)
def test_a_rerendered_turn_says_whether_its_variables_are_back(plan: Plan, restored: set[int], said: str) -> None:
    assert restart.after_recorded(plan, (EARLIER, NO_CODE, FAILED), "new", restored) == said


def test_the_restore_the_line_suggests_is_the_real_option() -> None:
    assert "`%agent --restore`" in restart.VARIABLES_GONE and "--restore" in OPTIONS
    assert "`--restore`" in (ROOT / "docs" / "notebook.md").read_text()


# No key: the error alone, nothing created -----------------------------------------------------------------------
def logs_of(url: str, folder: Path) -> list[Path]:
    return [s.path for s in notebook_sessions(get_store(url or None), folder)]


@pytest.mark.parametrize("kind", STORES)
def test_a_request_without_a_key_creates_nothing_in_either_store(
    shell: Any, fake: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    notebook = tmp_path / f"first-{kind}.ipynb"
    monkeypatch.setenv("JPY_SESSION_NAME", str(notebook))
    url = use_store(kind, monkeypatch)
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    folder = nbagent.stores.folders.log_dir_for(notebook)
    for cell in ("%agent hello", "%agent --new hello", "%agent --session mine hello", "%%agent\nhello"):
        result = shell.run_cell(cell)
        assert result.success  # said calmly, as plain output (notebook/outcomes.py): nothing failed
        assert "nbagent: No Anthropic API key" in capsys.readouterr().out
        assert logs_of(url, folder) == [] and not (tmp_path / ".nbagent").exists()
    assert fake.requests == []
    # A session that exists is left as it was: no request logged, no new session beside it.
    shell.run_cell("%config Agent.demo = True")
    assert shell.run_cell("%agent What is in this folder?").success
    [log] = logs_of(url, folder)
    before = [e["seq"] for e in get_store(url or None).read(log)]
    shell.run_cell("%config Agent.demo = False")
    for cell in ("%agent a second question", "%agent --new a third"):
        assert shell.run_cell(cell).success
    assert logs_of(url, folder) == [log]
    assert [e["seq"] for e in get_store(url or None).read(log)] == before


NO_KEY_CELLS = ("%agent What is in this folder?", "%agent --new hello", "%%agent\nWhat is in data.csv?")


@pytest.fixture(scope="module")
def keyless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kernel, Path]]:
    """A real kernel with no API key in its environment (a new user's), in its own folder, nbagent loaded."""
    folder = tmp_path_factory.mktemp("first-run")
    (folder / "data.csv").write_text("month,total\n2026-01,120\n2026-02,135\n2026-03,161\n")
    env = kernel_env()
    env = {k: v for k, v in env.items() if not k.startswith("ANTHROPIC_")}
    with Kernel(folder, env) as kernel:
        kernel.run("%load_ext nbagent")
        yield kernel, folder


def cell(kernel: Kernel, code: str) -> tuple[str, list[dict[str, Any]], str]:
    """(status, iopub messages, everything shown) of one cell."""
    messages, reply = kernel.execute(code)
    return reply["content"]["status"], messages, shown(messages)


@pytest.mark.kernel
def test_a_start_without_a_key_shows_the_error_alone_and_never_suggests_writing_the_key(keyless: tuple[Kernel, Path]) -> None:
    kernel, folder = keyless
    for code in NO_KEY_CELLS:
        status, messages, said = cell(kernel, code)
        assert status == "error"
        error = stream(messages, "stderr")  # IPython shows a UsageError as one line on stderr
        assert error.startswith("UsageError: No Anthropic API key") and "Traceback" not in error
        # The error alone: no panel (no widget, no display), so no header saying "done" above it.
        assert [m["msg_type"] for m in messages if m["msg_type"] in ("display_data", "update_display_data", "comm_open")] == []
        assert stream(messages, "stdout") == "" and "done" not in said
        assert "ANTHROPIC_API_KEY" in error and "getpass" in error and "Agent.demo = True" in error
        # Nothing that writes the key into the notebook's source or output.
        assert "%env" not in error and not re.search(r"ANTHROPIC_API_KEY'?\]? *= *['\"]", error)
        assert not (folder / ".nbagent").exists()


@pytest.mark.kernel
def test_a_mistyped_option_names_the_right_one(keyless: tuple[Kernel, Path]) -> None:
    kernel, folder = keyless
    status, messages, said = cell(kernel, "%agent --modle claude-x hi")
    assert status == "error" and "unrecognized option --modle: did you mean --model?" in said
    assert not (folder / ".nbagent").exists()


@pytest.mark.kernel
def test_agent_help_is_plain_text(keyless: tuple[Kernel, Path]) -> None:
    kernel, _ = keyless
    for code in ("%agent?", "%%agent?", "%agent_replay?", "%agent_sessions?"):
        _, reply = kernel.execute(code)
        [page] = [p for p in reply["content"]["payload"] if p.get("source") == "page"]
        help_text = re.sub(r"\x1b\[[0-9;]*m", "", page["data"]["text/plain"])
        if "%agent?" in code:
            assert "usage: %agent" in help_text and "--model NAME" in help_text and "--restore" in help_text
        for markup in ("``", ":class:", ":mod:", "\n::", "<{"):
            assert markup not in help_text, markup


def suggested_questions() -> list[str]:
    """The requests README.md and docs/*.md show in code, the `nbagent demo` requests, and the issue's first question."""
    found = ["What is in this folder?", *REQUESTS]
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.startswith("%agent ") and not line.startswith("%agent -"):
                found.append(line.removeprefix("%agent ").split("  #")[0].strip())
            elif line.strip() == "%%agent":
                body = []
                for rest in lines[i + 1 :]:
                    if rest.startswith("```"):
                        break
                    body.append(rest)
                found.append("\n".join(body).strip())
    return list(dict.fromkeys(q for q in found if q))


def test_the_suggested_questions_are_found() -> None:
    questions = suggested_questions()
    assert {"What is in this folder?", "What is in data.csv?", "Load sales.csv and plot the monthly totals."} <= set(questions)
    assert REQUESTS[0] in questions and any(q.startswith("Fit a linear trend") for q in questions)


@pytest.mark.kernel
def test_the_demo_model_answers_every_suggested_question_with_no_tool_error(keyless: tuple[Kernel, Path]) -> None:
    kernel, folder = keyless
    kernel.run("%config Agent.demo = True")
    try:
        for question in suggested_questions():
            code = "%%agent --new\n" + question
            status, messages, said = cell(kernel, code)
            assert status == "ok", errors(messages)
            assert DemoModel.LABEL.strip() in said
            newest = max((folder / ".nbagent").rglob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns)
            events = list(nbagent.read_events(newest))
            results = [e for e in events if e["type"] == "tool_result"]
            assert results and not [e for e in results if e.get("is_error")], (question, json.dumps(results)[:2000])
            final = [e for e in events if e["type"] == "assistant_msg"][-1]
            assert final["stop_reason"] == "end_turn"
            if "data.csv" in question:  # it read the file the question names
                assert any("month,total" in json.dumps(e.get("content")) for e in results)
    finally:
        kernel.run("%config Agent.demo = False")


# After a restart --------------------------------------------------------------------------------------------------
@pytest.mark.kernel
def test_after_a_restart_the_rerendered_turn_says_its_variables_are_gone_and_how_to_get_them_back(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    env = kernel_env(fake.base_url)
    fake.script(tool_use("python", {"code": "x = 41 + 1"}), text("x is made."), text("Just words."))
    with Kernel(tmp_path, env) as kernel:
        kernel.run("%load_ext nbagent\n%config Agent.approval = 'auto'")
        kernel.run("%agent make x", cell_id="cell-x")
        kernel.run("%agent say something", cell_id="cell-words")
        assert "42" in kernel.run("print(x)")
    with Kernel(tmp_path, env) as kernel:  # a restart: a new kernel process
        kernel.run("%load_ext nbagent")
        made = kernel.execute("%agent make x", cell_id="cell-x")[0]
        html = "".join(m["content"]["data"].get("text/html", "") for m in made if m["msg_type"] == "display_data")
        assert re.search(r"; not run again; the variables its python code made went with the old kernel: run `%agent --restore`", html)
        words = kernel.execute("%agent say something", cell_id="cell-words")[0]
        html = "".join(m["content"]["data"].get("text/html", "") for m in words if m["msg_type"] == "display_data")
        assert "; not run again</div>" in html  # no python code, so nothing to say about variables
        assert "restored kernel state by re-running 1 recorded python call" in kernel.run("%agent --restore")
        assert "42" in kernel.run("print(x)")
    assert len(fake.requests) == 3


@pytest.mark.kernel
def test_the_getpass_advice_sets_the_key_for_this_kernel_without_showing_it(fake: FakeAnthropic, tmp_path: Path) -> None:
    """The no-key error's "this kernel only" line, followed as written: the key reaches the API, and no output or log."""
    env = {k: v for k, v in kernel_env().items() if not k.startswith("ANTHROPIC_")} | {"ANTHROPIC_BASE_URL": fake.base_url}
    key = "sk-ant-first-run-" + "k" * 24
    fake.script(text("Hello."))
    with Kernel(tmp_path, env) as kernel:
        kernel.run("%load_ext nbagent")
        advice = stream(kernel.execute("%agent hello")[0], "stderr")
        [line] = [line for line in advice.splitlines() if "getpass" in line]
        code = line[line.index("`") + 1 : line.rindex("`")]
        msg_id = kernel.send(code, allow_stdin=True)
        prompt = kernel.kc.get_stdin_msg(timeout=30)
        assert prompt["content"]["password"] is True
        kernel.kc.input(key)
        reply, shown_text = kernel.wait(msg_id)
        assert reply["status"] == "ok" and key not in shown_text
        assert "Hello." in kernel.run("%agent hello")
    sent = [r.headers.get("x-api-key") or r.headers.get("authorization", "").removeprefix("Bearer ") for r in fake.requests]
    assert sent == [key]  # the SDK sends it as x-api-key or as a bearer token, by version
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
