"""A real MCP server for the tests, on the official ``mcp`` SDK: ``python -m tests.support.mcp_server [stdio | http PORT]``.

Its tools cover what nbagent maps: annotations to effects, text, images, structured content, an error result, a
call slow enough to be killed mid-way (``slow`` writes a line to ``$MCP_TEST_CALLS`` when it starts), and a server
that exits while a call runs (``die``). ``$MCP_TEST_STARTS`` gets a line each time the server starts.
``$MCP_TEST_FAIL_START`` makes it exit at once, its last stderr line saying so (and ``$MCP_TEST_STDERR`` if set);
``$MCP_TEST_HUGE=N`` adds a tool ``huge`` whose description and input schema are each about N characters.
"""

from __future__ import annotations

import base64
import os
import sys
import time
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import ToolAnnotations
from pydantic import Field

# The smallest valid PNG (1x1, grey): an image result the API accepts.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAAAAAA6fptVAAAACklEQVR4nGNgAAAAAgABSK+kcQAAAABJRU5ErkJggg==")

server = MCPServer("nbagent-test")


def _mark(variable: str, text: str) -> None:
    path = os.environ.get(variable)
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(text + "\n")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, title="Add two numbers"))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(annotations=ToolAnnotations(read_only_hint=True, title="Look a key up"))
def lookup(key: str) -> str:
    """Look a key up (read-only, says the server; each call is written to $MCP_TEST_CALLS)."""
    _mark("MCP_TEST_CALLS", f"lookup {key}")
    return f"value of {key}"


def _add_huge(size: int) -> None:
    """A tool whose description and input schema are each about ``size`` characters."""

    def huge(text: str) -> str:
        return text

    huge.__annotations__ = {"text": Annotated[str, Field(description="s" * size)], "return": str}  # its size known only now
    server.add_tool(huge, description="h" * (size - 3) + "END", annotations=ToolAnnotations(read_only_hint=True))


@server.tool()
def echo(text: str) -> str:
    """Echo the text back (no annotations: a write)."""
    _mark("MCP_TEST_CALLS", f"echo {text}")
    return text


@server.tool(annotations=ToolAnnotations(destructive_hint=True, title="Delete a row"))
def delete_row(row: int) -> str:
    """Delete one row of the test table."""
    _mark("MCP_TEST_CALLS", f"delete_row {row}")
    return f"deleted row {row}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def picture() -> list[object]:
    """Return a caption and a 1x1 PNG."""
    return ["a grey pixel", Image(data=PNG, format="png")]


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def environment(name: str) -> str:
    """Read one environment variable of the server process."""
    return os.environ.get(name, "(unset)")


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the reason."""
    raise ValueError(reason)


@server.tool()
def slow(seconds: float) -> str:
    """Sleep, then answer (a write: its outcome is unknown if the server dies mid-way)."""
    _mark("MCP_TEST_CALLS", f"slow {seconds}")
    time.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def die() -> str:
    """Exit the server process while the call is running."""
    _mark("MCP_TEST_CALLS", "die")
    sys.stdout.flush()
    os._exit(3)


def main(argv: list[str]) -> None:
    """Serve on stdio (default) or streamable HTTP on 127.0.0.1:PORT."""
    _mark("MCP_TEST_STARTS", f"start {os.getpid()}")
    if os.environ.get("MCP_TEST_FAIL_START"):
        said = os.environ.get("MCP_TEST_STDERR")
        print("the test server was told not to start" + (f" ({said})" if said else ""), file=sys.stderr)
        sys.exit(2)
    if os.environ.get("MCP_TEST_HUGE"):
        _add_huge(int(os.environ["MCP_TEST_HUGE"]))
    if argv[:1] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))
    else:
        server.run("stdio")


if __name__ == "__main__":
    main(sys.argv[1:])
