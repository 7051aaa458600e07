"""``mcprec replay --http`` of a cassette found corrupt while serving: one line on stderr, a
JSON-RPC error the client can read (not a bare 500), and a non-zero exit, as over stdio."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import httpx
import orjson
from support.helpers import MCPREC
from support.http_helpers import start_replay

from mcprec import wire
from mcprec.record.writer import open_session_writer

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"}}}
CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "big", "arguments": {}}}
PAGE = 16384


def _corrupt_cassette(path: Path) -> None:
    """A session whose tools/call answer (600 KB, many overflow pages) has a broken page."""
    w = open_session_writer(path, "s", transport="stdio", target=["big"])
    w.message(wire.CLIENT_TO_SERVER, orjson.dumps(INIT), 0)
    w.message(wire.SERVER_TO_CLIENT, orjson.dumps({"jsonrpc": "2.0", "id": 0, "result": {
        "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
        "serverInfo": {"name": "big", "version": "1"}}}), 10)
    w.message(wire.CLIENT_TO_SERVER, orjson.dumps(CALL), 100)
    w.message(wire.SERVER_TO_CLIENT, orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": "x" * 600_000}]}}), 200)
    w.close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(path.read_bytes())
    middle = len(data) // PAGE // 2 * PAGE  # an overflow page of the answer: its next-page link
    data[middle:middle + 4] = b"\xff\xff\xff\x7f"
    path.write_bytes(bytes(data))


def test_a_cassette_found_corrupt_while_serving_is_said_and_answered(tmp_path: Path) -> None:
    cassette = tmp_path / "c.db"
    _corrupt_cassette(cassette)
    # the same cassette over stdio: the one-line error and exit 1 this test holds HTTP to
    stdio = subprocess.run([*MCPREC, "replay", str(cassette)], capture_output=True, timeout=60,
                           input=orjson.dumps(INIT) + b"\n" + orjson.dumps(CALL) + b"\n",
                           check=False)
    assert stdio.returncode == 1 and b"corrupt" in stdio.stderr, stdio.stderr
    proc = start_replay(cassette)
    try:
        headers = {"accept": "application/json, text/event-stream"}
        with httpx.Client(timeout=30) as client:
            first = client.post(proc.url, json=INIT, headers=headers)
            assert first.status_code == 200, first.text
            sid = first.headers["mcp-session-id"]
            answer = client.post(proc.url, json=CALL, headers={**headers, "mcp-session-id": sid})
        assert answer.status_code == 500
        error = answer.json()["error"]
        assert error["code"] == -32603 and "is corrupt or truncated" in error["message"], error
    finally:
        code, _ = proc.stop()
    said = [line for line in proc.err if "is corrupt or truncated" in line]
    assert len(said) == 1 and "Traceback" not in proc.stderr_text(), proc.stderr_text()
    assert code == 1, (code, proc.stderr_text())


