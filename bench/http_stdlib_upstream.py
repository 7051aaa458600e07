"""The issue's reference upstream: a plain standard-library HTTP echo server
(``http.server.ThreadingHTTPServer``), answering as bench/http_upstream.py does.

    python bench/http_stdlib_upstream.py [--sse] [--port N]

Prints its URL first; on SIGINT prints ``requests=N`` (POSTs received) and exits.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from http_upstream import answer  # noqa: E402  (the same answers, byte for byte)

COUNT = [0]
LOCK = threading.Lock()


def handler(sse: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's naming
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            with LOCK:
                COUNT[0] += 1
            sid = self.headers.get("mcp-session-id")
            self.wfile.write(answer(body, sse, sid.encode() if sid else None))

        def do_DELETE(self) -> None:  # noqa: N802
            self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")

        def do_GET(self) -> None:  # noqa: N802
            self.wfile.write(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sse", action="store_true")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(args.sse))
    server.daemon_threads = True
    print(f"http://127.0.0.1:{server.server_address[1]}/mcp", flush=True)

    def stop(*_: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    server.serve_forever()
    print(f"requests={COUNT[0]}", flush=True)


if __name__ == "__main__":
    main()
