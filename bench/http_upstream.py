"""A minimal, fast MCP-ish Streamable HTTP server for the HTTP benchmarks.

    python bench/http_upstream.py [--sse] [--port N]

HTTP/1.1 with keep-alive on uvloop + httptools (raw asyncio protocol, no framework). Every POST
carrying a JSON-RPC request is answered at once with the same id: ``initialize`` with a server
info and a fresh ``Mcp-Session-Id``, anything else with ``result = params`` (an echo).
Notifications and responses get ``202 Accepted``, DELETE ``200``, GET ``405`` (no GET stream).

Answers are a JSON body (``content-length``), or with ``--sse`` one SSE event in a chunked
``text/event-stream`` body, headers and body in one write either way. It binds 127.0.0.1 (port 0
by default), prints its URL as the first stdout line when listening, and on SIGINT/SIGTERM
prints ``requests=N`` (POSTs received) and exits: the benchmark checks each request reached it
exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import socket
import sys

import httptools
import orjson

JSON_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
             b"mcp-session-id: %s\r\ncontent-length: %d\r\n\r\n")
SSE_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            b"mcp-session-id: %s\r\ntransfer-encoding: chunked\r\n\r\n")
ACCEPTED = b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n"
DELETED = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
NOT_ALLOWED = b"HTTP/1.1 405 Method Not Allowed\r\nallow: POST, DELETE\r\ncontent-length: 0\r\n\r\n"
BAD = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
INIT_RESULT = orjson.dumps({
    "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
    "serverInfo": {"name": "bench-http-upstream", "version": "1.0.0"},
})

COUNT = [0]


def answer(body: bytes, sse: bool, sid: bytes | None) -> bytes:
    try:
        msg = orjson.loads(body)
    except orjson.JSONDecodeError:
        err = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}'
        return BAD % (len(err), err)
    if not isinstance(msg, dict) or "id" not in msg or "method" not in msg:
        return ACCEPTED
    if msg["method"] == "initialize":
        sid = secrets.token_hex(16).encode()
        result = INIT_RESULT
    else:
        result = orjson.dumps(msg.get("params"))
    out = b'{"jsonrpc":"2.0","id":' + orjson.dumps(msg["id"]) + b',"result":' + result + b"}"
    sid = sid or b"none"
    if not sse:
        return (JSON_HEAD % (sid, len(out))) + out
    event = b"event: message\ndata: " + out + b"\n\n"
    return (SSE_HEAD % sid) + b"%x\r\n%s\r\n0\r\n\r\n" % (len(event), event)


class Protocol(asyncio.Protocol):
    def __init__(self, sse: bool) -> None:
        self.sse = sse
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.body: list[bytes] = []
        self.sid: bytes | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            assert self.transport is not None
            self.transport.close()

    def on_message_begin(self) -> None:
        self.body = []
        self.sid = None

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"mcp-session-id":
            self.sid = value

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        assert self.transport is not None
        method = self.parser.get_method()
        if method == b"POST":
            COUNT[0] += 1
            out = answer(b"".join(self.body), self.sse, self.sid)
        elif method == b"DELETE":
            out = DELETED
        else:
            out = NOT_ALLOWED
        self.transport.write(out)
        if not self.parser.should_keep_alive():
            self.transport.close()


async def serve(sse: bool, port: int) -> None:
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(1024)
    server = await loop.create_server(lambda: Protocol(sse), sock=sock)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    await stop.wait()
    server.close()
    print(f"requests={COUNT[0]}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sse", action="store_true")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(args.sse, args.port))
    else:
        uvloop.run(serve(args.sse, args.port))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
