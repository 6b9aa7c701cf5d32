"""The pure parts of issue 24: a turn's python calls from the log, the cells and button made of them, the comm's shapes, the diff."""

from __future__ import annotations

from typing import Any

import pytest

from nbagent.notebook import cell_edit, cells_comm, insert
from nbagent.record import events as ev
from nbagent.state.turn_work import Call, TurnWork, label, turn, turns

PNG = "iVBORw0KGgo="


def event(seq: int, kind: str, **payload: Any) -> ev.Event:
    return {"v": ev.SCHEMA_VERSION, "seq": seq, "ts": 1.0, "type": kind, **payload}


def call(key: str, code: str, name: str = "python") -> dict[str, Any]:
    return {"type": "tool_use", "id": key, "name": name, "input": {"code": code} if name == "python" else {"path": code}}


def result(seq: int, key: str, content: Any, **extra: Any) -> ev.Event:
    return event(seq, ev.TOOL_RESULT, tool_use_id=key, content=content, **extra)


LOG = [
    event(1, ev.SESSION_START, session_id="s"),
    event(2, ev.USER_MSG, content="plot it", meta={"cell_id": "cell-a"}),
    event(3, ev.ASSISTANT_MSG, content=[{"type": "text", "text": "Loading."}, call("t1", "x = 1\nprint(x)"), call("t2", "1/0")]),
    result(4, "t1", [{"type": "text", "text": "1"}]),
    result(5, "t2", [{"type": "text", "text": "ZeroDivisionError"}], is_error=True),
    event(6, ev.ASSISTANT_MSG, content=[call("t3", "plot()"), call("r1", "data.csv", name="read_file")]),
    result(
        7,
        "t3",
        [
            {"type": "text", "text": "[stderr]\nwarn"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        ],
    ),
    result(8, "r1", "a,b"),
    event(9, ev.ASSISTANT_MSG, content=[{"type": "text", "text": "The plot is above."}]),
    event(10, ev.USER_MSG, content="again"),
    event(11, ev.ASSISTANT_MSG, content=[call("t4", "y = 2")]),
    event(12, ev.INTERRUPTED, during="tool"),
]


def test_turns_are_read_with_their_python_calls_in_order_and_their_answers() -> None:
    first, second = turns(LOG)
    assert (first.number, first.seq, first.end, first.cell_id, first.answer) == (1, 2, 9, "cell-a", "The plot is above.")
    assert [c.tool_use_id for c in first.calls] == ["t1", "t2", "t3"]  # read_file is not python
    assert [c.tool_use_id for c in first.done] == ["t1", "t3"]  # the call that raised is not a cell
    assert (second.number, second.cell_id, second.done) == (2, "", ())  # interrupted before its result: not a cell
    assert turn(LOG, 2) == second and turn(LOG, 3) is None and turn(LOG, 0) is None


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ((), "ran python"),
        (({"type": "text", "text": "x"},), "ran python"),
        (({"type": "image"},), "ran python · 1 plot"),
        (({"type": "image"},) * 2, "ran python · 2 plots"),
    ],
)
def test_a_call_s_label(content: tuple[dict[str, Any], ...], words: str) -> None:
    assert label(Call("t", "c", content, True)) == words


@pytest.mark.parametrize(
    ("text", "streams"),
    [
        ("1", [("stdout", "1\n")]),
        ("(no output)", []),
        ("", []),
        ("[stderr]\nwarn", [("stderr", "warn\n")]),
        ("out\n[stderr]\nerr\n", [("stdout", "out" + "\n"), ("stderr", "err\n")]),
    ],
)
def test_recorded_text_becomes_streams(text: str, streams: list[tuple[str, str]]) -> None:
    outputs = insert.outputs(Call("t", "c", ({"type": "text", "text": text},), True))
    assert [(o["name"], o["text"]) for o in outputs] == streams and all(o["output_type"] == "stream" for o in outputs)


def test_cells_of_a_turn_with_outputs_metadata_and_an_optional_summary() -> None:
    first = turns(LOG)[0]
    code = insert.cells(first, "sess")
    assert [c["tool_use_id"] for c in code] == ["t1", "t3"] and all(c["cell_type"] == "code" for c in code)
    assert code[0]["source"] == "x = 1\nprint(x)" and code[0]["metadata"] == {
        "nbagent": {"session": "sess", "tool_use_id": "t1", "turn": 1}
    }
    image = code[1]["outputs"][1]
    assert image == {"output_type": "display_data", "data": {"image/png": PNG, "text/plain": "<Figure>"}, "metadata": {}}
    with_summary = insert.cells(first, "sess", summary=True)
    assert with_summary[-1]["cell_type"] == "markdown" and with_summary[-1]["source"] == "The plot is above."
    assert with_summary[-1]["tool_use_id"] == insert.summary_id("sess", 1)
    assert [c["tool_use_id"] for c in insert.cells(first, "sess", summary=True, only="t3")] == ["t3"]


def test_the_button_bundle_has_the_contract_s_mime_type_and_a_plain_fallback() -> None:
    first, second = turns(LOG)
    bundle = insert.button(first, "sess")
    assert bundle is not None
    assert bundle[insert.MIME] == {
        "v": 1,
        "session": "sess",
        "turn": 1,
        "calls": [{"tool_use_id": "t1", "label": "ran python"}, {"tool_use_id": "t3", "label": "ran python · 1 plot"}],
    }
    assert "can't be inserted" in bundle["text/plain"] and "%agent_cells" in bundle["text/plain"]
    assert insert.button(second, "sess") is None  # nothing to insert: no button
    assert insert.button(TurnWork(1, 1, 1), "s") is None


GOOD_NOTEBOOK = {
    "v": 1,
    "type": "notebook",
    "id": "r1",
    "path": "a.ipynb",
    "cells": [{"id": "c1", "cell_type": "code", "source": "x", "execution_count": None, "outputs_text": "", "dirty": True}],
}


@pytest.mark.parametrize(
    ("message", "wrong"),
    [
        ({"v": 1, "type": "hello", "extension": "0.1.0"}, ""),
        ({"v": 1, "type": "insert_request", "id": "a", "session": "s", "turn": 1}, ""),
        ({"v": 1, "type": "insert_request", "id": "a", "session": "s", "turn": 1, "tool_use_id": "t"}, ""),
        (
            {
                "v": 1,
                "type": "inserted",
                "id": "a",
                "session": "s",
                "cells": [{"tool_use_id": "t", "cell_id": "c", "index": 3}],
                "skipped": ["u"],
            },
            "",
        ),
        (GOOD_NOTEBOOK, ""),
        ({"v": 1, "type": "edit_result", "id": "a", "ok": False, "reason": "changed"}, ""),
        ({"v": 1, "type": "error", "error": "no"}, ""),
        ([], "a message must be a JSON object"),
        ({"type": "hello", "extension": "x"}, "needs 'v'"),
        ({"v": 2, "type": "hello", "extension": "x"}, "needs 'v'"),
        ({"v": True, "type": "hello", "extension": "x"}, "needs 'v'"),
        ({"v": 1, "type": "run_code", "code": "import os"}, "unknown message type"),
        ({"v": 1, "type": "hello"}, "with 'extension'"),
        ({"v": 1, "type": "hello", "extension": "x", "script": "alert(1)"}, "without the keys ['script']"),
        ({"v": 1, "type": "insert_request", "id": "a", "session": "s", "turn": 0}, "'turn' is an integer of at least 1"),
        ({"v": 1, "type": "insert_request", "id": "a", "session": "s", "turn": True}, "'turn' is an integer"),
        ({"v": 1, "type": "insert_request", "id": "a" * 201, "session": "s", "turn": 1}, "'id' is a string of at most 200"),
        ({"v": 1, "type": "insert_request", "id": 5, "session": "s", "turn": 1}, "'id' is a string"),
        ({"v": 1, "type": "inserted", "id": "a", "session": "s", "cells": [{"tool_use_id": "t", "cell_id": "c"}], "skipped": []}, "item 0"),
        ({"v": 1, "type": "inserted", "id": "a", "session": "s", "cells": "all", "skipped": []}, "'cells' is a list"),
        ({**GOOD_NOTEBOOK, "cells": [{**GOOD_NOTEBOOK["cells"][0], "cell_type": "widget"}]}, "'cell_type' is one of"),
        ({**GOOD_NOTEBOOK, "cells": [{**GOOD_NOTEBOOK["cells"][0], "outputs_text": "x" * 20_001}]}, "'outputs_text' is a string"),
        ({"v": 1, "type": "edit_result", "id": "a", "ok": "yes"}, "'ok' is true or false"),
    ],
)
def test_only_documented_shapes_are_accepted(message: Any, wrong: str) -> None:
    found = cells_comm.problem(message)
    assert (found == "") if not wrong else (wrong in found), found


@pytest.mark.parametrize(
    ("old", "new", "changed"),
    [
        ("a\nb\nc", "a\nB\nc", ["-b", "+B"]),
        ("x", "x", []),
        (
            "\n".join(f"l{i}" for i in range(40)),
            "\n".join(f"l{i}" if i not in (2, 30) else "new" for i in range(40)),
            ["-l2", "+new", "-l30", "+new"],
        ),
        ("", "print(1)", ["+print(1)"]),
        ("a", "a\u2028b", ["-a", "+a\u2028b"]),  # lines end at \n only, as the cell's: a separator stays in its line
        ("a\nb", "a\x0cb", ["-a", "-b", "+a\x0cb"]),
    ],
)
def test_a_diff_shows_every_changed_line(old: str, new: str, changed: list[str]) -> None:
    lines = cell_edit.diff_lines(old, new)
    assert [line for line in lines if line[:1] in "+-" and line[:3] not in ("+++", "---")] == changed


def test_the_diff_html_escapes_the_model_s_source() -> None:
    shown = cell_edit.diff_html("a", "<script>alert(1)</script>")
    assert "<script>" not in shown and "&lt;script&gt;" in shown and 'class="nbagent-diff-add"' in shown


def test_the_diff_shows_hidden_characters_escaped_and_marked() -> None:
    """Issue 33 item 9: a Trojan-Source edit (bidi controls, a zero-width space) reads as what it is in the diff."""
    new = 'access = "user\u202e \u2066# admin\u2069 \u2066"\nok\u200b = True'
    shown = cell_edit.diff_html("access = 'user'", new)
    assert not any(c in shown for c in "\u202e\u2066\u2069\u200b")  # none passes raw
    for escape, name in (("\\u202e", "RIGHT-TO-LEFT OVERRIDE"), ("\\u2066", "LEFT-TO-RIGHT ISOLATE"), ("\\u200b", "ZERO WIDTH SPACE")):
        assert f'title="U+{escape[2:].upper()} {name}">{escape}</span>' in shown
        assert f"{escape} (U+{escape[2:].upper()} {name})" in shown  # the warning above the diff names it
    assert "hidden characters" in shown
    assert "hidden characters" not in cell_edit.diff_html("a", "b")


def test_the_live_document_names_ids_and_unsaved_cells_and_is_bounded() -> None:
    text = cell_edit.document(GOOD_NOTEBOOK)
    assert "as it is in the browser now" in text and "id c1" in text and "unsaved edits" in text and "never run" in text
    many = {**GOOD_NOTEBOOK, "cells": [{**GOOD_NOTEBOOK["cells"][0], "id": f"c{i}", "source": "x" * 3_000} for i in range(20)]}
    bounded = cell_edit.document(many, budget=10_000)
    assert len(bounded) < 11_000 and "left out" in bounded


# In terminal IPython (no kernel, no comm): nothing breaks, and %agent_cells fills the next prompt ----------------------
def test_terminal_ipython_has_no_button_and_agent_cells_fills_the_next_input(shell: Any, fake: Any, capsys: Any) -> None:
    from tests.support.fake_anthropic import text, tool_use

    fake.script(tool_use("python", {"code": "t = 3"}), tool_use("python", {"code": "raise ValueError"}), text("t is 3."))
    assert shell.run_cell("%agent make t").success
    assert insert.MIME not in capsys.readouterr().out and shell.user_ns["t"] == 3
    shell.rl_next_input = None
    assert shell.run_cell("%agent_cells").success
    assert shell.rl_next_input == "t = 3" and "1 python call(s) of turn 1" in capsys.readouterr().out


def test_agent_cells_before_any_session_says_what_to_do(shell: Any) -> None:
    result = shell.run_cell("%agent_cells")
    assert not result.success and "no agent session in this notebook yet" in str(result.error_in_exec)
