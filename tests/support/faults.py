"""A fault-injecting file layer for the log and snapshots (an ``nbagent.stores.writer.FileOps``).

Every operation really happens on disk (so reads see what a running process
would see), and beside it the layer keeps a model of what a power loss would
leave: per file, the bytes as of its last fsync plus the writes and truncations
made since (the page cache); per folder, the entries created, renamed or removed
since its last fsync.  :meth:`FaultyFiles.crash_image` turns that model into the
files a crash would leave, keeping, dropping or garbling each unsynced change.

It can also crash at the N-th mutating step (raising :class:`Crash`, after which
every mutating call raises it again), fail the N-th write or fsync with an errno
once or persistently, and make the N-th write short.
"""

from __future__ import annotations

import errno as errnos
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from nbagent.stores.writer import FileOps

CrashMode = Literal["keep", "drop", "garble", "prefix", "each"]
CRASH_MODES: tuple[str, ...] = ("keep", "drop", "garble", "prefix", "each")
MUTATING = ("create", "write", "fsync", "ftruncate", "replace", "unlink", "fsync_dir")


class Crash(BaseException):
    """The simulated machine lost power here (a BaseException, so nothing in the engine handles it)."""


@dataclass
class _Inode:
    durable: bytes = b""
    pending: list[tuple[str, int, bytes]] = field(default_factory=list)  # ("write", offset, data) | ("truncate", size, b"")


@dataclass
class Fault:
    """Fail the ``nth`` call of ``op`` ("write" or "fsync"; fsync_dir counts as fsync) with ``errno``."""

    op: str
    nth: int
    errno: int = errnos.EIO
    persistent: bool = False
    short: bool = False  # a write fault: the nth write writes half and returns; the next write fails
    fired: int = 0


class FaultyFiles(FileOps):
    """File operations that record everything, model the page cache, crash and fail on request."""

    def __init__(self, *, crash_at: int | None = None, faults: list[Fault] | tuple[Fault, ...] = ()) -> None:
        self.crash_at = crash_at
        self.faults = list(faults)
        self.crashed = False
        self.steps = 0  # mutating calls so far
        self.counts = dict.fromkeys(("write", "fsync"), 0)
        self.trace: list[tuple[str, str, int]] = []  # (op, path, size or offset)
        self._inodes: dict[int, _Inode] = {}
        self._next_inode = 0
        self._fds: dict[int, tuple[int, str]] = {}  # fd -> (inode, path)
        self._appends: set[int] = set()
        self._folders: set[str] = set()
        self._names: dict[str, int] = {}  # the folder entries a running process sees
        self._durable_names: dict[str, int] = {}  # the entries a crash would keep for sure
        self._dir_pending: list[tuple[str, str, str, int]] = []  # (folder, "link"|"unlink", path, inode)
        self._fail_next_write: Fault | None = None

    # Control ---------------------------------------------------------------------------------
    def arm_crash(self, after: int) -> None:
        """Crash at the ``after``-th mutating call from now (1 = the next one)."""
        self.crash_at = self.steps + after

    def _step(self, op: str, path: str, amount: int = 0) -> None:
        if self.crashed:
            raise Crash(f"{op} after the crash")
        self.steps += 1
        if self.crash_at is not None and self.steps >= self.crash_at:
            self.crashed = True
            raise Crash(f"crash at step {self.steps} ({op} {path})")
        self.trace.append((op, path, amount))

    def _fault(self, op: str) -> Fault | None:
        self.counts[op] += 1
        if op == "write" and self._fail_next_write is not None:
            fault = self._fail_next_write
            if not fault.persistent:
                self._fail_next_write = None
            return fault
        for fault in self.faults:
            if fault.op == op and (self.counts[op] == fault.nth or (fault.persistent and fault.fired and self.counts[op] > fault.nth)):
                fault.fired += 1
                return fault
        return None

    # The model ---------------------------------------------------------------------------------
    def _adopt(self, folder: str) -> None:
        """Take the files already in ``folder`` as durable, the first time the layer touches it."""
        if folder in self._folders:
            return
        self._folders.add(folder)
        for entry in os.scandir(folder or "."):
            if entry.is_file(follow_symlinks=False) and entry.path not in self._names:
                inode = self._new_inode(Path(entry.path).read_bytes())
                self._names[entry.path] = self._durable_names[entry.path] = inode

    def _inode_for(self, path: str, flags: int) -> int:
        self._adopt(os.path.dirname(path))
        if path in self._names:
            return self._names[path]
        if os.path.exists(path):  # a file from before this layer: durable as it is
            inode = self._new_inode(Path(path).read_bytes())
            self._names[path] = self._durable_names[path] = inode
            return inode
        inode = self._new_inode(b"")
        self._names[path] = inode
        self._dir_pending.append((os.path.dirname(path), "link", path, inode))
        return inode

    def _new_inode(self, durable: bytes) -> int:
        self._next_inode += 1
        self._inodes[self._next_inode] = _Inode(durable)
        return self._next_inode

    def _path(self, fd: int) -> str:
        return self._fds[fd][1] if fd in self._fds else f"fd {fd}"

    def durable_bytes(self, path: str | os.PathLike[str]) -> bytes | None:
        """What a crash that drops every unsynced change would leave at ``path`` (None: no such file)."""
        inode = self._durable_names.get(os.fspath(path))
        return None if inode is None else self._inodes[inode].durable

    def crash_image(self, mode: CrashMode, seed: int = 0) -> dict[str, bytes]:
        """The files (path -> bytes) a crash now would leave, every unsynced change kept, dropped or garbled per ``mode``.

        keep: all kept; drop: all lost; garble: every unsynced write lands as random
        bytes; prefix: the changes reach the disk in order up to a random point, the
        next write torn (a random part of it, then garbage); each: every change
        independently kept, dropped or garbled (folder entries kept or dropped).
        """
        rng = random.Random(seed)
        names = dict(self._durable_names)
        dir_ops = list(self._dir_pending)
        if mode == "keep":
            kept_dir = len(dir_ops)
        elif mode in ("drop", "garble"):
            kept_dir = 0
        else:  # a journalling file system commits folder changes in order
            kept_dir = rng.randint(0, len(dir_ops))
        for _folder, kind, path, inode in dir_ops[:kept_dir]:
            if kind == "link":
                names[path] = inode
            else:
                names.pop(path, None)
        image = {}
        for path, inode in names.items():
            image[path] = self._settle(self._inodes[inode], mode, rng)
        return image

    @staticmethod
    def _settle(inode: _Inode, mode: CrashMode, rng: random.Random) -> bytes:
        data = bytearray(inode.durable)
        pending = inode.pending
        stop = rng.randint(0, len(pending)) if mode == "prefix" else len(pending)
        for index, (kind, where, payload) in enumerate(pending):
            if mode == "drop" or index > stop:
                break
            choice = {"keep": "keep", "garble": "garble"}.get(mode) or rng.choice(("keep", "drop", "garble"))
            if mode == "prefix":
                choice = "keep" if index < stop else "torn"
            if choice == "drop":
                continue
            if kind == "truncate":
                del data[where:]
                if len(data) < where:
                    data.extend(bytes(where - len(data)))
                continue
            if choice == "garble":
                payload = rng.randbytes(len(payload))
            elif choice == "torn":
                cut = rng.randint(0, len(payload))
                payload = payload[:cut] + rng.choice((bytes(len(payload) - cut), rng.randbytes(len(payload) - cut)))
            if len(data) < where:
                data.extend(bytes(where - len(data)))
            data[where : where + len(payload)] = payload
        return bytes(data)

    def write_image(self, image: dict[str, bytes], folder: Path) -> dict[str, Path]:
        """Write a crash image into ``folder`` (same file names); returns old path -> new path."""
        folder.mkdir(parents=True, exist_ok=True)
        placed = {}
        for path, data in image.items():
            target = folder / os.path.basename(path)
            target.write_bytes(data)
            placed[path] = target
        return placed

    # FileOps -------------------------------------------------------------------------------------
    def open(self, path: str | os.PathLike[str], flags: int, mode: int = 0o777) -> int:  # type: ignore[override]
        name = os.fspath(path)
        if flags & os.O_DIRECTORY:
            return os.open(name, flags, mode)
        self._adopt(os.path.dirname(name))  # before the file is created: what is already there is durable
        creating = bool(flags & os.O_CREAT) and name not in self._names and not os.path.exists(name)
        if creating or flags & os.O_TRUNC:
            self._step("create" if creating else "write", name)
        inode = self._inode_for(name, flags)  # before os.open creates it: a new file is not durable yet
        fd = os.open(name, flags, mode)
        self._fds[fd] = (inode, name)
        if flags & os.O_APPEND:
            self._appends.add(fd)
        else:
            self._appends.discard(fd)
        if flags & os.O_TRUNC and not creating:
            self._inodes[inode].pending.append(("truncate", 0, b""))
        return fd

    def close(self, fd: int) -> None:  # type: ignore[override]
        self._fds.pop(fd, None)
        os.close(fd)

    def write(self, fd: int, data: bytes | memoryview) -> int:  # type: ignore[override]
        self._step("write", self._path(fd), len(data))
        fault = self._fault("write")
        if fault is not None and fault.short:
            data = bytes(data[: max(1, len(data) // 2)])
            self._fail_next_write = Fault("write", 0, errnos.ENOSPC, fault.persistent)
        elif fault is not None:
            raise OSError(fault.errno, os.strerror(fault.errno))
        offset = os.fstat(fd).st_size if fd in self._appends else os.lseek(fd, 0, os.SEEK_CUR)
        written = os.write(fd, data)
        if fd in self._fds:
            self._inodes[self._fds[fd][0]].pending.append(("write", offset, bytes(data[:written])))
        return written

    def fsync(self, fd: int) -> None:  # type: ignore[override]
        self._step("fsync", self._path(fd))
        fault = self._fault("fsync")
        if fault is not None:
            # Like Linux after a failed writeback: the cached pages may never reach the disk.
            raise OSError(fault.errno, os.strerror(fault.errno))
        if fd in self._fds:
            inode = self._inodes[self._fds[fd][0]]
            with open(f"/proc/self/fd/{fd}", "rb") as current:  # the same file, even if fd is write-only
                inode.durable, inode.pending = current.read(), []

    def ftruncate(self, fd: int, length: int) -> None:  # type: ignore[override]
        self._step("ftruncate", self._path(fd), length)
        os.ftruncate(fd, length)
        if fd in self._fds:
            self._inodes[self._fds[fd][0]].pending.append(("truncate", length, b""))

    def replace(self, src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:  # type: ignore[override]
        source, target = os.fspath(src), os.fspath(dst)
        self._adopt(os.path.dirname(target))
        self._step("replace", target)
        os.replace(source, target)
        inode = self._names.pop(source)
        self._names[target] = inode
        folder = os.path.dirname(target)
        self._dir_pending += [(folder, "link", target, inode), (folder, "unlink", source, inode)]

    def unlink(self, path: str | os.PathLike[str]) -> None:  # type: ignore[override]
        name = os.fspath(path)
        self._adopt(os.path.dirname(name))
        self._step("unlink", name)
        os.unlink(name)
        inode = self._names.pop(name, 0)
        self._dir_pending.append((os.path.dirname(name), "unlink", name, inode))

    def fsync_dir(self, path: str | os.PathLike[str]) -> None:
        folder = os.fspath(path)
        self._step("fsync_dir", folder)
        fault = self._fault("fsync")
        if fault is not None:
            raise OSError(fault.errno, os.strerror(fault.errno))
        keep = []
        for entry in self._dir_pending:
            owner, kind, name, inode = entry
            if owner != folder:
                keep.append(entry)
            elif kind == "link":
                self._durable_names[name] = inode
            else:
                self._durable_names.pop(name, None)
        self._dir_pending = keep


class NoSyncFiles(FileOps):
    """Plain file operations without fsync: for checks that open thousands of logs and test no durability."""

    @staticmethod
    def fsync(fd: int) -> None:  # type: ignore[override]
        """Skip the flush (the page cache is all these checks read)."""

    def fsync_dir(self, path: str | os.PathLike[str]) -> None:
        """Skip the flush."""


NO_SYNC = NoSyncFiles()
