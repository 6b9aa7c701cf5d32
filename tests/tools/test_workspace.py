"""The file tools stay in the workspace: paths outside the root need approval (the tools' guard says so),
paths into nbagent's log folders are refused whatever the approval (security review item 12)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pytest

import nbagent
from nbagent.record import events as ev
from nbagent.tools import builtin as toolkit
from tests.support.fake_anthropic import FakeAnthropic, text, tool_use, tool_uses

LOG_TEXT = "LOGSECRET-do-not-leak"
SECRET = "TOPSECRET-outside-the-workspace"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp/ws is the workspace; tmp/outside, tmp/home are not; links cross the border both ways.

    ws/            data.txt, sub/, .nbagent/nb/old.jsonl (a log), out_link -> ../outside,
                   secret_link -> ../outside/secret.txt, dangling -> ../outside/none.txt,
                   logs_link -> .nbagent, log_file_link -> .nbagent/nb/old.jsonl
    outside/       secret.txt, in_link -> ../ws/data.txt
    rootlink -> ws
    ws2/.nbagent -> ../elsewhere_logs   (a log folder that is itself a link)
    home/          (HOME)
    """
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "data.txt").write_text("inside\n")
    (ws / ".nbagent" / "nb").mkdir(parents=True)
    (ws / ".nbagent" / "nb" / "old.jsonl").write_text(LOG_TEXT + "\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text(SECRET + "\n")
    (tmp_path / "outside" / "in_link").symlink_to(ws / "data.txt")
    (ws / "out_link").symlink_to(tmp_path / "outside")
    (ws / "secret_link").symlink_to(tmp_path / "outside" / "secret.txt")
    (ws / "dangling").symlink_to(tmp_path / "outside" / "none.txt")
    (ws / "logs_link").symlink_to(".nbagent")
    (ws / "log_file_link").symlink_to(Path(".nbagent") / "nb" / "old.jsonl")
    (tmp_path / "rootlink").symlink_to(ws)
    (tmp_path / "elsewhere_logs").mkdir()
    (tmp_path / "elsewhere_logs" / "x.jsonl").write_text(LOG_TEXT)
    (tmp_path / "ws2").mkdir()
    (tmp_path / "ws2" / ".nbagent").symlink_to(tmp_path / "elsewhere_logs")
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path / "outside")  # the process cwd is NOT the workspace
    return tmp_path


# root, path, outside?, log folder?   ({t} is the tmp folder; roots are relative to it)
TABLE = [
    ("ws", "data.txt", False, False),
    ("ws", "sub/new/file.txt", False, False),  # does not exist yet (write_file)
    ("ws", "sub/../data.txt", False, False),
    ("ws", ".", False, False),
    ("ws", "", False, False),
    ("ws", "{t}/ws/data.txt", False, False),
    ("ws", "../outside/secret.txt", True, False),
    ("ws", "..", True, False),
    ("ws", "sub/../../outside/secret.txt", True, False),
    ("ws", "missing/../../outside/new.txt", True, False),
    ("ws", "{t}/outside/secret.txt", True, False),
    ("ws", "/etc/passwd", True, False),
    ("ws", "out_link/secret.txt", True, False),  # symlink inside -> outside
    ("ws", "out_link/new.txt", True, False),
    ("ws", "secret_link", True, False),
    ("ws", "dangling", True, False),  # a dangling link would create the file outside
    ("ws", "{t}/outside/in_link", False, False),  # symlink outside -> inside
    ("ws", "~/notes.txt", True, False),
    ("ws", "~", True, False),
    ("home", "~/notes.txt", False, False),
    ("ws", ".nbagent/nb/old.jsonl", False, True),
    ("ws", ".nbagent", False, True),
    ("ws", ".nbagent/new.txt", False, True),
    ("ws", "sub/../.nbagent/nb/old.jsonl", False, True),
    ("ws", "{t}/ws/.nbagent/nb/old.jsonl", False, True),
    ("ws", "logs_link/nb/old.jsonl", False, True),  # a link to the log folder
    ("ws", "log_file_link", False, True),  # a link to a log file
    ("ws", ".NBAGENT/nb/old.jsonl", False, True),  # the same folder on a case-insensitive disk
    ("ws", ".nbagent/../data.txt", False, False),  # only passes through the name
    ("ws", "../ws2/.nbagent/x.jsonl", True, True),
    ("ws2", ".nbagent/x.jsonl", True, True),  # the link leads outside, and into a log folder
    ("ws2", "../elsewhere_logs/x.jsonl", True, True),  # where ws2's .nbagent link really leads
    ("rootlink", "data.txt", False, False),  # the root itself is a link
    ("rootlink", "{t}/rootlink/data.txt", False, False),
    ("rootlink", "{t}/ws/data.txt", False, False),
    ("rootlink", "../outside/secret.txt", True, False),
    ("rootlink", ".nbagent/nb/old.jsonl", False, True),
]


@pytest.mark.parametrize(("root", "path", "is_outside", "is_log"), TABLE, ids=[f"{r}:{p or 'empty'}" for r, p, _, _ in TABLE])
def test_where_a_path_leads(tree: Path, root: str, path: str, is_outside: bool, is_log: bool) -> None:
    path = path.format(t=tree)
    assert toolkit.outside(tree / root, path) is is_outside
    assert toolkit.private(tree / root, path) is is_log


def test_root_none_is_the_working_directory_at_call_time(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tree / "ws")
    assert not toolkit.outside(None, "data.txt") and toolkit.outside(None, "../outside/secret.txt")
    assert toolkit.private(None, ".nbagent/nb/old.jsonl")
    monkeypatch.chdir(tree / "outside")
    assert not toolkit.outside(None, "secret.txt") and toolkit.outside(None, "../ws/data.txt")


def test_protected_folders_are_log_folders(tree: Path) -> None:
    (tree / "ws" / "logs").mkdir()
    assert toolkit.private(tree / "ws", "logs/a.jsonl", protected=[tree / "ws" / "logs"])
    assert toolkit.private(tree / "ws", "../ws/logs", protected=["logs_dir_is_resolved_against_cwd", tree / "ws" / "logs"])
    assert not toolkit.private(tree / "ws", "logs/a.jsonl")


# The tools ------------------------------------------------------------------------------------


def tools_in(root: Any, **kw: Any) -> dict[str, nbagent.Tool]:
    return {t.name: t for t in toolkit.file_tools(root, **kw)}


def call(t: nbagent.Tool, **arguments: Any) -> tuple[Any, bool]:
    return t.invoke(arguments, key="k")


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()}


LOG_PATHS = [
    ".nbagent/nb/old.jsonl",
    "logs_link/nb/old.jsonl",
    "log_file_link",
    "sub/../.nbagent/nb/old.jsonl",
    "{t}/ws/.nbagent/nb/old.jsonl",
]


@pytest.mark.parametrize("path", LOG_PATHS)
def test_log_files_are_never_read_written_or_edited(tree: Path, path: str) -> None:
    path = path.format(t=tree)
    tools = tools_in(tree / "ws")
    logs = tree / "ws" / ".nbagent"
    before = snapshot(logs)
    attempts = [
        call(tools["read_file"], path=path),
        call(tools["write_file"], path=path, content="overwritten"),
        call(tools["edit_file"], path=path, old_text=LOG_TEXT, new_text="edited"),
    ]
    for content, is_error in attempts:
        assert is_error and content.startswith("PermissionError:") and ".nbagent" in content and "never" in content
        assert LOG_TEXT not in content
    assert snapshot(logs) == before


def test_new_files_in_the_log_folder_are_refused(tree: Path) -> None:
    tools = tools_in(tree / "ws")
    for path in [".nbagent/new.txt", ".nbagent/nb/new.jsonl", "logs_link/new.txt", ".nbagent/fresh/dir/x.txt"]:
        content, is_error = call(tools["write_file"], path=path, content="x")
        assert is_error and "PermissionError" in content, path
    assert sorted(p.name for p in (tree / "ws" / ".nbagent").rglob("*")) == ["nb", "old.jsonl"]


def test_a_log_folder_that_is_a_link_is_refused(tree: Path) -> None:
    tools = tools_in(tree / "ws2")
    content, is_error = call(tools["read_file"], path=".nbagent/x.jsonl")
    assert is_error and LOG_TEXT not in content
    content, is_error = call(tools["read_file"], path="../elsewhere_logs/x.jsonl")  # approved or not: refused
    assert is_error and LOG_TEXT not in content


@pytest.mark.parametrize("path", [".nbagent", ".nbagent/nb", "logs_link", "sub/../.nbagent", ".NBAGENT"])
def test_the_log_folder_is_never_listed(tree: Path, path: str) -> None:
    content, is_error = call(tools_in(tree / "ws")["list_files"], path=path, recursive=True)
    assert is_error and content.startswith("PermissionError:") and "old.jsonl" not in content


def test_listing_the_workspace_skips_the_log_folder_and_links_into_it(tree: Path) -> None:
    list_files = tools_in(tree / "ws")["list_files"]
    for arguments in [{}, {"recursive": True}, {"pattern": "*.jsonl", "recursive": True}, {"pattern": "*link*"}]:
        content, is_error = call(list_files, **arguments)
        assert not is_error
        assert ".nbagent" not in content and "old.jsonl" not in content
        assert "logs_link" not in content and "log_file_link" not in content
    listing = call(list_files, recursive=True)[0].splitlines()
    assert "data.txt\t7" in listing and "sub/" in listing and "out_link/" in listing


def test_protected_folder_is_refused_and_not_listed(tree: Path) -> None:
    (tree / "ws" / "logs").mkdir()
    (tree / "ws" / "logs" / "s.jsonl").write_text(LOG_TEXT)
    tools = tools_in(tree / "ws", protected=[tree / "ws" / "logs"])
    assert call(tools["read_file"], path="logs/s.jsonl")[1] is True
    assert call(tools["list_files"], path="logs")[1] is True
    content, is_error = call(tools["list_files"], recursive=True)
    assert not is_error and "logs" not in content and "data.txt" in content
    assert call(toolkit.default_tools(root=tree / "ws", protected=[tree / "ws" / "logs"])[0], path="logs/s.jsonl")[1] is True


def test_relative_paths_resolve_against_the_root_not_the_cwd(tree: Path) -> None:
    tools = tools_in(tree / "ws")  # the cwd is tmp/outside
    assert call(tools["read_file"], path="data.txt")[0].endswith("inside")
    assert call(tools["write_file"], path="sub/new.txt", content="n")[1] is False
    assert (tree / "ws" / "sub" / "new.txt").read_text() == "n" and not (tree / "outside" / "sub").exists()
    assert call(tools["edit_file"], path="sub/new.txt", old_text="n", new_text="m")[1] is False
    assert (tree / "ws" / "sub" / "new.txt").read_text() == "m"
    assert "data.txt" in call(tools["list_files"])[0]
    assert "secret.txt" not in call(tools["list_files"])[0]


def test_a_root_with_tilde_is_expanded(tree: Path) -> None:
    (tree / "home" / "proj").mkdir()
    (tree / "home" / "proj" / "a.txt").write_text("a")
    tools = tools_in("~/proj")
    assert call(tools["read_file"], path="a.txt")[0].endswith("a")
    assert tools["read_file"].guard({"path": "a.txt"}) is None


def test_guard_says_outside_workspace_and_nothing_else(tree: Path) -> None:
    for t in toolkit.file_tools(tree / "ws"):
        assert t.guard is not None
        assert t.guard({"path": "data.txt"}) is None
        assert t.guard({"path": "sub/new.txt"}) is None
        assert t.guard({"path": "../outside/secret.txt"}) == toolkit.OUTSIDE_WORKSPACE == "outside_workspace"
        assert t.guard({"path": "out_link/secret.txt"}) == "outside_workspace"
        assert t.guard({"path": str(tree / "outside" / "secret.txt")}) == "outside_workspace"
        assert t.guard({"path": "~/x"}) == "outside_workspace"
        # refused when it runs, whatever the approval: nothing to ask
        assert t.guard({"path": ".nbagent/nb/old.jsonl"}) is None
        assert t.guard({"path": "../ws2/.nbagent/x.jsonl"}) is None
        # arguments the call's validation rejects: nothing to ask either
        assert t.guard({"path": 3}) is None and t.guard({"path": "a\0b"}) is None
    list_files = tools_in(tree / "ws")["list_files"]
    assert list_files.guard({}) is None  # path defaults to "."
    assert tools_in(tree / "ws" / "sub")["list_files"].guard({}) is None
    assert tools_in(tree / "ws" / "sub")["list_files"].guard({"path": ".."}) == "outside_workspace"


def test_module_level_tools_are_confined_to_the_cwd_at_call_time(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tree / "ws")
    assert toolkit.read_file.guard({"path": "data.txt"}) is None
    assert toolkit.read_file.guard({"path": "../outside/secret.txt"}) == "outside_workspace"
    assert call(toolkit.read_file, path=".nbagent/nb/old.jsonl")[1] is True
    assert [t.guard is not None for t in toolkit.default_tools()] == [True] * 4 + [False]  # shell is not confined
    monkeypatch.chdir(tree / "outside")
    assert toolkit.read_file.guard({"path": "secret.txt"}) is None


def test_the_guard_only_advises_an_approved_outside_call_runs(tree: Path) -> None:
    # Asking is the loop's job (before the call starts); the tool itself does what it is asked.
    tools = tools_in(tree / "ws")
    content, is_error = call(tools["read_file"], path="../outside/secret.txt")
    assert not is_error and SECRET in content


def test_user_tools_have_no_guard_and_schemas_are_unchanged(tree: Path) -> None:
    @nbagent.tool
    def mine(x: int) -> int:
        """Mine.

        Args:
            x: A number.
        """
        return x

    assert mine.guard is None and nbagent.Tool(lambda: None, name="f").guard is None
    bound = toolkit.file_tools(tree / "ws")
    assert [t.name for t in bound] == ["read_file", "write_file", "edit_file", "list_files"]
    assert [t.effect for t in bound] == ["read", "write", "write", "read"]
    assert [t.to_dict() for t in bound] == [t.to_dict() for t in toolkit.FILE_TOOLS]
    properties = {t.name: sorted(t.to_dict()["input_schema"]["properties"]) for t in bound}
    assert properties == {
        "read_file": ["limit", "offset", "path"],
        "write_file": ["content", "path"],
        "edit_file": ["new_text", "old_text", "path"],
        "list_files": ["path", "pattern", "recursive"],
    }
    assert "root" not in json.dumps([t.to_dict() for t in bound]) and str(tree) not in json.dumps([t.to_dict() for t in bound])


# Through the real engine ---------------------------------------------------------------------


def log_texts(log_path: Path) -> list[tuple[str, str]]:
    return [(e["type"], json.dumps(e)) for e in nbagent.read_events(log_path)]


def test_log_folder_is_refused_in_a_real_run_even_with_auto_approval(fake: FakeAnthropic, client: anthropic.Anthropic, tree: Path) -> None:
    ws = tree / "ws"
    log_path = ws / ".nbagent" / "nb" / "session.jsonl"
    fake.script(
        tool_uses(
            [
                ("read_file", {"path": ".nbagent/nb/old.jsonl"}, "toolu_r"),
                ("read_file", {"path": "logs_link/nb/session.jsonl"}, "toolu_s"),
                ("write_file", {"path": ".nbagent/nb/old.jsonl", "content": "forged"}, "toolu_w"),
                ("list_files", {"path": ".nbagent", "recursive": True}, "toolu_l"),
            ]
        ),
        text("done"),
    )
    with nbagent.Session.open(log_path) as session:
        assert nbagent.run(session, "peek", tools=toolkit.file_tools(ws), client=client, model="claude-test", approval="auto") == "done"
    [reply] = [m for m in fake.requests[1].body["messages"] if m["role"] == "user"][-1:]
    results = {b["tool_use_id"]: b for b in reply["content"]}
    assert all(r["is_error"] and "PermissionError" in r["content"] for r in results.values())
    assert (ws / ".nbagent" / "nb" / "old.jsonl").read_text() == LOG_TEXT + "\n"
    assert LOG_TEXT not in json.dumps(fake.requests[1].body)
    assert not any(LOG_TEXT in line for _, line in log_texts(log_path))


def test_outside_workspace_asks_through_the_loop(fake: FakeAnthropic, client: anthropic.Anthropic, tree: Path) -> None:
    ws = tree / "ws"
    (tree / "secret.txt").write_text(SECRET)
    log_path = ws / ".nbagent" / "nb" / "session.jsonl"
    asked: list[nbagent.ApprovalRequest] = []
    answers = iter([False, True])

    def policy(request: nbagent.ApprovalRequest) -> bool:
        asked.append(request)
        assert request.tool_use_id not in started  # asked before the call starts
        return next(answers, True)  # says yes to anything else: the log folder must still be refused

    started: set[str] = set()

    def watch(event: Any) -> None:
        if event["type"] == ev.TOOL_STARTED:
            started.add(event["tool_use_id"])

    fake.script(
        tool_use("read_file", {"path": "../secret.txt"}, id="toolu_no"),
        tool_use("read_file", {"path": "../secret.txt"}, id="toolu_yes"),
        tool_use("read_file", {"path": "data.txt"}, id="toolu_in"),
        tool_use("read_file", {"path": ".nbagent/nb/old.jsonl"}, id="toolu_log"),
        text("done"),
    )
    with nbagent.Session.open(log_path) as session:
        session.subscribe(watch)
        result = nbagent.run(session, "look around", tools=toolkit.file_tools(ws), client=client, model="claude-test", approval=policy)
        assert result == "done"
        approvals = [(e["tool_use_id"], e["reason"], e["decision"]) for e in session.events() if e["type"] == ev.APPROVAL]
        starts = [e["tool_use_id"] for e in session.events() if e["type"] == ev.TOOL_STARTED]
        outcome = {e["tool_use_id"]: e for e in session.events() if e["type"] == ev.TOOL_RESULT}

    # Asked once per outside call, with the reason; never for the inside call or the log folder.
    assert [(r.tool_use_id, r.tool_name, r.input, r.reason) for r in asked] == [
        ("toolu_no", "read_file", {"path": "../secret.txt"}, "outside_workspace"),
        ("toolu_yes", "read_file", {"path": "../secret.txt"}, "outside_workspace"),
    ]
    assert approvals == [
        ("toolu_no", "outside_workspace", "pending"),
        ("toolu_no", "outside_workspace", "declined"),
        ("toolu_yes", "outside_workspace", "pending"),
        ("toolu_yes", "outside_workspace", "approved"),
    ]
    # Declined: not run (no tool_started), an error result, the secret nowhere in the log.
    assert "toolu_no" not in starts
    assert outcome["toolu_no"].get("is_error") is True and SECRET not in json.dumps(outcome["toolu_no"])
    # Approved: run.
    assert SECRET in json.dumps(outcome["toolu_yes"]) and not outcome["toolu_yes"].get("is_error")
    secret_events = [kind for kind, line in log_texts(log_path) if SECRET in line]
    assert secret_events == [ev.TOOL_RESULT]  # only the approved call's result
    # Inside: run without asking.
    assert "toolu_in" in starts and "inside" in json.dumps(outcome["toolu_in"])
    # The log folder: refused whatever the policy says.
    assert outcome["toolu_log"].get("is_error") is True
    assert not any(LOG_TEXT in line for _, line in log_texts(log_path))
