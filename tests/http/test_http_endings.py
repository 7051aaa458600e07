"""How HTTP exchanges end, recorded and replayed: an upstream killed in the middle of an SSE
answer, an upstream sending a broken answer, and what replay promises for a stateless server
(no session id, no GET stream) and for event ids."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from support.helpers import dump, run_mcprec
from support.http_helpers import (
    RawRequest, RawUpstream, progress_recorder, run_http_session, run_sync, start_proxy,
    start_replay, start_sdk_http,
)
from mcprec.cassette import open_cassette

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"}}}


def _killing_scenario(upstream: Any, seen: dict[str, Any]) -> Any:
    """Call the long ``stream`` tool; kill the upstream at its first progress notification."""

    async def scenario(s: Any, run: Any) -> None:
        record = progress_recorder(run)

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            await record(progress, total, message)
            if upstream is not None and upstream.popen.poll() is None:
                seen["killed_at"] = time.monotonic()
                upstream.popen.send_signal(signal.SIGKILL)

        try:
            await s.call_tool("stream", {"steps": 400, "delay_ms": 50},
                              progress_callback=on_progress)
            seen["error"] = None
        except Exception as e:  # noqa: BLE001 - the call must fail, and say why
            seen["error"] = str(e)
        seen["failed_at"] = time.monotonic()

    return scenario


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The SDK server killed (SIGKILL) while streaming an answer through the proxy; then the
    recording replayed to the same client code."""
    tmp = tmp_path_factory.mktemp("killed")
    upstream = start_sdk_http()
    cassette = tmp / "killed.db"
    proxy = start_proxy(upstream.url, cassette, session="killed")
    live: dict[str, Any] = {}
    try:
        run_sync(lambda: run_http_session(proxy.url, _killing_scenario(upstream, live),
                                          timeout=60))
    finally:
        code, _ = proxy.stop()
        upstream.kill()
    replay = start_replay(cassette, "killed")
    replayed: dict[str, Any] = {}
    t0 = time.monotonic()
    try:
        run_sync(lambda: run_http_session(replay.url, _killing_scenario(None, replayed),
                                          timeout=60))
    finally:
        replay.stop()
    with open_cassette(cassette) as c:
        messages = list(c.messages("killed"))
    return SimpleNamespace(live=live, replayed=replayed, replay_took=time.monotonic() - t0,
                           messages=messages, code=code, stderr=proxy.stderr_text())


def test_killed_upstream_fails_the_pending_call_promptly(killed: SimpleNamespace) -> None:
    """The client's pending call fails within 5 s of the kill, saying the stream was dropped."""
    assert killed.live["error"] and "dropped the stream" in killed.live["error"]
    assert killed.live["failed_at"] - killed.live["killed_at"] < 5


def test_killed_upstream_is_recorded_as_the_calls_error(killed: SimpleNamespace) -> None:
    """The cassette ends the call with a synthetic JSON-RPC error answering it."""
    call = next(m for m in killed.messages if m.method == "tools/call" and m.kind == "request")
    answer = next(m for m in killed.messages if m.reply_to == call.seq)
    assert answer.kind == "error" and answer.http["synthetic"] is True
    assert "dropped the stream" in answer.http["error"]
    assert killed.code == 0 and "Traceback" not in killed.stderr


def test_killed_upstream_replays_the_same_failure(killed: SimpleNamespace) -> None:
    """Replay ends the same call with the same error, at once."""
    assert killed.replayed["error"] == killed.live["error"]
    assert killed.replay_took < 10


def _broken_upstream() -> RawUpstream:
    """Answers with a Content-Length of 500 and 20 bytes, then hangs up."""

    def handle(req: RawRequest, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                     b"content-length: 500\r\n\r\n" + b'{"jsonrpc":"2.0","id"')
        conn.shutdown(socket.SHUT_RDWR)
        conn.close()

    return RawUpstream(handle)


def test_broken_answer_fails_the_call_with_its_id(tmp_path: Path) -> None:
    """A broken answer gives the client a 502 JSON-RPC error carrying its request's id, and the
    cassette a failure marker on the exchange that `show` prints."""
    upstream = _broken_upstream()
    cassette = tmp_path / "broken.db"
    proxy = start_proxy(upstream.url, cassette, session="broken")
    try:
        r = httpx.post(proxy.url, json=INIT, headers=ACCEPT, timeout=10)
    finally:
        proxy.stop()
        upstream.close()
    assert r.status_code == 502
    assert r.json()["id"] == 1 and "broken answer" in r.json()["error"]["message"]
    with open_cassette(cassette) as c:
        answer = list(c.messages("broken"))[1]
    assert answer.kind == "error" and answer.reply_to == 0 and answer.http["synthetic"]
    shown = run_mcprec("show", str(cassette), "broken").stdout.decode()
    assert "! upstream sent a broken answer" in shown


# --- what replay promises ---------------------------------------------------------------------


def _record(tmp: Path, name: str, *flags: str) -> Path:
    upstream = start_sdk_http(*flags)
    cassette = tmp / f"{name}.db"
    proxy = start_proxy(upstream.url, cassette, session=name)

    async def scenario(s: Any, run: Any) -> None:
        run.results["tools"] = dump(await s.list_tools())
        run.results["add"] = dump(await s.call_tool("add", {"a": 2, "b": 3}))

    try:
        run_sync(lambda: run_http_session(proxy.url, scenario))
    finally:
        proxy.stop()
        upstream.stop()
    return cassette


def _raw_exchange(url: str) -> SimpleNamespace:
    """initialize, then tools/list as SSE, then a GET, over raw HTTP."""
    with httpx.Client(timeout=10) as client:
        init = client.post(url, json=INIT, headers=ACCEPT)
        sid = init.headers.get("mcp-session-id")
        headers = {**ACCEPT, "mcp-protocol-version": "2025-11-25",
                   **({"mcp-session-id": sid} if sid else {})}
        client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                    headers=headers)
        listed = client.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                             headers={**headers, "accept": "text/event-stream, application/json"})
        get_headers = {k: v for k, v in headers.items() if k != "content-type"}
        get_headers["accept"] = "text/event-stream"
        with client.stream("GET", url, headers=get_headers) as got:
            get_status = got.status_code
    return SimpleNamespace(sid=sid, listed=listed, get_status=get_status)


@pytest.fixture(scope="module")
def promised(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A stateless server and a stateful one with an event store, recorded, then replayed."""
    tmp = tmp_path_factory.mktemp("promises")
    out = {}
    for name, flags in (("stateless", ("--stateless",)), ("events", ("--event-store",))):
        cassette = _record(tmp, name, *flags)
        replay = start_replay(cassette, name)
        try:
            out[name] = _raw_exchange(replay.url)
        finally:
            replay.stop()
    return SimpleNamespace(**out)


def _event_ids(body: str) -> list[str]:
    return [line[3:].strip() for line in body.splitlines() if line.startswith("id:")]


def test_stateless_replay_issues_no_session_id(promised: SimpleNamespace) -> None:
    """A recording of a stateless server replays without Mcp-Session-Id, and its later
    requests are answered without one."""
    assert promised.stateless.sid is None
    assert "tools" in promised.stateless.listed.text


def test_stateless_replay_offers_no_get_stream(promised: SimpleNamespace) -> None:
    """A recording of a stateless server replays with no GET stream: 405."""
    assert promised.stateless.get_status == 405


def test_replay_invents_no_event_ids(promised: SimpleNamespace) -> None:
    """A server that sent SSE events without ids replays without ids."""
    assert promised.stateless.listed.headers["content-type"].startswith("text/event-stream")
    assert _event_ids(promised.stateless.listed.text) == []


def test_replay_keeps_event_ids_and_sessions_where_recorded(promised: SimpleNamespace) -> None:
    """A server with an event store (ids on events) and sessions replays with both, and a GET
    stream."""
    assert promised.events.sid is not None
    assert _event_ids(promised.events.listed.text)
    assert promised.events.get_status == 200


def test_stateless_replay_serves_the_sdk_client(tmp_path: Path) -> None:
    """The SDK client gets the same results from the replay of a stateless server as live."""
    upstream = start_sdk_http("--stateless")

    async def scenario(s: Any, run: Any) -> None:
        run.results["add"] = dump(await s.call_tool("add", {"a": 2, "b": 3}))

    cassette = tmp_path / "sdk.db"
    proxy = start_proxy(upstream.url, cassette, session="sdk")
    try:
        live = run_sync(lambda: run_http_session(proxy.url, scenario))
    finally:
        proxy.stop()
        upstream.stop()
    replay = start_replay(cassette, "sdk")
    try:
        replayed = run_sync(lambda: run_http_session(replay.url, scenario))
    finally:
        replay.stop()
    assert replayed.results == live.results
