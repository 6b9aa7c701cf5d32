"""The command line with NBAGENT_STORE naming a database (no --store): listing, searching and SESSION arguments find its sessions too.

Sessions are written through ``Session.open(..., store=url)`` for notebooks in a temp folder,
as kernels with NBAGENT_STORE set write them, next to a session file; the CLI runs in-process
through ``main(argv)`` and, for a few, as a real ``python -m nbagent`` subprocess.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from nbagent.agent.session import Session
from nbagent.cli.main import main
from nbagent.record import events as ev
from tests.support.store_fixtures import database

pytestmark = pytest.mark.postgres

DOWN = "postgresql://nobody@127.0.0.1:1/none"  # nothing listens on port 1: the connection is refused at once


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def record(notebook: Path, name: str, request: str, store: str) -> None:
    """One finished turn of ``notebook``'s session ``name``, in ``store`` (a database URL, or "files")."""
    path = notebook.parent / ".nbagent" / notebook.name / f"{name}.jsonl"
    with Session.open(path, store=store, fsync="never") as session:
        session.append(ev.USER_MSG, content=request)
        reply = [{"type": "text", "text": f"answer to {request}"}]
        session.append(ev.ASSISTANT_MSG, content=reply, stop_reason="end_turn", usage={"input_tokens": 10, "output_tokens": 2})


@dataclass
class Team:
    url: str
    project: Path  # the current folder: analysis.ipynb (a file session and a database one), sub/deep.ipynb (database only)
    other: Path  # a folder beside it with elsewhere.ipynb (database only)


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Team:
    url = database(f"cli-env-{tmp_path.name}")
    project, other = tmp_path / "project", tmp_path / "other"
    (project / "sub").mkdir(parents=True)
    other.mkdir()
    for notebook in (project / "analysis.ipynb", project / "sub" / "deep.ipynb", other / "elsewhere.ipynb"):
        notebook.write_text("{}")
    record(project / "analysis.ipynb", "f-alpha", "sum the files", "files")
    record(project / "analysis.ipynb", "db-alpha", "plot the totals", url)
    record(project / "sub" / "deep.ipynb", "db-deep-old", "first deep question", url)
    record(project / "sub" / "deep.ipynb", "db-deep", "second deep question", url)
    record(other / "elsewhere.ipynb", "db-other", "a question from elsewhere", url)
    monkeypatch.chdir(project)
    monkeypatch.setenv("NBAGENT_STORE", url)
    return Team(url, project, other)


def listed(*argv: str) -> list[dict[str, object]]:
    code, out, err = run("sessions", *argv, "--json")
    assert code == 0 and not err, err
    return list(json.loads(out))


def names(*argv: str) -> list[str]:
    return [str(s["name"]) for s in listed(*argv)]


# Listing ------------------------------------------------------------------------------------------
def test_sessions_mixes_files_and_the_databases_sessions_by_last_activity(team: Team) -> None:
    found = listed()
    assert [s["name"] for s in found] == ["f-alpha", "db-alpha", "db-deep-old", "db-deep"]  # not another folder's db-other
    by_name = {s["name"]: s for s in found}
    assert by_name["f-alpha"]["source"] != "index" and not str(by_name["f-alpha"]["path"]).startswith("postgresql://")
    assert by_name["db-alpha"]["path"] == f"{team.url}#{team.project / 'analysis.ipynb'}/db-alpha"
    assert by_name["db-alpha"]["source"] == "index" and by_name["db-alpha"]["title"] == "plot the totals"
    assert [s["last_ts"] for s in found] == sorted(s["last_ts"] for s in found)  # type: ignore[type-var]
    code, out, err = run("sessions")
    assert code == 0 and not err
    assert "f-alpha" in out and "db-alpha" in out and "db-deep" in out and "db-other" not in out
    assert f"{team.project / 'analysis.ipynb'}  (in {team.url})" in out  # the database's rows are grouped apart from the files'


def test_sessions_path_a_notebook_a_folder_or_another_folder(team: Team, tmp_path: Path) -> None:
    assert names("analysis.ipynb") == ["f-alpha", "db-alpha"]
    assert names("sub/deep.ipynb") == ["db-deep-old", "db-deep"]
    assert names("sub") == ["db-deep-old", "db-deep"]
    assert names(str(team.other)) == ["db-other"]
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run("sessions", str(empty))
    assert code == 0 and not err and out == f"no sessions under {empty} (nor in {team.url})\n"
    assert listed(str(empty)) == []
    # A link to the project: the database keyed the notebooks by their real path.
    link = tmp_path / "link"
    link.symlink_to(team.project)
    assert names(str(link)) == ["f-alpha", "db-alpha", "db-deep-old", "db-deep"]
    # A notebook that is not on this machine, but in the database (another node's), is listed; a made-up one is an error.
    record(tmp_path / "gone" / "lost.ipynb", "db-lost", "a lost notebook", team.url)
    assert names(str(tmp_path / "gone" / "lost.ipynb")) == ["db-lost"]
    code, out, err = run("sessions", str(tmp_path / "nowhere.ipynb"))
    assert code == 2 and "no such file" in err and f"Nor has {team.url} a notebook there" in err and err.count("\n") == 1


def test_grep_searches_the_database_sessions_events_under_path(team: Team) -> None:
    code, out, err = run("sessions", "--grep", "PLOT THE")
    assert code == 0 and not err
    assert out == "db-alpha  event 2  request: plot the totals\ndb-alpha  event 3  reply: answer to plot the totals\n"
    found = json.loads(run("sessions", "--grep", "answer to", "--json")[1])
    assert [(m["name"], m["where"]) for m in found] == [
        ("f-alpha", "reply"),
        ("db-alpha", "reply"),
        ("db-deep-old", "reply"),
        ("db-deep", "reply"),
    ]
    assert found[1]["path"] == f"{team.url}#{team.project / 'analysis.ipynb'}/db-alpha" and found[1]["seq"] == 3
    assert run("sessions", "--grep", "from elsewhere")[1] == "no session mentions 'from elsewhere'\n"  # another folder's
    found = json.loads(run("sessions", str(team.other), "--grep", "from elsewhere", "--json")[1])
    assert [(m["name"], m["where"]) for m in found] == [("db-other", "request"), ("db-other", "reply")]


# SESSION arguments -------------------------------------------------------------------------------
def test_show_tail_export_verify_and_copy_find_database_sessions(team: Team, tmp_path: Path) -> None:
    code, out, err = run("show", "db-alpha")
    assert code == 0 and not err
    assert out.startswith(f"session db-alpha  ({team.url}#{team.project / 'analysis.ipynb'}/db-alpha)\n")
    assert "plot the totals" in out and "answer to plot the totals" in out
    assert "second deep question" in run("show", "db-deep")[1]  # an exact name, though it prefixes nothing else
    assert "first deep question" in run("show", "db-deep-o")[1]  # a unique prefix
    assert "second deep question" in run("show", "sub/deep.ipynb")[1]  # a notebook: its most recently active session
    assert "sum the files" in run("show", "analysis.ipynb")[1]  # files first: the notebook's session file
    session_id = {s["name"]: s["session_id"] for s in listed()}["db-alpha"]
    assert "plot the totals" in run("show", str(session_id)[:8])[1]  # a session id prefix
    code, out, err = run("tail", "db-alpha", "--json")
    assert code == 0 and [json.loads(line)["type"] for line in out.splitlines()][1:] == [ev.USER_MSG, ev.ASSISTANT_MSG]
    target = tmp_path / "alpha.md"
    code, out, err = run("export", "db-alpha", "-o", str(target))
    assert code == 0 and "plot the totals" in target.read_text()
    code, out, err = run("verify", "db-alpha")
    assert code == 0 and out.startswith(f"{team.url}#{team.project / 'analysis.ipynb'}/db-alpha: OK: 3 valid events"), out + err
    copied = tmp_path / "copied.jsonl"
    code, out, err = run("copy", "db-alpha", str(copied))
    assert code == 0 and "copied 3 events" in out, err
    assert run("verify", str(copied))[0] == 0
    code, out, err = run("snapshot", "db-alpha")  # as the session's writer, in the database
    assert code == 0 and out.startswith("wrote ") and "(events 1-3)" in out, out + err
    assert run("verify", "db-alpha")[0] == 0
    code, out, err = run("show", "db-nothing")
    assert code == 2 and "unknown session 'db-nothing'" in err and f"in its files or in {team.url}" in err and err.count("\n") == 1


def test_an_ambiguous_database_session_lists_the_full_names(team: Team) -> None:
    code, out, err = run("show", "db-deep-")
    assert code == 0 and "first deep question" in out  # one match: db-deep-old
    for notebook in (team.project / "analysis.ipynb", team.project / "sub" / "deep.ipynb"):
        record(notebook, "twin", "which one?", team.url)
    for spec in ("twin", "db-"):
        code, out, err = run("show", spec)
        assert code == 2 and not out and err.count("\n") == 1 and "Traceback" not in err
        assert f"session {spec!r} is ambiguous" in err and "give its full name" in err
    assert f"{team.url}#{team.project / 'analysis.ipynb'}/db-alpha" in err  # "db-": the full names are listed
    code, _, err = run("show", "twin")
    assert f"{team.url}#{team.project / 'analysis.ipynb'}/twin, {team.url}#{team.project / 'sub' / 'deep.ipynb'}/twin" in err
    # Files first: a name a session file has is that file, even when the database has it too.
    record(team.project / "analysis.ipynb", "twin", "the file twin", "files")
    code, out, err = run("show", "twin")
    assert code == 0 and "the file twin" in out, err


def test_without_nbagent_store_the_cli_reads_files_only(team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    for unset in (None, ""):
        if unset is None:
            monkeypatch.delenv("NBAGENT_STORE")
        else:
            monkeypatch.setenv("NBAGENT_STORE", unset)
        assert names() == ["f-alpha"]
        assert names(str(team.other)) == []
        assert run("sessions", "--grep", "plot the")[1] == "no session mentions 'plot the'\n"
        code, out, err = run("show", "db-alpha")
        assert code == 2 and err == (
            f"nbagent show: unknown session 'db-alpha': no session of that name or id under {team.project} "
            "(run `nbagent sessions` to list them, or give the log's path).\n"
        )
        code, out, err = run("show", "sub/deep.ipynb")
        assert (
            code == 2
            and err == f"nbagent show: sub/deep.ipynb has no agent sessions (looked in {team.project / 'sub/.nbagent/deep.ipynb'}).\n"
        )
        assert run("sessions", "--store", team.url, "--notebook", "deep.ipynb", "--json")[0] == 0  # --store as before
        assert [s["name"] for s in json.loads(run("sessions", "--store", team.url, "--json")[1])] == [
            "db-alpha",
            "db-deep-old",
            "db-deep",
            "db-other",
        ]


def test_an_unreachable_database_is_one_line_and_the_files_still_work(team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBAGENT_STORE", DOWN)
    code, out, err = run("show", "db-alpha")
    assert code == 1 and not out and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("nbagent show: no session file matches 'db-alpha', and the database NBAGENT_STORE names could not be asked")
    assert f"cannot connect to {DOWN}" in err
    code, out, err = run("show", "f-alpha")  # a session file: the database is not asked
    assert code == 0 and "sum the files" in out and not err
    code, out, err = run("sessions", "--json")  # the files are listed, and the database's absence said
    assert code == 1 and [s["name"] for s in json.loads(out)] == ["f-alpha"]
    assert err.count("\n") == 1 and f"cannot connect to {DOWN}" in err and "only the session files are listed" in err
    code, out, err = run("sessions", "--grep", "sum the")
    assert (
        code == 1
        and out == "f-alpha  event 2  request: sum the files\nf-alpha  event 3  reply: answer to sum the files\n"
        and "only the session files were searched" in err
    )


def test_python_m_nbagent_honours_nbagent_store(team: Team) -> None:
    def nbagent(*argv: str, store: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "NBAGENT_STORE": store}
        return subprocess.run(
            [sys.executable, "-m", "nbagent", *argv], capture_output=True, text=True, cwd=team.project, env=env, timeout=120
        )

    done = nbagent("sessions", "--json", store=team.url)
    assert done.returncode == 0, done.stderr
    assert [s["name"] for s in json.loads(done.stdout)] == ["f-alpha", "db-alpha", "db-deep-old", "db-deep"]
    done = nbagent("show", "db-alpha", store=team.url)
    assert done.returncode == 0 and "plot the totals" in done.stdout, done.stderr
    done = nbagent("verify", "db-alpha", store=DOWN)
    assert done.returncode == 1 and not done.stdout and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and f"cannot connect to {DOWN}" in done.stderr


def test_a_session_keyed_by_the_folder_itself_is_listed_there(team: Team) -> None:
    """``Session.open("name", store=URL)`` run in a project folder keys the session by that folder: listing the folder shows it."""
    with Session.open("folder-run", store=team.url, fsync="never") as session:  # relative: this folder's session
        session.append(ev.USER_MSG, content="a script's question")
    assert "folder-run" in names()
    assert "folder-run" in names(str(team.project))
    assert "folder-run" not in names("sub") and "folder-run" not in names(str(team.other))
