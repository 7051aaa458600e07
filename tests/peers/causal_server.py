"""A stdio JSON-RPC server with no SDK, for replay's endings and causality.

Line by line, answering at once unless told otherwise:

- ``initialize`` and ``ping``: answered (a ping right after ``notifications/initialized`` is
  answered only after the server has asked the client for its roots, without waiting for them);
- ``tools/call`` by tool name:
  ``ask``      asks the client ``roots/list`` and answers the call only after the client's answer;
  ``cancel``   answers nothing until the client cancels it, then answers with an error;
  ``crash``    writes a line to stderr and exits with code 42, answering nothing;
  ``hang``     answers nothing, ever;
  ``big``      answers with ``size`` bytes of text (default 5000);
  anything else: ``{"content": [{"type": "text", "text": "<name>"}]}``.
"""

from __future__ import annotations

import json
import sys


def send(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def text(rid: object, value: str) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": value}]}})


def main() -> int:
    sys.stderr.write("causal server starting\n")
    sys.stderr.flush()
    initialized = False
    asked: dict[str, object] = {}  # roots/list id -> the tools/call id waiting for it
    cancellable: set[str] = set()
    n = 0
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        params = msg.get("params") or {}
        if method is None:  # the client's answer to one of our requests
            waiting = asked.pop(json.dumps(rid), None)
            if waiting is not None:
                roots = (msg.get("result") or {}).get("roots", [])
                text(waiting, f"{len(roots)} roots")
            continue
        if method == "notifications/initialized":
            initialized = True
            continue
        if method == "notifications/cancelled":
            target = json.dumps(params.get("requestId"))
            if target in cancellable:
                cancellable.discard(target)
                send({"jsonrpc": "2.0", "id": params.get("requestId"),
                      "error": {"code": -32800, "message": "Request cancelled"}})
            continue
        if rid is None:
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}}, "serverInfo": {"name": "causal", "version": "1"}}})
        elif method == "ping":
            if initialized:
                initialized = False
                send({"jsonrpc": "2.0", "id": "roots-0", "method": "roots/list"})
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif method == "tools/call":
            name = params.get("name")
            if name == "ask":
                n += 1
                asked[json.dumps(f"roots-{n}")] = rid
                send({"jsonrpc": "2.0", "id": f"roots-{n}", "method": "roots/list"})
            elif name == "cancel":
                cancellable.add(json.dumps(rid))
            elif name == "crash":
                sys.stderr.write("fatal: crash requested\n")
                sys.stderr.flush()
                return 42
            elif name == "hang":
                pass
            elif name == "big":
                text(rid, "x" * int((params.get("arguments") or {}).get("size", 5000)))
            else:
                text(rid, str(name))
        else:
            send({"jsonrpc": "2.0", "id": rid,
                  "error": {"code": -32601, "message": f"Method not found: {method}"}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
