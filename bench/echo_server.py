"""A trivial, fast JSON-RPC echo server for the benchmarks (newline-delimited stdio).

For every request line read from stdin it writes one response line with the same id whose
``result`` is the request's ``params``, and flushes it at once (one ``os.write`` per response).
Raw fds, big reads, no asyncio: the server should never be what a benchmark measures.

Exits on stdin EOF. Stdlib + orjson only.
"""

from __future__ import annotations

import os
import sys

import orjson

HEAD = b'{"jsonrpc":"2.0","id":'


def response(line: bytes) -> bytes | None:
    """The response line (with its newline) for one request line, or None for a notification."""
    try:
        msg = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(msg, dict) or "id" not in msg:
        return None
    return b"".join((
        HEAD, orjson.dumps(msg["id"]), b',"result":', orjson.dumps(msg.get("params")), b"}\n"
    ))


def main() -> None:
    rfd, wfd = sys.stdin.buffer.fileno(), sys.stdout.buffer.fileno()
    os.set_blocking(rfd, True)
    os.set_blocking(wfd, True)
    partial = b""
    write = os.write
    while True:
        chunk = os.read(rfd, 1 << 16)  # a pipe gives at most 64 KiB; bigger reads only churn mmap
        if not chunk:
            break
        if partial:
            chunk = partial + chunk
        start = 0
        nl = chunk.find(b"\n")
        while nl >= 0:
            out = response(chunk[start:nl])
            if out is not None:
                view = memoryview(out)
                while view:
                    view = view[write(wfd, view):]
            start = nl + 1
            nl = chunk.find(b"\n", start)
        partial = chunk[start:]


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
