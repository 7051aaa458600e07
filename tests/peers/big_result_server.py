"""A lean stdio MCP server for large messages: its tool ``image`` returns ``size`` bytes of
base64, its tool ``upload`` takes ``data`` and says how long it was.

Raw fds, lines gathered in one buffer, one write per answer, so that a test of 100 MB messages
measures mcprec, not the server. Answers initialize, tools/list, tools/call and ping; ignores
notifications.
"""

from __future__ import annotations

import base64
import os

import orjson

BLOCK = base64.b64encode(bytes(range(256)) * 12)


def image(size: int) -> bytes:
    return (BLOCK * (size // len(BLOCK) + 1))[:size]


def answer(msg: dict) -> bytes | None:
    method, rid = msg.get("method"), msg.get("id")
    if rid is None:
        return None
    head = b'{"jsonrpc":"2.0","id":' + orjson.dumps(rid) + b',"result":'
    if method == "initialize":
        result = orjson.dumps({"protocolVersion": msg["params"]["protocolVersion"],
                               "capabilities": {"tools": {}},
                               "serverInfo": {"name": "big-result", "version": "1.0"}})
    elif method == "tools/list":
        result = orjson.dumps({"tools": [{"name": "image", "inputSchema": {
            "type": "object", "properties": {"size": {"type": "integer"}}}}]})
    elif method == "tools/call" and msg["params"]["name"] == "upload":
        size = len(msg["params"]["arguments"]["data"])
        result = orjson.dumps({"content": [{"type": "text", "text": str(size)}]})
    elif method == "tools/call":
        size = int(msg["params"]["arguments"]["size"])
        result = b'{"content":[{"type":"image","data":"' + image(size) + \
            b'","mimeType":"image/png"}]}'
    else:
        result = b"{}"
    return head + result + b"}\n"


def main() -> None:
    buf = bytearray()
    while chunk := os.read(0, 1 << 20):
        buf += chunk
        if chunk.find(b"\n") < 0:
            continue
        *lines, rest = bytes(buf).split(b"\n")
        del buf[:len(buf) - len(rest)]
        for line in lines:
            out = answer(orjson.loads(line))
            view = memoryview(out or b"")
            while view:
                view = view[os.write(1, view):]


if __name__ == "__main__":
    main()
