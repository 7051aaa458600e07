"""Lint on real traffic: recordings of real peers lint clean (no false positives), what the
TypeScript schema allows is allowed, a newer feature is named as one, and the rules for sampling
with tools, task results and base64 data catch what they are for."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

from support.helpers import EVERYTHING_DIR, PEERS
from support.http_helpers import start_proxy, start_sdk_http

from mcprec.lint import LintOptions, lint
from mcprec.record.writer import open_session_writer

MCPREC = [sys.executable, "-m", "mcprec"]
NO_CONFIG = LintOptions(use_config=False)
C2S, S2C = "client_to_server", "server_to_client"


def _found(path: Path) -> list[tuple[str, str | None, str]]:
    return [(f.code, f.method, f.message) for f in lint([path], options=NO_CONFIG).findings]


def test_typescript_task_client_lints_clean(tmp_path: Path) -> None:
    """The TypeScript SDK's task stream against server-everything: its tasks/get params carry
    `task` too, and the GetTaskResult answers are no SCH002."""
    cassette = tmp_path / "ts-task.db"
    index = EVERYTHING_DIR / "dist" / "index.js"
    out = subprocess.run(["node", str(PEERS / "ts_task_client.mjs"), *MCPREC, "record", "-c",
                          str(cassette), "-s", "t", "--", "node", str(index), "stdio"],
                         capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout)["seen"][-2:] == ["completed", "result"]
    result = lint([cassette], options=NO_CONFIG)
    assert result.sessions[0].messages >= 15
    assert [(f.code, f.method, f.message) for f in result.findings] == []


async def _stateless_client(url: str) -> None:
    from mcp.client import Client

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        async with Client(url, mode="2026-07-28") as c:  # type: ignore[arg-type]
            await c.list_tools()
            await c.call_tool("add", {"a": 2, "b": 3})


def test_stateless_http_clients_reusing_ids_lint_clean(tmp_path: Path) -> None:
    """Two 2026-07-28 clients of a stateless server, both starting their ids at 1, recorded in
    one session: no ID003, the revision has no sessions."""
    cassette = tmp_path / "stateless.db"
    live = start_sdk_http("--stateless")
    try:
        proxy = start_proxy(live.url, cassette, "s")
        try:
            for _ in range(2):
                asyncio.run(_stateless_client(proxy.url))
        finally:
            proxy.stop()
    finally:
        live.stop()
    result = lint([cassette], options=NO_CONFIG)
    assert result.sessions[0].version == "2026-07-28"
    assert [(f.code, f.method, f.message) for f in result.findings] == []


# --- sessions written directly ----------------------------------------------------------------


def _write(path: Path, version: str, client_caps: Any, server_caps: Any,
           messages: list[tuple[str, Any]]) -> Path:
    w = open_session_writer(path, "s", transport="stdio", target=["x"])
    opening = [
        (C2S, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": client_caps,
            "clientInfo": {"name": "c", "version": "1"}}}),
        (S2C, {"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": version, "capabilities": server_caps,
            "serverInfo": {"name": "s", "version": "1"}}}),
        (C2S, {"jsonrpc": "2.0", "method": "notifications/initialized"})]
    for i, (direction, obj) in enumerate([*opening, *messages]):
        w.message(direction, json.dumps(obj).encode(), (i + 1) * 1000)
    w.close()
    return path


def _call(rid: int, result: Any, **params: Any) -> list[tuple[str, Any]]:
    return [(C2S, {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                   "params": {"name": "t", "arguments": {}, **params}}),
            (S2C, {"jsonrpc": "2.0", "id": rid, "result": result})]


def test_typescript_numbers_win(tmp_path: Path) -> None:
    """A resource size of 95.5 and a completion total of 3.14 (schema.json: integer; the
    TypeScript schema: number) are no SCH002."""
    path = _write(tmp_path / "n.db", "2025-11-25", {}, {"resources": {}, "completions": {}}, [
        (C2S, {"jsonrpc": "2.0", "id": 1, "method": "resources/list"}),
        (S2C, {"jsonrpc": "2.0", "id": 1, "result": {"resources": [
            {"uri": "file:///a", "name": "a", "size": 95.5}]}}),
        (C2S, {"jsonrpc": "2.0", "id": 2, "method": "completion/complete", "params": {
            "ref": {"type": "ref/prompt", "name": "p"},
            "argument": {"name": "x", "value": ""}}}),
        (S2C, {"jsonrpc": "2.0", "id": 2, "result": {"completion": {
            "values": [], "total": 3.14}}})])
    assert _found(path) == []


def test_newer_feature_is_named_with_its_revision(tmp_path: Path) -> None:
    """A 2025-11-25 URL elicitation in a 2025-06-18 session is named as a 2025-11-25 feature."""
    path = _write(tmp_path / "url.db", "2025-06-18", {"elicitation": {}}, {"tools": {}}, [
        (S2C, {"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create", "params": {
            "mode": "url", "message": "Sign in", "url": "https://example.com/login",
            "elicitationId": "x1"}}),
        (C2S, {"jsonrpc": "2.0", "id": "e1", "result": {"action": "accept"}})])
    found = _found(path)
    assert found and all(c == "SCH001" for c, _, _ in found), found
    assert all("a 2025-11-25 feature in a 2025-06-18 session" in m for _, _, m in found)


def test_sampling_tools_needs_its_capability(tmp_path: Path) -> None:
    """sampling/createMessage with tools: CAP005 to a client without sampling.tools, nothing
    to one with it."""
    def session(caps: Any, name: str) -> Path:
        return _write(tmp_path / name, "2025-11-25", {"sampling": caps}, {"tools": {}}, [
            (S2C, {"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage",
                   "params": {"messages": [], "maxTokens": 10,
                              "tools": [{"name": "t", "inputSchema": {"type": "object"}}]}}),
            (C2S, {"jsonrpc": "2.0", "id": "s1", "result": {
                "role": "assistant", "content": {"type": "text", "text": "hi"},
                "model": "m"}})])

    assert [c for c, _, _ in _found(session({}, "without.db"))] == ["CAP005"]
    assert _found(session({"tools": {}}, "with.db")) == []


def test_task_result_needs_the_tasks_capability(tmp_path: Path) -> None:
    """A CreateTaskResult from a server without tasks: CAP006; with it: nothing."""
    task = {"task": {"taskId": "t1", "status": "working", "ttl": 1000,
                     "createdAt": "2025-11-25T00:00:00Z",
                     "lastUpdatedAt": "2025-11-25T00:00:00Z"}}

    def session(caps: Any, name: str) -> Path:
        return _write(tmp_path / name, "2025-11-25", {}, caps,
                      _call(1, task, task={"ttl": 1000}))

    assert [c for c, _, _ in _found(session({"tools": {}}, "without.db"))] == ["CAP006"]
    assert _found(session({"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}},
                          "with.db")) == []


def test_base64_data(tmp_path: Path) -> None:
    """Image and audio data and a resource blob that are not base64: SCH008 at each path;
    base64 ones: nothing."""
    bad = {"content": [
        {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo=?"},
        {"type": "audio", "mimeType": "audio/wav", "data": "UklGR"},
        {"type": "resource", "resource": {"uri": "file:///b", "blob": "not base64"}}]}
    path = _write(tmp_path / "b.db", "2025-11-25", {}, {"tools": {}}, _call(1, bad))
    findings = lint([path], options=NO_CONFIG).findings
    assert [(f.code, f.path) for f in findings] == [
        ("SCH008", "$.result.content[0].data"), ("SCH008", "$.result.content[1].data"),
        ("SCH008", "$.result.content[2].resource.blob")]
    good = {"content": [{"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
                        {"type": "resource", "resource": {"uri": "file:///b", "blob": ""}}]}
    assert _found(_write(tmp_path / "g.db", "2025-11-25", {}, {"tools": {}},
                         _call(1, good))) == []
