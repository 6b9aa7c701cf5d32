"""Defects 3 and 5 of issue 20 on a real cluster: another member under row-level security, and a row holding a non-ASCII character."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nbagent.agent.session import Session
from nbagent.errors import LogCorruptError
from nbagent.record import events as ev
from nbagent.stores import get_store, migrations
from nbagent.stores.postgres_db import log_bytes
from reliability.redteam import Context, Finding, context
from reliability.redteam import postgres as redteam
from tests.support import pg_harness

pytestmark = pytest.mark.postgres
pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'nbagent[postgres]')")


@pytest.fixture(scope="module")
def ctx() -> Iterator[Context]:
    """One campaign context (and cluster) for this module."""
    if pg_harness.missing():
        pytest.skip(pg_harness.missing() or "")
    with context(quick=True) as made:
        yield made


@pytest.fixture(scope="module")
def findings(ctx: Context) -> list[Finding]:
    """The campaign's attacks on defects 3 and 5, run once for this module."""
    return redteam.attacks(ctx.sub("campaign"))


ATTACKS = [
    (3, "mallory inserts 5000 event rows into alice's session"),
    (3, "mallory moves her own event rows into alice's session"),
    (3, "mallory squats alice's snapshot row"),
    (3, "mallory probes session ids through key errors"),
    (3, "mallory probes notebook and session names"),
    (3, "mallory LISTENs on alice's session's channel"),
    *[
        (5, f"nbagent {what} on a row holding a non-ASCII character")
        for what in ("show", "verify", "tail", "export", "copy", "sessions --grep")
    ],
    (5, "Session.open of the owner's session with a non-ASCII row"),
]


@pytest.mark.slow
def test_every_attack_was_tried(findings: list[Finding]) -> None:
    assert [(f.defect, f.attack) for f in findings] == ATTACKS


@pytest.mark.slow
@pytest.mark.parametrize("attack", [a for _d, a in ATTACKS])
def test_the_attack_held(findings: list[Finding], attack: str) -> None:
    found = next(f for f in findings if f.attack == attack)
    assert found.held, f"{found.outcome}: {found.problems}"


@pytest.mark.slow
def test_alice_still_works_and_follows_her_session_under_row_security(ctx: Context, monkeypatch: pytest.MonkeyPatch) -> None:
    """Her own session: appends, a follow woken by her commits on its private channel, verify, the auditor sees both roles' rows."""
    monkeypatch.setenv("NBAGENT_DATA_DIR", str(ctx.folder / "alice-data"))
    monkeypatch.delenv("NBAGENT_STORE", raising=False)
    t = redteam.team(ctx.sub("works"))
    with Session.open(t.path, store=t.alice) as session:
        session.append(ev.USER_MSG, content="one")
        follow = get_store(t.alice).follow(t.path, since=session.seq, idle_timeout=5)
        session.append(ev.USER_MSG, content="two")
        assert next(follow)["content"] == "two"
        follow.close()
    channels = redteam.sql(t.admin, "SELECT channel FROM nbagent_sessions")
    assert all(len(c) == 40 and c.startswith("nbagent_") for (c,) in channels)
    assert redteam.verified(t) == ""
    assert redteam.sql(t.mallory, "SELECT count(*) FROM nbagent_events")[0][0] == 0


@pytest.mark.slow
def test_enabling_row_security_again_applies_only_what_is_missing(ctx: Context) -> None:
    """A database with the first policy (an older nbagent's) gets the second one; then there is nothing left to apply."""
    url = ctx.postgres().new_database()
    store = get_store(url)
    with store.connect() as conn:  # type: ignore[attr-defined]
        assert migrations.apply_optional(conn, "row_security") is True
    assert store.enable_row_security() is True  # type: ignore[attr-defined]
    assert store.enable_row_security() is False  # type: ignore[attr-defined]
    names = [row[0] for row in redteam.sql(url, "SELECT name FROM _nbagent_migrations ORDER BY applied_at, name")]
    assert names[-2:] == ["row_security", "row_security_by_session"] and "m003_private_channels" in names


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["{}", "ab"], b"{}\nab\n"),
        (["a\u00e9b"], b"a\0b\n"),  # one byte per character: later lines keep their offsets
        (["\u2603\U0001f600", "x"], b"\0\0\nx\n"),
        ([], b""),
    ],
)
def test_log_bytes_turns_each_non_ascii_character_into_one_nul(lines: list[str], expected: bytes) -> None:
    assert log_bytes(lines) == expected


@pytest.mark.slow
def test_a_non_ascii_row_read_by_the_store_is_damage_at_that_line(ctx: Context, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBAGENT_DATA_DIR", str(ctx.folder / "reader-data"))
    url = ctx.postgres().new_database()
    path = ctx.folder / "reader" / ".nbagent" / "n.ipynb" / "s.jsonl"
    with Session.open(path, store=url) as session:
        for text in ("one", "two", "three"):
            session.append(ev.USER_MSG, content=text)
    redteam.sql(url, "UPDATE nbagent_events SET line = replace(line, 'three', 'thr\u00e9e') WHERE seq = 4")
    store = get_store(url)
    seen: list[int] = []
    with pytest.raises(LogCorruptError, match="line 4 .* is damaged"):
        seen.extend(e["seq"] for e in store.read(path))
    assert seen == [1, 2, 3]
    with pytest.raises(LogCorruptError, match="line 4"):
        Session.open(path, store=url, snapshot_every=0).close()
    assert Path(path).exists() is False  # nothing beside the notebook: the database holds it
