"""A stdio MCP server broken on purpose, a peer for tests/check/test_check.py: it answers a method it
does not know with an empty result instead of -32601 (Method not found), and it ignores
``notifications/cancelled``: a cancelled ``sleep`` still sends its result. Everything else is
by the book, so that ``mcprec check`` fails exactly those two checks.

Run: ``python tests/peers/broken_server.py [--crash]``. Plain JSON-RPC on stdin/stdout, no
SDK. ``--crash``: worse, it exits with code 3 on a method it does not know.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

_out = threading.Lock()
CRASH = "--crash" in sys.argv[1:]
READ_ONLY = {"readOnlyHint": True}
TOOLS = [
    {"name": "echo", "description": "Echo the text back.", "annotations": READ_ONLY,
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"]}},
    {"name": "sleep", "description": "Sleep, reporting progress each step.",
     "annotations": READ_ONLY,
     "inputSchema": {"type": "object", "properties": {
         "steps": {"type": "integer", "default": 4},
         "delay_ms": {"type": "integer", "default": 200}}}},
]


def send(obj: dict[str, Any]) -> None:
    with _out:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def result(rid: Any, value: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": value})


def error(rid: Any, code: int, message: str) -> None:
    send({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})


def text(value: str, is_error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], **({"isError": True} if is_error
                                                             else {})}


def sleep(rid: Any, args: dict[str, Any], token: Any) -> None:
    steps, delay = int(args.get("steps", 4)), int(args.get("delay_ms", 200)) / 1000
    for i in range(1, steps + 1):
        time.sleep(delay)
        if token is not None:
            send({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": token, "progress": i, "total": steps}})
    result(rid, text(f"slept {steps} steps"))  # cancelled or not: the bug


def call(rid: Any, params: dict[str, Any]) -> None:
    name, args = params.get("name"), params.get("arguments") or {}
    if not isinstance(name, str):
        error(rid, -32602, "tools/call needs a tool name")
    elif name == "echo":
        if not isinstance(args.get("text"), str):
            result(rid, text("echo: text must be a string", is_error=True))
        else:
            result(rid, text(args["text"]))
    elif name == "sleep":
        if not all(isinstance(args.get(k, 1), int) for k in ("steps", "delay_ms")):
            result(rid, text("sleep: steps and delay_ms are integers", is_error=True))
            return
        token = (params.get("_meta") or {}).get("progressToken")
        threading.Thread(target=sleep, args=(rid, args, token), daemon=True).start()
    else:
        error(rid, -32602, f"Unknown tool: {name}")


def handle(msg: dict[str, Any]) -> None:
    method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method is None or "id" not in msg:
        return  # a response, or a notification: cancellation included, ignored
    if method == "initialize":
        result(rid, {"protocolVersion": params.get("protocolVersion", "2025-11-25"),
                     "capabilities": {"tools": {}},
                     "serverInfo": {"name": "broken-server", "version": "0.1.0"}})
    elif method == "ping":
        result(rid, {})
    elif method == "tools/list":
        result(rid, {"tools": TOOLS})
    elif method == "tools/call":
        call(rid, params)
    elif CRASH:
        sys.exit(3)
    else:
        result(rid, {})  # the bug: should be error -32601


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
            continue
        if isinstance(msg, dict):
            handle(msg)


if __name__ == "__main__":
    main()
