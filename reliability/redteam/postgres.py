"""Defects 3 and 5 of issue 20: another member against a session under row-level security, and a damaged row.

Two database roles hold exactly the grants docs/postgres.md lists, on a fresh database of the
shared cluster with ``enable_row_security()`` applied by the tables' owner. Alice works through
nbagent (``Session.open``, the ``nbagent`` command line); mallory is any client with her own
role and SQL, going around nbagent. A row altered by hand (a non-ASCII character) must give
every reader a one-line "damaged" error naming the row.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import traceback
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import nbagent
from nbagent.cli.main import main
from nbagent.errors import LogError
from nbagent.record import events as ev

from . import Context, Finding

GRANTS = (  # exactly what docs/postgres.md tells an administrator to grant each member
    "GRANT SELECT, INSERT, UPDATE ON nbagent_sessions, nbagent_events, nbagent_snapshots TO {role}",
    "GRANT SELECT ON _nbagent_migrations TO {role}",
    "GRANT USAGE ON SEQUENCE nbagent_sessions_id_seq TO {role}",
)
FLOOD = 5000  # rows mallory inserts into alice's session


@dataclass
class Team:
    """A database with row-level security on, its owner's URL, and two members (alice works through nbagent)."""

    admin: str
    alice: str
    mallory: str
    alice_role: str
    notebook: Path
    path: Path  # alice's session, as Session.open takes it

    def name(self, url: str) -> str:
        """Alice's session's full name on a command line, through ``url``'s role."""
        return f"{url}#{self.notebook}/{self.path.name.removesuffix('.jsonl')}"


def as_role(url: str, role: str) -> str:
    """The same database as another role (the test cluster trusts every local role)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rsplit('@', 1)[-1]}"))


def sql(url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """One statement on its own autocommit connection; its rows if it returns any."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query, params)
        return list(cursor.fetchall()) if cursor.description else []


def attempt(url: str, query: str, params: tuple[Any, ...] = ()) -> str:
    """What the database answered to ``query``: "ok", or its error with numbers blanked (to compare two answers)."""
    import psycopg

    try:
        sql(url, query, params)
    except psycopg.Error as exc:
        return f"{exc.sqlstate}: " + re.sub(r"\d+", "N", str(exc).splitlines()[0])
    return "ok"


@contextlib.contextmanager
def user(ctx: Context) -> Iterator[None]:
    """This process as alice: a data folder (a key) of her own, no NBAGENT_STORE."""
    saved = {k: os.environ.get(k) for k in ("NBAGENT_DATA_DIR", "NBAGENT_STORE")}
    os.environ["NBAGENT_DATA_DIR"] = str(ctx.folder / "alice-data")
    os.environ.pop("NBAGENT_STORE", None)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def team(ctx: Context) -> Team:
    """A fresh database: tables and row-level security by the owner, then alice and mallory with the documented grants."""
    from nbagent.stores import get_store

    admin = ctx.postgres().new_database()
    owner = get_store(admin)
    owner.list()  # the tables, created by their owner
    owner.enable_row_security()  # type: ignore[attr-defined]
    tag = uuid.uuid4().hex[:8]
    roles = {who: f"{who}_{tag}" for who in ("alice", "mallory")}
    for role in roles.values():
        sql(admin, f"CREATE ROLE {role} LOGIN")
        for grant in GRANTS:
            sql(admin, grant.format(role=role))
    notebook = ctx.folder / "plan.ipynb"
    notebook.write_text("{}")
    path = ctx.folder / ".nbagent" / "plan.ipynb" / "secret.jsonl"
    return Team(admin, as_role(admin, roles["alice"]), as_role(admin, roles["mallory"]), roles["alice"], notebook, path)


def fresh(t: Team, name: str) -> Team:
    """The team with a new session of alice's named ``name``, holding her first request (so no attack depends on another)."""
    found = dataclasses.replace(t, path=t.path.with_name(name + ".jsonl"))
    failed = alice_writes(found, f"alice's secret plan for {name}")
    assert not failed, failed
    return found


def alice_writes(t: Team, text: str) -> str:
    """Alice appends one request through nbagent; '' if it worked, else the error."""
    try:
        with nbagent.Session.open(t.path, store=t.alice) as session:
            session.append(ev.USER_MSG, content=text)
    except LogError as exc:
        return str(exc)
    return ""


def alice_session(t: Team) -> tuple[int, int]:
    """Alice's session's row id and last seq (read by the owner, as an auditor would)."""
    name = t.path.name.removesuffix(".jsonl")
    row = sql(t.admin, "SELECT id, last_seq FROM nbagent_sessions WHERE owner_role = %s AND name = %s", (t.alice_role, name))[0]
    return int(row[0]), int(row[1])


def cli(*argv: str) -> tuple[int, str, str]:
    """The real command line in this process; an exception that escapes it is reported as a traceback."""
    out, err = io.StringIO(), io.StringIO()
    try:
        code = main(list(argv), out=out, err=err)
    except BaseException:  # what a user would see as a traceback
        return 99, out.getvalue(), traceback.format_exc()
    return code, out.getvalue(), err.getvalue()


def verified(t: Team) -> str:
    """`nbagent verify` on alice's session as alice: '' when it passes, else what it said."""
    code, out, err = cli("verify", t.name(t.alice))
    return "" if code == 0 and ": OK:" in out else f"verify said ({code}): {(out + err).strip()[:300]}"


# Defect 3: rows of alice's session written by mallory ------------------------------------------
def flood(t: Team) -> Finding:
    """Mallory inserts 5,000 event rows carrying alice's session id, after alice's last event."""
    t = fresh(t, "flooded")
    session, last = alice_session(t)
    answer = attempt(
        t.mallory,
        "INSERT INTO nbagent_events (session, seq, start_at, ts, type, line) "
        "SELECT %s::bigint, g, 1000000000 + g, 0, 'user_msg', '{}' FROM generate_series(%s::integer, %s::integer) g",
        (session, last + 1, last + FLOOD),
    )
    problems = [] if answer != "ok" else [f"mallory inserted {FLOOD} rows into alice's session"]
    failed = alice_writes(t, "the next step")
    problems += [f"alice's next append failed: {failed}"] if failed else []
    problems += [p for p in [verified(t)] if p]
    return Finding(3, f"mallory inserts {FLOOD} event rows into alice's session", "refused" if answer != "ok" else "ran", problems)


def moved_row(t: Team) -> Finding:
    """Mallory writes a session of her own, then moves its row into alice's session with UPDATE."""
    t = fresh(t, "moved")
    mine = t.path.with_name("mallory.jsonl")
    with nbagent.Session.open(mine, store=t.mallory) as session:
        session.append(ev.USER_MSG, content="mine")
    session_id, last = alice_session(t)
    answer = attempt(
        t.mallory, "UPDATE nbagent_events SET session = %s, seq = seq + %s, start_at = start_at + 1000000000", (session_id, last)
    )
    problems = [] if answer != "ok" else ["mallory moved her rows into alice's session"]
    failed = alice_writes(t, "after the move")
    problems += [f"alice's next append failed: {failed}"] if failed else []
    return Finding(3, "mallory moves her own event rows into alice's session", "refused" if answer != "ok" else "ran", problems)


def squatted_snapshot(t: Team) -> Finding:
    """Mallory inserts a snapshot row for alice's new session (its id follows the last) before alice writes hers."""
    t = dataclasses.replace(t, path=t.path.with_name("squatted.jsonl"))
    problems = []
    with nbagent.Session.open(t.path, store=t.alice, snapshot_every=0) as session:
        session.append(ev.USER_MSG, content="alice's plan, not yet snapshotted")
        session_id, _ = alice_session(t)
        answer = attempt(t.mallory, "INSERT INTO nbagent_snapshots (session, seq, data) VALUES (%s, 1, 'x')", (session_id,))
        problems += [] if answer != "ok" else ["mallory stored a snapshot row for alice's session"]
        try:
            session.snapshot()
        except OSError as exc:
            problems.append(f"alice's snapshot failed: {exc}")
    session = session_id
    stored = sql(t.admin, "SELECT role FROM nbagent_snapshots WHERE session = %s", (session,))
    if stored != [(t.alice_role,)]:
        problems.append(f"alice's session's snapshot row is {stored}")
    return Finding(3, "mallory squats alice's snapshot row", "refused" if answer != "ok" else "ran", problems)


def id_oracle(t: Team) -> Finding:
    """Mallory inserts rows for alice's session id and for an id that does not exist: the errors must not differ."""
    t = fresh(t, "probed")
    session, _ = alice_session(t)
    missing = session + 10_000
    problems = []
    for table, query in (
        ("nbagent_events", "INSERT INTO nbagent_events (session, seq, start_at, ts, type, line) VALUES (%s, 1, 0, 0, 'user_msg', '{}')"),
        ("nbagent_snapshots", "INSERT INTO nbagent_snapshots (session, seq, data) VALUES (%s, 1, 'x')"),
    ):
        there, absent = attempt(t.mallory, query, (session,)), attempt(t.mallory, query, (missing,))
        if there != absent:
            problems.append(f"{table}: alice's session answers {there!r}, a missing one {absent!r}")
    return Finding(3, "mallory probes session ids through key errors", "ran" if problems else "inert", problems)


def name_oracle(t: Team) -> Finding:
    """Mallory creates sessions of alice's notebook and name and of a name nobody has: both must answer alike."""
    t = fresh(t, "named")
    notebook, taken = str(t.notebook), t.path.name.removesuffix(".jsonl")
    query = "INSERT INTO nbagent_sessions (notebook, name) VALUES (%s, %s)"
    there, absent = attempt(t.mallory, query, (notebook, taken)), attempt(t.mallory, query, (notebook, "nobody-has-this"))
    problems = [f"SQL: alice's name answers {there!r}, a free one {absent!r}"] if there != absent else []
    try:  # through nbagent: opening a session of alice's notebook and name
        with nbagent.Session.open(t.path, store=t.mallory) as session:
            seen = [e for e in session.events() if "alice" in str(e.get("content", ""))]
        if seen:
            problems.append(f"mallory's open of alice's name found {len(seen)} event(s) of alice's")
    except LogError as exc:
        problems.append(f"nbagent: opening alice's name as mallory says {exc}")
    return Finding(3, "mallory probes notebook and session names", "ran" if problems else "inert", problems)


def listened(t: Team) -> Finding:
    """Mallory LISTENs on the channel alice's session used to have (its row id) while alice appends."""
    t = fresh(t, "listened")
    import psycopg

    session, _ = alice_session(t)
    heard: list[str] = []
    with psycopg.connect(t.mallory, autocommit=True) as conn:
        conn.execute(f"LISTEN nbagent_s{session}")
        problems = [f"alice's append failed: {failed}"] if (failed := alice_writes(t, "while mallory listens")) else []
        heard = [f"{n.channel}: {n.payload!r}" for n in conn.notifies(timeout=0.5, stop_after=1)]
    problems += [f"mallory heard alice's commits: {', '.join(heard)}"] if heard else []
    seen = sql(t.mallory, "SELECT id FROM nbagent_sessions WHERE owner_role <> current_user")
    problems += [f"mallory can read {len(seen)} row(s) (channel names) of other roles' sessions"] if seen else []
    return Finding(3, "mallory LISTENs on alice's session's channel", "ran" if heard else "inert", problems)


def row_security(t: Team) -> list[Finding]:
    """Defect 3: each attack of mallory's against a session of alice's of its own."""
    return [flood(t), moved_row(t), squatted_snapshot(t), id_oracle(t), name_oracle(t), listened(t)]


# Defect 5: a non-ASCII character in a row --------------------------------------------------------
def damaged_row(t: Team, folder: Path) -> list[Finding]:
    """A row of alice's own session altered to hold 'é': every reader says "damaged" in one line naming the row."""
    t = dataclasses.replace(t, path=t.path.with_name("altered.jsonl"))
    with nbagent.Session.open(t.path, store=t.alice, snapshot_every=0) as session:  # no snapshot: opening reads every row
        for text in ("first request", "second request", "third request"):
            session.append(ev.USER_MSG, content=text)
    session_id, _ = alice_session(t)
    altered = sql(
        t.admin,
        "UPDATE nbagent_events SET line = replace(line, 'second', 'sécond') WHERE session = %s AND line LIKE '%%second%%' RETURNING seq",
        (session_id,),
    )
    row = f"line {altered[0][0]}"
    name = t.name(t.alice)
    runs = {
        "show": ("show", name),
        "verify": ("verify", name),
        "tail": ("tail", name),
        "export": ("export", name, "-o", str(folder / "damaged.md")),
        "copy": ("copy", name, str(folder / "copied.jsonl")),
        "sessions --grep": ("sessions", str(folder), "--grep", "first request"),
    }
    findings = []
    for what, argv in runs.items():
        os.environ["NBAGENT_STORE"] = t.alice  # the database's sessions of the notebooks under the folder
        try:
            code, out, err = cli(*argv)
        finally:
            os.environ.pop("NBAGENT_STORE", None)
        if what == "sessions --grep":  # a damaged session is searched up to its damage, as a damaged file is
            held = code == 0 and "altered  event 2" in out and not err
            problems = [] if held else [f"said ({code}): {(out + err).strip()[:400]}"]
        else:
            said = out.strip() if what == "verify" else err.strip()  # verify's report names every problem
            one_line = what == "verify" or "\n" not in said
            held = code != 0 and "damaged" in said and row in said and one_line and "Traceback" not in said
            problems = [] if held else [f"said ({code}): {said[:400]}"]
        findings.append(Finding(5, f"nbagent {what} on a row holding a non-ASCII character", "refused", problems))
    try:
        nbagent.Session.open(t.path, store=t.alice).close()
        opened = ["Session.open of alice's own session opened it"]
    except LogError as exc:
        opened = [] if "damaged" in str(exc) and row in str(exc) else [f"Session.open said: {exc}"]
    except Exception:  # noqa: BLE001 - what a notebook user would see as a traceback
        opened = [f"Session.open raised {traceback.format_exc().strip().splitlines()[-1]}"]
    findings.append(Finding(5, "Session.open of the owner's session with a non-ASCII row", "refused", opened))
    return findings


def attacks(ctx: Context) -> list[Finding]:
    """Defects 3 and 5 on a fresh database of the shared cluster."""
    with user(ctx):
        t = team(ctx)
        return row_security(t) + damaged_row(t, ctx.folder)
