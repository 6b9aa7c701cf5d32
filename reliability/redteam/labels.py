"""Defects 4 and 9 of issue 20: a trust label a database client can forge, and thinking shown or exported.

4. Without row-level security, mallory (her own database role and nbagent key, in a process of her
   own) writes a session and sets its index row's ``owner_role`` and ``signer`` to alice's.  Alice
   lists with ``nbagent sessions --store URL --owner alice`` and opens the server's listing, its
   stream and its session page: no label may say "yours" (the full check says "other key").
9. A reply whose thinking and compaction blocks hold a secret, kept verbatim in the log: ``nbagent
   tail --json``, the events API and the stream's ``event`` field must show them redacted, and
   ``nbagent show`` and ``nbagent export`` (``.md``, ``.ipynb``) must leave the thinking text out.

``python -m reliability.redteam.labels ROLE ...`` is one side of the attack in a process of its own
(``NBAGENT_DATA_DIR`` names its key): ``write`` (alice), ``forge`` (mallory), ``think`` (alice's log).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from . import Context, Finding

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-ant-api03-" + "Zq7" * 20  # a key shape nbagent redacts
MARKER = "private-reasoning-marker"  # thinking text that is no secret: `show` and exports leave it out all the same
FORGED, MINE = "forged", "mine"


# The sides, each in its own process ----------------------------------------------------------------------------
def write(url: str, notebook: str, name: str) -> None:
    """Alice's own session in the database, signed with her key."""
    import nbagent
    from nbagent.record import events as ev
    from nbagent.stores.postgres import key_path

    with nbagent.Session.open(key_path(notebook, name), store=url, fsync="never") as session:
        session.append(ev.USER_MSG, content="alice's question")
        session.append(ev.ASSISTANT_MSG, stop_reason="end_turn", usage={}, content=[{"type": "text", "text": "alice's answer"}])


def forge(url: str, notebook: str, victim: str) -> None:
    """Mallory: a session of her own, then its index row's owner and signer set to the victim's (prints what happened)."""
    import psycopg

    write(url, notebook, FORGED)
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT signer FROM nbagent_sessions WHERE owner_role = %s AND signer <> '' LIMIT 1", (victim,)).fetchone()
        if row is None:
            print("refused: the victim's signer cannot be read")
            return
        try:
            conn.execute(
                "UPDATE nbagent_sessions SET owner_role = %s, signer = %s WHERE notebook = %s AND name = %s",
                (victim, row[0], notebook, FORGED),
            )
        except psycopg.Error as exc:
            print(f"refused: {str(exc).splitlines()[0]}")
            return
    print("forged")


def think(path: str) -> None:
    """A log whose reply holds a secret in its thinking, its redacted thinking and its compaction block (all verbatim)."""
    import nbagent
    from nbagent.record import events as ev

    blocks = [
        {"type": "thinking", "thinking": f"{MARKER}: the key is {SECRET}.", "signature": "EqQBCkYIBxgCKkB" + SECRET},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy" + SECRET},
        {"type": "text", "text": "Done."},
        {"type": "compaction", "content": f"Summary: the user gave {SECRET}."},
    ]
    with nbagent.Session.open(Path(path), fsync="never") as session:
        session.append(ev.USER_MSG, content="think about it")
        session.append(ev.ASSISTANT_MSG, stop_reason="end_turn", usage={}, content=blocks)


SIDES = {"write": write, "forge": forge, "think": think}


# The attacks --------------------------------------------------------------------------------------------------
def run(data: Path, *args: str, module: str = "reliability.redteam.labels", **env: str) -> subprocess.CompletedProcess[str]:
    """A process of the user whose key is in ``data``: this module's side, or (``module="nbagent"``) the command line."""
    environ = {k: v for k, v in os.environ.items() if k != "NBAGENT_STORE"}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env={**environ, "NBAGENT_DATA_DIR": str(data), **env},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )


def _roles(admin: str) -> tuple[str, str, str, str]:
    """Two members with exactly the grants docs/postgres.md lists (no row-level security): their names and URLs."""
    import psycopg

    from nbagent.stores import get_store

    get_store(admin).list()  # the tables, made by their owner
    suffix = uuid.uuid4().hex[:8]
    alice, mallory = f"alice_{suffix}", f"mallory_{suffix}"
    with psycopg.connect(admin, autocommit=True) as conn:
        for role in (alice, mallory):
            conn.execute(f"CREATE ROLE {role} LOGIN")
            conn.execute(f"GRANT SELECT, INSERT, UPDATE ON nbagent_sessions, nbagent_events, nbagent_snapshots TO {role}")
            conn.execute(f"GRANT SELECT ON _nbagent_migrations TO {role}")
            conn.execute(f"GRANT USAGE ON SEQUENCE nbagent_sessions_id_seq TO {role}")
    host, _, database = admin.split("@", 1)[1].rpartition("/")
    return alice, f"postgresql://{alice}@{host}/{database}", mallory, f"postgresql://{mallory}@{host}/{database}"


def _listed(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    """The ``nbagent sessions --json`` rows by name (empty if the command failed)."""
    if done.returncode != 0:
        return {}
    return {row["name"]: row for row in json.loads(done.stdout)}


def forged_labels(server: Any, alice: str, alice_url: str, alice_data: Path, listed: str, stored: str) -> list[Finding]:
    """Defect 4, seen by alice: her command line, the server's listing (of ``listed``), events API, stream and page (``stored``)."""
    found: list[Finding] = []
    attack = "mallory sets her index row's owner_role and signer to alice's"
    cli = _listed(run(alice_data, "sessions", "--store", alice_url, "--owner", alice, "--json", module="nbagent"))
    table = run(alice_data, "sessions", "--store", alice_url, "--owner", alice, module="nbagent")
    checked = _listed(run(alice_data, "sessions", "--store", alice_url, "--owner", alice, "--check", "--json", module="nbagent"))
    problems = []
    if FORGED not in cli or MINE not in cli:
        problems.append(f"`nbagent sessions --owner` did not list both sessions: {sorted(cli)}")
    elif cli[FORGED]["trust"] == "yours":
        problems.append("`nbagent sessions --store --owner --json` says the forged session is 'yours'")
    row = next((line for line in table.stdout.splitlines() if line.startswith(FORGED + " ")), "")
    if " yours " in row:
        problems.append(f"`nbagent sessions --owner` table: {row.split()[-3:]}")
    if checked.get(FORGED, {}).get("trust") != "other key" or checked.get(MINE, {}).get("trust") != "yours":
        problems.append("--check labels: " + str({k: v["trust"] for k, v in checked.items()}))
    found.append(Finding(4, attack + ": nbagent sessions --store --owner", "ran" if problems else "inert", problems))

    problems = []
    reply = server.get("nbagent/api/sessions?path=" + listed)
    rows = {r["name"]: r for r in reply.body.get("sessions", [])} if reply.status == 200 else {}
    if rows.get(FORGED, {}).get("trust", "yours") == "yours":
        problems.append(f"the server's listing labels it {rows.get(FORGED, {}).get('trust')!r} (status {reply.status})")
    from tests.support.server_harness import session_api

    events = server.get(session_api(stored, FORGED) + "/events")
    if events.status != 200 or events.body.get("trust") != "other key":
        problems.append(f"the events API's label: {events.status} {events.body.get('trust') if events.status == 200 else events.body}")
    stream = server.stream(stored, FORGED)
    try:
        notice = next(m.json() for m in stream.messages() if m.event == "session")
    finally:
        stream.close()
    if notice.get("trust") != "other key":
        problems.append(f"the stream's notice says {notice.get('trust')!r}")
    problems += _page_label(server, stored)
    found.append(Finding(4, attack + ": the server's listing, events, stream and page", "ran" if problems else "inert", problems))
    return found


def _page_label(server: Any, notebook: str) -> list[str]:
    """What the session page says wrote the forged session (Chromium, when this machine has it)."""
    try:
        from playwright.sync_api import sync_playwright

        from tests.browser.harness import find_chromium, launch_chromium
    except ImportError:
        return []
    if find_chromium() is None:
        return []
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page()
            page.goto(server.url("nbagent/sessions", notebook=notebook, session=FORGED))
            labels = page.locator(".nbagent-labels")
            page.wait_for_function("() => document.querySelector('.nbagent-labels').textContent.includes('written by')", timeout=30_000)
            page.wait_for_timeout(300)  # the listing and the stream's notice both answered
            text = labels.inner_text()
        finally:
            browser.close()
    return [] if "written by: other key" in text and "yours" not in text else [f"the session page says {text!r}"]


def thinking_shown(ctx: Context, server: Any, alice_data: Path, log: Path) -> list[Finding]:
    """Defect 9: each view and export of a log whose thinking and compaction blocks hold a secret."""
    found: list[Finding] = []

    def leaks(where: str, text: str, *, left_out: bool = False) -> Finding:
        problems = [f"{where} shows the secret"] if SECRET in text else []
        if left_out and MARKER in text:
            problems.append(f"{where} holds the thinking text (exports leave it out)")
        return Finding(9, f"thinking with a secret: {where}", "ran" if problems else "inert", problems)

    tailed = run(alice_data, "tail", str(log), "--json", module="nbagent")
    found.append(leaks("nbagent tail --json", tailed.stdout + tailed.stderr))
    shown = run(alice_data, "show", str(log), "--full", module="nbagent")
    found.append(leaks("nbagent show", shown.stdout + shown.stderr, left_out=True))
    for suffix in ("md", "ipynb"):
        out = ctx.folder / f"export.{suffix}"
        done = run(alice_data, "export", str(log), "-o", str(out), module="nbagent")
        text = out.read_text() if out.exists() else f"(not written: {done.stderr.strip()})"
        found.append(leaks(f"nbagent export .{suffix}", text, left_out=True))
    from tests.support.server_harness import session_api

    notebook = log.parent.name
    reply = server.get(session_api(notebook, log.stem) + "/events")
    found.append(leaks("the events API", json.dumps(reply.body)))
    stream = server.stream(notebook, log.stem)
    try:
        records = stream.records(3)  # session_start, the request, the reply
    finally:
        stream.close()
    found.append(leaks("the stream", json.dumps(records)))
    return found


def attacks(ctx: Context) -> list[Finding]:
    """Defects 4 and 9 against a real PostgreSQL cluster, a real Jupyter server and the real command line."""
    from tests.support.server_harness import NbServer

    admin = ctx.postgres().new_database()
    alice, alice_url, _mallory, mallory_url = _roles(admin)
    alice_data, mallory_data = ctx.folder / "alice-data", ctx.folder / "mallory-data"
    root = ctx.folder / "root"
    root.mkdir()
    (root / "team.ipynb").write_text("{}")
    (root / "think.ipynb").write_text("{}")
    notebook = str(root / "team.ipynb")
    for done in (
        run(alice_data, "write", alice_url, notebook, MINE),
        run(alice_data, "think", str(root / ".nbagent" / "think.ipynb" / "t.jsonl")),
    ):
        if done.returncode != 0:
            raise RuntimeError(f"alice's side failed: {done.stderr[-2000:]}")
    forged = run(mallory_data, "forge", mallory_url, notebook, alice)
    if forged.returncode != 0:
        raise RuntimeError(f"mallory's side failed: {forged.stderr[-2000:]}")
    found: list[Finding] = []
    server = NbServer(root, ctx.folder / "home", env={"NBAGENT_STORE": alice_url, "NBAGENT_DATA_DIR": str(alice_data)})
    server.start()
    try:
        if forged.stdout.strip() == "forged":
            found += forged_labels(server, alice, alice_url, alice_data, "team.ipynb", notebook)
        else:
            found.append(Finding(4, "mallory sets her index row's owner_role and signer to alice's", "refused", []))
        found += thinking_shown(ctx, server, alice_data, root / ".nbagent" / "think.ipynb" / "t.jsonl")
    finally:
        server.stop()
    return found


if __name__ == "__main__":
    SIDES[sys.argv[1]](*sys.argv[2:])
