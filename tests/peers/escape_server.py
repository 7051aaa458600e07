"""A real MCP server (the official Python SDK) whose every string a terminal would obey: its
name, version, instructions, a tool's description and its stderr hold escape sequences that
set the window title, clear the screen and move the cursor.

Run: ``python tests/peers/escape_server.py`` (stdio). ``MCPREC_TEST_SERVER_VARIANT=v2`` changes
the tool's description (for diff and verify).
"""

from __future__ import annotations

import os
import sys

from mcp.server import MCPServer

HOSTILE = "\x1b]0;title\x07\x1b[2J\x1b[1A"
V2 = os.environ.get("MCPREC_TEST_SERVER_VARIANT") == "v2"

server = MCPServer(name=f"evil{HOSTILE}", version=f"1{HOSTILE}",
                   instructions=f"read me{HOSTILE}\r\nsecond line")


@server.tool(description=f"Echo{HOSTILE}" + (" v2" if V2 else ""))
def echo(text: str) -> str:
    print(f"echoing{HOSTILE}{text}", file=sys.stderr, flush=True)
    return f"{text}{HOSTILE}"


if __name__ == "__main__":
    print(f"starting{HOSTILE}\x9b2J\u202eoops", file=sys.stderr, flush=True)
    server.run("stdio")
