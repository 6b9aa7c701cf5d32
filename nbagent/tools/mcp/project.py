"""A project's ``.mcp.json`` beside the notebook: used only after this user approves it, in its folder, once.

The file can start any command with the user's rights, and it comes with whatever was cloned or downloaded, so its
servers never start unasked (as Claude Code does with project servers). An approval is recorded per user in
``<data dir>/mcp-approved.json`` (the folder of the signing secret, ``nbagent.record.signing.data_dir``), keyed by
all of: the file's bytes (SHA-256), its folder (symbolic links resolved), and the bytes of the files its servers'
commands and arguments name inside that folder (a script such as ``server.py``, see :func:`named_files`). A change
to any of them, or the same bytes in another folder, asks again. Its stdio servers run in the file's folder.
``nbagent mcp approve PATH`` approves from a terminal; in a notebook the panel asks.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from ...record import signing
from ...record.readfile import open_regular, read_regular
from .config import McpConfigError, ServerConfig, parse

FILE_NAME = ".mcp.json"
RECORD = "mcp-approved.json"
MAX_BYTES = 1 << 20
MAX_NAMED = 16 << 20  # a named file larger than this is not hashed: its approval says so, and so asks if it changes size
SCRIPTS = frozenset(".py .pyw .js .mjs .cjs .ts .mts .sh .bash .zsh .rb .pl .php .jar .lua .r .ps1 .bat .cmd .exe".split())
NOT_COVERED = (
    "It does not cover what those programs load or read themselves (imported modules, packages, other files in the "
    "folder): a change there runs unasked."
)


@dataclass(frozen=True)
class ProjectFile:
    """A ``.mcp.json`` as read: its path and folder, its bytes' hash, its servers, the files they name and their hashes."""

    path: Path
    digest: str
    servers: list[ServerConfig]
    raw: dict[str, Any]
    folder: Path = Path()
    files: tuple[tuple[str, str], ...] = ()  # (path relative to the folder, its sha256 or why it has none)

    @property
    def key(self) -> str:
        """What an approval is recorded under: this content, in this folder, with these named files."""
        shape = [str(self.folder), self.digest, [list(f) for f in self.files]]
        return hashlib.sha256(json.dumps(shape).encode()).hexdigest()

    def covers(self) -> str:
        """What approving covers and what it does not, in two sentences."""
        named = ", ".join(f"{name} ({value[:16] if len(value) == 64 else value})" for name, value in self.files)
        files = f" and the files its commands name: {named}" if named else " (its commands name no file in this folder)"
        return f"Approving covers this exact content of {self.path.name}, in {self.folder}{files}. {NOT_COVERED}"

    def describe(self) -> str:
        """Every server the file starts, in full (the command, its arguments and env as written), and what approving covers."""
        lines = [f"{self.path} (sha256 {self.digest[:16]}) names {len(self.servers)} MCP server(s), run in {self.folder}:"]
        entries = self.raw.get("mcpServers", self.raw) if isinstance(self.raw, dict) else {}
        for name, entry in entries.items():
            lines.append(f"  {name}: {json.dumps(entry, ensure_ascii=False, sort_keys=True)}")
        lines.append(self.covers())
        return "\n".join(lines)


def find(folder: str | os.PathLike[str]) -> Path | None:
    """The ``.mcp.json`` in ``folder`` (the notebook's), if there is one."""
    path = Path(folder) / FILE_NAME
    return path if os.path.lexists(path) else None


def load(path: str | os.PathLike[str]) -> ProjectFile:
    """Read and check a project file (nothing started); McpConfigError saying what is wrong with it."""
    path = Path(path).absolute()
    try:
        data = read_regular(path)
    except OSError as exc:
        raise McpConfigError(f"{path} cannot be read ({exc}); its MCP servers are not used.") from None
    if len(data) > MAX_BYTES:
        raise McpConfigError(f"{path} is {len(data):,} bytes; a .mcp.json over {MAX_BYTES:,} bytes is not used.")
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise McpConfigError(f"{path} is not valid JSON ({exc}); its MCP servers are not used.") from None
    if not isinstance(raw, dict):
        raise McpConfigError(f'{path} must hold {{"mcpServers": {{...}}}}; its MCP servers are not used.')
    folder = Path(os.path.realpath(path.parent))
    servers = [_in_folder(s, folder) for s in parse(raw, origin=str(path), trusted=False)]
    files = sorted({name for server in servers for name in named_files(server, folder)})
    return ProjectFile(path, hashlib.sha256(data).hexdigest(), servers, raw, folder, tuple((n, _digest(folder / n)) for n in files))


def _in_folder(server: ServerConfig, folder: Path) -> ServerConfig:
    """A stdio server run in the file's folder (a relative ``cwd``: inside it), not wherever the kernel runs."""
    if server.transport != "stdio":
        return server
    return dataclasses.replace(server, cwd=str(folder / server.cwd) if server.cwd else str(folder))


def named_files(server: ServerConfig, folder: Path) -> list[str]:
    """The files inside ``folder`` that a stdio server's command, or an argument with a script's suffix, names (relative, ``/``)."""
    if server.transport != "stdio":
        return []
    where = Path(server.cwd or folder)
    found = []
    for n, word in enumerate([server.command, *server.args]):
        if not word or word.startswith("-") or (n > 0 and PurePath(word).suffix.lower() not in SCRIPTS):
            continue
        if n == 0 and os.sep not in word and "/" not in word:
            continue  # a command looked up on PATH, not a file of the project
        target = Path(os.path.realpath(where / word))
        if target.is_file() and target.is_relative_to(folder):
            found.append(target.relative_to(folder).as_posix())
    return found


def _digest(path: Path) -> str:
    """The file's SHA-256, or why it has none."""
    try:
        with open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_NAMED:
                return f"not hashed: {size:,} bytes"
            digest = hashlib.sha256()
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
            return digest.hexdigest()
    except OSError as exc:
        return f"not readable: {type(exc).__name__}"


def _record_path() -> Path:
    return signing.data_dir() / RECORD


def _approvals() -> dict[str, Any]:
    try:
        record = json.loads(read_regular(_record_path()).decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def approved(project: ProjectFile) -> bool:
    """Whether this user approved exactly this content, in this folder, with these named files (an approval kept by content only does not count)."""
    return project.key in _approvals()


def approve(project: ProjectFile) -> None:
    """Record that this user approves this content in this folder (written whole, readable by this user only)."""
    record = _approvals()
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    record[project.key] = {
        "path": str(project.path),
        "folder": str(project.folder),
        "sha256": project.digest,
        "files": dict(project.files),
        "approved": now,
        "servers": [s.name for s in project.servers],
    }
    folder = _record_path().parent
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=".mcp-approved-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(record, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, _record_path())
    except BaseException:
        os.unlink(temporary)
        raise


def not_approved_note(project: ProjectFile, why: str) -> str:
    """The one line a run shows when a project file's servers were not started."""
    return (
        f"The MCP servers of {project.path} were not started: {why}. This file can run commands, so it is used only once "
        f"you approve it, in this folder: `nbagent mcp approve {project.path}` in a terminal, or Approve in the panel."
    )
