"""A plain HTTP server (the standard library's ``http.server``) in front of an MCP endpoint
that wants a bearer token: a peer for mcprec's HTTP tests of answers that are not JSON-RPC.

Run: ``python tests/peers/auth_server.py [--token T] [--requests-log PATH]``. It binds
127.0.0.1 on a free port and prints its endpoint URL (``http://127.0.0.1:PORT/mcp``) as the
first line on stdout.

A POST without ``Authorization: Bearer T`` (default token ``let-me-in``) gets ``401`` with a
plain-text body and a ``WWW-Authenticate`` challenge; a POST with an ``Origin`` other than a
local one gets ``403`` in plain text. An authorized POST of ``initialize`` is answered with a
JSON result, of a notification with ``202``, of any other request with a JSON error.
``--requests-log PATH`` appends each request's method and headers as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import signal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHALLENGE = ('Bearer error="invalid_token", error_description="a bearer token is required", '
             'resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource"')
UNAUTHORIZED = b"Unauthorized: a bearer token is required\n"


class Handler(BaseHTTPRequestHandler):
    token = "let-me-in"
    log_path: str | None = None
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's name
        pass

    def _reply(self, status: int, body: bytes, content_type: str,
               extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.log_path:
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"method": "POST", "headers": dict(self.headers.items())})
                        + "\n")
        origin = self.headers.get("Origin")
        if origin is not None and not origin.startswith(("http://127.0.0.1", "http://localhost")):
            self._reply(403, b"Forbidden: foreign Origin\n", "text/plain; charset=utf-8")
            return
        if self.headers.get("Authorization") != f"Bearer {self.token}":
            self._reply(401, UNAUTHORIZED, "text/plain; charset=utf-8",
                        {"WWW-Authenticate": CHALLENGE})
            return
        msg = json.loads(body)
        if "id" not in msg:
            self._reply(202, b"", "text/plain")
            return
        if msg.get("method") == "initialize":
            out = {"jsonrpc": "2.0", "id": msg["id"], "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "auth-server", "version": "1"}}}
        else:
            out = {"jsonrpc": "2.0", "id": msg["id"],
                   "error": {"code": -32601, "message": "Method not found"}}
        self._reply(200, json.dumps(out).encode(), "application/json")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--token", default="let-me-in")
    ap.add_argument("--requests-log")
    args = ap.parse_args()
    Handler.token = args.token
    Handler.log_path = args.requests_log
    # Ctrl-C's handler set here, not left to the interpreter: one that starts with SIGINT
    # ignored keeps it ignored, and the tests stop this peer with SIGINT
    signal.signal(signal.SIGINT, signal.default_int_handler)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"http://127.0.0.1:{server.server_address[1]}/mcp", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
