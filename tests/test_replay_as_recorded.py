"""A request recorded just as it comes is matched without redacting it again; one holding a
secret is still redacted first, and matches the redacted recording."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from mcprec import wire
from mcprec.cassette import open_session_writer
from mcprec.redact import default_redactor

SECRET = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3"


def _request(i: int, text: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                         "params": {"name": "echo", "arguments": {"text": text}}})


def _answer(i: int, text: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": i,
                         "result": {"content": [{"type": "text", "text": text}]}})


INIT = orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"}}})
INIT_ANSWER = orjson.dumps({"jsonrpc": "2.0", "id": 0, "result": {
    "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
    "serverInfo": {"name": "echo", "version": "1"}}})


def _cassette(path: Path) -> None:
    w = open_session_writer(path, "s", transport="stdio", target=["echo"],
                            redact=default_redactor())
    w.message(wire.CLIENT_TO_SERVER, INIT, 0)
    w.message(wire.SERVER_TO_CLIENT, INIT_ANSWER, 10)
    for i, text in enumerate(["plain", f"key {SECRET}"], start=1):
        w.message(wire.CLIENT_TO_SERVER, _request(i, text), 100 * i)
        w.message(wire.SERVER_TO_CLIENT, _answer(i, f"answer {i}"), 100 * i + 50)
    w.close()


def _replay(cassette: Path, *requests: bytes) -> tuple[list[dict], set[str]]:
    """The answers, and the modules the replay imported."""
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "mcprec", "replay",
                        str(cassette)], input=b"".join(r + b"\n" for r in (INIT, *requests)),
                       capture_output=True, timeout=60, check=False)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.decode().splitlines()
                if line.startswith("import time:")}
    return [orjson.loads(line) for line in p.stdout.splitlines()], imported


def _text(answer: dict) -> str:
    return answer["result"]["content"][0]["text"]


def test_requests_as_recorded_match_without_the_redactor(tmp_path: Path) -> None:
    """Requests identical to the recorded ones (one plain, one as stored, placeholder and all)
    are answered without the redaction rules ever being loaded."""
    cassette = tmp_path / "c.db"
    _cassette(cassette)
    as_stored = default_redactor().redact(_request(12, f"key {SECRET}"))
    assert SECRET.encode() not in as_stored
    answers, imported = _replay(cassette, _request(11, "plain"), as_stored)
    assert [a["id"] for a in answers] == [0, 11, 12]
    assert [_text(a) for a in answers[1:]] == ["answer 1", "answer 2"]
    assert "mcprec.redact" not in imported


def test_a_request_holding_a_secret_is_redacted_and_matched(tmp_path: Path) -> None:
    """The client sends the secret the recording had redacted: it is redacted on arrival and
    matches; a request recorded as it was still matches beside it."""
    cassette = tmp_path / "c.db"
    _cassette(cassette)
    answers, imported = _replay(cassette, _request(21, f"key {SECRET}"), _request(22, "plain"))
    assert [(a["id"], _text(a)) for a in answers[1:]] == [(21, "answer 2"), (22, "answer 1")]
    assert "mcprec.redact" in imported
