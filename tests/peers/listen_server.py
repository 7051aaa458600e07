"""A Python SDK server for the 2026-07-28 ``subscriptions/listen`` stream: the ``touch`` tool
publishes a tools-list change to every listener while the call is in flight.

Run: ``python tests/peers/listen_server.py`` (stdio)."""

from __future__ import annotations

import warnings

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

server = MCPServer("mcprec-listen-server")


@server.tool()
async def touch(name: str, ctx: Context) -> str:
    """Change the tools list (an event for listeners), then answer."""
    await ctx.notify_tools_changed()
    return f"touched {name}"


if __name__ == "__main__":
    server.run("stdio")
