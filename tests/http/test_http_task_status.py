"""Tasks over Streamable HTTP: status notifications the recorded server sent on its GET stream
reach a replay client that keeps none, on the stream of its blocking ``tasks/result``, which
is answered when the recorded task ended, not at once."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from support.helpers import PEERS
from support.http_helpers import start_everything, start_proxy, start_replay

from mcprec.cassette import open_cassette

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
TERMINAL = ("completed", "failed", "cancelled")


def _events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in text.splitlines()
            if line.startswith("data:") and line[5:].strip()]


def _post(c: httpx.Client, url: str, body: dict[str, Any], sid: str | None) -> httpx.Response:
    headers = {**HEADERS, **({"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
                             if sid else {})}
    return c.post(url, headers=headers, content=json.dumps(body))


def _no_get_stream_client(url: str) -> dict[str, Any]:
    """initialize, a task-augmented tools/call, then tasks/result at once (its params as the
    TypeScript SDK sends them, ``task`` copied in): what came on its stream, and when its
    answer came after the call."""
    with httpx.Client(timeout=60) as c:
        r = _post(c, url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}, None)
        sid = r.headers["mcp-session-id"]
        _post(c, url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
        started = time.monotonic()
        r = _post(c, url, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "simulate-research-query", "arguments": {"topic": "lint", "ambiguous": False},
            "task": {"ttl": 60000}}}, sid)
        created = next(e for e in _events(r.text) if "result" in e)
        task_id = created["result"]["task"]["taskId"]
        r = _post(c, url, {"jsonrpc": "2.0", "id": 2, "method": "tasks/result",
                           "params": {"taskId": task_id, "task": {"ttl": 60000}}}, sid)
        took = time.monotonic() - started
        events = _events(r.text) if r.text.startswith(("event", "id", "data", ":")) \
            else [r.json()]
    return {"statuses": [e["params"]["status"] for e in events
                         if e.get("method") == "notifications/tasks/status"],
            "answered": "result" in events[-1], "took": took}


def test_status_notifications_reach_a_client_without_a_get_stream(tmp_path: Path) -> None:
    """Recorded from the TypeScript SDK's task stream (status on the GET stream); replayed to a
    raw client with no GET stream: it gets the statuses up to the terminal one on its
    tasks/result stream, answered no earlier than the recorded task ended, within 1.5 s of it."""
    cassette = tmp_path / "task.db"
    upstream = start_everything("streamableHttp")
    try:
        proxy = start_proxy(upstream.url, cassette, "s")
        try:
            out = subprocess.run(["node", str(PEERS / "ts_task_client.mjs"), proxy.url],
                                 capture_output=True, text=True, timeout=120, check=True)
        finally:
            proxy.stop()
    finally:
        upstream.stop()
    assert json.loads(out.stdout)["seen"][-2:] == ["completed", "result"]
    with open_cassette(cassette) as c:
        messages = list(c.messages(c.session("s")))
    call = next(m for m in messages if m.method == "tools/call" and m.kind == "request")
    ended = next(m for m in messages if m.method == "notifications/tasks/status"
                 and m.json["params"]["status"] in TERMINAL)
    duration = (ended.t_ns - call.t_ns) / 1e9
    replay = start_replay(cassette, "s")
    try:
        got = _no_get_stream_client(replay.url)
    finally:
        replay.stop()
    assert got["answered"], got
    assert got["statuses"] and got["statuses"][-1] == "completed", got
    assert duration - 0.2 <= got["took"] <= duration + 1.5, (got, duration)
