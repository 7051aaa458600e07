"""A Streamable HTTP MCP server broken on purpose, a peer for tests/check/test_check.py: it accepts
any ``Host`` and any ``Origin`` (no DNS-rebinding protection), hands out a session id but never
asks for it back (a request without one, or in a session ended by DELETE, is served as any
other), and ignores ``MCP-Protocol-Version``. The JSON-RPC side is by the book, so that
``mcprec check --target`` fails exactly the transport checks.

Run: ``python tests/peers/open_http_server.py``. It binds 127.0.0.1 on a free port and prints
its endpoint URL as the first line on stdout. Answers are JSON (no event streams: no
resumption); GET is 405.
"""

from __future__ import annotations

import json
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOOLS = [{"name": "echo", "description": "Echo the text back.",
          "annotations": {"readOnlyHint": True},
          "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                          "required": ["text"]}}]


def answer(msg: dict[str, Any]) -> dict[str, Any] | None:
    method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method is None or "id" not in msg:
        return None
    ok = {"jsonrpc": "2.0", "id": rid}
    if method == "initialize":
        return {**ok, "result": {"protocolVersion": params.get("protocolVersion", "2025-11-25"),
                                 "capabilities": {"tools": {}},
                                 "serverInfo": {"name": "open-http-server", "version": "0.1.0"}}}
    if method == "ping":
        return {**ok, "result": {}}
    if method == "tools/list":
        return {**ok, "result": {"tools": TOOLS}}
    if method == "tools/call":
        name, args = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str):
            return {**ok, "error": {"code": -32602, "message": "tools/call needs a tool name"}}
        if name != "echo":
            return {**ok, "error": {"code": -32602, "message": f"Unknown tool: {name}"}}
        if not isinstance(args.get("text"), str):
            return {**ok, "result": {"content": [{"type": "text", "text": "text: a string"}],
                                     "isError": True}}
        return {**ok, "result": {"content": [{"type": "text", "text": args["text"]}]}}
    return {**ok, "error": {"code": -32601, "message": f"Method not found: {method}"}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None
              ) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            msg = json.loads(body)
        except ValueError:
            self.reply(400, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,'
                            b'"message":"Parse error"}}', {"content-type": "application/json"})
            return
        out = answer(msg) if isinstance(msg, dict) else None
        if out is None:
            self.reply(202)
            return
        headers = {"content-type": "application/json"}
        if msg.get("method") == "initialize":
            headers["mcp-session-id"] = uuid.uuid4().hex  # handed out, never checked
        self.reply(200, json.dumps(out).encode(), headers)

    def do_GET(self) -> None:
        self.reply(405, b"", {"allow": "POST, DELETE"})

    def do_DELETE(self) -> None:
        self.reply(200)


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"http://127.0.0.1:{server.server_address[1]}/mcp", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    sys.exit(0)


if __name__ == "__main__":
    main()
