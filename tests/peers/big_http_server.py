"""A lean Streamable HTTP MCP server for large transfers, a peer for the recording proxy's
back-pressure tests: raw sockets, a thread per connection, each answer written at once, so that
a test moving 100+ MB measures mcprec, not the server.

Run: ``python tests/peers/big_http_server.py``. It binds 127.0.0.1 on a free port and, once it
accepts connections, prints its endpoint URL as the first line on stdout.

POST /mcp: ``initialize`` is answered in JSON with a new ``Mcp-Session-Id`` (``big-1``, ``big-2``
…); a notification or response gets ``202``; ``tools/call``: ``blob`` (``size``) answers in JSON
with ``size`` bytes of text, ``upload`` (``data``) says how long ``data`` was, ``stream``
(``count``, ``size``) answers with an SSE stream (chunked) of ``count`` log notifications of
``size`` bytes each, then the result: exactly the bytes of ``sse_body``. DELETE ends a session
(``200``); GET is ``405`` (no server stream).
"""

from __future__ import annotations

import itertools
import signal
import socket
import sys
import threading
from collections.abc import Iterator

import orjson


def _message(rid: object, result: dict) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": result})


def notification(i: int, size: int) -> bytes:
    """The ``i``-th notification of a stream: ``size`` bytes of JSON."""
    head = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"'
    head += b"%d:" % i
    return head + bytes([97 + i % 26]) * (size - len(head) - 3) + b'"}}'


def sse_events(rid: object, count: int, size: int) -> Iterator[bytes]:
    """The events of a ``stream`` call's answer, each as sent (one chunk each)."""
    for i in range(count):
        yield b"event: message\r\ndata: " + notification(i, size) + b"\r\n\r\n"
    done = _message(rid, {"content": [{"type": "text", "text": f"{count} sent"}]})
    yield b"event: message\r\ndata: " + done + b"\r\n\r\n"


def sse_body(rid: object, count: int, size: int) -> bytes:
    """The whole body of a ``stream`` call's answer, transfer coding removed."""
    return b"".join(sse_events(rid, count, size))


def blob(rid: object, size: int) -> bytes:
    """The JSON answer of a ``blob`` call: ``size`` bytes of text in its content."""
    return _message(rid, {"content": [{"type": "text", "text": "b" * size}]})


_sessions = itertools.count(1)


def _answer(conn: socket.socket, status: bytes, body: bytes, headers: bytes = b"",
            content_type: bytes = b"application/json") -> None:
    conn.sendall(b"HTTP/1.1 " + status + b"\r\ncontent-type: " + content_type + headers
                 + b"\r\ncontent-length: %d\r\n\r\n" % len(body) + body)


def _post(conn: socket.socket, body: bytes) -> None:
    msg = orjson.loads(body)
    method, rid = msg.get("method"), msg.get("id")
    if rid is None or method is None:
        _answer(conn, b"202 Accepted", b"")
    elif method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"],
                  "capabilities": {"tools": {}},
                  "serverInfo": {"name": "big-http", "version": "1.0"}}
        _answer(conn, b"200 OK", _message(rid, result),
                b"\r\nmcp-session-id: big-%d" % next(_sessions))
    elif method == "tools/call" and msg["params"]["name"] == "stream":
        args = msg["params"]["arguments"]
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                     b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n")
        for event in sse_events(rid, int(args["count"]), int(args["size"])):
            conn.sendall(b"%x\r\n" % len(event) + event + b"\r\n")
        conn.sendall(b"0\r\n\r\n")
    elif method == "tools/call" and msg["params"]["name"] == "blob":
        _answer(conn, b"200 OK", blob(rid, int(msg["params"]["arguments"]["size"])))
    elif method == "tools/call" and msg["params"]["name"] == "upload":
        size = len(msg["params"]["arguments"]["data"])
        _answer(conn, b"200 OK", _message(rid, {"content": [{"type": "text", "text": str(size)}]}))
    else:
        _answer(conn, b"200 OK", _message(rid, {}))


def _serve(conn: socket.socket) -> None:
    buf = b""
    with conn:
        while True:
            while b"\r\n\r\n" not in buf:
                chunk = conn.recv(1 << 20)
                if not chunk:
                    return
                buf += chunk
            head, _, buf = buf.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method = lines[0].split(" ", 1)[0]
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            parts, have = [buf[:length]], len(buf[:length])
            buf = buf[length:]
            while have < length:
                chunk = conn.recv(min(1 << 20, length - have))
                if not chunk:
                    return
                parts.append(chunk)
                have += len(chunk)
            if method == "POST":
                _post(conn, b"".join(parts))
            elif method == "DELETE":
                _answer(conn, b"200 OK", b"")
            else:
                _answer(conn, b"405 Method Not Allowed", b"", b"\r\nallow: POST, DELETE")


def main() -> None:
    # Ctrl-C's handler set here, not left to the interpreter: one that starts with SIGINT
    # ignored keeps it ignored, and the tests stop this peer with SIGINT
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    while True:
        conn, _ = sock.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
