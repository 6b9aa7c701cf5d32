"""The PostgreSQL store's schema as named migrations, applied in order on first use (in the manner of simonw/llm's).

Each migration is a function named ``mNNN_what``; ``_nbagent_migrations`` records the names
applied.  A database holding a name this nbagent does not know was migrated by a newer
nbagent and is refused with an upgrade hint.  :data:`OPTIONAL` migrations (row-level
security) are applied only when asked for (:func:`apply_optional`), in the order they are registered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import LogVersionError

Migration = Callable[[Any], None]  # takes a psycopg Connection inside a transaction
TABLE = "_nbagent_migrations"
MIGRATE_LOCK = 0x6E62_6D67  # 'nbmg': one migrating client at a time (a transaction-level advisory lock)
MIGRATIONS: list[Migration] = []
OPTIONAL: dict[str, Migration] = {}


def migration(fn: Migration) -> Migration:
    """Register ``fn`` as the next migration (its name is what the database records)."""
    MIGRATIONS.append(fn)
    return fn


def optional(fn: Migration) -> Migration:
    """Register ``fn`` as a migration applied only on request."""
    OPTIONAL[fn.__name__] = fn
    return fn


@migration
def m001_sessions_and_events(conn: Any) -> None:
    """The index of sessions (one row each, for listings) and the events (one sealed line each)."""
    conn.execute(
        """
        CREATE TABLE nbagent_sessions (
            id bigserial PRIMARY KEY,
            notebook text NOT NULL,
            name text NOT NULL,
            session_id text NOT NULL DEFAULT '',
            owner_role name NOT NULL DEFAULT current_user,
            signer text NOT NULL DEFAULT '',
            title text NOT NULL DEFAULT '',
            requests text NOT NULL DEFAULT '',
            created double precision NOT NULL DEFAULT 0,
            last_ts double precision NOT NULL DEFAULT 0,
            last_seq integer NOT NULL DEFAULT 0,
            size bigint NOT NULL DEFAULT 0,
            turns integer NOT NULL DEFAULT 0,
            summary jsonb NOT NULL DEFAULT '{}',
            UNIQUE (notebook, name)
        )
        """
    )
    conn.execute("CREATE INDEX nbagent_sessions_by_activity ON nbagent_sessions (last_ts, name)")
    conn.execute("CREATE INDEX nbagent_sessions_by_owner ON nbagent_sessions (owner_role, last_ts)")
    conn.execute("CREATE INDEX nbagent_sessions_by_session_id ON nbagent_sessions (session_id)")
    conn.execute(
        """
        CREATE TABLE nbagent_events (
            session bigint NOT NULL REFERENCES nbagent_sessions (id) ON DELETE CASCADE,
            seq integer NOT NULL CHECK (seq > 0),
            start_at bigint NOT NULL,
            ts double precision NOT NULL,
            type text NOT NULL,
            tool_use_id text,
            attempt integer,
            role name NOT NULL DEFAULT current_user,
            signer text NOT NULL DEFAULT '',
            line text NOT NULL,
            PRIMARY KEY (session, seq),
            UNIQUE (session, start_at)
        )
        """
    )
    # Exactly-once dispatch in the database, whatever the client does.
    conn.execute(
        "CREATE UNIQUE INDEX nbagent_tool_started_once ON nbagent_events (session, tool_use_id, attempt) WHERE type = 'tool_started'"
    )
    conn.execute("CREATE UNIQUE INDEX nbagent_tool_result_once ON nbagent_events (session, tool_use_id) WHERE type = 'tool_result'")


@migration
def m002_snapshots(conn: Any) -> None:
    """Snapshots (the same bytes as a ``.snapshot`` file), one per session."""
    conn.execute(
        """
        CREATE TABLE nbagent_snapshots (
            session bigint PRIMARY KEY REFERENCES nbagent_sessions (id) ON DELETE CASCADE,
            seq integer NOT NULL,
            role name NOT NULL DEFAULT current_user,
            data bytea NOT NULL
        )
        """
    )


@migration
def m003_private_channels(conn: Any) -> None:
    """Each session's NOTIFY channel is a random name kept in its row (under row-level security only its owner can read it)."""
    conn.execute("ALTER TABLE nbagent_sessions ADD COLUMN channel text NOT NULL DEFAULT ('nbagent_' || md5(gen_random_uuid()::text))")


@optional
def row_security(conn: Any) -> None:
    """Each role sees and writes only its own sessions (the tables' owner, e.g. an auditor's admin role, still sees all)."""
    for table, column in (("nbagent_sessions", "owner_role"), ("nbagent_events", "role"), ("nbagent_snapshots", "role")):
        conn.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        conn.execute(f"CREATE POLICY {table}_own ON {table} USING ({column} = current_user) WITH CHECK ({column} = current_user)")


OWNS_SESSION = "EXISTS (SELECT 1 FROM nbagent_sessions s WHERE s.id = {table}.session AND s.owner_role = current_user)"


@optional
def row_security_by_session(conn: Any) -> None:
    """A session's events and snapshot are read and written only by the session's owner role, and names are per role.

    The first policy checked only a row's own role, so another member could insert rows carrying
    someone's session (blocking its next seq) or squat its snapshot, and unique keys told whether a
    notebook and name existed.  Now a row's session must be the writer's own (checked before any
    key, so a foreign and a missing session give the same error), and the name key is per role.
    """
    for table in ("nbagent_events", "nbagent_snapshots"):
        owns = OWNS_SESSION.format(table=table)
        conn.execute(f"DROP POLICY {table}_own ON {table}")
        conn.execute(f"CREATE POLICY {table}_own ON {table} USING ({owns}) WITH CHECK (role = current_user AND {owns})")
    conn.execute("ALTER TABLE nbagent_sessions DROP CONSTRAINT nbagent_sessions_notebook_name_key")
    conn.execute("CREATE UNIQUE INDEX nbagent_sessions_per_role ON nbagent_sessions (notebook, name, owner_role)")


def applied(conn: Any) -> list[str]:
    """The names of the migrations applied to this database (none if it has no nbagent tables)."""
    if conn.execute("SELECT to_regclass(%s)", (TABLE,)).fetchone()[0] is None:
        return []
    return [row[0] for row in conn.execute(f"SELECT name FROM {TABLE} ORDER BY applied_at, name")]


def check_known(names: list[str]) -> None:
    """Refuse a database migrated by a newer nbagent."""
    unknown = [n for n in names if n not in OPTIONAL and n not in {m.__name__ for m in MIGRATIONS}]
    if unknown:
        raise LogVersionError(
            f"this database's nbagent schema is newer than this nbagent reads (it has migration(s) {', '.join(unknown)}). "
            "Upgrade nbagent (pip install -U 'nbagent[postgres]') to use it; nothing was changed."
        )


def applied_quickly(conn: Any) -> list[str]:
    """:func:`applied` in one round trip on an autocommit connection (opening a session pays it): a missing table is an error there."""
    if not conn.autocommit or conn.info.transaction_status != 0:  # 0: idle, outside a transaction
        return applied(conn)
    try:
        return [row[0] for row in conn.execute(f"SELECT name FROM {TABLE} ORDER BY applied_at, name")]
    except Exception as exc:
        if getattr(exc, "sqlstate", None) != "42P01":  # undefined_table: no nbagent tables yet
            raise
        return []


def migrate(conn: Any) -> list[str]:
    """Apply every missing migration in one transaction (refusing a newer schema); returns the names applied now."""
    names = applied_quickly(conn)
    check_known(names)
    if all(m.__name__ in names for m in MIGRATIONS):
        return []  # nothing to do: a role without CREATE rights can use a migrated database
    done = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {TABLE} (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())"
        )
        names = applied(conn)  # again, under the lock: another client may have migrated meanwhile
        check_known(names)
        for step in MIGRATIONS:
            if step.__name__ not in names:
                step(conn)
                conn.execute(f"INSERT INTO {TABLE} (name) VALUES (%s)", (step.__name__,))
                done.append(step.__name__)
    return done


def apply_optional(conn: Any, name: str) -> bool:
    """Apply the optional migration ``name`` (e.g. ``row_security``) once; False if it was already applied."""
    if name not in OPTIONAL:
        raise ValueError(f"no optional migration {name!r}; there are: {', '.join(sorted(OPTIONAL))}")
    migrate(conn)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
        if name in applied(conn):
            return False
        OPTIONAL[name](conn)
        conn.execute(f"INSERT INTO {TABLE} (name) VALUES (%s)", (name,))
    return True
