"""What a call through an MCP server costs over calling the same function directly: ``python -m benchmarks.mcp_overhead``.

The function is the test server's ``add`` (tests/support/mcp_server.py, on the official ``mcp`` SDK). Side by side, per call:

- direct: the same function as an ``@nbagent.tool``, through ``Tool.invoke`` (schema check and all);
- SDK floor: the SDK's own ``Client.call_tool`` over stdio, awaited in one event loop (no nbagent in the path);
- nbagent: ``McpTool.invoke`` over stdio from the loop's thread (the background event loop, the result conversion).

The stdio server runs in a child process on the same machine; the server's start is timed once, apart.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbagent
from nbagent.tools.mcp import Manager, McpServers

ROOT = Path(__file__).resolve().parent.parent
SERVER = {"command": sys.executable, "args": ["-m", "tests.support.mcp_server"], "cwd": str(ROOT)}


def per_call(call: Callable[[], Any], calls: int, rounds: int) -> list[float]:
    """Seconds per call, one figure per round of ``calls`` calls (after a warm-up)."""
    for _ in range(min(calls, 20)):
        call()
    figures = []
    for _ in range(rounds):
        began = time.perf_counter()
        for _ in range(calls):
            call()
        figures.append((time.perf_counter() - began) / calls)
    return figures


def direct(calls: int, rounds: int) -> list[float]:
    """The same function as an nbagent tool, called in this process."""

    @nbagent.tool(effect="read")
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return per_call(lambda: add.invoke({"a": 2, "b": 3}, ""), calls, rounds)


def sdk_floor(calls: int, rounds: int) -> list[float]:
    """The SDK's own client over stdio, in one event loop: the protocol's cost without nbagent."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def main() -> list[float]:
        params = StdioServerParameters(command=SERVER["command"], args=list(SERVER["args"]), cwd=SERVER["cwd"])
        async with Client(stdio_client(params)) as client:
            for _ in range(min(calls, 20)):
                await client.call_tool("add", {"a": 2, "b": 3})
            figures = []
            for _ in range(rounds):
                began = time.perf_counter()
                for _ in range(calls):
                    await client.call_tool("add", {"a": 2, "b": 3})
                figures.append((time.perf_counter() - began) / calls)
            return figures

    return asyncio.run(main())


def through_nbagent(calls: int, rounds: int) -> tuple[list[float], list[float], float]:
    """``McpTool.invoke`` over stdio, as the loop calls it; nbagent's hop to its event loop alone; the server's start."""
    manager = Manager()

    async def nothing() -> None:
        return None

    try:
        began = time.perf_counter()
        tools = {t.name: t for t in McpServers({"bench": SERVER}, manager=manager).tools()}
        start = time.perf_counter() - began
        add = tools["mcp__bench__add"]
        hop = per_call(lambda: manager.submit(nothing()).result(), calls, rounds)
        return per_call(lambda: add.invoke({"a": 2, "b": 3}, ""), calls, rounds), hop, start
    finally:
        manager.close()


def report(calls: int, rounds: int) -> str:
    """The comparison as a Markdown table (median of the rounds)."""
    floor = statistics.median(direct(calls, rounds))
    sdk = statistics.median(sdk_floor(calls, rounds))
    mine, hops, start = through_nbagent(calls, rounds)
    ours, hop = statistics.median(mine), statistics.median(hops)
    rows = [
        "| path | per call | vs direct |",
        "|---|---:|---:|",
        f"| direct (`Tool.invoke` of the same function) | {floor * 1e6:,.1f} µs | 1.0x |",
        f"| SDK `Client.call_tool`, stdio, one event loop | {sdk * 1e6:,.1f} µs | {sdk / floor:,.0f}x |",
        f"| nbagent `McpTool.invoke`, stdio (background loop) | {ours * 1e6:,.1f} µs | {ours / floor:,.0f}x |",
        f"| nbagent's hop to its event loop and back alone (a no-op) | {hop * 1e6:,.1f} µs | {hop / floor:,.0f}x |",
        "",
        f"nbagent over the SDK alone: {(ours - sdk) * 1e6:+,.1f} µs per call ({ours / sdk:.2f}x). "
        f"Starting the server and listing its tools: {start:.2f} s, once per kernel. {calls} calls x {rounds} rounds, median.",
    ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (the median is shown)")
    args = parser.parse_args(argv)
    print(report(args.calls, args.rounds))


if __name__ == "__main__":
    main()
