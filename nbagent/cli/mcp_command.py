"""``nbagent mcp approve PATH``: approve a project's ``.mcp.json`` in its folder from a terminal, after seeing every server it starts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from ..errors import HistoryError
from ..tools.mcp import project
from ..tools.mcp.config import McpConfigError
from .exit_codes import EXIT_DATA, EXIT_OK


def add_parser(commands: Any) -> None:
    """The ``mcp`` subcommand."""
    mcp = commands.add_parser("mcp", help="approve a project's .mcp.json (its MCP servers start only once you approve its exact content)")
    mcp.add_argument("action", choices=["approve"], help="approve: show the file's servers and commands, then record your approval")
    mcp.add_argument("path", help="the .mcp.json, or the folder (a notebook's) that holds it")
    mcp.add_argument("--yes", action="store_true", help="do not ask for confirmation (for scripts)")


def cmd_mcp(args: argparse.Namespace, out: TextIO) -> int:
    """``nbagent mcp approve PATH`` (errors raise HistoryError: the CLI prints them in one line)."""
    given = Path(args.path).expanduser()
    path = project.find(given) if given.is_dir() else (given if given.exists() or given.is_symlink() else None)
    if given.suffix == ".ipynb":
        path = project.find(given.parent)
    if path is None:
        raise HistoryError(f"no .mcp.json at {given}")
    try:
        found = project.load(path)
    except McpConfigError as exc:
        raise HistoryError(str(exc), usage=False) from None
    if project.approved(found):
        out.write(f"{found.path}: already approved (this exact content, in {found.folder}); nothing was changed\n")
        return EXIT_OK
    out.write(found.describe() + "\n")
    out.write(
        "Approving lets nbagent start these commands with your rights, in that folder, whenever a notebook beside this file "
        "runs %agent where you could be asked (never in a headless run, nor under Agent.approval = 'deny').\n"
    )
    if not args.yes:
        if sys.stdin is None or not sys.stdin.isatty():
            raise HistoryError("not approved: nobody can confirm here (no terminal); run it in a terminal, or pass --yes")
        out.flush()
        if input("Approve this .mcp.json? [y/N] ").strip().lower() not in ("y", "yes"):
            out.write("not approved; nothing was changed\n")
            return EXIT_DATA
    project.approve(found)
    out.write(
        f"approved: {found.path} (sha256 {found.digest[:16]}) in {found.folder}; a change to what it covers, or the same file "
        "in another folder, asks again\n"
    )
    return EXIT_OK
