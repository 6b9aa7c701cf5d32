"""The built-in file and shell tools, called the way the loop calls them (Tool.invoke) and through a real run."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

import nbagent
from nbagent.tools import builtin as toolkit
from tests.support.fake_anthropic import text, tool_use


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def call(t: nbagent.Tool, **arguments):
    return t.invoke(arguments, key="k")


def test_effects_are_declared():
    effects = {t.name: t.effect for t in toolkit.ALL_TOOLS}
    assert effects == {"read_file": "read", "list_files": "read", "write_file": "write", "edit_file": "write", "shell": "irreversible"}


def test_schemas_come_from_hints_and_docstrings():
    schema = toolkit.read_file.to_dict()
    assert schema["name"] == "read_file"
    props = schema["input_schema"]["properties"]
    assert props["path"]["type"] == "string" and props["offset"]["type"] == "integer"
    assert schema["input_schema"]["required"] == ["path"]
    assert "numbered" in schema["description"]


def test_write_read_edit_round_trip(in_tmp: Path):
    assert call(toolkit.write_file, path="sub/a.txt", content="one\ntwo\nthree\n") == ("Created sub/a.txt (14 characters).", False)
    content, is_error = call(toolkit.read_file, path="sub/a.txt", offset=1, limit=1)
    assert not is_error and content.startswith("     2\ttwo") and "offset=2" in content
    assert call(toolkit.edit_file, path="sub/a.txt", old_text="two", new_text="2")[1] is False
    assert (in_tmp / "sub/a.txt").read_text() == "one\n2\nthree\n"


def test_edit_refuses_missing_or_ambiguous_text(in_tmp: Path):
    (in_tmp / "b.txt").write_text("x x")
    content, is_error = call(toolkit.edit_file, path="b.txt", old_text="x", new_text="y")
    assert is_error and "occurs 2 times" in content
    content, is_error = call(toolkit.edit_file, path="b.txt", old_text="z", new_text="y")
    assert is_error and "was not found" in content
    assert (in_tmp / "b.txt").read_text() == "x x"


def test_read_errors_and_binary(in_tmp: Path):
    content, is_error = call(toolkit.read_file, path="nope.txt")
    assert is_error and "FileNotFoundError" in content
    (in_tmp / "blob.bin").write_bytes(b"\0\1\2")
    content, is_error = call(toolkit.read_file, path="blob.bin")
    assert is_error and "binary" in content


def test_read_image_returns_image_block(in_tmp: Path):
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
    (in_tmp / "plot.png").write_bytes(png)
    content, is_error = call(toolkit.read_file, path="plot.png")
    assert not is_error and content[1]["type"] == "image"
    assert base64.b64decode(content[1]["source"]["data"]) == png


def test_list_files(in_tmp: Path):
    (in_tmp / "d").mkdir()
    (in_tmp / "d" / "x.csv").write_text("a")
    (in_tmp / "y.csv").write_text("bb")
    (in_tmp / ".hidden").write_text("")
    assert call(toolkit.list_files)[0] == "d/\ny.csv\t2"
    assert call(toolkit.list_files, pattern="*.csv", recursive=True)[0] == "d/x.csv\t1\ny.csv\t2"


def test_shell_output_exit_code_and_timeout(in_tmp: Path):
    content, is_error = call(toolkit.shell, command="echo hi; echo oops >&2; exit 3")
    assert not is_error and content == "exit code 3\nstdout:\nhi\n\nstderr:\noops\n"
    marker = in_tmp / "child-survived"
    content, is_error = call(toolkit.shell, command=f"(sleep 0.5; touch {marker}) & sleep 30", timeout=0.2)
    assert is_error and "timed out after 0.2 s" in content
    # The whole process group was killed, including the background child.
    os.system("sleep 0.9")
    assert not marker.exists()


def test_tools_in_a_real_run(fake, client, log_path, in_tmp: Path):
    (in_tmp / "data.csv").write_text("a,b\n1,2\n")
    fake.script(
        tool_use("read_file", {"path": "data.csv"}),
        tool_use("shell", {"command": "rm data.csv"}),
        text("done"),
    )
    with nbagent.Session.open(log_path) as session:
        assert nbagent.run(session, "look", tools=toolkit.default_tools(), client=client, approval="deny") == "done"
    results = [m for m in fake.requests[2].body["messages"] if m["role"] == "user"][1:]
    assert "a,b" in results[0]["content"][0]["content"]
    denied = results[1]["content"][0]
    assert denied["is_error"] and "deny" in denied["content"]
    assert (in_tmp / "data.csv").exists()


def test_default_tools_take_a_workspace_root(in_tmp: Path):
    (in_tmp / "proj").mkdir()
    (in_tmp / "proj" / "a.txt").write_text("in proj\n")
    (in_tmp / "a.txt").write_text("in cwd\n")
    tools = {t.name: t for t in toolkit.default_tools(root=in_tmp / "proj")}
    assert list(tools) == ["read_file", "write_file", "edit_file", "list_files", "shell"]
    assert call(tools["read_file"], path="a.txt")[0] == "     1\tin proj"
    assert tools["read_file"].guard({"path": "../a.txt"}) == "outside_workspace"
    assert tools["shell"].guard is None  # the shell is not confined to the workspace
    assert toolkit.default_tools(files=False) == [toolkit.shell]
