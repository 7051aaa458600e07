"""Recording Streamable HTTP: the SDK's HTTP client through `mcprec record --target` in front of an
SDK server (tests/peers/http_server.py), compared with a direct connection to the same server."""

from __future__ import annotations

import glob
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from support.helpers import dump
from support.http_helpers import (
    EXPECTED_EVENTS, SECRET_HEADERS, HTTPRun, client_scenario, read_jsonl, run_http_session,
    run_sync, sdk_scenario as scenario, start_proxy, start_sdk_http,
)
from mcprec.cassette import open_cassette

CONCURRENT = 5


def without_count(results: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in results.items() if k != "count"}


def rpc_trace(entries: list[dict[str, Any]]) -> tuple[list[tuple[Any, ...]], list[Any]]:
    """The requests a server received, without the (random) session ids: the POSTs in order,
    and the other requests (the GET stream, DELETE) as a sorted list, since the client opens
    its GET stream while its next POST is on the way and either may reach the server first."""
    trace = [(e["method"], e.get("rpc"), e.get("id")) for e in entries]
    return ([t for t in trace if t[0] == "POST"],
            sorted((t for t in trace if t[0] != "POST"), key=repr))


def cassette_bytes(path: Path) -> bytes:
    return b"".join(Path(p).read_bytes() for p in sorted(glob.glob(f"{path}*")))


def record_through(flags: tuple[str, ...], tmp: Path, *, concurrent: int = 0,
                   scenario: Any = scenario, transport: str = "streamable") -> SimpleNamespace:
    """Run ``scenario`` directly, then through the proxy (and ``concurrent`` clients at once),
    stop the proxy with SIGINT, then the server; everything observed, for the tests."""
    log = tmp / "requests.jsonl"
    cas = tmp / "http.db"
    upstream = start_sdk_http(*flags, requests_log=log)
    try:
        direct = run_sync(lambda: run_http_session(upstream.url, scenario, transport=transport))
        direct_log = read_jsonl(log)
        proxy = start_proxy(upstream.url, cas, session="sdk")
        try:
            proxied = run_sync(lambda: run_http_session(proxy.url, scenario, transport=transport,
                                                        headers=SECRET_HEADERS))
            proxied_log = read_jsonl(log)[len(direct_log):]
            clients: dict[int, HTTPRun] = {}

            async def many() -> None:
                async def one(i: int) -> None:
                    clients[i] = await run_http_session(proxy.url, client_scenario(i))

                async with anyio.create_task_group() as tg:
                    for i in range(concurrent):
                        tg.start_soon(one, i)

            if concurrent:
                run_sync(many)
        finally:
            code, took = proxy.stop()
        count = run_sync(lambda: run_http_session(
            upstream.url, _read_count, transport=transport)).results["read_count"]
    finally:
        upstream.stop()
    with open_cassette(cas) as c:
        sessions = {s.name: s for s in c.sessions()}
        messages = {name: list(c.messages(s)) for name, s in sessions.items()}
    return SimpleNamespace(direct=direct, proxied=proxied, clients=clients, code=code, took=took,
                           direct_log=direct_log, proxied_log=proxied_log, count=count,
                           sessions=sessions, messages=messages, cassette=cas,
                           raw=cassette_bytes(cas), proxy_stderr=proxy.stderr_text(),
                           upstream_url=upstream.url)


async def _read_count(s: Any, run: HTTPRun) -> None:
    run.results["read_count"] = dump(await s.call_tool("read_count", {}))["structuredContent"]


@pytest.fixture(scope="module")
def sse_mode(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """SSE responses (the SDK's default), with an event store: event ids and priming events."""
    return record_through(("--event-store",), tmp_path_factory.mktemp("sse"),
                          concurrent=CONCURRENT)


async def stateless_scenario(s: Any, run: HTTPRun) -> None:
    """What a stateless server can do (no server-to-client requests)."""
    r = run.results
    r["tools/list"] = dump(await s.list_tools())
    r["add"] = dump(await s.call_tool("add", {"a": 2, "b": 3}))
    r["count"] = dump(await s.call_tool("count", {}))


@pytest.fixture(scope="module")
def stateless_mode(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """A stateless server (--stateless --json-response): no Mcp-Session-Id at all."""
    return record_through(("--stateless", "--json-response"), tmp_path_factory.mktemp("stateless"),
                          scenario=stateless_scenario)


@pytest.fixture(scope="module")
def legacy_mode(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """The SDK server on the legacy HTTP+SSE transport (--sse), the SDK's sse_client."""
    return record_through(("--sse",), tmp_path_factory.mktemp("legacy"), transport="sse")


@pytest.fixture(scope="module")
def json_mode(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """JSON responses (--json-response)."""
    return record_through(("--json-response",), tmp_path_factory.mktemp("json"))


# --- what the client sees ---------------------------------------------------------------------


def test_results_equal_direct(sse_mode: SimpleNamespace) -> None:
    """Every result through the proxy equals the direct one."""
    assert without_count(sse_mode.proxied.results) == without_count(sse_mode.direct.results)


def test_progress_logs_and_sampling_arrive_in_order(sse_mode: SimpleNamespace) -> None:
    """Progress, log messages and the sampling request arrive over SSE in the server's order."""
    assert sse_mode.direct.events == EXPECTED_EVENTS
    assert sse_mode.proxied.events == EXPECTED_EVENTS


def test_count_tool_ran_once_per_call(sse_mode: SimpleNamespace) -> None:
    """The upstream's counter went up once per `count` call: 1 direct, then 2 through the proxy."""
    assert sse_mode.direct.results["count"]["content"][0]["text"] == "call 1"
    assert sse_mode.proxied.results["count"]["content"][0]["text"] == "call 2"
    assert sse_mode.count == {"result": 2}


def test_every_request_reached_upstream_exactly_once(sse_mode: SimpleNamespace) -> None:
    """Upstream received through the proxy exactly the HTTP requests it received directly."""
    assert rpc_trace(sse_mode.proxied_log) == rpc_trace(sse_mode.direct_log)
    posts = [e for e in sse_mode.proxied_log if e["method"] == "POST" and e.get("id") is not None]
    assert len({(e["rpc"], e["id"]) for e in posts}) == len(posts)


def test_secret_headers_reach_upstream_unchanged(sse_mode: SimpleNamespace) -> None:
    """Authorization and Cookie are forwarded as sent; Host is rewritten to the upstream's."""
    for e in sse_mode.proxied_log:
        assert e["authorization"] == SECRET_HEADERS["Authorization"]
        assert e["cookie"] == SECRET_HEADERS["Cookie"]
        assert sse_mode.upstream_url.startswith(f"http://{e['host']}/")


# --- the cassette -----------------------------------------------------------------------------


C2S, S2C = "client_to_server", "server_to_client"


def _req(method: str) -> list[tuple[str, str, str]]:
    return [(C2S, "request", method), (S2C, "response", method)]


EXPECTED_FLOW = [
    *_req("initialize"),
    (C2S, "notification", "notifications/initialized"),
    *_req("tools/list"),
    *_req("tools/call") * 2,  # add, echo
    (C2S, "request", "tools/call"),  # slow
    *[(S2C, "notification", "notifications/progress"),
      (S2C, "notification", "notifications/message")] * 3,
    (S2C, "response", "tools/call"),
    (C2S, "request", "tools/call"),  # ask_model
    (S2C, "request", "sampling/createMessage"),
    (C2S, "response", "sampling/createMessage"),
    (S2C, "response", "tools/call"),
    (C2S, "request", "tools/call"),  # chatty
    *[(S2C, "notification", "notifications/message")] * 2,
    (S2C, "response", "tools/call"),
    *_req("tools/call"),  # count
    *_req("ping"),
]


def flow(messages: list[Any]) -> list[tuple[str, str, str | None]]:
    return [(m.direction, m.kind, m.method) for m in messages]


def test_cassette_holds_the_session_in_order(sse_mode: SimpleNamespace) -> None:
    """The named session holds every message of the conversation, nothing else, in order."""
    assert flow(sse_mode.messages["sdk"]) == EXPECTED_FLOW


def test_cassette_messages_equal_what_the_client_saw(sse_mode: SimpleNamespace) -> None:
    """Recorded responses parse to what the client received (echo of tricky text included)."""
    by_id = {m.rpc_id: m.json for m in sse_mode.messages["sdk"]
             if m.direction == S2C and m.kind == "response"}
    assert by_id["4"]["result"] == sse_mode.proxied.results["echo"]
    assert by_id["8"]["result"] == sse_mode.proxied.results["count"]


def test_cassette_requests_carry_http_metadata(sse_mode: SimpleNamespace) -> None:
    """Client messages note exchange, method, path and headers; exchanges are distinct."""
    requests = [m for m in sse_mode.messages["sdk"] if m.direction == C2S]
    for m in requests:
        assert m.http["method"] == "POST" and m.http["path"] == "/mcp", m.http
        assert isinstance(m.http["exchange"], int)
        assert m.http["headers"]["content-type"] == "application/json"
    assert len({m.http["exchange"] for m in requests}) == len(requests)


def test_cassette_responses_carry_status_content_type_and_event_ids(
        sse_mode: SimpleNamespace) -> None:
    """Each response stream's first message notes status 200 and SSE; every event its id."""
    first_of_exchange: dict[int, Any] = {}
    for m in sse_mode.messages["sdk"]:
        if m.direction == S2C:
            assert m.http["event_id"], m.http
            first_of_exchange.setdefault(m.http["exchange"], m.http)
    for meta in first_of_exchange.values():
        assert meta["status"] == 200 and meta["content_type"] == "sse", meta
    streams = {meta["stream"] for meta in first_of_exchange.values()}
    assert streams <= {"post", "get"} and "post" in streams


def test_priming_events_are_not_recorded_as_messages(sse_mode: SimpleNamespace) -> None:
    """An SSE event with an id and empty data (a priming event) is plumbing, not a message."""
    assert all(m.raw for m in sse_mode.messages["sdk"])
    assert not [m for m in sse_mode.messages["sdk"] if m.kind == "invalid"]


def test_cassette_session_row(sse_mode: SimpleNamespace) -> None:
    """The session is 'http', targets the upstream URL and knows client and server."""
    s = sse_mode.sessions["sdk"]
    assert s.transport == "http"
    assert s.target == sse_mode.upstream_url
    assert s.server_info["name"] == "mcprec-http-test-server"
    assert s.client_info["name"]
    assert s.protocol_version


def test_secrets_never_in_cassette_bytes(sse_mode: SimpleNamespace) -> None:
    """The Authorization and Cookie values appear nowhere in the cassette's files."""
    assert b"sk-secret123" not in sse_mode.raw
    assert b"a=b" not in sse_mode.raw
    headers = sse_mode.messages["sdk"][0].http["headers"]
    assert headers["authorization"] == "Bearer [REDACTED]"
    assert headers["cookie"] == "[REDACTED]"


# --- concurrency and shutdown -----------------------------------------------------------------


def test_concurrent_clients_get_their_own_answers(sse_mode: SimpleNamespace) -> None:
    """Five clients at once through one proxy each get their own results and progress."""
    assert sorted(sse_mode.clients) == list(range(CONCURRENT))
    for i, run in sse_mode.clients.items():
        assert run.results["echo"]["content"][0]["text"] == f"client {i}"
        assert run.results["add"]["structuredContent"] == {"result": i + 1000}
        assert [e[:3] for e in run.events if e[0] == "progress"] == [
            ("progress", 1.0, 2.0), ("progress", 2.0, 2.0)]


def test_concurrent_clients_become_separate_sessions(sse_mode: SimpleNamespace) -> None:
    """Each concurrent client is its own cassette session, holding its own messages only."""
    others = {n: ms for n, ms in sse_mode.messages.items() if n != "sdk"}
    assert sorted(others) == sorted(f"sdk-{i}" for i in range(2, CONCURRENT + 2))
    seen = set()
    for name, ms in others.items():
        calls = [m.json["params"] for m in ms if m.method == "tools/call" and m.kind == "request"]
        echo = [p["arguments"]["text"] for p in calls if p["name"] == "echo"]
        assert len(echo) == 1, name
        i = int(echo[0].split()[1])
        seen.add(i)
        assert [p["arguments"] for p in calls if p["name"] == "add"] == [{"a": i, "b": 1000}]
        methods = [m.method for m in ms if m.kind == "request" and m.direction == C2S]
        assert methods[0] == "initialize" and methods.count("tools/call") == 3, methods
        assert len([m for m in ms if m.method == "notifications/progress"]) == 2
    assert seen == set(range(CONCURRENT))


def test_sigint_exits_zero_promptly(sse_mode: SimpleNamespace) -> None:
    """SIGINT stops the proxy with exit code 0 within a couple of seconds, without a traceback."""
    assert sse_mode.code == 0
    assert sse_mode.took < 3.0
    assert "Traceback" not in sse_mode.proxy_stderr


def test_all_sessions_complete(sse_mode: SimpleNamespace) -> None:
    """After SIGINT every session in the cassette is 'complete'."""
    assert len(sse_mode.sessions) == CONCURRENT + 1
    assert {s.status for s in sse_mode.sessions.values()} == {"complete"}


# --- JSON responses ---------------------------------------------------------------------------


def test_json_mode_results_equal_direct(json_mode: SimpleNamespace) -> None:
    """With JSON responses, every result through the proxy equals the direct one."""
    assert without_count(json_mode.proxied.results) == without_count(json_mode.direct.results)
    assert json_mode.proxied.events == json_mode.direct.events


def test_json_mode_requests_reached_upstream_exactly_once(json_mode: SimpleNamespace) -> None:
    """With JSON responses too, upstream got the same requests through the proxy as directly."""
    assert rpc_trace(json_mode.proxied_log) == rpc_trace(json_mode.direct_log)
    assert json_mode.count == {"result": 2}


def test_json_mode_cassette_notes_json_responses(json_mode: SimpleNamespace) -> None:
    """Answers to POSTs are recorded with content_type 'json' and status 200, byte for byte."""
    responses = [m for m in json_mode.messages["sdk"]
                 if m.direction == S2C and m.kind == "response"]
    assert len(responses) == 9
    for m in responses:
        assert m.http["content_type"] == "json" and m.http["status"] == 200, m.http
        assert json.loads(m.raw)["jsonrpc"] == "2.0"
    assert {s.status for s in json_mode.sessions.values()} == {"complete"}


# --- the recorded response mode, replayed -----------------------------------------------------


def _replayed_content_types(cassette: Path, session: str) -> list[str]:
    """Content types `replay --http` answers initialize and tools/list with, to a raw client."""
    import httpx

    from support.http_helpers import start_replay

    proc = start_replay(cassette, session)
    try:
        accept = {"accept": "application/json, text/event-stream"}
        with httpx.Client(timeout=10) as client:
            r1 = client.post(proc.url, headers=accept, json={
                "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"}}})
            sid = {"mcp-session-id": r1.headers["mcp-session-id"], **accept}
            r2 = client.post(proc.url, headers=sid,
                             json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    finally:
        proc.stop()
    assert r2.status_code == 200 and b"count" in r2.content
    return [r.headers["content-type"].split(";")[0] for r in (r1, r2)]


def test_json_mode_session_replays_as_json(json_mode: SimpleNamespace) -> None:
    """A session recorded with JSON responses is replayed with JSON bodies."""
    assert _replayed_content_types(json_mode.cassette, "sdk") == ["application/json"] * 2


def test_sse_mode_session_replays_as_sse(sse_mode: SimpleNamespace) -> None:
    """A session recorded with SSE responses is replayed as SSE streams."""
    assert _replayed_content_types(sse_mode.cassette, "sdk") == ["text/event-stream"] * 2


# --- a stateless server -----------------------------------------------------------------------


def test_stateless_results_equal_direct(stateless_mode: SimpleNamespace) -> None:
    """With a stateless server, results through the proxy equal direct, each call made once."""
    assert without_count(stateless_mode.proxied.results) == without_count(
        stateless_mode.direct.results)
    assert rpc_trace(stateless_mode.proxied_log) == rpc_trace(stateless_mode.direct_log)
    assert stateless_mode.count == {"result": 2}


def test_stateless_session_is_one_complete_session(stateless_mode: SimpleNamespace) -> None:
    """Without session ids, initialize and the requests after it are one complete session."""
    assert list(stateless_mode.sessions) == ["sdk"]
    assert stateless_mode.sessions["sdk"].status == "complete"
    requests = [m.method for m in stateless_mode.messages["sdk"] if m.direction == C2S]
    assert requests[:2] == ["initialize", "notifications/initialized"]
    assert requests.count("tools/call") == 2


def test_stateless_session_replays(stateless_mode: SimpleNamespace) -> None:
    """The stateless session replays over HTTP with the live results."""
    from support.http_helpers import start_replay

    proc = start_replay(stateless_mode.cassette, "sdk")
    try:
        run = run_sync(lambda: run_http_session(proc.url, stateless_scenario))
    finally:
        proc.stop()
    assert run.results == stateless_mode.proxied.results


# --- the legacy HTTP+SSE transport ------------------------------------------------------------


def test_legacy_results_and_events_equal_direct(legacy_mode: SimpleNamespace) -> None:
    """Over legacy HTTP+SSE, results, progress, logs and sampling through the proxy equal direct."""
    assert without_count(legacy_mode.proxied.results) == without_count(legacy_mode.direct.results)
    assert legacy_mode.proxied.events == legacy_mode.direct.events == EXPECTED_EVENTS


def test_legacy_requests_reached_upstream_exactly_once(legacy_mode: SimpleNamespace) -> None:
    """Over legacy HTTP+SSE too, upstream got the same requests through the proxy as directly."""
    assert rpc_trace(legacy_mode.proxied_log) == rpc_trace(legacy_mode.direct_log)
    assert legacy_mode.count == {"result": 2}


def test_legacy_cassette_session(legacy_mode: SimpleNamespace) -> None:
    """The legacy connection is one complete 'sse' session holding the whole conversation."""
    assert [(n, s.transport, s.status) for n, s in legacy_mode.sessions.items()] == [
        ("sdk", "sse", "complete")]
    assert flow(legacy_mode.messages["sdk"]) == EXPECTED_FLOW
    assert b"sk-secret123" not in legacy_mode.raw
