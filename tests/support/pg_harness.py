"""A throwaway PostgreSQL cluster for tests and benchmarks: initdb and pg_ctl, as the unprivileged ``postgres`` user.

PostgreSQL refuses to run as root (CI runs as root), so the cluster's folder is chowned
to the ``postgres`` OS user and every server command runs through ``runuser -u postgres --``.
It listens on 127.0.0.1 at a free port; ``NBAGENT_TEST_POSTGRES`` (a DSN) uses a running server instead.
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path

OS_USER = "postgres"


def find_bindir() -> Path | None:
    """The folder with initdb and pg_ctl: pg_config's, the distribution's (/usr/lib/postgresql/*/bin), or PATH's."""
    candidates: list[str] = []
    if shutil.which("pg_config"):
        try:
            candidates.append(subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True).stdout.strip())
        except (OSError, subprocess.CalledProcessError):
            pass
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0)[
        ::-1
    ]
    found = shutil.which("initdb")
    if found:
        candidates.append(str(Path(os.path.realpath(found)).parent))
    for folder in candidates:
        if (Path(folder) / "initdb").is_file() and (Path(folder) / "pg_ctl").is_file():
            return Path(folder)
    return None


def missing() -> str | None:
    """Why no PostgreSQL can be started here (None: one can)."""
    if os.environ.get("NBAGENT_TEST_POSTGRES"):
        return None
    if find_bindir() is None:
        return "needs PostgreSQL: no initdb/pg_ctl (apt-get install postgresql), or set NBAGENT_TEST_POSTGRES to a DSN"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(OS_USER)
        except KeyError:
            return f"needs PostgreSQL: running as root and there is no {OS_USER!r} OS user to run the server as"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Cluster:
    """One initdb'd cluster in a temp folder, started with pg_ctl; ``dsn`` connects as its superuser over TCP."""

    def __init__(self, *, fsync: bool = False) -> None:
        bindir = find_bindir()
        assert bindir is not None, missing()
        self.bindir = bindir
        self.port = _free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="nbagent-pg-"))
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.fsync = fsync
        self.as_root = os.geteuid() == 0
        if self.as_root:
            os.chmod(self.folder, 0o700)
            entry = pwd.getpwnam(OS_USER)
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
        self.superuser = OS_USER if self.as_root else pwd.getpwuid(os.geteuid()).pw_name
        self.dsn = f"postgresql://{self.superuser}@127.0.0.1:{self.port}/postgres"
        self.socket_dsn = f"postgresql://{self.superuser}@/postgres?host={self.folder}&port={self.port}"  # the local socket
        self._run("initdb", "-D", str(self.data), "-U", self.superuser, "--auth=trust", "-E", "UTF8", "--no-instructions")
        self.start()

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bindir / tool), *args]
        if self.as_root:
            command = ["runuser", "-u", OS_USER, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=check, cwd=self.folder, timeout=120)

    def start(self) -> None:
        """Start (or start again) the server and wait until it takes connections."""
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.folder} -c fsync={'on' if self.fsync else 'off'} -c max_connections=300"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``immediate``: as a crash would, without a checkpoint)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def restart(self, mode: str = "fast") -> None:
        """Stop and start the server again (every connection is dropped)."""
        self.stop(mode)
        self.start()

    def new_database(self, *, socket: bool = False) -> str:
        """A fresh, empty database; its DSN (over the Unix socket with ``socket``, else TCP on 127.0.0.1)."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        if socket:
            return f"postgresql://{self.superuser}@/{name}?host={self.folder}&port={self.port}"
        return self.dsn.rsplit("/", 1)[0] + "/" + name

    def destroy(self) -> None:
        """Stop the server and remove its folder."""
        self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)


class External:
    """A server someone else runs (``NBAGENT_TEST_POSTGRES``): databases are made in it, never started or stopped."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    def new_database(self) -> str:
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        base, _, _ = self.dsn.rpartition("/")
        return f"{base}/{name}"

    def destroy(self) -> None:
        pass


_shared: Cluster | External | None = None
_shared_lock = threading.Lock()


def shared() -> Cluster | External:
    """The one cluster of this test process, started on first use and destroyed at exit."""
    global _shared
    with _shared_lock:
        if _shared is None:
            dsn = os.environ.get("NBAGENT_TEST_POSTGRES")
            _shared = External(dsn) if dsn else Cluster()
            atexit.register(_shared.destroy)
        return _shared
