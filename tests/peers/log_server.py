"""An MCP server on the official Python SDK whose one tool logs at a time of its choosing: for
tests of several calls in flight at once. Run: ``python tests/peers/log_server.py`` (stdio).

``log_at(level, before_ms, after_ms)`` waits ``before_ms``, sends a log message at ``level``,
waits ``after_ms`` and returns the level."""

from __future__ import annotations

import warnings

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

server = MCPServer(name="mcprec-log-server", version="1.0.0")


@server.tool(description="Wait, log at a level, wait, return the level.")
async def log_at(ctx: Context, level: str, before_ms: int = 0, after_ms: int = 0) -> str:
    await anyio.sleep(before_ms / 1000)
    await ctx.log(level, f"{level} from log_at")  # type: ignore[arg-type]
    await anyio.sleep(after_ms / 1000)
    return level


if __name__ == "__main__":
    server.run("stdio")
