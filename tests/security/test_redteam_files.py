"""Issue 20, defect 2 and its informational items: nothing beside a log that is not a regular file is opened or waited on.

The attacks are reliability/redteam/files.py's (the campaign runs the same functions): the real
``nbagent`` command and ``Session.open`` in child processes with a timeout, and a real Jupyter
server asked about a folder of FIFO snapshots many times at once. The finer tests below check the
one helper every reader uses, and the server's own bounded threads.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from nbagent.record.readfile import NotRegularFile, open_regular, read_log_bytes, read_regular
from nbagent.server.pool import Busy, Pool
from reliability import redteam
from reliability.redteam import files as attacks


@pytest.mark.slow  # the CLI, child processes and a Jupyter server, each with a timeout
def test_every_files_attack_held() -> None:
    with redteam.context(quick=True) as ctx:
        findings = attacks.attacks(ctx)
    assert {f.defect for f in findings} == {2}
    failed = [f"#{f.defect} {f.attack}: {f.outcome}; {'; '.join(f.problems)}" for f in findings if not f.held]
    assert not failed, "\n".join(failed)


def _kinds(tmp_path: Path) -> dict[str, Path]:
    regular = tmp_path / "regular"
    regular.write_bytes(b"data\n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link_to_fifo, link_to_file = tmp_path / "link-fifo", tmp_path / "link-file"
    link_to_fifo.symlink_to(fifo)
    link_to_file.symlink_to(regular)
    folder = tmp_path / "folder"
    folder.mkdir()
    return {"regular": regular, "fifo": fifo, "link-fifo": link_to_fifo, "link-file": link_to_file, "folder": folder}


@pytest.mark.parametrize(
    ("kind", "what"),
    [("fifo", "a FIFO"), ("link-fifo", "a symbolic link"), ("link-file", "a symbolic link"), ("folder", "a folder"), ("regular", "")],
)
def test_only_a_regular_file_is_opened_without_following_links_or_blocking(tmp_path: Path, kind: str, what: str) -> None:
    path = _kinds(tmp_path)[kind]
    if not what:
        assert read_regular(path) == b"data\n"
        return
    with pytest.raises(NotRegularFile) as refused:
        open_regular(path)
    assert refused.value.what == what and what in str(refused.value) and str(path) in str(refused.value)
    with pytest.raises(FileNotFoundError):
        open_regular(tmp_path / "missing")


@pytest.mark.parametrize(
    ("lines", "limit", "whole"),
    [
        ([b"a" * 10, b"b" * 10], 16, True),  # every line within the limit: all of it
        ([b"a" * 10, b"b" * 40, b"c" * 10], 16, False),  # a line over it: reading stops in it
        ([b"a" * 40], 64, True),
    ],
)
def test_a_log_is_read_only_up_to_a_line_over_the_limit(tmp_path: Path, lines: list[bytes], limit: int, whole: bool) -> None:
    log = tmp_path / "log"
    data = b"\n".join(lines) + b"\n"
    log.write_bytes(data)
    got = read_log_bytes(log, line_limit=limit, chunk=8)  # small reads, so that a long line spans many
    assert data.startswith(got)
    if whole:
        assert got == data
    else:
        assert len(got) < len(data) and len(got) - got.rfind(b"\n") - 1 > limit


def test_the_server_pool_answers_busy_rather_than_queueing_without_end() -> None:
    async def scenario() -> tuple[int, list[str], int]:
        pool, gate = Pool(2, 0.2), threading.Event()
        stuck = [asyncio.ensure_future(pool.run(gate.wait)) for _ in range(2)]
        await asyncio.sleep(0.05)
        with pytest.raises(Busy) as busy:
            await pool.run(lambda: "never run")
        gate.set()
        await asyncio.gather(*stuck)
        after = [await pool.run(lambda: "ran") for _ in range(3)]
        pool.close()
        return busy.value.status, after, pool.refused

    status, after, refused = asyncio.run(scenario())
    assert status == 503 and after == ["ran"] * 3 and refused == 1


def test_a_caller_that_gives_up_keeps_its_thread_counted() -> None:
    async def scenario() -> tuple[int, int]:
        pool, gate = Pool(1, 0.1), threading.Event()
        caller = asyncio.ensure_future(pool.run(gate.wait))
        await asyncio.sleep(0.05)
        caller.cancel()  # the thread still runs: its slot stays taken
        await asyncio.sleep(0.05)
        with pytest.raises(Busy):
            await pool.run(lambda: None)
        busy_while_stuck = pool.busy
        gate.set()
        await asyncio.sleep(0.1)
        pool.close()
        return busy_while_stuck, pool.busy

    assert asyncio.run(scenario()) == (1, 0)
