"""Replaying over HTTP: `mcprec replay --http` (and `replay_http_server`) serving a session recorded
through the HTTP proxy, once the real server is gone; concurrent clients, progress and sampling
over SSE, the legacy HTTP+SSE transport, and stdio <-> HTTP across transports."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import httpx
import pytest

from support.helpers import MCPREC, SDK_SERVER, dump
from support.http_helpers import (
    EXPECTED_EVENTS, TRICKY_TEXT, HTTPRun, progress_recorder, run_http_session, run_sync,
    sdk_scenario, start_proxy, start_replay, start_sdk_http,
)
from mcprec.testing import replay_http_server

CONCURRENT = 5


async def cross_scenario(s: Any, run: HTTPRun) -> None:
    """What tests/peers/sdk_server.py (stdio) and tests/peers/http_server.py both offer."""
    r = run.results
    r["tools/list"] = dump(await s.list_tools())
    r["add"] = dump(await s.call_tool("add", {"a": 2, "b": 3}))
    r["echo"] = dump(await s.call_tool("echo", {"text": TRICKY_TEXT}))
    r["slow"] = dump(await s.call_tool("slow", {"steps": 3},
                                       progress_callback=progress_recorder(run)))
    r["ask_model"] = dump(await s.call_tool("ask_model", {"question": "why?"}))
    r["ping"] = dump(await s.send_ping())


CROSS_EVENTS = EXPECTED_EVENTS[:7]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """The SDK scenario recorded through the proxy as session 'live'; then server and proxy stop."""
    cas = tmp_path_factory.mktemp("replay") / "http.db"
    upstream = start_sdk_http("--event-store")
    try:
        proxy = start_proxy(upstream.url, cas, session="live")
        try:
            run = run_sync(lambda: run_http_session(proxy.url, sdk_scenario))
        finally:
            proxy.stop()
    finally:
        upstream.stop()
    assert upstream.popen.poll() is not None  # the server is gone from here on
    return SimpleNamespace(cassette=cas, run=run)


@pytest.fixture(scope="module")
def replay(live: SimpleNamespace) -> Any:
    """`mcprec replay CASSETTE --http --listen 127.0.0.1:0` serving session 'live'."""
    proc = start_replay(live.cassette, "live")
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def stdio_recorded(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """tests/peers/sdk_server.py recorded over stdio (`mcprec record -- ...`) as session 'stdio'."""
    cas = tmp_path_factory.mktemp("stdio") / "stdio.db"
    argv = [*MCPREC, "record", "-c", str(cas), "-s", "stdio", "--", sys.executable, str(SDK_SERVER)]
    run = run_sync(lambda: run_http_session(argv, cross_scenario, transport="stdio"))
    return SimpleNamespace(cassette=cas, run=run)


def test_results_equal_live(live: SimpleNamespace, replay: Any) -> None:
    """`replay --http` gives the client every result of the live run, with the server gone."""
    run = run_sync(lambda: run_http_session(replay.url, sdk_scenario))
    assert run.results == live.run.results


def test_progress_logs_and_sampling_replayed_in_order(live: SimpleNamespace, replay: Any) -> None:
    """Progress, log messages and the sampling request arrive over SSE in the recorded order."""
    assert live.run.events == EXPECTED_EVENTS
    run = run_sync(lambda: run_http_session(replay.url, sdk_scenario))
    assert run.events == EXPECTED_EVENTS


def test_concurrent_sessions_replay_independently(live: SimpleNamespace, replay: Any) -> None:
    """Five clients at once each replay the whole session from the start, unaffected by others."""
    runs: list[HTTPRun] = []

    async def many() -> None:
        async def one() -> None:
            runs.append(await run_http_session(replay.url, sdk_scenario))

        async with anyio.create_task_group() as tg:
            for _ in range(CONCURRENT):
                tg.start_soon(one)

    run_sync(many)
    assert len(runs) == CONCURRENT
    for run in runs:
        assert run.results == live.run.results
        assert run.events == EXPECTED_EVENTS


def test_replay_http_server_helper(live: SimpleNamespace, tmp_path: Path) -> None:
    """The `replay_http_server` helper serves the same results and writes a full report."""
    report = tmp_path / "report.json"
    with replay_http_server(live.cassette, session="live", report_path=report) as server:
        run = run_sync(lambda: run_http_session(server.url, sdk_scenario))
    assert run.results == live.run.results
    assert server.process.returncode == 0
    data = server.report()
    assert data["unplayed"] == [] and data["unmatched"] == []


def test_legacy_sse_replay(live: SimpleNamespace, replay: Any) -> None:
    """The legacy HTTP+SSE transport at <base>/sse replays the same session, sampling included."""
    run = run_sync(lambda: run_http_session(f"{replay.base}/sse", sdk_scenario, transport="sse"))
    assert run.results == live.run.results
    assert run.events == EXPECTED_EVENTS


def test_replay_answers_after_server_gone_without_network_to_it(replay: Any) -> None:
    """A raw POST initialize is answered by the replay server itself, with a session id."""
    body = {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}
    r = httpx.post(replay.url, json=body, headers={"accept": "application/json, text/event-stream"},
                   timeout=10)
    assert r.status_code == 200
    assert r.headers["mcp-session-id"]
    assert b'"id":7' in r.content and b"mcprec-http-test-server" in r.content


def test_stdio_recording_served_over_http(stdio_recorded: SimpleNamespace) -> None:
    """A session recorded over stdio answers an HTTP client exactly as the stdio server did."""
    assert stdio_recorded.run.events == CROSS_EVENTS
    proc = start_replay(stdio_recorded.cassette, "stdio")
    try:
        run = run_sync(lambda: run_http_session(proc.url, cross_scenario))
    finally:
        assert proc.stop()[0] == 0
    assert run.results == stdio_recorded.run.results
    assert run.events == CROSS_EVENTS


def test_http_recording_replayed_over_stdio(live: SimpleNamespace) -> None:
    """A session recorded over HTTP answers a stdio client (`mcprec replay CASSETTE`) the same."""
    argv = [*MCPREC, "replay", str(live.cassette), "-s", "live"]
    run = run_sync(lambda: run_http_session(argv, sdk_scenario, transport="stdio"))
    assert run.results == live.run.results
    assert run.events == EXPECTED_EVENTS


def test_replay_answers_404_off_its_path(replay: Any) -> None:
    """Off --path (the default /mcp) replay answers 404, as the server and the proxy do."""
    base = replay.url.rsplit("/mcp", 1)[0]
    got = httpx.get(base + "/.well-known/oauth-authorization-server", timeout=10)
    assert got.status_code == 404
    posted = httpx.post(base + "/not-mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                        headers={"Accept": "application/json, text/event-stream"}, timeout=10)
    assert posted.status_code == 404
