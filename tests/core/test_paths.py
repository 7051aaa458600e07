"""The paths mcprec prints (replay's no-match report, the diff) pasted into --ignore ignore
exactly what they name, keys with dots and slashes included."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from support.helpers import LINE_SERVER, run_mcprec
from mcprec.record.writer import open_session_writer
from mcprec.jsonpath import format_path, join_key

KEY = "io.example/key"


def lines(*messages: Any) -> bytes:
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def conversation(value: str) -> bytes:
    """initialize, then one tools/call whose arguments hold ``KEY: value``."""
    return lines(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "lookup", "arguments": {"city": "Paris", KEY: value}}},
    )


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A real recording (line_server behind `mcprec record`) of a call with KEY: "v1"."""
    cassette = tmp_path / "paths.db"
    live = run_mcprec("record", "-c", str(cassette), "-s", "s", "--",
                      sys.executable, str(LINE_SERVER), input=conversation("v1"))
    assert live.returncode == 0, live.stderr
    return cassette


def answers(stdout: bytes) -> dict[Any, Any]:
    return {m["id"]: m for m in map(json.loads, stdout.splitlines())}


@pytest.mark.parametrize("steps, text", [
    (("params", "arguments", "city"), "params.arguments.city"),
    (("params", "arguments", KEY), 'params.arguments["io.example/key"]'),
    (("result", "content", 0, "text"), "result.content[0].text"),
    (("a-b", "_c", "*", "", "0"), 'a-b._c["*"][""]["0"]'),
])
def test_simple_keys_stay_plain_and_others_are_quoted(steps: tuple[Any, ...], text: str) -> None:
    """Plain keys print as before (docs and reports unchanged); only keys that need it are quoted."""
    assert format_path(steps, root="") == text
    assert format_path(steps) == "$." + text


def test_join_key_from_the_root() -> None:
    """A first key needing quotes goes in brackets with no dot before it."""
    assert join_key("", KEY) == '["io.example/key"]'
    assert join_key("$", KEY) == '$["io.example/key"]'


def test_no_match_report_path_pasted_into_ignore_ignores_that_field(recorded: Path) -> None:
    """The report names the dotted key so that --ignore, given that very text, matches."""
    miss = run_mcprec("replay", str(recorded), input=conversation("v2"))
    assert miss.returncode == 3, miss.stderr
    report = [line.strip() for line in miss.stderr.decode().splitlines()
              if ": recorded " in line]
    assert report == ['params.arguments["io.example/key"]: recorded "v1", got "v2"']
    path = report[0].split(": recorded ")[0]

    hit = run_mcprec("replay", str(recorded), "--ignore", path, input=conversation("v2"))
    assert hit.returncode == 0, hit.stderr
    assert answers(hit.stdout)[2]["result"] == {"echo": "tools/call", "n": 3}


def test_diff_path_pasted_into_ignore_makes_the_sessions_equal(tmp_path: Path) -> None:
    """A diff path through a dotted key, given back to --ignore, hides that difference."""
    cassette = tmp_path / "d.db"
    for session, value in (("a", "v1"), ("b", "v2")):
        writer = open_session_writer(cassette, session, transport="stdio", target=["x"])
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "lookup", "arguments": {}}}
        answer = {"jsonrpc": "2.0", "id": 1, "result": {
            "content": [], "structuredContent": {KEY: value, "city": "Paris"}}}
        writer.message("client_to_server", json.dumps(request).encode(), 1_000)
        writer.message("server_to_client", json.dumps(answer).encode(), 2_000)
        writer.close()
    report = run_mcprec("diff", f"{cassette}:a", f"{cassette}:b", "--format", "json",
                        cwd=tmp_path)
    assert report.returncode == 1, report.stderr
    (exchange,) = json.loads(report.stdout)["exchanges"]
    (path,) = [d["path"] for d in exchange["differences"]]
    assert path == '$.result.structuredContent["io.example/key"]'
    ignored = run_mcprec("diff", f"{cassette}:a", f"{cassette}:b", "--ignore", path,
                         cwd=tmp_path)
    assert ignored.returncode == 0, ignored.stdout + ignored.stderr
