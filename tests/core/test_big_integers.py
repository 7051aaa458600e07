"""Integers past 64 bits (which orjson cannot write, and reads rounded): recorded exactly
beside a redacted secret, and through `mcprec diff` (requests aligned with --ignore, the JSON
report, JSON held in strings)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from support.helpers import LINE_SERVER, run_mcprec
from mcprec.cassette import Cassette
from mcprec.record.writer import open_session_writer

BIG = 2**70 + 1  # 1180591620717411303425: a float would make it ...303424


def call(x: int, n: int) -> bytes:
    """A conversation: initialize, then one tools/call with arguments x and n."""
    messages: list[Any] = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "count", "arguments": {"x": x, "n": n}}},
    ]
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def test_redacted_request_keeps_its_big_integer_exact(tmp_path: Path) -> None:
    """A password is redacted by key, and the 70-bit integer beside it is recorded as sent."""
    cassette = tmp_path / "secret.db"
    request = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "login", "arguments": {"password": "hunter22", "n": BIG}}}
    live = run_mcprec("record", "-c", str(cassette), "--", sys.executable, str(LINE_SERVER),
                      input=json.dumps(request).encode() + b"\n")
    assert live.returncode == 0, live.stderr
    with Cassette.open(cassette) as c:
        (recorded,) = [m for m in c.messages(c.session()) if m.kind == "request"]
    assert json.loads(recorded.raw)["params"]["arguments"] == {"password": "[REDACTED]", "n": BIG}


def test_ignore_aligns_requests_that_carry_big_integers(tmp_path: Path) -> None:
    """Recorded calls differing only in an ignored argument, beside a 70-bit one, diff equal."""
    cassette = tmp_path / "big.db"
    for session, x in (("a", 1), ("b", 2)):
        live = run_mcprec("record", "-c", str(cassette), "-s", session, "--",
                          sys.executable, str(LINE_SERVER), input=call(x, BIG))
        assert live.returncode == 0, live.stderr
    ignored = run_mcprec("diff", f"{cassette}:a", f"{cassette}:b",
                         "--ignore", "params.arguments.x", cwd=tmp_path)
    assert (ignored.returncode, ignored.stderr) == (0, b"")
    apart = run_mcprec("diff", f"{cassette}:a", f"{cassette}:b", "--format", "json",
                       cwd=tmp_path)
    assert apart.returncode == 1, apart.stderr
    assert {e["status"] for e in json.loads(apart.stdout)["exchanges"]} == {"only_a", "only_b"}


def write(cassette: Path, session: str, answer: Any) -> None:
    """One tools/call and its answer, written with the cassette writer."""
    w = open_session_writer(cassette, session, transport="stdio", target=["x"])
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "count", "arguments": {}}}
    w.message("client_to_server", json.dumps(request).encode(), 1_000)
    w.message("server_to_client", json.dumps(
        {"jsonrpc": "2.0", "id": 1, "result": answer}).encode(), 2_000)
    w.close()


@pytest.mark.parametrize("before, after, path", [
    ({"structuredContent": {"n": BIG}}, {"structuredContent": {"n": BIG + 1}},
     "$.result.structuredContent.n"),
    ({"content": [{"type": "text", "text": json.dumps({"n": BIG})}]},  # rounded, both read 2**70
     {"content": [{"type": "text", "text": json.dumps({"n": BIG + 1})}]},
     "$.result.content[0].text.n"),
])
def test_json_report_shows_big_integers_exactly(tmp_path: Path, before: Any, after: Any,
                                                path: str) -> None:
    """Answers one apart at 70 bits differ, and the JSON report gives both values exactly."""
    cassette = tmp_path / "big.db"
    write(cassette, "a", before)
    write(cassette, "b", after)
    report = run_mcprec("diff", f"{cassette}:a", f"{cassette}:b", "--format", "json",
                        cwd=tmp_path)
    assert report.returncode == 1, report.stderr
    (exchange,) = json.loads(report.stdout)["exchanges"]
    assert [(d["path"], d["before"], d["after"]) for d in exchange["differences"]] == [
        (path, BIG, BIG + 1)]
    text = run_mcprec("diff", f"{cassette}:a", f"{cassette}:b", cwd=tmp_path)
    assert text.returncode == 1 and f"{BIG + 1}".encode() in text.stdout, text.stderr
