"""Forks (issue 25, item 2): Session.fork and ``nbagent fork`` on both stores, verify, trust, listings and the family tree.

A second user's process (tests/support/attacker_proc.py, its own NBAGENT_DATA_DIR) writes the foreign session.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import anthropic
import pytest

import nbagent
from nbagent import history, stores
from nbagent.agent.session import Session
from nbagent.cli.main import main
from nbagent.errors import UntrustedLogError
from nbagent.record import events as ev
from nbagent.state.lineage import ForkPointError
from reliability.attacker import call_events
from tests.security.test_attacks import attacker  # the second user's process, as the attack tests run it
from tests.support.store_fixtures import STORES, use_store


@pytest.fixture(params=STORES)
def kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The store under test, selected through NBAGENT_STORE."""
    use_store(request.param, monkeypatch)
    return str(request.param)


def turn(session: Session, n: int) -> None:
    """One finished turn: a request, a model call and its reply."""
    session.append(ev.USER_MSG, content=f"request {n}")
    session.append(ev.MODEL_CALL, model="claude-test", attempt=1)
    session.append(ev.ASSISTANT_MSG, stop_reason="end_turn", usage={}, content=[{"type": "text", "text": f"answer {n}"}])


def parent_session(folder: Path, turns: int = 3) -> Path:
    """A notebook's session of ``turns`` finished turns (seqs 2-4, 5-7, 8-10, ...), closed."""
    path = folder / ".nbagent" / "nb.ipynb" / "parent.jsonl"
    with Session.open(path) as session:
        for n in range(1, turns + 1):
            turn(session, n)
    return path


def texts(session: Session) -> list[str]:
    return [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"] for m in session.messages]


def test_a_fork_keeps_the_parents_turns_and_goes_on_alone(kind: str, tmp_path: Path) -> None:
    path = parent_session(tmp_path)
    with Session.open(path) as parent:
        with parent.fork(turn=2, name="kid") as kid:
            assert kid.id != parent.id and kid.path.name == "kid.jsonl"
            assert kid.seq == 8 and kid.state.turns == 2
            assert texts(kid) == ["request 1", "answer 1", "request 2", "answer 2"]
            assert kid.lineage is not None and (kid.lineage.parent, kid.lineage.at, kid.lineage.name) == (parent.id, 7, "parent")
            assert kid.trusted and kid.continue_refusal() == ""
            turn(kid, 9)
            assert texts(kid)[-2:] == ["request 9", "answer 9"]
        assert parent.seq == 10 and texts(parent)[-1] == "answer 3"  # the parent is only read
    with Session.open(path.with_name("kid.jsonl")) as kid:  # reopened from its snapshot: the same session, still yours
        assert kid.seq == 11 and kid.trusted and kid.snapshot_note == "" and kid.lineage is not None
        assert texts(kid)[-1] == "answer 9"
    source, found = history.resolve_session(
        str(path.with_name("kid.jsonl")) if kind == "file" else stores.session_url(stores.get_store(), path.with_name("kid.jsonl"))
    )
    report = history.verify(found, source)
    assert report.ok, report.problems
    assert any("match the SHA-256" in note for note in report.notes) and any("still holds them" in note for note in report.notes)
    assert report.trust.startswith("signed by you")


def test_each_kind_of_fork_point_is_taken_or_refused_with_the_nearest(kind: str, tmp_path: Path) -> None:
    path = tmp_path / ".nbagent" / "nb.ipynb" / "calls.jsonl"
    with Session.open(path) as session:
        turn(session, 1)  # 2-4
        for event_type, payload in call_events(steps="finished"):  # 5-10: a request, a call, its start and result, a reply
            session.append(event_type, **payload)
        for event_type, payload in call_events(steps="started", call_id="toolu_2"):  # 11-14: a call left open
            session.append(event_type, **payload)
        assert session.seq == 14
        with session.fork(at=1, name="empty") as empty:
            assert empty.messages == [] and empty.state.turns == 0
        with session.fork(turn=1, name="one") as one:
            assert one.seq == 5 and one.state.frontier == "done"
        with session.fork(at=10, name="two") as two:
            assert two.state.turns == 2 and two.state.final_text == "done"
        for at in (5, 7, 8, 9):  # a request awaiting its reply, a call open, started, a result awaiting the reply
            with pytest.raises(ForkPointError, match=r"event 4 \(after turn 1.*event 10 \(after turn 2"):
                session.fork(at=at)
        with pytest.raises(ForkPointError, match=r"not at rest at its last event \(14\).*event 10"):
            session.fork()  # the default, the last event, is inside a turn (a call open)
        with pytest.raises(ForkPointError, match="turn 3 did not end at rest"):
            session.fork(turn=3)
    assert sorted(p.name for p in path.parent.glob("*.jsonl")) == ["calls.jsonl", "empty.jsonl", "one.jsonl", "two.jsonl"] or kind != "file"


def test_a_fork_of_a_fork_and_the_family_in_every_listing(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = parent_session(tmp_path)
    with Session.open(path) as parent, parent.fork(turn=1, name="kid") as kid:
        turn(kid, 5)
        with kid.fork(name="grandkid") as grandkid:
            assert grandkid.lineage is not None and grandkid.lineage.name == "kid" and grandkid.trusted
            ids = {"parent": parent.id, "kid": kid.id, "grandkid": grandkid.id}
    source = stores.get_store() if kind == "postgres" else stores.FileStore(tmp_path)
    listed = {item.name: item for item in source.list(under=str(tmp_path))}
    assert listed["kid"].lineage is not None and listed["kid"].lineage.parent == ids["parent"]
    assert listed["grandkid"].lineage is not None and listed["grandkid"].lineage.parent == ids["kid"]
    assert listed["parent"].lineage is None
    assert [i.name for i in source.family(ids["grandkid"], under=str(tmp_path))] == ["parent", "kid", "grandkid"]
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    assert main(["sessions", "--tree"], out=out) == 0
    lines = out.getvalue().splitlines()
    names = [line[: lines[0].index("FORKED AT")].rstrip() for line in lines[1:]]
    assert names == ["parent", "└─ kid", "   └─ grandkid"], lines
    out = io.StringIO()
    assert main(["sessions"], out=out) == 0
    listing = out.getvalue()  # each fork has a title of its own, saying where it came from as people count turns
    assert "request 1 (fork after turn 1)" in listing and " (fork after turn 2)" in listing and "at event" not in listing
    assert [line.split()[0] for line in listing.splitlines()[1:]] == ["parent", "kid", "grandkid"]
    out = io.StringIO()
    assert main(["sessions", "--tree", "--json"], out=out) == 0
    rows = {row["name"]: row for row in json.loads(out.getvalue())}
    grandkid = rows["grandkid"]
    assert (grandkid["depth"], grandkid["parent_name"], grandkid["forked_at"], grandkid["forked_after_turn"]) == (2, "kid", 8, 2)
    assert (
        grandkid["title"] == "request 1 (fork after turn 1) (fork after turn 2)" and rows["kid"]["title"] == "request 1 (fork after turn 1)"
    )
    assert rows["parent"]["title"] == "request 1" and rows["parent"]["forked_after_turn"] is None
    out = io.StringIO()
    assert main(["sessions", "--tree"], out=out) == 0
    assert "after turn 1" in out.getvalue() and "after turn 2" in out.getvalue() and "event 8" not in out.getvalue()
    out = io.StringIO()
    assert main(["show", "grandkid"], out=out) == 0
    shown = out.getvalue()
    assert "forked from kid after turn 2: events 1-8 are its parent's" in shown
    assert "started, forked from parent after turn 1" in shown and "started, forked from kid after turn 2" in shown


def test_nbagent_fork_on_the_command_line(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parent_session(tmp_path)
    monkeypatch.chdir(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert main(["fork", "parent", "--turn", "2", "--name", "two"], out=out, err=err) == 0, err.getvalue()
    said = out.getvalue()
    assert said.startswith("forked parent after turn 2 (it keeps turns 1–2: events 1-7) into") and said.count("\n") == 1
    assert said.rstrip().endswith('titled "request 1 (fork after turn 2)"')
    out = io.StringIO()
    assert main(["fork", "parent", "--turn", "1", "--name", "one"], out=out, err=err) == 0
    assert "after turn 1 (it keeps turn 1: events 1-4)" in out.getvalue()
    out = io.StringIO()
    assert main(["fork", "parent", "--turn", "0", "--name", "none"], out=out, err=err) == 0
    assert "before the first turn (it keeps no turns" in out.getvalue() and '"request 1 (fork before the first turn)"' in out.getvalue()
    out, err = io.StringIO(), io.StringIO()
    assert main(["fork", "parent", "--at", "6"], out=out, err=err) == 2
    assert err.getvalue().startswith("nbagent fork: cannot fork parent there: event 6 is inside a turn")
    assert "event 4 (after turn 1: --at 4 or --turn 1) and event 7" in err.getvalue() and err.getvalue().count("\n") == 1
    out, err = io.StringIO(), io.StringIO()
    assert main(["fork", "parent", "--turn", "2", "--name", "two"], out=out, err=err) == 1
    assert "already holds a session" in err.getvalue()
    out, err = io.StringIO(), io.StringIO()
    assert main(["fork", "parent", "--at", "4", "--turn", "1"], out=out, err=err) == 2  # argparse: not both
    out = io.StringIO()
    assert main(["verify", "two"], out=out) == 0, out.getvalue()


# Trust and tampering (the file store) -----------------------------------------------------------------
def test_a_fork_of_a_session_you_did_not_write_is_not_yours_to_run(tmp_path: Path, fake: Any) -> None:
    theirs = tmp_path / ".nbagent" / "nb.ipynb" / "theirs.jsonl"
    attacker(tmp_path, "session", theirs, json.dumps(call_events(steps="finished")))  # a finished turn with a call, by another key
    with Session.open(theirs) as foreign:
        assert not foreign.trusted
        kid = foreign.fork(name="mine")
    with kid:
        assert kid.lineage is not None and kid.seq == 8
        report = kid.trust
        assert (report.foreign, report.mine, report.trusted_upto) == (7, 1, 0)  # only the fork's own first line is yours
        assert "not written by you" in kid.continue_refusal()
        with pytest.raises(UntrustedLogError, match="nbagent trust"):
            nbagent.run(kid, "go on", client=anthropic.Anthropic(api_key="k", base_url=fake.base_url, max_retries=0), model="claude-test")
    assert fake.requests == []  # nothing was sent
    report = history.verify(theirs.with_name("mine.jsonl"))
    assert report.ok and "NOT trusted" in report.trust and "7 signed by another key" in report.trust
    with Session.open(theirs.with_name("mine.jsonl")) as kid:  # `nbagent trust` on the fork: then, and only then, it is yours to run
        kid.trust_log()
        assert kid.trusted and kid.continue_refusal() == ""


def test_verify_fails_a_fork_whose_inherited_lines_or_parent_were_changed(tmp_path: Path) -> None:
    path = parent_session(tmp_path)
    with Session.open(path) as parent, parent.fork(turn=2, name="kid"):
        pass
    kid = path.with_name("kid.jsonl")
    assert history.verify(kid).ok
    attacker(tmp_path, "tamper", path, 7, "answer 2", "ANSWER 2")  # the parent's line 7 (inherited by the fork) changed
    assert "altered" in history.verify(path).trust  # the parent itself: its signature check says so
    report = history.verify(kid)
    assert not report.ok
    assert any("no longer holds the bytes this fork was made from" in p.message for p in report.problems), report.problems
    attacker(tmp_path, "tamper", kid, 4, "answer 1", "ANSWER 1")  # now the fork's own copy of an inherited line
    report = history.verify(kid)
    assert any("not the ones it was made from (SHA-256 differs)" in p.message and p.line == 8 for p in report.problems), report.problems
    assert "altered" in report.trust
    with Session.open(kid) as opened:  # and the fork is not continued: its history is no longer what you forked
        assert not opened.trusted and opened.continue_refusal()


def test_the_panel_replay_and_server_views_say_where_a_fork_came_from(tmp_path: Path) -> None:
    from nbagent.render import html
    from nbagent.render.timeline import Timeline

    path = parent_session(tmp_path)
    with Session.open(path) as parent, parent.fork(turn=1, name="kid"):
        pass
    kid = path.with_name("kid.jsonl")
    shown = html.transcript_html(history.read_all(kid))  # what the panel, the replay widget and the server's live view render
    assert "forked from parent after turn 1" in shown
    # The replay widget's header says it before any event is shown; a session that is no fork says nothing of the kind.
    assert "forked from parent after turn 1 · read-only" in Timeline(history.read_all(kid)).header_html()
    assert "forked from" not in Timeline(history.read_all(path)).header_html()
    rows = {s.name: history.json_row(s) for s in history.list_summaries(tmp_path)}  # the server's session list is these rows
    assert (rows["kid"]["parent_name"], rows["kid"]["forked_at"], rows["parent"]["parent"]) == ("parent", 4, "")
