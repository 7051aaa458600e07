"""Replay as a server of the recorded revision: a stateless (2026-07-28) recording refuses what
the live SDK server refuses, with its HTTP status and JSON-RPC code; a client of another era is
told the recorded revision."""

from __future__ import annotations

import asyncio
import json
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.helpers import SDK_SERVER
from support.http_helpers import start_proxy, start_replay, start_sdk_http

MCPREC = [sys.executable, "-m", "mcprec"]
V = "2026-07-28"
ACCEPT = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def _meta(version: str = V) -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"}}


def _call(headers: dict[str, str], **params: Any) -> tuple[dict[str, str], dict[str, Any]]:
    return ({"MCP-Protocol-Version": V, "Mcp-Method": "tools/call", **headers},
            {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
             "params": {"name": "add", "arguments": {"a": 2, "b": 3}, **params}})


PROBES: dict[str, tuple[dict[str, str], dict[str, Any]]] = {
    "a version never spoken": (
        {"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list",
         "params": {"_meta": _meta("2099-01-01")}}),
    "no envelope": ({"MCP-Protocol-Version": V, "Mcp-Method": "tools/list"},
                    {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
    "Mcp-Name not the body's": _call({"Mcp-Name": "subtract"}, _meta=_meta()),
    "ping": ({"MCP-Protocol-Version": V, "Mcp-Method": "ping"},
             {"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"_meta": _meta()}}),
    # and the other checks on the way, in the live server's order
    "header version not the envelope's": (
        {"MCP-Protocol-Version": V, "Mcp-Method": "tools/list"},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/list",
         "params": {"_meta": _meta("2099-01-01")}}),
    "Mcp-Method not the body's": _call({"Mcp-Method": "tools/list", "Mcp-Name": "add"},
                                       _meta=_meta()),
    "no Mcp-Name": _call({}, _meta=_meta()),
    "Mcp-Name in base64": _call({"Mcp-Name": "=?base64?YWRk?="}, _meta=_meta()),
    "logging/setLevel": ({"MCP-Protocol-Version": V, "Mcp-Method": "logging/setLevel"},
                         {"jsonrpc": "2.0", "id": 9, "method": "logging/setLevel",
                          "params": {"level": "info", "_meta": _meta()}}),
}
EXPECTED = {"a version never spoken": (400, -32022), "no envelope": (400, -32602),
            "Mcp-Name not the body's": (400, -32020), "ping": (404, -32601)}


def _probe(url: str, name: str) -> tuple[int, int | None]:
    headers, body = PROBES[name]
    r = httpx.post(url, headers={**ACCEPT, **headers}, content=json.dumps(body), timeout=10)
    text = r.text
    if text.startswith("event:") or "\ndata:" in text:
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    answer = json.loads(text)
    return r.status_code, (answer.get("error") or {}).get("code")


async def _stateless_client(url: str) -> list[str]:
    from mcp.client import Client

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        async with Client(url, mode=V) as c:  # type: ignore[arg-type]
            tools = await c.list_tools()
            await c.call_tool("add", {"a": 2, "b": 3})
    return sorted(t.name for t in tools.tools)


@pytest.fixture(scope="module")
def stateless_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The live stateless SDK server, and the replay of a 2026-07-28 client's session with it."""
    cassette = tmp_path_factory.mktemp("era") / "era.db"
    live = start_sdk_http("--stateless")
    replay = None
    try:
        proxy = start_proxy(live.url, cassette, "s")
        try:
            asyncio.run(_stateless_client(proxy.url))
        finally:
            proxy.stop()
        replay = start_replay(cassette, "s")
        yield live.url, replay.url
    finally:
        if replay is not None:
            replay.stop()
        live.stop()


@pytest.mark.parametrize("name", list(PROBES))
def test_probe_gets_the_live_status_and_code(stateless_http: tuple[str, str], name: str) -> None:
    """Each raw 2026-07-28 probe gets from replay the HTTP status and JSON-RPC code live gives."""
    live, replayed = stateless_http
    got_live = _probe(live, name)
    if name in EXPECTED:
        assert got_live == EXPECTED[name]
    assert _probe(replayed, name) == got_live


def test_stateless_client_replays(stateless_http: tuple[str, str]) -> None:
    """The recorded 2026-07-28 client still gets its answers, the checks passed."""
    live, replayed = stateless_http
    assert asyncio.run(_stateless_client(replayed)) == asyncio.run(_stateless_client(live))


async def _pinned(argv: list[str], mode: str) -> Any:
    from mcp import StdioServerParameters
    from mcp.client import Client

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            async with Client(StdioServerParameters(command=argv[0], args=argv[1:]),
                              mode=mode) as c:  # type: ignore[arg-type]
                return [t.name for t in (await c.list_tools()).tools]
        except BaseException as e:  # noqa: BLE001 - the SDK wraps it in exception groups
            while isinstance(e, BaseExceptionGroup):
                e = e.exceptions[0]
            return e


def test_client_of_another_era_is_told_the_recorded_revision(tmp_path: Path) -> None:
    """A client pinned to 2026-07-28 replaying a 2025-11-25 recording gets -32022 naming the
    recorded revision, one line on stderr, and an entry in --report."""
    cassette = tmp_path / "legacy.db"
    assert isinstance(asyncio.run(_pinned([*MCPREC, "record", "-c", str(cassette), "-s", "old",
                                           "--", sys.executable, str(SDK_SERVER)], "legacy")),
                      list)
    report = tmp_path / "report.json"
    stderr = tmp_path / "stderr.txt"
    wrapper = ["/bin/sh", "-c", f'exec "$@" 2>>{stderr}', "sh",
               *MCPREC, "replay", str(cassette), "-s", "old", "--report", str(report)]
    error = asyncio.run(_pinned(wrapper, V))
    assert getattr(error, "code", None) == -32022
    assert getattr(error, "data", None) == {"supported": ["2025-11-25"], "requested": V}
    assert "2025-11-25" in str(error)
    lines = [line for line in stderr.read_text().splitlines() if "2026-07-28" in line]
    assert len(lines) == 1 and "2025-11-25" in lines[0], lines
    written = json.loads(report.read_text())
    assert written["other_era"] == {"client": V, "recorded": ["2025-11-25"]}
    assert written["refused"][0]["code"] == -32022


def test_legacy_client_still_bridged_to_a_stateless_recording(tmp_path: Path) -> None:
    """An initialize-era client of a stateless stdio recording is answered, as the SDK server
    answers both eras; a stateless one gets -32601 for ping, as live."""
    cassette = tmp_path / "s.db"
    live = asyncio.run(_pinned([*MCPREC, "record", "-c", str(cassette), "-s", "new", "--",
                                sys.executable, str(SDK_SERVER)], "auto"))
    assert isinstance(live, list)
    assert asyncio.run(_pinned([*MCPREC, "replay", str(cassette)], "legacy")) == live
    assert asyncio.run(_pinned([*MCPREC, "replay", str(cassette)], V)) == live
    pinged = _stdio_lines([*MCPREC, "replay", str(cassette)], [
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": _meta()}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}])
    live_pinged = _stdio_lines([sys.executable, str(SDK_SERVER)], [
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": _meta()}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}])
    assert [a["error"]["code"] for a in pinged] == [a["error"]["code"] for a in live_pinged] \
        == [-32601, -32602]


def _stdio_lines(argv: list[str], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each message on its own line to a stdio server, its answer read before the next."""
    import subprocess

    answers = []
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        for m in messages:
            proc.stdin.write(json.dumps(m) + "\n")
            proc.stdin.flush()
            answers.append(json.loads(proc.stdout.readline()))
        proc.stdin.close()
        proc.wait(30)
    return answers
