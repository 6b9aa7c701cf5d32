"""The notebook front end on a PostgreSQL store, through the real magics: restart and Run All, listing, --resume, a followed replay.

In-process tests use the shared IPython shell (tests/notebook/test_magics.py's pattern) with ``Agent.store`` or
``NBAGENT_STORE`` set to a database of the throwaway cluster (tests/support/pg_harness.py); a "restart" there
unloads the extension and gives the kernel a new id, as a new kernel process has.  The last test
runs real kernels (jupyter_client): one writes, this process follows it, a second kernel re-runs it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

import nbagent
from nbagent.history.summary import notebook_sessions
from nbagent.notebook import kernel as nbkernel
from nbagent.notebook.magics import magics_for
from nbagent.notebook.replay import Replay
from nbagent.record import events as ev
from nbagent.stores import get_store
from nbagent.stores.postgres import key_path
from tests.support.fake_anthropic import text, tool_use
from tests.support.kernels import Kernel, wait_for
from tests.support.store_fixtures import STORES, database, use_store


@pytest.fixture
def notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The notebook the shell runs (as Jupyter Server tells a kernel): each test's own, so its sessions are its own."""
    path = tmp_path / "work.ipynb"
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    return path


def restart(shell: Any, monkeypatch: pytest.MonkeyPatch, config: str = "") -> None:
    """What a kernel restart does to the front end: sessions closed, a new kernel id, the extension loaded afresh."""
    assert shell.run_cell("%unload_ext nbagent").success
    monkeypatch.setattr(nbkernel, "KERNEL_ID", os.urandom(8).hex())
    assert shell.run_cell("%load_ext nbagent" + (f"\n{config}" if config else "")).success


def usage_error(shell: Any, code: str) -> str:
    result = shell.run_cell(code)
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    return str(result.error_in_exec)


def texts(request: Any) -> list[str]:
    """Every text the model was sent, in order."""
    found = []
    for message in request.body["messages"]:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        found += [b["text"] for b in blocks if b.get("type") == "text"]
    return found


@pytest.mark.postgres
def test_run_all_after_a_restart_renders_each_turn_from_the_database_without_a_model_call(
    shell, fake, notebook, tmp_path, monkeypatch, capsys
):
    url = database()
    config = f"%config Agent.store = {url!r}"
    assert shell.run_cell(config).success
    fake.script(text("answer one"), tool_use("python", {"code": "made = 41 + 1\nmade"}), text("answer two"))
    assert shell.run_cell("%agent first request", cell_id="c1").success
    assert shell.run_cell("%agent second request", cell_id="c2").success
    assert shell.user_ns.pop("made") == 42
    sent = len(fake.requests)
    assert sent == 3
    assert not (tmp_path / ".nbagent").exists()  # nothing beside the notebook: the session is in the database
    [listed] = get_store(url).list(notebook=str(notebook))
    assert listed.turns == 2

    restart(shell, monkeypatch, config)
    capsys.readouterr()
    assert shell.run_cell("%agent first request", cell_id="c1").success  # Run All
    assert shell.run_cell("%agent second request", cell_id="c2").success
    out = capsys.readouterr().out
    assert "answer one" in out and "answer two" in out and "41 + 1" in out
    assert len(fake.requests) == sent  # re-rendered from the table: no model call
    assert "made" not in shell.user_ns  # and no tool ran again

    fake.script(text("three"))
    assert shell.run_cell("%agent third request", cell_id="c3").success
    sent_texts = texts(fake.requests[-1])
    assert "first request" in sent_texts and "second request" in sent_texts  # the same session continued
    assert any(t.startswith("[nbagent note: the Jupyter kernel was restarted") for t in sent_texts)
    [listed] = get_store(url).list(notebook=str(notebook))
    assert listed.turns == 3 and not (tmp_path / ".nbagent").exists()


@pytest.mark.postgres
def test_agent_sessions_lists_this_notebooks_sessions_from_the_index(shell, fake, notebook, tmp_path, monkeypatch, capsys):
    url = use_store("postgres", monkeypatch)  # NBAGENT_STORE, as a team's environment sets it
    fake.script(text("a"), text("b"))
    assert shell.run_cell("%agent first question").success
    assert shell.run_cell("%agent --new second question").success
    with nbagent.Session.open(key_path(str(tmp_path / "other.ipynb"), "elsewhere"), store=url) as other:
        other.append(ev.USER_MSG, content="a question of another notebook")
    capsys.readouterr()
    assert shell.run_cell("%agent_sessions").success
    out = capsys.readouterr().out
    assert f"Sessions of {notebook} in {url} (* = current):" in out
    rows = [line for line in out.splitlines() if "question" in line]
    assert len(rows) == 2 and "another notebook" not in out
    assert "first question" in rows[0] and rows[0].startswith(" ") and "complete" in rows[0]
    assert "second question" in rows[1] and rows[1].startswith("*")
    assert all("  yours  " in row for row in rows)

    restart(shell, monkeypatch)  # a new kernel: no session is current, the listing is the same
    capsys.readouterr()
    assert shell.run_cell("%agent_sessions").success
    rows = [line for line in capsys.readouterr().out.splitlines() if "question" in line]
    assert len(rows) == 2 and not any(row.startswith("*") for row in rows)

    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "empty.ipynb"))
    capsys.readouterr()
    assert shell.run_cell("%agent_sessions").success
    assert f"No agent sessions yet of {tmp_path / 'empty.ipynb'} in {url}." in capsys.readouterr().out


@pytest.mark.postgres
def test_resume_continues_a_database_session_by_name_and_nothing_else(shell, fake, notebook, tmp_path, monkeypatch, capsys):
    url = use_store("postgres", monkeypatch)
    fake.script(text("noted"), text("other"))
    assert shell.run_cell("%agent --session alpha remember the number 7").success
    assert shell.run_cell("%agent --new something else").success
    with nbagent.Session.open(key_path(str(tmp_path / "other.ipynb"), "theirs"), store=url) as other:
        other.append(ev.USER_MSG, content="not this notebook's")

    restart(shell, monkeypatch)
    sent = len(fake.requests)
    message = usage_error(shell, "%agent --resume nope go on")
    assert "No session named 'nope'" in message and "alpha" in message and "%agent_sessions" in message
    foreign = f"{url}#{tmp_path / 'other.ipynb'}/theirs"
    assert "cannot be continued here" in usage_error(shell, f"%agent --resume {foreign} go on")
    assert len(fake.requests) == sent

    fake.script(text("it was 7"))
    capsys.readouterr()
    assert shell.run_cell("%agent --resume alpha which number?").success
    out = capsys.readouterr().out
    assert "noted" in out and "it was 7" in out  # its history rendered first, then the new turn
    assert "remember the number 7" in texts(fake.requests[-1])
    fake.script(text("still alpha"))
    assert shell.run_cell("%agent and again?").success  # --resume made it current
    assert "remember the number 7" in texts(fake.requests[-1])
    assert shell.run_cell(f"%agent --resume {url}#{notebook}/alpha").success  # its full name works too
    assert len(fake.requests) == sent + 2


@pytest.mark.parametrize("kind", STORES)
def test_replay_finds_a_session_and_follows_it_as_it_is_written(kind, shell, fake, notebook, monkeypatch, capsys):
    url = use_store(kind, monkeypatch)
    fake.script(text("first answer"))
    assert shell.run_cell("%agent --session live first request").success
    magics = magics_for(shell)
    assert magics is not None
    assert shell.run_cell("%agent_replay").success  # the latest session of this notebook
    replay = magics.replay
    assert replay.following and "first request" in capsys.readouterr().out
    assert replay.source == (f"{url}#{notebook}/live" if url else str(notebook.parent / ".nbagent" / notebook.name / "live.jsonl"))
    replay.go(len(replay.events) - 1)  # at the end: a followed event moves it on, as a live view

    # A tool of the turn being written waits until the replay has the turn's own events so far: followed, not reloaded.
    seen: dict[str, list[str]] = {}

    @nbagent.tool(effect="read")
    def peek() -> str:
        """Look at the replay."""
        wait_for(lambda: any(e["type"] == ev.TOOL_STARTED for e in replay.events), timeout=20)
        seen["types"] = [e["type"] for e in replay.events]
        return "peeked"

    shell.user_ns["peek"] = peek
    fake.script(tool_use("peek", {}), text("the answer, streamed in pieces", chunks=8, delay=0.03))
    assert shell.run_cell("%agent second request").success
    assert seen["types"].count(ev.USER_MSG) == 2 and seen["types"][-1] == ev.TOOL_STARTED  # the turn so far, while it runs

    source = get_store(url)
    [path] = [s.path for s in notebook_sessions(source, notebook.parent / ".nbagent" / notebook.name)]
    recorded = list(source.read(path))
    wait_for(lambda: replay.last_seq == recorded[-1]["seq"], timeout=20)
    time.sleep(0.5)  # anything late (a duplicate) would come now
    assert [e["seq"] for e in replay.events] == list(range(1, len(recorded) + 1))  # no gap, no duplicate
    assert replay.events == recorded
    assert replay.slider.max == len(recorded) and replay.index == len(recorded) - 1  # it was at the end: it stays there

    assert shell.run_cell("%agent_replay live").success  # by name; the older replay stops following
    assert magics.replay is not replay and not replay.following and magics.replay.following
    shell.user_ns.pop("peek")


def test_a_followed_log_that_turns_damaged_stops_following_and_says_why(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with nbagent.Session.open(path) as session:
        session.append(ev.USER_MSG, content="hi")
    replay = Replay.from_path(path)
    replay.follow()
    assert replay.following and "Following" in replay.live.value
    with nbagent.Session.open(tmp_path / "other.jsonl") as other:
        other.append(ev.USER_MSG, content="valid, but not this log's")
    with open(path, "ab") as log:
        log.write(b'{"broken": true}\n' + (tmp_path / "other.jsonl").read_bytes().splitlines(keepends=True)[-1])
    wait_for(lambda: not replay.following, timeout=10)
    assert "Stopped following: " in replay.live.value and "line 3" in replay.live.value and "is damaged" in replay.live.value
    assert len(replay.events) == 2


@pytest.mark.postgres
@pytest.mark.kernel
@pytest.mark.slow
def test_kernels_on_one_database_follow_restart_and_run_all(fake, notebook, tmp_path, monkeypatch, shell):
    url = database()
    env = {**os.environ, "ANTHROPIC_BASE_URL": fake.base_url, "ANTHROPIC_API_KEY": "test-key", "NBAGENT_STORE": url}
    setup = "%load_ext nbagent\n%config Agent.tools = ['python']"
    fake.script(text("one"), text("counting: " + " ".join(str(i) for i in range(40)), chunks=30, delay=0.08))
    with Kernel(tmp_path, env) as writer:
        writer.run(setup, "setup")
        assert "one" in writer.run("%agent first request", "c1")

        # This process is the other kernel: its replay catches up from the table, then follows notifications.
        monkeypatch.setenv("NBAGENT_STORE", url)
        assert shell.run_cell("%agent_replay").success
        magics = magics_for(shell)
        assert magics is not None
        replay = magics.replay
        first_part = replay.last_seq
        msg_id = writer.send("%agent second request", "c2")

        def mid_turn() -> bool:
            requests = [i for i, e in enumerate(replay.events) if e["type"] == ev.USER_MSG]
            return len(requests) == 2

        wait_for(mid_turn, timeout=30)
        later = replay.events[[i for i, e in enumerate(replay.events) if e["type"] == ev.USER_MSG][1] :]
        assert not any(e["type"] == ev.ASSISTANT_MSG for e in later)  # seen while the answer was still streaming
        reply, shown = writer.wait(msg_id)
        assert reply["status"] == "ok" and "counting: 0 1 2" in shown
    source = get_store(url)
    [path] = [s.path for s in notebook_sessions(source, notebook.parent / ".nbagent" / notebook.name)]
    recorded = list(source.read(path))
    wait_for(lambda: replay.last_seq == recorded[-1]["seq"], timeout=20)
    time.sleep(0.5)
    assert replay.last_seq > first_part and replay.events == recorded  # no gap, no duplicate
    sent = len(fake.requests)

    with Kernel(tmp_path, env) as fresh:  # a new kernel runs the whole notebook again
        fresh.run(setup, "setup")
        assert "one" in fresh.run("%agent first request", "c1")
        assert "counting: 0 1 2" in fresh.run("%agent second request", "c2")
        assert len(fake.requests) == sent
        listing = fresh.run("%agent_sessions")
        assert f"in {url}" in listing
        assert len([line for line in listing.splitlines() if "first request" in line]) == 1
    assert not (tmp_path / ".nbagent").exists()
