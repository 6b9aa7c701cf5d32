"""Built-in tools for an agent that works on files: read, write, edit, list, and run a shell command.

Effects, and why:

* ``read_file``, ``list_files``: ``"read"`` -- they change nothing, so replay may repeat them.
* ``write_file``, ``edit_file``: ``"write"`` -- they change a file the user may have changed since;
  a call whose outcome is unknown is not repeated without asking.
* ``shell``: ``"irreversible"`` -- a command can do anything (delete, send, deploy), so every call
  needs approval before it runs (``approval="auto"`` grants it).

The workspace.  The four file tools work inside a root folder (:func:`file_tools`, ``root=``;
in a notebook ``Agent.workspace``, by default the notebook's folder; the module-level tools
use the current working directory at call time).  Relative paths resolve against the root.
A path that leads outside it -- after ``~``, ``..``, absolute paths and symbolic links
(the root's own included) are followed -- is not refused by the tool: its ``guard``
returns ``"outside_workspace"`` and the loop asks for approval before the call starts.
nbagent's log folders (any folder named ``.nbagent``, and any ``protected`` folder) are
never read, written or listed by the file tools, whatever the approval: the tool itself
refuses the call with an error result (its guard returns None for it: there is nothing
to approve).

The ``shell`` tool (and the notebook's ``python`` tool) are *not* confined: they run
with the user's full rights, in the process's working directory, and can read or write
any file, the session logs included.  Their safeguard is approval, not the workspace.
"""

from __future__ import annotations

import base64
import contextlib
import fnmatch
import os
import selectors
import signal
import stat
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..stores.folders import STORE_DIR
from .clipping import ByteHeadTail, fit
from .decorator import Tool, tool

MAX_READ_CHARS = 100_000
MAX_LIST_ENTRIES = 500
MAX_SHELL_OUTPUT = 50_000  # characters of stdout and stderr together; the middle of longer output is counted, not kept
READ_SIZE = 65_536  # bytes read from a pipe at a time
KILL_GRACE = 5.0  # seconds to read what a killed command printed (a process outside its group may keep the pipe open)
IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp"}
MAX_IMAGE_BYTES = 20 * 1024 * 1024  # the largest image read_file loads; images.py fits it to the API's limits

OUTSIDE_WORKSPACE = "outside_workspace"  # the approval reason a guard gives for a path outside the root

PathArg = str | os.PathLike[str]


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters not shown]"


# The workspace ---------------------------------------------------------------------------------


def _is_store_name(part: str) -> bool:
    # Case-folded, trailing dots and spaces dropped: what a case-insensitive (macOS) or
    # Windows file system would treat as the same folder.
    return part.casefold().rstrip(". ") == STORE_DIR


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


class Workspace:
    """A root folder and the folders inside it the file tools never touch.

    ``root`` None means the current working directory at the time of each check or call.
    ``protected`` adds folders (e.g. a configured log folder) treated like ``.nbagent``.
    """

    def __init__(self, root: PathArg | None = None, *, protected: Iterable[PathArg] = ()) -> None:
        self.root = None if root is None else Path(os.path.expanduser(os.fspath(root))).absolute()
        self.protected = tuple(Path(os.path.expanduser(os.fspath(p))).absolute() for p in protected)

    def base(self) -> Path:
        """The root folder as given (not resolved)."""
        return self.root if self.root is not None else Path.cwd()

    def resolve(self, path: PathArg) -> Path:
        """Where ``path`` leads: ``~`` expanded, relative to the root, ``..`` and symbolic links followed.

        A part that does not exist yet (a file to create) is kept as written.
        Raises OSError or ValueError (e.g. a NUL byte) if the path cannot be resolved.
        """
        given = Path(os.path.expanduser(os.fspath(path)))
        return Path(os.path.realpath(self.base() / given))

    def outside(self, path: PathArg) -> bool:
        """Whether ``path`` leads outside the root (True too when it cannot be resolved)."""
        try:
            return not _under(self.resolve(path), Path(os.path.realpath(self.base())))
        except (OSError, ValueError):
            return True

    def private(self, path: PathArg) -> bool:
        """Whether ``path`` leads into a log folder: through ``.nbagent`` or a protected folder.

        Both the path as written (``..`` collapsed) and where it really leads are checked,
        so neither a symbolic link to a log folder nor a symbolic link named ``.nbagent`` gets through.
        """
        folders = self.log_folders()
        written = Path(os.path.normpath(self.base() / os.path.expanduser(os.fspath(path))))
        if self.is_log_path(written, folders):
            return True
        try:
            real = self.resolve(path)
        except (OSError, ValueError):
            return False  # it cannot be opened either: the call fails with that error
        return self.is_log_path(real, folders)

    def log_folders(self) -> list[Path]:
        """The protected folders and the root's ``.nbagent``, as given and resolved."""
        folders: list[Path] = []
        for folder in (*self.protected, self.base() / STORE_DIR):
            folders.append(folder)
            try:
                folders.append(Path(os.path.realpath(folder)))
            except (OSError, ValueError):
                pass
        return folders

    @staticmethod
    def is_log_path(path: Path, folders: Iterable[Path]) -> bool:
        """Whether ``path``, taken as it is (no links followed), is in a log folder."""
        return any(_is_store_name(part) for part in path.parts) or any(_under(path, folder) for folder in folders)

    def open(self, path: PathArg) -> Path:
        """The real path to use for ``path``; PermissionError if it leads into a log folder."""
        if self.private(path):
            raise PermissionError(
                f"{os.fspath(path)} is in nbagent's session-log folder ({STORE_DIR}); the file tools never read, "
                "write or list session logs, whatever the approval. Work with other files."
            )
        return self.resolve(path)

    def guard(self, arguments: dict[str, Any]) -> str | None:
        """The file tools' guard: ``"outside_workspace"`` if the call's path leads outside the root, else None.

        None as well for a path into a log folder (the tool refuses it when it runs, so
        there is nothing to approve) and for arguments without a usable path (the call
        fails its validation). Never raises.
        """
        path = arguments.get("path", ".") if isinstance(arguments, dict) else None
        if not isinstance(path, str):
            return None
        try:
            self.resolve(path)
        except (OSError, ValueError):
            return None  # e.g. a NUL byte: nothing can be opened, the call fails with that error
        try:
            if self.private(path):
                return None
            return OUTSIDE_WORKSPACE if self.outside(path) else None
        except Exception:  # a guard must not kill the loop; asking is the safe answer
            return OUTSIDE_WORKSPACE


def outside(root: PathArg | None, path: PathArg) -> bool:
    """Whether ``path`` (relative to ``root``, or absolute) leads outside ``root`` once resolved."""
    return Workspace(root).outside(path)


def private(root: PathArg | None, path: PathArg, *, protected: Iterable[PathArg] = ()) -> bool:
    """Whether ``path`` (relative to ``root``) leads into a log folder the file tools never touch."""
    return Workspace(root, protected=protected).private(path)


# The file tools --------------------------------------------------------------------------------


def file_tools(root: PathArg | None = None, *, protected: Iterable[PathArg] = ()) -> tuple[Tool, ...]:
    """``read_file``, ``write_file``, ``edit_file``, ``list_files`` working in the workspace ``root``.

    ``root`` None: the current working directory at call time.  Relative paths resolve
    against the root; each tool's ``guard`` says ``"outside_workspace"`` for a path that
    leads outside it (the loop then asks first).  Paths into ``.nbagent`` folders or a
    ``protected`` folder are refused when the tool runs.  The schemas the model sees are
    the same whatever the root.
    """
    workspace = Workspace(root, protected=protected)

    def read_file(path: str, offset: int = 0, limit: int = 2000) -> Any:
        """Read a text file (or an image) and return its lines, numbered from 1.

        Args:
            path: The file to read, relative to the working directory or absolute.
            offset: Number of lines to skip from the start.
            limit: Maximum number of lines to return.
        """
        file = workspace.open(path)
        suffix = Path(os.path.expanduser(path)).suffix.lower()
        if suffix in IMAGE_TYPES:
            data = file.read_bytes()
            if len(data) > MAX_IMAGE_BYTES:
                raise ValueError(f"{path} is {len(data)} bytes; images over {MAX_IMAGE_BYTES} bytes are not read (make a smaller copy)")
            media_type = IMAGE_TYPES[suffix]
            return [
                {"type": "text", "text": f"{path} ({len(data)} bytes, {media_type}):"},
                {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": base64.b64encode(data).decode()}},
            ]
        raw = file.read_bytes()
        if b"\0" in raw[:8192]:
            raise ValueError(f"{path} looks like a binary file ({len(raw)} bytes); it was not read as text")
        lines = raw.decode("utf-8", errors="replace").splitlines()
        shown = lines[max(0, offset) : max(0, offset) + max(0, limit)]
        numbered = "\n".join(f"{offset + i + 1:6}\t{line}" for i, line in enumerate(shown))
        rest = len(lines) - offset - len(shown)
        if rest > 0:
            numbered += f"\n[{rest} more lines; call again with offset={offset + len(shown)}]"
        return _clip(numbered, MAX_READ_CHARS) if numbered else f"({path} has no lines in that range; it has {len(lines)} lines)"

    def write_file(path: str, content: str) -> str:
        """Create or overwrite a text file with the given content (UTF-8); missing folders are created.

        Args:
            path: The file to write, relative to the working directory or absolute.
            content: The complete new content of the file.
        """
        file = workspace.open(path)
        file.parent.mkdir(parents=True, exist_ok=True)
        existed = file.exists()
        file.write_text(content, encoding="utf-8")
        return f"{'Overwrote' if existed else 'Created'} {path} ({len(content)} characters)."

    def edit_file(path: str, old_text: str, new_text: str) -> str:
        """Replace one exact occurrence of old_text with new_text in a text file.

        old_text must occur exactly once (include surrounding lines to make it unique).

        Args:
            path: The file to edit, relative to the working directory or absolute.
            old_text: The exact text to replace, including whitespace.
            new_text: The text to put in its place.
        """
        file = workspace.open(path)
        text = file.read_text(encoding="utf-8")
        count = text.count(old_text) if old_text else 0
        if count != 1:
            found = "was not found" if count == 0 else f"occurs {count} times"
            raise ValueError(f"old_text {found} in {path}; it must occur exactly once (add surrounding lines to make it unique)")
        file.write_text(text.replace(old_text, new_text, 1), encoding="utf-8")
        return f"Edited {path}: replaced {len(old_text)} characters with {len(new_text)}."

    def list_files(path: str = ".", pattern: str = "*", recursive: bool = False) -> str:
        """List files and folders (folders end with '/'), with sizes in bytes; hidden entries are skipped.

        Args:
            path: The folder to list, relative to the working directory or absolute.
            pattern: A glob pattern that names must match, e.g. '*.csv'.
            recursive: Whether to list sub-folders too.
        """
        top = workspace.open(path)
        if not top.is_dir():
            raise NotADirectoryError(f"{path} is not a folder")
        entries: list[str] = []
        logs = workspace.log_folders()

        def is_log(entry: Path) -> bool:
            # os.walk does not follow symbolic links to folders, and top is resolved, so an entry
            # is where it says it is unless it is itself a link: only links need resolving.
            return workspace.is_log_path(entry, logs) or (os.path.islink(entry) and workspace.private(entry))

        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not is_log(Path(folder) / d))
            base = Path(folder).relative_to(top)
            for name in dirs:
                if fnmatch.fnmatch(name, pattern):
                    entries.append(f"{base / name}/")
            for name in sorted(files):
                if not name.startswith(".") and fnmatch.fnmatch(name, pattern):
                    full = Path(folder) / name
                    if workspace.is_log_path(full, logs):
                        continue
                    try:
                        info = os.lstat(full)
                        if stat.S_ISLNK(info.st_mode):
                            if workspace.private(full):
                                continue  # a link to a session log: not listed
                            info = os.stat(full)
                        size = info.st_size
                    except OSError:
                        size = -1
                    entries.append(f"{base / name}\t{size}")
            if not recursive:
                break
        if not entries:
            return f"(nothing in {path} matches {pattern!r})"
        more = len(entries) - MAX_LIST_ENTRIES
        listing = "\n".join(sorted(entries)[:MAX_LIST_ENTRIES])
        return listing + (f"\n[{more} more entries not shown]" if more > 0 else "")

    return (
        Tool(read_file, effect="read", guard=workspace.guard),
        Tool(write_file, effect="write", guard=workspace.guard),
        Tool(edit_file, effect="write", guard=workspace.guard),
        Tool(list_files, effect="read", guard=workspace.guard),
    )


def _read(pipes: dict[int, ByteHeadTail], deadline: float) -> bool:
    """Read the pipes into their buffers as the bytes come: True once all are closed, False at the deadline."""
    with selectors.DefaultSelector() as selector:
        for fd in pipes:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            wait = deadline - time.monotonic()
            if wait <= 0:
                return False
            for key, _ in selector.select(min(wait, 60.0)):
                data = os.read(key.fd, READ_SIZE)
                if data:
                    pipes[key.fd].feed(data)
                else:
                    selector.unregister(key.fd)
    return True


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group is already gone
        os.killpg(process.pid, signal.SIGKILL)


@tool(effect="irreversible")
def shell(command: str, timeout: float = 60.0) -> str:
    """Run a shell command in the working directory and return its exit code, stdout and stderr.

    Args:
        command: The command line, run by /bin/sh.
        timeout: Seconds to wait before the command (and everything it started) is killed.
    """
    process = subprocess.Popen(
        command,
        shell=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, so a timeout kills its children too
    )
    assert process.stdout is not None and process.stderr is not None
    out, err = ByteHeadTail(MAX_SHELL_OUTPUT), ByteHeadTail(MAX_SHELL_OUTPUT)
    pipes = {process.stdout.fileno(): out, process.stderr.fileno(): err}
    deadline = time.monotonic() + timeout
    try:
        try:
            if not _read(pipes, deadline):
                raise subprocess.TimeoutExpired(command, timeout)
            process.wait(max(0.0, deadline - time.monotonic()))
            status = f"exit code {process.returncode}"
        except subprocess.TimeoutExpired:
            _kill(process)
            _read(pipes, time.monotonic() + KILL_GRACE)  # what it printed before it was killed
            process.wait()
            status = f"timed out after {timeout:g} s; killed"
    except BaseException:
        _kill(process)
        process.wait()
        raise
    finally:
        process.stdout.close()
        process.stderr.close()
    out.feed(b"", final=True)
    err.feed(b"", final=True)
    shown_out, shown_err = fit([out, err], MAX_SHELL_OUTPUT)
    parts = [status]
    if out.total:
        parts.append("stdout:\n" + shown_out)
    if err.total:
        parts.append("stderr:\n" + shown_err)
    report = "\n".join(parts)
    if status.startswith("timed out"):
        raise TimeoutError(report)
    return report


# The file tools in the current working directory (as it is at call time), for code that imports them.
FILE_TOOLS: tuple[Tool, ...] = file_tools()
read_file, write_file, edit_file, list_files = FILE_TOOLS
ALL_TOOLS: tuple[Tool, ...] = (*FILE_TOOLS, shell)


def default_tools(
    *, files: bool = True, shell_tool: bool = True, root: PathArg | None = None, protected: Iterable[PathArg] = ()
) -> list[Tool]:
    """The built-in tools to offer: the file tools (in the workspace ``root``) and the shell tool, each optional."""
    chosen = (FILE_TOOLS if root is None and not protected else file_tools(root, protected=protected)) if files else ()
    return [*chosen, *((shell,) if shell_tool else ())]
