"""Helpers for the tests of `mcprec view`: real recordings, a running view, headless Chromium.

``recordings()`` records tests/peers/sdk_server.py twice into one cassette with the SDK client
(sessions ``v1`` and ``v2``: the server's two releases), once per test process. ``gallery()``
writes a cassette of edge cases with the cassette writer: an image and audio in results, a
secret left unredacted, a stderr line, a transport failure, an integer past 64 bits.
"""

from __future__ import annotations

import base64
import os
import sqlite3
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from support.helpers import MCPREC, SDK_SERVER, sqlite
from support.replay_helpers import Run, drive, main_scenario

CHROMIUM = os.environ.get("MCPREC_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a GitHub token's shape, not a token


async def view_scenario(s: Any, run: Run) -> None:
    """The main SDK scenario, then calls whose answers change from v1 to v2."""
    await main_scenario(s, run)
    run.results["forecast"] = await s.call_tool("forecast", {"city": "Paris"})
    run.results["greet"] = await s.call_tool("greet", {"name": "Ann"})


_recorded: dict[str, Path] = {}


def recordings(tmp: Path) -> Path:
    """A cassette holding sessions ``v1`` and ``v2`` of the SDK server, recorded through
    `mcprec record` (made once per process; each caller gets a copy of its own)."""
    if "cassette" not in _recorded:
        cassette = tmp / "recorded" / "sdk.db"
        cassette.parent.mkdir(parents=True, exist_ok=True)
        for variant in ("v1", "v2"):
            drive([*MCPREC, "record", "-c", str(cassette), "-s", variant, "--",
                   sys.executable, str(SDK_SERVER)], view_scenario,
                  env={"MCPREC_TEST_SERVER_VARIANT": variant})
        _recorded["cassette"] = cassette
    copy = tmp / f"sdk-{len(list(tmp.glob('sdk-*.db')))}.db"
    # SQLite's backup: what is still in the source's WAL comes along
    with sqlite(_recorded["cassette"]) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    src.close()
    dst.close()
    return copy


def _png(width: int = 120, height: int = 80) -> bytes:
    """A small PNG: a gradient from blue to green."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    rows = b"".join(b"\x00" + b"".join(bytes((40, 80 + x, 255 - 2 * y)) for x in range(width))
                    for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def _wav(samples: int = 8000) -> bytes:
    data = bytes(128 + (40 if (i // 20) % 2 else -40) for i in range(samples))
    return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt "
            + struct.pack("<IHHIIHH", 16, 1, 1, 8000, 8000, 1, 8) + b"data"
            + struct.pack("<I", len(data)) + data)


BIG = 2**70


def gallery(path: Path) -> Path:
    """A session of edge cases, written with the cassette writer and no redaction."""
    from mcprec.record.writer import open_session_writer

    w = open_session_writer(path, "gallery", transport="stdio", target=["gallery-server"])
    t = 0

    def send(direction: str, obj: Any, http: dict[str, Any] | None = None) -> None:
        nonlocal t
        t += 2_000_000
        raw = obj if isinstance(obj, bytes) else orjson.dumps(obj, option=orjson.OPT_PASSTHROUGH_DATACLASS)
        w.message(direction, raw, t, http=http)

    c2s, s2c = "client_to_server", "server_to_client"
    send(c2s, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "gallery-client", "version": "1"}}})
    send(s2c, {"jsonrpc": "2.0", "id": 1, "result": {
        "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
        "serverInfo": {"name": "gallery-server", "version": "0.1"}}})
    send(c2s, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    send(c2s, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "picture", "arguments": {}}})
    send(s2c, {"jsonrpc": "2.0", "id": 2, "result": {"content": [
        {"type": "image", "mimeType": "image/png", "data": base64.b64encode(_png()).decode()},
        {"type": "audio", "mimeType": "audio/wav", "data": base64.b64encode(_wav()).decode()},
    ]}})
    send(c2s, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "whoami", "arguments": {}}})
    send(s2c, {"jsonrpc": "2.0", "id": 3, "result": {"content": [
        {"type": "text", "text": f"your token is {SECRET}"}]}})
    w.stderr_line(f"debug: using {SECRET}".encode(), t + 1)
    send(c2s, {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
               "params": {"name": "big", "arguments": {}}})
    send(s2c, f'{{"jsonrpc":"2.0","id":4,"result":{{"content":[],"structuredContent":'
              f'{{"n":{BIG}}}}}}}'.encode())
    send(c2s, {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
               "params": {"name": "broken", "arguments": {}}})
    send(s2c, {"jsonrpc": "2.0", "id": 5, "error": {"code": -32603, "message": "it broke"}})
    send(s2c, b"", http={"synthetic": True, "error": "upstream dropped the stream: closed"})
    send(c2s, {"jsonrpc": "2.0", "id": 6, "method": "tools/call",
               "params": {"name": "login", "arguments": {"token": SECRET}}})
    send(s2c, {"jsonrpc": "2.0", "id": 6, "error": {"code": -32000, "message": f"bad {SECRET}"}})
    w.close(exit_code=0)
    return path


@contextmanager
def running_view(cassette: Path, *args: str) -> Iterator[str]:
    """`mcprec view CASSETTE --no-open ARGS` in a child process; yields the URL it prints."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPREC_")}
    proc = subprocess.Popen([*MCPREC, "view", str(cassette), "--no-open", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()
        if not line.startswith("http://"):
            proc.kill()
            raise AssertionError(f"mcprec view printed {line!r}; stderr: "
                                 f"{proc.stderr.read().decode() if proc.stderr else ''}")
        yield line
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def base_of(url: str) -> str:
    """``http://127.0.0.1:PORT/#/s/1`` -> ``http://127.0.0.1:PORT/``."""
    return url.split("#", 1)[0]
