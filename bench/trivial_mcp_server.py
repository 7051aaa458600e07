"""A trivial live MCP server over stdio, written with the standard library alone: it answers
``initialize``, ``ping``, ``tools/list`` and ``tools/call`` (echoing the arguments as text), one
line at a time. The live baseline of ``bench_pytest.py``: the cheapest real server a test suite
could talk to."""

from __future__ import annotations

import json
import sys

TOOLS = [{"name": "echo", "description": "Echo the arguments.",
          "inputSchema": {"type": "object"}}]


def answer(msg: dict) -> dict | None:
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}}, "serverInfo": {"name": "trivial", "version": "1"}}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        return {"content": [{"type": "text", "text": json.dumps(params.get("arguments"))}]}
    return {}


def main() -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" in msg and "method" in msg:
            out = {"jsonrpc": "2.0", "id": msg["id"], "result": answer(msg)}
            sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
