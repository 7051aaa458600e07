"""A real MCP server on the official Python SDK over Streamable HTTP (or legacy HTTP+SSE), a peer
for mcprec's HTTP tests.

Run: ``python tests/peers/http_server.py [--port N] [--json-response] [--stateless] [--sse]
[--event-store] [--requests-log PATH]``. It binds 127.0.0.1 (port 0 by default: a free port)
and, once it accepts connections, prints its endpoint URL as the first line on stdout.

``--requests-log PATH`` appends one JSON line per HTTP request that reaches the server
(``{"method": "POST", "rpc": "tools/call", "id": 3, "sid": "...", "authorization": ...}``): the
tests read it to check that a proxy delivered every request exactly once, headers intact.
``--event-store`` keeps events in memory: SSE events get ids, and streams start with a priming
event (an id and empty data), as the 2025-11-25 revision describes.

Tools: ``add``, ``echo``, ``count`` (counts its calls), ``read_count`` (the count so far),
``slow`` (progress notifications and a log message per step), ``ask_model`` (asks the client for
sampling), ``chatty`` (logs N messages), ``stream`` (N progress notifications, ``delay_ms`` apart:
a long SSE response).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import warnings
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.streamable_http import EventMessage, EventStore
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import SamplingMessage, TextContent

# logging and sampling are deprecated in the 2026-07-28 revision, still in use in 2025-11-25
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

server = MCPServer(name="mcprec-http-test-server", version="1.0.0",
                   instructions="A deterministic HTTP server for mcprec's tests.")

_calls = {"count": 0}


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Echo the text back.")
def echo(text: str) -> str:
    return text


@server.tool(description="Count the calls: each call returns the next number.")
def count() -> str:
    _calls["count"] += 1
    return f"call {_calls['count']}"


@server.tool(description="How many times `count` has been called.")
def read_count() -> int:
    return _calls["count"]


@server.tool(description="Work in steps, reporting progress and logging each step.")
async def slow(ctx: Context, steps: int = 3, delay_ms: int = 20) -> str:
    for i in range(1, steps + 1):
        await anyio.sleep(delay_ms / 1000)
        await ctx.report_progress(i, steps, f"step {i} of {steps}")
        await ctx.info(f"slow: finished step {i}")
    return f"done after {steps} steps"


@server.tool(description="Send `steps` progress notifications, `delay_ms` apart.")
async def stream(ctx: Context, steps: int = 100, delay_ms: int = 50) -> str:
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps)
        await anyio.sleep(delay_ms / 1000)
    return f"streamed {steps}"


@server.tool(description="Ask the client's model a question (sampling) and return its answer.")
async def ask_model(question: str, ctx: Context) -> str:
    result = await ctx.session.create_message(
        [SamplingMessage(role="user", content=TextContent(type="text", text=question))],
        max_tokens=50,
        system_prompt="Answer briefly.",
    )
    content = result.content
    text = content.text if isinstance(content, TextContent) else repr(content)
    return f"model {result.model} said: {text}"


@server.tool(description="Log `n` messages, then return.")
async def chatty(ctx: Context, n: int = 3) -> str:
    for i in range(1, n + 1):
        await ctx.info(f"chatty {i} of {n}")
    return f"logged {n}"


class MemoryEventStore(EventStore):
    """Resumability in memory: numbered events, replayed after a Last-Event-ID."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []

    async def store_event(self, stream_id: str, message: Any) -> str:
        event_id = str(len(self.events) + 1)
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: Any) -> str | None:
        ids = [e[0] for e in self.events]
        if last_event_id not in ids:
            return None
        i = ids.index(last_event_id)
        stream = self.events[i][1]
        for event_id, sid, message in self.events[i + 1:]:
            if sid == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


def requests_logger(app: Any, path: str) -> Any:
    """Wrap the ASGI app: one JSON line per HTTP request received, before the app sees it."""

    async def logged(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        sid = headers.get("mcp-session-id")
        chunks: list[dict[str, Any]] = []
        body = b""
        if scope["method"] == "POST":
            while True:
                msg = await receive()
                chunks.append(msg)
                if msg["type"] != "http.request":
                    break
                body += msg.get("body", b"")
                if not msg.get("more_body"):
                    break
        try:
            obj = json.loads(body) if body else None
        except ValueError:
            obj = None
        items = obj if isinstance(obj, list) else [obj]
        with open(path, "a", encoding="utf-8") as f:
            for item in items:
                rec: dict[str, Any] = {"method": scope["method"], "sid": sid}
                for name in ("authorization", "cookie", "host"):
                    if name in headers:
                        rec[name] = headers[name]
                if isinstance(item, dict):
                    rec["rpc"] = item.get("method")
                    rec["id"] = item.get("id")
                f.write(json.dumps(rec) + "\n")

        async def replay_receive() -> dict[str, Any]:
            if chunks:
                return chunks.pop(0)
            return await receive()

        await app(scope, replay_receive, send)

    return logged


async def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--json-response", action="store_true")
    ap.add_argument("--stateless", action="store_true")
    ap.add_argument("--sse", action="store_true", help="legacy HTTP+SSE transport (GET /sse)")
    ap.add_argument("--event-store", action="store_true")
    ap.add_argument("--requests-log")
    args = ap.parse_args()

    if args.sse:
        app: Any = server.sse_app(host="127.0.0.1")
        path = "/sse"
    else:
        app = server.streamable_http_app(json_response=args.json_response,
                                         stateless_http=args.stateless, host="127.0.0.1",
                                         event_store=MemoryEventStore() if args.event_store
                                         else None)
        path = "/mcp"
    if args.requests_log:
        app = requests_logger(app, args.requests_log)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=1)
    srv = uvicorn.Server(config)
    task = asyncio.get_running_loop().create_task(srv.serve(sockets=[sock]))
    while not srv.started and not task.done():
        await asyncio.sleep(0.01)
    if srv.started:
        print(f"http://127.0.0.1:{port}{path}", flush=True)
    await task


if __name__ == "__main__":
    asyncio.run(main())
