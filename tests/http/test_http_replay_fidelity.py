"""HTTP replay as the recording went: a call the client cancelled ends the same way, and one
cassette holding many client sessions serves each client the session its traffic matches.

The server is the official SDK (tests/peers/http_server.py), recorded through the proxy.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from support.helpers import dump, run_mcprec
from support.http_helpers import (
    HTTPRun, client_scenario, run_http_session, run_sync, start_proxy, start_replay,
    start_sdk_http,
)

CANCEL_AFTER_S = 0.4
CLIENTS = 3


async def cancel_slow_then_add(s: Any, run: HTTPRun) -> None:
    """Start a long slow call, give up on it (the SDK sends notifications/cancelled), call add."""
    started = time.monotonic()
    with anyio.move_on_after(CANCEL_AFTER_S) as scope:
        await s.call_tool("slow", {"steps": 40, "delay_ms": 100})
    run.results["slow cancelled"] = scope.cancelled_caught
    run.results["slow took at least the cancel delay"] = (
        time.monotonic() - started >= CANCEL_AFTER_S)
    run.results["add"] = dump(await s.call_tool("add", {"a": 1, "b": 2}))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """One cassette: a session that cancels a call, then three clients with their own traffic
    at once; the server and the proxy are gone afterwards."""
    cassette = tmp_path_factory.mktemp("fidelity") / "http.db"
    upstream = start_sdk_http()
    try:
        proxy = start_proxy(upstream.url, cassette)
        try:
            cancelled = run_sync(lambda: run_http_session(proxy.url, cancel_slow_then_add))
            clients: dict[int, HTTPRun] = {}

            async def many() -> None:
                async def one(i: int) -> None:
                    clients[i] = await run_http_session(proxy.url, client_scenario(i))

                async with anyio.create_task_group() as tg:
                    for i in range(CLIENTS):
                        tg.start_soon(one, i)

            run_sync(many)
        finally:
            proxy.stop()
    finally:
        upstream.stop()
    return SimpleNamespace(cassette=cassette, cancelled=cancelled, clients=clients)


@pytest.fixture(scope="module")
def replay(recorded: SimpleNamespace) -> Any:
    """`mcprec replay CASSETTE --http`, no --session: every recorded session is a candidate."""
    proc = start_replay(recorded.cassette)
    yield proc
    proc.stop()


def test_cassette_holds_every_client_session(recorded: SimpleNamespace) -> None:
    """The proxy recorded one session per MCP client session (the premise of the tests below)."""
    out = run_mcprec("sessions", str(recorded.cassette), "--json")
    assert out.returncode == 0, out.stderr
    import json

    assert len(json.loads(out.stdout)) == 1 + CLIENTS


def test_cancelled_call_ends_as_it_did_live(recorded: SimpleNamespace, replay: Any) -> None:
    """The SDK server answered the cancelled call after the client's cancellation: replay waits
    for the cancellation too, so the client sees its own clean cancel, not an early error."""
    run = run_sync(lambda: run_http_session(replay.url, cancel_slow_then_add))
    assert run.results == recorded.cancelled.results
    assert run.results["slow cancelled"] is True


def test_many_clients_each_get_their_own_session(recorded: SimpleNamespace, replay: Any) -> None:
    """Clients at once, each with its own traffic, each get the answers recorded for theirs."""
    runs: dict[int, HTTPRun] = {}

    async def many() -> None:
        async def one(i: int) -> None:
            runs[i] = await run_http_session(replay.url, client_scenario(i))

        async with anyio.create_task_group() as tg:
            for i in reversed(range(CLIENTS)):
                tg.start_soon(one, i)

    run_sync(many)
    for i in range(CLIENTS):
        assert runs[i].results == recorded.clients[i].results, i
    replay.join_output()
    assert "chosen among 4 recorded sessions" in replay.stderr_text()


def test_failure_the_proxy_answered_replays_with_its_status(tmp_path: Path) -> None:
    """A request the recording proxy answered itself (502: upstream unreachable) replays with
    the same status and JSON-RPC error."""
    import httpx

    from support.http_helpers import free_port

    cassette = tmp_path / "dead.db"
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}}
    headers = {"accept": "application/json, text/event-stream"}
    proxy = start_proxy(f"http://127.0.0.1:{free_port()}/mcp", cassette)
    try:
        live = httpx.post(proxy.url, json=body, headers=headers, timeout=10)
    finally:
        proxy.stop()
    assert live.status_code == 502
    replay = start_replay(cassette)
    try:
        replayed = httpx.post(replay.url, json=body, headers=headers, timeout=10)
    finally:
        replay.stop()
    assert (replayed.status_code, replayed.json()) == (502, live.json())
