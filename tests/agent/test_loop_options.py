"""``run()`` takes every option ``Loop`` takes, from one definition (``nbagent.agent.loop.Options``), and passes each on."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent.agent import loop

# README's "Use it from Python": what both accept (run also takes client=)
DOCUMENTED = {"tools", "model", "provider", "approval", "max_turns", "max_cost", "max_session_cost", "context", "thinking"}
DOCUMENTED |= {"parallel", "delta_interval"}
RUN_ONLY = {"client", "meta"}  # run builds the model from a client; meta goes to the turn's request, as Loop.run's


def keywords(function: Callable[..., Any]) -> set[str]:
    """The keyword options a function takes: its keyword parameters, and the keys of an ``**options: Unpack[Options]``."""
    names: set[str] = set()
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind is parameter.KEYWORD_ONLY:
            names.add(parameter.name)
        elif parameter.kind is parameter.VAR_KEYWORD:
            assert parameter.annotation == "Unpack[Options]", f"{function.__name__} takes **{parameter.name} of another kind"
            names |= set(loop.Options.__optional_keys__) | set(loop.Options.__required_keys__)
    return names


def test_run_takes_every_loop_option() -> None:
    taken_by_loop, taken_by_run = keywords(loop.Loop.__init__), keywords(loop.run)
    assert taken_by_loop - taken_by_run == set()
    assert taken_by_run - taken_by_loop == RUN_ONLY
    assert DOCUMENTED <= taken_by_loop and DOCUMENTED <= taken_by_run


def test_run_passes_every_option_to_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    given: dict[str, Any] = {}

    class Spy:
        def __init__(self, session: Any, *, model: Any, **options: Any) -> None:
            given.update(options, model=model)

        def run(self, prompt: Any, *, meta: Any = None) -> str:
            return "ran"

    monkeypatch.setattr(loop, "Loop", Spy)
    options = {name: object() for name in loop.OPTIONS}
    model = nbagent.DemoModel()
    assert loop.run(None, "hi", model=model, **options) == "ran"
    assert given == {**options, "model": model}


def test_a_misspelt_option_is_refused(tmp_path: Path) -> None:
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        with pytest.raises(TypeError, match="'max_turn'"):
            nbagent.Loop(session, model=nbagent.DemoModel(), max_turn=3)
        with pytest.raises(TypeError, match="'max_turn'"):
            nbagent.run(session, "hi", model=nbagent.DemoModel(), max_turn=3)


def test_run_and_loop_take_parallel_and_delta_interval(tmp_path: Path) -> None:
    with nbagent.Session.open(tmp_path / "s.jsonl") as session:
        text = nbagent.run(session, "hello", model=nbagent.DemoModel(delay=0), parallel=False, delta_interval=0, max_turns=3)
        assert "not Claude" in text
        made = nbagent.Loop(session, model=nbagent.DemoModel(), parallel=2, delta_interval=0.5, setting_names="Agent.{name}")
        assert (made.parallel, made.delta_interval, made.setting_names) == (2, 0.5, "Agent.{name}")
