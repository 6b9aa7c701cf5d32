"""Defect 2 of issue 20, and two informational items: files beside a log that are not regular files, huge lines, ``--limit 0``.

A log folder can come from a clone (git carries symbolic links) or a shared folder: the
attacker puts a FIFO, or a link to one, where a snapshot (or the log) should be. Opening a
FIFO for reading waits for a writer forever, so each attack runs its entry point with a
timeout: the real ``nbagent`` command, ``Session.open`` in a child process, and a real
Jupyter server whose own ``/api/kernelspecs`` must keep answering while nbagent's
routes are asked about the folder many times at once.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from reliability.attacker import write_log
from reliability.hostile import victim

from . import Context, Finding, Missing

TIMEOUT = 20.0  # a command or request that takes longer hangs (each takes well under a second here)
CONCURRENT = 10  # more requests at once than the default executor of a 2-core machine has threads (6)
NOTEBOOK = "hostile.ipynb"


def _session(folder: Path, name: str = "s1") -> Path:
    """A notebook with one session (and its snapshot) in ``folder``; the log's path."""
    (folder / NOTEBOOK).write_text("{}")
    log = folder / ".nbagent" / NOTEBOOK / f"{name}.jsonl"
    write_log(log, [("user_msg", {"content": "hello"})], snapshot=True)
    return log


def _plant(log: Path, kind: str) -> Path:
    """Replace the snapshot beside ``log`` with a FIFO (``fifo``) or a link to one (``link``); the FIFO's path."""
    snap = log.with_name(log.name + ".snapshot")
    snap.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(snap)
        return snap
    target = log.parent.parent.parent / "pipe"
    with contextlib.suppress(FileExistsError):
        os.mkfifo(target)
    snap.symlink_to(target)
    return target


def _release(fifo: Path) -> None:
    """Open the FIFO for writing and close it: a reader hung on it gets end-of-file (so a hung run can be stopped)."""
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def _run(args: list[str], cwd: Path, fifo: Path | None = None) -> tuple[int | None, str, str]:
    """A child with a timeout: its exit code (None if it hung and was killed), stdout and stderr."""
    child = subprocess.Popen(args, cwd=cwd, env=dict(os.environ), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = child.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        if fifo is not None:
            _release(fifo)
        child.kill()
        out, err = child.communicate()
        return None, out.decode(errors="replace"), err.decode(errors="replace")
    return child.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def _cli(*args: str, cwd: Path, fifo: Path | None = None) -> tuple[int | None, str, str]:
    return _run([sys.executable, "-m", "nbagent", *args], cwd, fifo)


def _one_line_error(err: str) -> list[str]:
    """Problems with what a command printed on stderr (it must be at most one line, and never a traceback)."""
    lines = [line for line in err.splitlines() if line.strip()]
    if "Traceback" in err:
        return ["printed a traceback: " + err.strip().splitlines()[-1][:200]]
    return [f"printed {len(lines)} lines on stderr: {err.strip()[:300]!r}"] if len(lines) > 1 else []


def _cli_attacks(ctx: Context) -> list[Finding]:
    found = []
    commands = [["sessions", "."], ["show", "LOG"], ["verify", "LOG"], ["tail", "LOG"]]
    if not ctx.quick:
        commands += [["sessions", "--grep", "hello", "."], ["export", "LOG", "-o", "out.md"], ["snapshot", "LOG"]]
    for kind in ("link", "fifo"):
        place = ctx.sub(f"cli-{kind}").folder
        log = _session(place)
        fifo = _plant(log, kind)
        for command in commands:
            args = [str(log) if a == "LOG" else a for a in command]
            code, out, err = _cli(*args, cwd=place, fifo=fifo)
            problems = [] if code is not None else [f"hung (killed after {TIMEOUT:.0f} s)"]
            problems += _one_line_error(err)
            if code is not None and command[0] in ("sessions", "show", "tail") and "hello" not in out:
                problems.append(f"the session was not read past the hostile snapshot (exit {code}): {err.strip()[:200]!r}")
            if not stat.S_ISFIFO(os.lstat(fifo).st_mode):
                problems.append("the FIFO was replaced or removed")
            attack = f"`nbagent {' '.join(command)}` with the snapshot {'a link to a FIFO' if kind == 'link' else 'a FIFO'}"
            found.append(Finding(2, attack, "refused", problems))
        _release(fifo)
    return found


OPEN = """
import sys
from nbagent import Session
from nbagent.errors import LogError
try:
    with Session.open(sys.argv[1]) as session:
        print("opened", session.seq, session.state.messages[0]["content"])
except LogError as exc:
    print("refused:", exc)
"""


def _open_attacks(ctx: Context) -> list[Finding]:
    found = []
    for kind in ("fifo", "link"):
        place = ctx.sub(f"open-{kind}").folder
        log = _session(place)
        fifo = _plant(log, kind)
        code, out, err = _run([sys.executable, "-c", OPEN, str(log)], place, fifo)
        problems = [] if code is not None else [f"hung (killed after {TIMEOUT:.0f} s)"]
        if code not in (0, None) or "Traceback" in err:
            problems.append(f"exit {code}: {err.strip()[-300:]!r}")
        outcome = "refused" if out.startswith("refused") else "inert"
        if code == 0 and kind == "fifo" and not out.startswith("opened"):
            problems.append(f"the session did not open past a FIFO snapshot: {out.strip()[:200]!r}")
        _release(fifo)
        found.append(Finding(2, f"Session.open with the snapshot {'a FIFO' if kind == 'fifo' else 'a link to a FIFO'}", outcome, problems))
    return found


# The server ------------------------------------------------------------------------------------------
def _get(port: int, token: str, path: str) -> int | None:
    """GET ``path`` with the token; the status, or None if no answer came within the timeout."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        conn.request("GET", path, headers={"Authorization": f"token {token}"})
        response = conn.getresponse()
        response.read()
        return response.status
    except OSError:
        return None
    finally:
        conn.close()


@contextlib.contextmanager
def _server(root: Path, home: Path) -> Iterator[tuple[int, str]]:
    try:
        import jupyter_server  # noqa: F401

        from tests.support.server_harness import NbServer
    except ImportError as exc:
        raise Missing(f"jupyter_server is not installed ({exc})") from None
    data = home / "server-data"
    data.mkdir(parents=True, exist_ok=True)
    server = NbServer(root, home, env={"NBAGENT_DATA_DIR": str(data)})
    server.start()
    try:
        yield server.port, server.token
    finally:
        server.stop()


def _server_attacks(ctx: Context) -> list[Finding]:
    base = ctx.sub("server").folder
    root = base / "root"
    hostile, clean = root / "hostile", root / "clean"
    hostile.mkdir(parents=True)
    clean.mkdir()
    fifos = [_plant(_session(hostile, "linked"), "link"), _plant(_session(hostile, "piped"), "fifo")]
    _session(clean)
    notebook = f"hostile%2F{NOTEBOOK}"
    asked = [f"/nbagent/api/sessions?path=hostile/{NOTEBOOK}", f"/nbagent/api/sessions/{notebook}/linked/events"]
    asked += [f"/nbagent/api/sessions/{notebook}/piped/events", "/nbagent/api/sessions?path=hostile"]
    statuses: list[int | None] = []
    with _server(root, base / "home") as (port, token):
        try:
            paths = [asked[n % len(asked)] for n in range(CONCURRENT)]
            threads = [threading.Thread(target=lambda p=path: statuses.append(_get(port, token, p))) for path in paths]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            after = {path: _get(port, token, path) for path in ("/api/kernelspecs", f"/nbagent/api/sessions?path=clean/{NOTEBOOK}")}
        finally:
            for fifo in fifos:  # a reader still hung on them (before the fix) gets end-of-file, so the server can stop
                _release(fifo)
    problems = [f"{statuses.count(None)} of {CONCURRENT} requests on the hostile folder got no answer"] if None in statuses else []
    problems += [f"answered {s}" for s in set(statuses) if s not in (200, None)]
    found = [Finding(2, f"{CONCURRENT} concurrent nbagent requests on a folder of FIFO and linked-FIFO snapshots", "refused", problems)]
    for path, status in after.items():
        problems = [] if status == 200 else [f"{path} then {'got no answer' if status is None else f'answered {status}'}"]
        found.append(Finding(2, f"the server still answers {path.split('?')[0]} after them", "inert", problems))
    return found


# Informational: a huge line, --limit 0 --------------------------------------------------------------------
MEASURE = """
import sys
from nbagent.cli.main import main
code = main(sys.argv[1:])
with open("/proc/self/io") as io:
    print(dict(line.split(": ") for line in io.read().splitlines())["rchar"], file=sys.stderr)
sys.exit(code)
"""


def _show_read(log: Path, cwd: Path) -> tuple[int | None, str, int]:
    """``nbagent show LOG`` in a child: its exit code, its stderr (without the measurement), the bytes it read (all files)."""
    code, _out, err = _run([sys.executable, "-c", MEASURE, "show", str(log)], cwd)
    lines = err.strip().splitlines()
    read = int(lines[-1]) if lines and lines[-1].isdigit() else 0
    return code, "\n".join(lines[:-1]), read


def _long_line(ctx: Context) -> Finding:
    place = ctx.folder
    log = _session(place)
    size = (100 << 20) if ctx.quick else 200_000_000
    with open(log, "ab") as handle:  # a valid-looking start, then one line of ``size`` bytes
        handle.write(b'{"v":3,"seq":3,"type":"user_msg","content":"')
        block = b"x" * (1 << 20)
        for _ in range(size >> 20):
            handle.write(block)
        handle.write(b'"}\n')
    code, err, read = _show_read(log, place)
    log.unlink()
    problems = [] if code is not None else ["hung"]
    if code is not None and (code == 0 or "longer than" not in err):
        problems.append(f"not refused as too long (exit {code}): {err[:200]!r}")
    problems += _one_line_error(err)
    if read >= size:  # reading stops just past the limit (16 MiB); the imports read a few MiB more
        problems.append(f"it read {read >> 20} MiB: the whole {size >> 20} MiB line before refusing it")
    return Finding(2, f"`nbagent show` of a log with a {size >> 20} MiB line (read {read >> 20} MiB)", "refused", problems)


def _limit_zero(ctx: Context) -> list[Finding]:
    _session(ctx.folder)
    found = []
    for args in (["--limit", "0"], ["--limit", "-1"], ["--limit", "2"]):
        code, out, err = _cli("sessions", *args, ".", cwd=ctx.folder)
        problems = [f"exit {code}, listed: {out.strip()[:120]!r}"] if code != 2 else []
        problems += _one_line_error(err)
        found.append(
            Finding(2, f"`nbagent sessions {' '.join(args)}` on files (the docs: --limit N >= 1, with --store)", "refused", problems)
        )
    return found


def attacks(ctx: Context) -> list[Finding]:
    """Every attack of this topic, as this process's user (a log folder from elsewhere needs no second key)."""
    with victim(ctx.folder):
        found = _cli_attacks(ctx.sub("cli"))
        found += _open_attacks(ctx.sub("open"))
        found.append(_long_line(ctx.sub("long")))
        found += _limit_zero(ctx.sub("limit"))
        found += _server_attacks(ctx.sub("server"))
    return found
