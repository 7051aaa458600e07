"""Recording @modelcontextprotocol/server-everything (TypeScript SDK) over HTTP: Streamable HTTP
and the legacy HTTP+SSE transport, through `mcprec record --target`, with the Python SDK's
clients; results compared with a direct connection."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from support.helpers import dump
from support.http_helpers import (
    EVERYTHING_INDEX, HTTPRun, run_http_session, run_sync, start_everything, start_proxy,
)
from mcprec.cassette import open_cassette


async def scenario(s: Any, run: HTTPRun) -> None:
    run.results["tools/list"] = dump(await s.list_tools())
    run.results["echo"] = dump(await s.call_tool("echo", {"message": "hello ☃"}))
    run.results["get-sum"] = dump(await s.call_tool("get-sum", {"a": 2, "b": 40}))


def record_everything(mode: str, transport: str, tmp: Path) -> SimpleNamespace:
    if not EVERYTHING_INDEX.is_file():
        pytest.fail(f"{EVERYTHING_INDEX} is missing: run `npm ci`", pytrace=False)
    cas = tmp / "everything.db"
    upstream = start_everything(mode)
    try:
        direct = run_sync(lambda: run_http_session(upstream.url, scenario, transport=transport))
        proxy = start_proxy(upstream.url, cas, session=mode)
        try:
            proxied = run_sync(lambda: run_http_session(proxy.url, scenario, transport=transport))
        finally:
            code, _ = proxy.stop()
    finally:
        upstream.stop(timeout=5)
    with open_cassette(cas) as c:
        sessions = c.sessions()
        messages = [list(c.messages(s)) for s in sessions]
    return SimpleNamespace(direct=direct, proxied=proxied, code=code, sessions=sessions,
                           messages=messages, upstream=upstream.url, proxy=proxy.url)


@pytest.fixture(scope="module")
def streamable(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    return record_everything("streamableHttp", "streamable", tmp_path_factory.mktemp("shttp"))


@pytest.fixture(scope="module")
def legacy(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    return record_everything("sse", "sse", tmp_path_factory.mktemp("sse"))


def test_streamable_results_equal_direct(streamable: SimpleNamespace) -> None:
    """tools/list, echo and get-sum through the proxy equal the direct answers."""
    assert streamable.proxied.results == streamable.direct.results
    assert streamable.direct.results["get-sum"]["content"][0]["text"].endswith("42.")


def test_streamable_cassette_has_one_complete_session_with_event_ids(
        streamable: SimpleNamespace) -> None:
    """One 'http' session, complete, whose answers carry the server's SSE event ids."""
    assert [(s.name, s.transport, s.status) for s in streamable.sessions] == [
        ("streamableHttp", "http", "complete")]
    answers = [m for m in streamable.messages[0] if m.kind == "response"]
    assert [m.method for m in answers] == ["initialize", "tools/list", "tools/call", "tools/call"]
    assert all(m.http.get("event_id") for m in answers)
    assert not [m for m in streamable.messages[0] if m.kind == "invalid" or not m.raw]


def test_legacy_sse_results_equal_direct(legacy: SimpleNamespace) -> None:
    """Over the legacy HTTP+SSE transport too, the answers through the proxy equal direct."""
    assert legacy.proxied.results == legacy.direct.results


def test_legacy_sse_cassette_session(legacy: SimpleNamespace) -> None:
    """The legacy SSE connection is one 'sse' session; POSTs go to the proxied endpoint."""
    assert [(s.name, s.transport, s.status) for s in legacy.sessions] == [
        ("sse", "sse", "complete")]
    ms = legacy.messages[0]
    posts = [m for m in ms if m.direction == "client_to_server" and m.http.get("method")]
    assert posts and all(m.http["path"].startswith("/message?sessionId=") for m in posts)
    answers = [m for m in ms if m.kind == "response"]
    assert [m.method for m in answers] == ["initialize", "tools/list", "tools/call", "tools/call"]
    assert all(m.http["stream"] == "get" for m in ms if m.direction == "server_to_client"
               and "stream" in m.http)


def test_proxy_exits_zero(streamable: SimpleNamespace, legacy: SimpleNamespace) -> None:
    """The proxy exits 0 on SIGINT after either transport."""
    assert streamable.code == 0 and legacy.code == 0
