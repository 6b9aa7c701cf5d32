"""Built-in tools for an agent that works on files: read, write, edit, list, and run a shell command.

Effects, and why:

* ``read_file``, ``list_files``: ``"read"`` -- they change nothing, so replay may repeat them.
* ``write_file``, ``edit_file``: ``"write"`` -- they change a file the user may have changed since;
  a call whose outcome is unknown is not repeated without asking.
* ``shell``: ``"irreversible"`` -- a command can do anything (delete, send, deploy), so every call
  needs approval before it runs (``approval="auto"`` grants it).

Relative paths are resolved against the current working directory (a notebook's folder).
"""

from __future__ import annotations

import base64
import fnmatch
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from .tools import Tool, tool

MAX_READ_CHARS = 100_000
MAX_LIST_ENTRIES = 500
MAX_SHELL_OUTPUT = 50_000
IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp"}
MAX_IMAGE_BYTES = 5 * 1024 * 1024


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters not shown]"


@tool(effect="read")
def read_file(path: str, offset: int = 0, limit: int = 2000) -> Any:
    """Read a text file (or an image) and return its lines, numbered from 1.

    Args:
        path: The file to read, relative to the working directory or absolute.
        offset: Number of lines to skip from the start.
        limit: Maximum number of lines to return.
    """
    file = Path(path).expanduser()
    if file.suffix.lower() in IMAGE_TYPES:
        data = file.read_bytes()
        if len(data) > MAX_IMAGE_BYTES:
            raise ValueError(f"{path} is {len(data)} bytes; images over {MAX_IMAGE_BYTES} bytes are not sent to the model")
        media_type = IMAGE_TYPES[file.suffix.lower()]
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


@tool(effect="write")
def write_file(path: str, content: str) -> str:
    """Create or overwrite a text file with the given content (UTF-8); missing folders are created.

    Args:
        path: The file to write, relative to the working directory or absolute.
        content: The complete new content of the file.
    """
    file = Path(path).expanduser()
    file.parent.mkdir(parents=True, exist_ok=True)
    existed = file.exists()
    file.write_text(content, encoding="utf-8")
    return f"{'Overwrote' if existed else 'Created'} {path} ({len(content)} characters)."


@tool(effect="write")
def edit_file(path: str, old_text: str, new_text: str) -> str:
    """Replace one exact occurrence of old_text with new_text in a text file.

    old_text must occur exactly once (include surrounding lines to make it unique).

    Args:
        path: The file to edit, relative to the working directory or absolute.
        old_text: The exact text to replace, including whitespace.
        new_text: The text to put in its place.
    """
    file = Path(path).expanduser()
    text = file.read_text(encoding="utf-8")
    count = text.count(old_text) if old_text else 0
    if count != 1:
        found = "was not found" if count == 0 else f"occurs {count} times"
        raise ValueError(f"old_text {found} in {path}; it must occur exactly once (add surrounding lines to make it unique)")
    file.write_text(text.replace(old_text, new_text, 1), encoding="utf-8")
    return f"Edited {path}: replaced {len(old_text)} characters with {len(new_text)}."


@tool(effect="read")
def list_files(path: str = ".", pattern: str = "*", recursive: bool = False) -> str:
    """List files and folders (folders end with '/'), with sizes in bytes; hidden entries are skipped.

    Args:
        path: The folder to list, relative to the working directory or absolute.
        pattern: A glob pattern that names must match, e.g. '*.csv'.
        recursive: Whether to list sub-folders too.
    """
    root = Path(path).expanduser()
    if not root.is_dir():
        raise NotADirectoryError(f"{path} is not a folder")
    entries: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        base = Path(folder).relative_to(root)
        for name in dirs:
            if fnmatch.fnmatch(name, pattern):
                entries.append(f"{base / name}/")
        for name in sorted(files):
            if not name.startswith(".") and fnmatch.fnmatch(name, pattern):
                try:
                    size = (Path(folder) / name).stat().st_size
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


@tool(effect="irreversible")
def shell(command: str, timeout: float = 60.0) -> str:
    """Run a shell command in the working directory and return its exit code, stdout and stderr.

    Args:
        command: The command line, run by /bin/sh.
        timeout: Seconds to wait before the command (and everything it started) is killed.
    """
    process = subprocess.Popen(
        command, shell=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, so a timeout kills its children too
    )
    try:
        out, err = process.communicate(timeout=timeout)
        status = f"exit code {process.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        status = f"timed out after {timeout:g} s; killed"
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise
    parts = [status]
    if out:
        parts.append("stdout:\n" + out.decode("utf-8", errors="replace"))
    if err:
        parts.append("stderr:\n" + err.decode("utf-8", errors="replace"))
    report = _clip("\n".join(parts), MAX_SHELL_OUTPUT)
    if status.startswith("timed out"):
        raise TimeoutError(report)
    return report


FILE_TOOLS: tuple[Tool, ...] = (read_file, write_file, edit_file, list_files)
ALL_TOOLS: tuple[Tool, ...] = (*FILE_TOOLS, shell)


def default_tools(*, files: bool = True, shell_tool: bool = True) -> list[Tool]:
    """The built-in tools to offer: the file tools and the shell tool, each optional."""
    return [*(FILE_TOOLS if files else ()), *((shell,) if shell_tool else ())]
