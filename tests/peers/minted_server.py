"""An SDK server that mints random values, for verify's minted-value rule.

Run: ``python tests/peers/minted_server.py`` (stdio), or with ``--http``: stateless Streamable
HTTP (2026-07-28) on a free port of 127.0.0.1, its URL printed first on stdout. Every process mints its own values:
  - ``resources/list`` is paged, 3 a page; each ``nextCursor`` is a random token this process
    remembers (a token of another process is refused: -32602);
  - ``create(title)`` stores a note under a random id and returns ``{"id": ...}``;
  - ``get(id)`` returns the note (a tool error for an id this process never minted), and so
    does the resource ``notes://{id}``.

MCPREC_TEST_SERVER_VARIANT=v2: ``get`` and the resource return the title in upper case.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from mcp.server import MCPServer
from mcp.shared.exceptions import MCPError

V2 = os.environ.get("MCPREC_TEST_SERVER_VARIANT") == "v2"
PAGE = 3
_cursors: dict[str, int] = {}
_notes: dict[str, str] = {}


async def paginate(ctx: Any, call_next: Any) -> Any:
    """Page resources/list with random cursors this process remembers."""
    if ctx.method != "resources/list":
        return await call_next(ctx)
    cursor = (ctx.params or {}).get("cursor")
    if cursor is not None and cursor not in _cursors:
        raise MCPError(-32602, f"unknown cursor {cursor}")
    result = await call_next(ctx)
    if not isinstance(result, dict):
        result = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    start = _cursors[cursor] if cursor else 0
    paged = {**result, "resources": result["resources"][start:start + PAGE]}
    if start + PAGE < len(result["resources"]):
        token = secrets.token_hex(8)
        _cursors[token] = start + PAGE
        paged["nextCursor"] = token
    return paged


server = MCPServer(name="mcprec-minted-server", version="1.0.0", middleware=[paginate])


@server.tool(description="Store a note; returns its id.")
def create(title: str) -> dict[str, Any]:
    nid = secrets.token_hex(8)
    _notes[nid] = title
    return {"id": nid}


@server.tool(description="A note by the id create returned.")
def get(id: str) -> dict[str, Any]:
    if id not in _notes:
        raise ValueError(f"no note {id}")
    title = _notes[id]
    return {"id": id, "title": title.upper() if V2 else title}


@server.resource("notes://{id}", name="note", mime_type="text/plain")
def note(id: str) -> str:
    if id not in _notes:
        raise ValueError(f"no note {id}")
    return _notes[id].upper() if V2 else _notes[id]


def _doc(i: int) -> None:
    @server.resource(f"test://docs/{i}", name=f"doc-{i}", mime_type="text/plain")
    def doc() -> str:
        return f"document {i}"


for _i in range(7):
    _doc(_i)


async def serve_http() -> None:
    """Stateless Streamable HTTP (JSON answers) on a free port of 127.0.0.1; prints its URL."""
    import asyncio
    import socket

    import uvicorn

    app = server.streamable_http_app(json_response=True, stateless_http=True, host="127.0.0.1")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    srv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on",
                                        timeout_graceful_shutdown=1))
    task = asyncio.get_running_loop().create_task(srv.serve(sockets=[sock]))
    while not srv.started and not task.done():
        await asyncio.sleep(0.01)
    if srv.started:
        print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    await task


if __name__ == "__main__":
    import sys

    if "--http" in sys.argv:
        import asyncio

        asyncio.run(serve_http())
    else:
        server.run()
