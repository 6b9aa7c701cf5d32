"""The comm pump's version gate and off switch, and both approval paths in a real ipykernel: buttons, and stdin."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from nbagent.notebook import pump
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use
from tests.support.kernels import TIMEOUT, Kernel, button_id, click, errors, kernel_env, stdout, stream

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("version", "supported"),
    [
        ("7.4.0", True),
        ("7.4.1", True),
        ("7.10.2", True),
        ("7.99", True),
        ("7.5.0rc1", True),
        ("7.3.0", False),  # no dispatch_shell(concurrent=)
        ("7.4.0rc1", False),
        ("7.0.0", False),
        ("6.29.5", False),
        ("8.0.0", False),
        ("8.0.0a1", False),
        ("10.0", False),
        ("", False),
        ("not a version", False),
    ],
)
def test_the_pump_runs_only_on_the_ipykernel_versions_it_was_written_for(version: str, supported: bool) -> None:
    assert pump.pump_supported(version) is supported


def test_the_pump_range_is_the_ipykernel_pin_of_the_test_extra() -> None:
    """CI installs the test extra, so it exercises the pump; the pin and the gate must name the same range."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    pins = [Requirement(spec).specifier for spec in extra if Requirement(spec).name == "ipykernel"]
    assert pins == [SpecifierSet(pump.SUPPORTED_IPYKERNEL)]


@pytest.mark.parametrize(
    ("value", "off"),
    [(None, False), ("", False), ("1", False), ("yes", False), ("0", True), (" OFF ", True), ("false", True), ("no", True)],
)
def test_the_off_switch(value: str | None, off: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if value is None:
        monkeypatch.delenv(pump.SWITCH, raising=False)
    else:
        monkeypatch.setenv(pump.SWITCH, value)
    assert pump.pump_switched_off() is off


def test_outside_a_kernel_there_is_no_pump() -> None:
    assert pump.CommPump.for_current_kernel() is None


@pytest.mark.parametrize(
    ("msg_type", "now"),
    [
        ("comm_msg", True),  # an approval click
        ("comm_open", True),
        ("comm_close", True),
        ("kernel_info_request", True),  # a page opened while the approval waits: its status bar needs the answer
        ("comm_info_request", True),  # its widget manager restoring the panel's widgets
        ("execute_request", False),  # the next cell runs after this one, in order
        ("complete_request", False),
        ("inspect_request", False),
        ("history_request", False),
        ("is_complete_request", False),
        ("shutdown_request", False),
        ("", False),  # a message whose header did not parse
    ],
)
def test_what_the_pump_handles_while_the_cell_waits_and_what_it_holds(msg_type: str, now: bool) -> None:
    assert pump.at_once(msg_type) is now


@pytest.mark.parametrize("missing", pump.INTERNALS)
def test_a_kernel_without_an_internal_the_pump_uses_gets_no_pump_and_a_message_naming_it(missing: str) -> None:
    """CommPump() raises, so for_current_kernel() warns once with the message and approvals go to the text prompt."""
    kernel = SimpleNamespace(**{name: object() for name in pump.INTERNALS if name != missing})
    with pytest.raises(AttributeError, match=f"^the kernel has no {missing}$"):
        pump.CommPump(kernel)


# Real kernels: ``kernel`` (conftest) has the default environment, so it pumps -------------------------
@pytest.fixture(scope="module")
def unpumped(server: FakeAnthropic, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    """A real ipykernel started with the pump switched off."""
    with Kernel(tmp_path_factory.mktemp("unpumped"), kernel_env(server.base_url, **{pump.SWITCH: "0"})) as started:
        yield started


def warnings(messages: list[dict[str, Any]]) -> list[str]:
    """nbagent's warning lines among what a cell wrote to stderr."""
    return [line for line in stream(messages, "stderr").splitlines() if "nbagent:" in line]


def wipe_cell(tmp_path: Path, name: str) -> tuple[str, Path]:
    """A cell that runs the agent with an irreversible tool behind ``panel.ask``; the tool writes a marker file."""
    marker = tmp_path / f"{name}.wiped"
    code = f"""
        import anthropic, nbagent, pathlib
        from nbagent.notebook.panel import Panel

        @nbagent.tool(effect="irreversible")
        def wipe(target: str) -> str:
            \"\"\"Wipe a target.\"\"\"
            pathlib.Path({str(marker)!r}).write_text(target)
            return "wiped"

        panel = Panel({name!r})
        with nbagent.Session.open({str(tmp_path / f"{name}.jsonl")!r}) as session:
            session.subscribe(panel)
            panel.show()
            nbagent.run(session, "wipe the db", tools=[wipe], approval=panel.ask, client=anthropic.Anthropic(), model="claude-test")
            panel.finish()
            approval = [e for e in session.events() if e["type"] == "approval"][-1]
            result = [e for e in session.events() if e["type"] == "tool_result"][0]
        print("approval", approval["decision"], approval["by"])
        print("result", bool(result.get("is_error")), result["content"])
        """
    return code, marker


def answer_on_stdin(kc: Any, reply: str, prompts: list[str]) -> threading.Thread:
    """Answer the kernel's next input_request with ``reply`` (as a frontend does when the user types it)."""

    def answer() -> None:
        request = kc.get_stdin_msg(timeout=TIMEOUT)
        prompts.append(request["content"]["prompt"])
        kc.input(reply)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    return thread


@pytest.mark.kernel
def test_with_the_pump_an_approval_click_is_handled_while_the_cell_blocks(kernel: Kernel, server: FakeAnthropic, tmp_path: Path) -> None:
    server.script(tool_use("wipe", {"target": "db"}), text("Wiped."))
    code, marker = wipe_cell(tmp_path, "pumped")

    def act(msg: dict[str, Any]) -> None:
        comm_id = button_id(msg, "Approve")
        if comm_id:
            click(kernel.kc, comm_id)

    messages, reply = kernel.execute(code, on_message=act)
    assert reply["content"]["status"] == "ok", errors(messages)
    assert "approval approved panel" in stdout(messages)
    assert marker.read_text() == "db"
    assert not warnings(messages)  # no fallback warning on a supported kernel


@pytest.mark.kernel
def test_the_gate_lets_this_kernel_pump(kernel: Kernel) -> None:
    """The pinned ipykernel is one the pump supports, so the button path above really went through the pump."""
    messages, reply = kernel.execute("from nbagent.notebook.pump import CommPump\nprint('pump', CommPump.for_current_kernel())")
    assert reply["content"]["status"] == "ok", errors(messages)
    assert "pump <nbagent.notebook.pump.CommPump object" in stdout(messages)


@pytest.mark.kernel
def test_with_the_pump_off_approvals_are_asked_on_stdin_after_one_warning(unpumped: Kernel, server: FakeAnthropic, tmp_path: Path) -> None:
    warned: list[str] = []
    for typed, runs in (("y", True), ("n", False)):
        server.script(tool_use("wipe", {"target": "db"}), text("Done." if runs else "Understood, I did not wipe it."))
        code, marker = wipe_cell(tmp_path, f"stdin-{typed}")
        prompts: list[str] = []
        answering = answer_on_stdin(unpumped.kc, typed, prompts)
        messages, reply = unpumped.execute(code)
        answering.join(TIMEOUT)
        assert reply["content"]["status"] == "ok", errors(messages)
        assert prompts == ["Approve? [y/N] "]
        assert "wipe" in stdout(messages).split("approval")[0]  # the call was shown before the question
        assert not [m for m in messages if button_id(m, "Approve")]  # no buttons nobody could click
        warned += warnings(messages)
        if runs:
            assert "approval approved console" in stdout(messages)
            assert marker.read_text() == "db"
        else:
            assert "approval declined console" in stdout(messages)
            assert "result True The user declined this tool call." in stdout(messages)
            assert not marker.exists()
    # One line for the kernel's life, saying why and what to do.
    assert warned == [f"nbagent: approval buttons are off ({pump.SWITCH}=0), {pump.FALLBACK}; unset {pump.SWITCH} for buttons."]


@pytest.mark.kernel
def test_a_pump_that_breaks_mid_wait_falls_back_to_stdin_for_good_and_the_kernel_stays_usable(
    server: FakeAnthropic, tmp_path: Path
) -> None:
    """The fault is injected in nbagent's own CommPump (it fails as ipykernel 7.3's dispatch_shell would); ipykernel is untouched."""
    with Kernel(tmp_path, kernel_env(server.base_url, **{pump.SWITCH: "1"})) as kernel:
        inject = """
            from nbagent.notebook.pump import CommPump
            def dispatch_like_7_3(self, frames):
                raise TypeError("dispatch_shell() got an unexpected keyword argument 'concurrent'")
            CommPump._dispatch = dispatch_like_7_3
            """
        assert kernel.execute(inject)[1]["content"]["status"] == "ok"
        prompts: list[str] = []
        clicked: list[str] = []

        def act(msg: dict[str, Any]) -> None:
            comm_id = button_id(msg, "Approve")
            if comm_id and not clicked:
                clicked.append(comm_id)
                answer_on_stdin(kernel.kc, "y", prompts)  # the click breaks the pump; the user then answers the text prompt
                click(kernel.kc, comm_id)

        server.script(tool_use("wipe", {"target": "db"}), text("Wiped."))
        code, marker = wipe_cell(tmp_path, "broken")
        messages, reply = kernel.execute(code, on_message=act)
        assert reply["content"]["status"] == "ok", errors(messages)
        assert clicked and prompts == ["Approve? [y/N] "]
        assert "approval approved console" in stdout(messages) and marker.read_text() == "db"
        assert warnings(messages) == [
            f"nbagent: approval buttons failed on ipykernel {pump.ipykernel_version()} (TypeError: dispatch_shell() got an unexpected "
            f"keyword argument 'concurrent'), {pump.FALLBACK}; set {pump.SWITCH}=0 to skip them, or %config Agent.approval = 'auto'."
        ]
        # The click the pump could not handle went back to the kernel's loop, and the loop still reads the next cell.
        messages, reply = kernel.execute("print('still alive')")
        assert reply["content"]["status"] == "ok" and "still alive" in stdout(messages)
        # The next approval goes straight to the text prompt, without buttons and without a second warning.
        server.script(tool_use("wipe", {"target": "db"}), text("Not wiped."))
        code, marker = wipe_cell(tmp_path, "broken-again")
        prompts.clear()
        answering = answer_on_stdin(kernel.kc, "n", prompts)
        messages, reply = kernel.execute(code)
        answering.join(TIMEOUT)
        assert reply["content"]["status"] == "ok", errors(messages)
        assert prompts == ["Approve? [y/N] "] and "approval declined console" in stdout(messages) and not marker.exists()
        assert not [m for m in messages if button_id(m, "Approve")] and not warnings(messages)
