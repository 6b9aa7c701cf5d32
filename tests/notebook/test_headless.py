"""Which notebook a kernel runs when nobody said: the rule (pure), the logs it reads, and the ``Agent.notebook`` setting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from traitlets import TraitError

import nbagent
from nbagent.notebook.headless import Finder, fitting
from nbagent.notebook.settings import Agent
from nbagent.record import events as ev

A = ("load data", "plot it", "summarize")
B = ("load data", "fit a model")
SWAPPED = ("plot it", "load data")
# candidates (name -> its latest session's requests), the requests seen so far (the current last) -> the fitting names
CASES = [
    # The first request alone decides where one notebook holds it ...
    ({"a.ipynb": A, "b.ipynb": B}, ["plot it"], ("a.ipynb",)),
    ({"a.ipynb": A, "b.ipynb": B}, ["fit a model"], ("b.ipynb",)),
    # ... up to whitespace;
    ({"a.ipynb": A, "b.ipynb": B}, ["  plot\n it "], ("a.ipynb",)),
    # several hold it: all are named, sorted (the caller refuses);
    ({"b.ipynb": B, "a.ipynb": A}, ["load data"], ("a.ipynb", "b.ipynb")),
    # none holds it, or nothing to go on: none;
    ({"a.ipynb": A, "b.ipynb": B}, ["something new"], ()),
    ({}, ["load data"], ()),
    ({"a.ipynb": A}, [], ()),
    # later cells narrow: the order tells notebooks with the same requests apart ...
    ({"a.ipynb": A, "s.ipynb": SWAPPED}, ["load data", "plot it"], ("a.ipynb",)),
    ({"a.ipynb": A, "s.ipynb": SWAPPED}, ["plot it", "load data"], ("s.ipynb",)),
    # ... and a request an earlier cell made must be held too (b never recorded "plot it");
    ({"a.ipynb": A, "b.ipynb": B}, ["load data", "plot it", "load data"], ()),
    ({"a.ipynb": A, "b.ipynb": B}, ["plot it", "load data"], ()),
    # a request no notebook holds (a cell added since the last run) is left out;
    ({"a.ipynb": A, "b.ipynb": B}, ["new cell", "summarize"], ("a.ipynb",)),
    # the same request twice needs two turns of it.
    ({"a.ipynb": ("go", "go"), "b.ipynb": ("go",)}, ["go", "go"], ("a.ipynb",)),
]


@pytest.mark.parametrize("candidates, seen, expected", CASES)
def test_the_notebook_whose_logs_hold_the_requests_in_order(candidates: dict[str, tuple[str, ...]], seen: list[str], expected) -> None:
    assert fitting(candidates, seen) == expected


def record(folder: Path, name: str, *requests: str) -> Path:
    """A session log in ``folder`` whose turns made ``requests``, in order."""
    folder.mkdir(parents=True, exist_ok=True)
    with nbagent.Session.open(folder / f"{name}.jsonl") as session:
        for request in requests:
            session.append(ev.USER_MSG, content=f"[a note]\n{request}", meta={"request": request, "kernel": "old"})
            session.append(ev.ASSISTANT_MSG, content=[{"type": "text", "text": "ok"}], stop_reason="end_turn", usage={})
    return folder / f"{name}.jsonl"


def test_the_finder_reads_the_latest_session_of_each_notebook_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    base = tmp_path / ".nbagent"
    for name in ("a.ipynb", "b.ipynb"):
        (tmp_path / name).write_text("{}")
    old = record(base / "a.ipynb", "1-old", "only in an old session")
    record(base / "a.ipynb", "2-new", "load data", "plot it")
    os.utime(old, (1, 1))  # the older activity
    record(base / "b.ipynb", "1", "load data", "fit a model")
    record(base / "gone.ipynb", "1", "plot it")  # its notebook is not here
    record(base / "untitled", "1", "plot it")
    (base / "b.ipynb" / "notes.txt").write_text("not a log")
    assert Finder().candidates(base, tmp_path) == {"a.ipynb": ("load data", "plot it"), "b.ipynb": ("load data", "fit a model")}
    assert Finder().candidates(tmp_path / "nowhere", tmp_path) == {}

    finder = Finder()
    assert finder.locate("plot it", base, tmp_path, base / "untitled") == "a.ipynb" and finder.note == ""
    assert finder.locate("only in an old session", base, tmp_path, base / "untitled") is None
    assert "not told its notebook's path" in finder.note and "sessions are those of .nbagent/untitled." in finder.note


def test_several_notebooks_holding_the_request_are_named_and_the_next_cell_narrows(tmp_path: Path) -> None:
    base = tmp_path / ".nbagent"
    for name, requests in (("a.ipynb", ("load data", "plot it")), ("s.ipynb", ("plot it", "load data"))):
        (tmp_path / name).write_text("{}")
        record(base / name, "1", *requests)
    finder = Finder()
    for _ in range(2):  # a refused cell run again counts once
        with pytest.raises(UsageError) as refused:
            finder.locate("load data", base, tmp_path, base / "untitled")
        message = str(refused.value)
        assert "a.ipynb, s.ipynb" in message and '%config Agent.notebook = "a.ipynb"' in message and "Nothing was sent" in message
    assert finder.seen == ["load data"]
    assert finder.locate("plot it", base, tmp_path, base / "untitled") == "a.ipynb"


def test_a_log_that_cannot_be_read_holds_nothing(tmp_path: Path) -> None:
    base = tmp_path / ".nbagent"
    (tmp_path / "a.ipynb").write_text("{}")
    (base / "a.ipynb").mkdir(parents=True)
    (base / "a.ipynb" / "1.jsonl").write_text("this is not an nbagent log\n")
    assert Finder().candidates(base, tmp_path) == {"a.ipynb": ()}


@pytest.mark.parametrize("value, expected", [("", ""), ("analysis.ipynb", "analysis.ipynb"), (" sub/a.ipynb ", "sub/a.ipynb")])
def test_agent_notebook_takes_a_notebook_path(value: str, expected: str) -> None:
    assert Agent(notebook=value).notebook == expected


@pytest.mark.parametrize("value", ["analysis", "analysis.py", ".ipynb", "sub/.ipynb"])
def test_agent_notebook_refuses_what_is_not_a_notebook(value: str) -> None:
    with pytest.raises(TraitError, match=r"Agent.notebook is the notebook this kernel runs, a path ending in \.ipynb"):
        Agent(notebook=value)
