"""A project's ``.mcp.json`` beside the notebook: used only after this user approves that file's exact content once.

The file can start any command with the user's rights, and it comes with whatever was cloned or downloaded, so its
servers never start unasked (as Claude Code does with project servers). An approval is recorded per user, keyed by
the SHA-256 of the file's bytes, in ``<data dir>/mcp-approved.json`` (the folder of the signing secret,
``nbagent.record.signing.data_dir``): a changed file is a new hash and asks again. ``nbagent mcp approve PATH`` approves from a
terminal; in a notebook the panel asks.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...record import signing
from ...record.readfile import read_regular
from .config import McpConfigError, ServerConfig, parse

FILE_NAME = ".mcp.json"
RECORD = "mcp-approved.json"
MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class ProjectFile:
    """A ``.mcp.json`` as read: its path, its bytes' hash, its servers."""

    path: Path
    digest: str
    servers: list[ServerConfig]
    raw: dict[str, Any]

    def describe(self) -> str:
        """Every server the file starts, in full (the command, its arguments and env as written): what approving runs."""
        lines = [f"{self.path} (sha256 {self.digest[:16]}) names {len(self.servers)} MCP server(s):"]
        entries = self.raw.get("mcpServers", self.raw) if isinstance(self.raw, dict) else {}
        for name, entry in entries.items():
            lines.append(f"  {name}: {json.dumps(entry, ensure_ascii=False, sort_keys=True)}")
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
    return ProjectFile(path, hashlib.sha256(data).hexdigest(), parse(raw, origin=str(path)), raw)


def _record_path() -> Path:
    return signing.data_dir() / RECORD


def _approvals() -> dict[str, Any]:
    try:
        record = json.loads(read_regular(_record_path()).decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def approved(project: ProjectFile) -> bool:
    """Whether this user approved exactly this content."""
    return project.digest in _approvals()


def approve(project: ProjectFile) -> None:
    """Record that this user approves this content (written whole, readable by this user only)."""
    record = _approvals()
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    record[project.digest] = {"path": str(project.path), "approved": now, "servers": [s.name for s in project.servers]}
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
        f"you approve its exact content: `nbagent mcp approve {project.path}` in a terminal, or Approve in the panel."
    )
