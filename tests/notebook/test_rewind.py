"""``%agent --fork`` / ``--rewind`` (issue 25, item 3): the reuse rule (table) and a rewind in a real kernel, then a restart and Run All."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nbagent.notebook.rewind import Made, reuse
from nbagent.notebook.syntax import split_request
from nbagent.stores import folders as store
from tests.support.fake_anthropic import text, tool_use

SETUP = "%load_ext nbagent\n%config Agent.tools = ['python']\n%config Agent.approval = 'auto'"

A, B = "old-kernel", "new-kernel"
MADE = [
    Made(Path("f1.jsonl"), "cell-4", A, "rewind 1"),
    Made(Path("f2.jsonl"), None, A, "fork -1"),
    Made(Path("f3.jsonl"), "cell-9", B, "rewind 1"),
]
# (cell id, option, kernel, claimed, the fork reused or None: a new one is made)
REUSE = [
    pytest.param("cell-4", "rewind 1", B, set(), "f1.jsonl", id="the same cell after a restart reuses its fork"),
    pytest.param("cell-4", "rewind 1", A, set(), None, id="run again in the same kernel: a new fork"),
    pytest.param("cell-4", "rewind 2", B, set(), None, id="another turn: a new fork"),
    pytest.param("cell-4", "rewind 1", B, {"f1.jsonl"}, None, id="already reused by this kernel: a new fork"),
    pytest.param("cell-5", "rewind 1", B, set(), None, id="another cell: a new fork"),
    pytest.param(None, "fork -1", B, set(), "f2.jsonl", id="a cell without an id: a fork made without one"),
    pytest.param("cell-7", "fork -1", B, set(), "f2.jsonl", id="a cell id not recorded: a fork made without one"),
    pytest.param("cell-9", "rewind 1", "third-kernel", set(), "f3.jsonl", id="a second restart reuses the fork once more"),
]


@pytest.mark.parametrize(("cell_id", "option", "kernel", "claimed", "expected"), REUSE)
def test_a_fork_cell_reuses_the_fork_it_made_before_a_restart(
    cell_id: str | None, option: str, kernel: str, claimed: set[str], expected: str | None
) -> None:
    found = reuse(MADE, cell_id=cell_id, option=option, kernel=kernel, claimed=claimed)
    assert (str(found.path) if found else None) == expected


@pytest.mark.parametrize(
    ("line", "options", "request_text"),
    [
        ("--fork 2 try again", "--fork 2 ", "try again"),
        ("--fork try again", "--fork ", "try again"),
        ("--fork", "--fork", ""),
        ("--rewind 3", "--rewind 3", ""),
        ("--rewind 2 -- 5 apples", "--rewind 2 ", "5 apples"),
    ],
)
def test_fork_and_rewind_on_the_magic_line(line: str, options: str, request_text: str) -> None:
    assert split_request(line) == (options, request_text)


def requests_text(fake: Any) -> list[str]:
    return [json.dumps(r.body["messages"]) for r in fake.requests]


@pytest.mark.kernel
@pytest.mark.slow
def test_rewind_in_a_real_kernel_then_restart_and_run_all(kernels: Any, fake: Any, tmp_path: Path) -> None:
    cells = [
        ("c1", "%agent say one"),
        ("c2", "%agent set x"),
        ("c3", "%agent say three"),
        ("c4", "%agent --rewind 1"),
        ("c5", "%agent what now"),
    ]
    fake.script(text("one"), tool_use("python", {"code": "x = 42"}), text("x is set"), text("three"), text("from turn one"))
    first = kernels()
    first.run(SETUP)
    for cell_id, code in cells[:3]:
        first.run(code, cell_id)
    assert len(fake.requests) == 4
    shown = first.run(cells[3][1], cells[3][0])
    assert "a fork of" in shown and "keeping turn 1; turns 2–3 are left out" in shown
    assert '"say one (fork after turn 1)"' in shown  # the fork's own title
    first.run(cells[4][1], cells[4][0])
    assert len(fake.requests) == 5
    sent = requests_text(fake)[-1]
    assert "say one" in sent and "set x" not in sent and "say three" not in sent  # the rewound turns are not in the history
    assert "rewound to the end of turn 1" in sent and "still holds the variables" in sent and "not restored" in sent
    assert first.run("print(x)").strip().endswith("42")  # the kernel was not rewound (and the model was told)
    folder = tmp_path / ".nbagent" / "work.ipynb"
    assert len(store.list_sessions(folder)) == 2
    first.shutdown()

    second = kernels()  # a restart, then Run All (Agent.restore_kernel_state: rebuilt from the fork's own history only)
    second.run(SETUP + "\n%config Agent.restore_kernel_state = True")
    outputs = [second.run(code, cell_id) for cell_id, code in cells]
    assert len(fake.requests) == 5  # every recorded turn was shown from the log; nothing was asked again
    assert "this turn was rewound" in outputs[1] and "this turn was rewound" in outputs[2]  # the rewound turns, shown from the parent
    assert "the fork this cell made before the kernel restart" in outputs[3]
    assert len(store.list_sessions(folder)) == 2  # no second fork
    assert "NameError" in second.run("try:\n    x\nexcept NameError as e:\n    print('NameError')")  # turn 2's code was not re-run


def test_fork_in_the_shell_keeps_every_turn_and_later_cells_use_it(shell: Any, fake: Any, tmp_path: Path, capsys: Any) -> None:
    from IPython.core.error import UsageError

    fake.script(text("one"), text("two"), text("three"))
    assert shell.run_cell("%agent say one").error_in_exec is None
    assert shell.run_cell("%agent say two").error_in_exec is None
    folder = tmp_path / ".nbagent" / "untitled"
    [parent] = store.list_sessions(folder)
    assert shell.run_cell("%agent --fork").error_in_exec is None
    said = capsys.readouterr().out
    assert "keeping turns 1–2." in said and '"say one (fork after turn 2)"' in said  # nothing left out, so no rewind note
    assert shell.run_cell("%agent say three").error_in_exec is None
    sent = requests_text(fake)[-1]
    assert "say one" in sent and "say two" in sent and "rewound" not in sent
    names = [s.name for s in store.list_sessions(folder)]
    assert len(names) == 2 and parent.name in names
    for line, words in (
        ("%agent --fork 7", "there is no turn 7"),
        ("%agent --fork --new hi", "run one alone"),
        ("%agent --rewind 1 --fork 1", "run one alone"),
    ):
        result = shell.run_cell(line)
        assert isinstance(result.error_in_exec, UsageError) and words in str(result.error_in_exec), (line, result.error_in_exec)
    assert len(store.list_sessions(folder)) == 2  # nothing made by a refused cell


def test_a_foreign_fork_found_after_a_restart_is_refused_without_claiming_this_cell_made_it(
    shell: Any, fake: Any, tmp_path: Path, capsys: Any
) -> None:
    """A cloned notebook's fork that records this cell's option (made under another kernel) is refused; nothing says this cell made it."""
    import nbagent
    from reliability.attacker import cloned_notebook_log
    from tests.security.test_security import as_another_user

    folder = tmp_path / ".nbagent" / "untitled"
    with as_another_user(tmp_path):  # the clone's log and the fork its author's cell made, under another kernel
        cloned_notebook_log(folder / "cloned.jsonl", "open('pwned', 'w').write('x')")
        with nbagent.Session.open(folder / "cloned.jsonl") as parent:
            parent.fork(by={"cell_id": None, "kernel": "their-kernel", "option": "fork -1"}).close()
    fake.script(text("never"))
    result = shell.run_cell("%agent --fork go on")
    out = capsys.readouterr().out
    assert result.error_in_exec is None
    assert "continuing in" not in out and "the fork this cell made" not in out  # it is not continued, nor this cell's
    assert "is recorded as a fork made by this cell under another kernel, but it was not written by you" in out
    assert "so this request starts a new session of yours" in out  # refused, as before: nothing of it is sent
    [sent] = requests_text(fake)
    assert "go on" in sent and "make z" not in sent
    assert not (tmp_path / "pwned").exists()
