"""The trust boundary at mcprec's HTTP front, checked the same way on the recording proxy and on
``replay --http``: Host and Origin (DNS rebinding), the size of a request's head and body. The
upstream is the SDK server with its own rebinding protection on: the proxy must not weaken it."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from support.http_helpers import read_jsonl, start_proxy, start_replay, start_sdk_http
from mcprec.cassette import open_cassette

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"}}}
ENDPOINTS = ["proxy", "replay"]


@pytest.fixture(scope="module")
def fronts(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The SDK server; a recording proxy in front of it; a replay of a session recorded
    through another proxy; a proxy that admits one foreign Host and Origin."""
    tmp = tmp_path_factory.mktemp("trust")
    log = tmp / "requests.jsonl"
    upstream = start_sdk_http(requests_log=log)
    first = start_proxy(upstream.url, tmp / "recorded.db", session="init")
    try:
        assert httpx.post(first.url, json=INIT, headers=ACCEPT, timeout=10).status_code == 200
    finally:
        first.stop()
    proxy = start_proxy(upstream.url, tmp / "trust.db")
    replay = start_replay(tmp / "recorded.db")
    admitting = start_proxy(upstream.url, tmp / "admitting.db", extra=[
        "--allow-host", "mcp.example:*", "--allow-origin", "https://app.example"])
    yield SimpleNamespace(upstream=upstream, proxy=proxy, replay=replay, admitting=admitting,
                          log=log, cassette=tmp / "trust.db")
    for p in (admitting, replay, proxy, upstream):
        p.stop()


def _post(url: str, **headers: str) -> httpx.Response:
    return httpx.post(url, json=INIT, headers={**ACCEPT, **headers}, timeout=10)


def _url(fronts: SimpleNamespace, which: str) -> str:
    return str(getattr(fronts, which).url)


def _port(url: str) -> int:
    return int(url.split(":")[2].split("/")[0])


def test_upstream_protects_itself_when_reached_directly(fronts: SimpleNamespace) -> None:
    """The SDK server refuses a foreign Host itself (421): the protection the proxy keeps."""
    r = _post(fronts.upstream.url, host=f"evil.example:{_port(fronts.upstream.url)}")
    assert r.status_code == 421


@pytest.mark.parametrize("which", ENDPOINTS)
def test_foreign_host_is_421(fronts: SimpleNamespace, which: str) -> None:
    """A DNS-rebinding page's Host (evil.example:PORT) is refused with 421 and a JSON-RPC error."""
    before = len(read_jsonl(fronts.log))
    url = _url(fronts, which)
    r = _post(url, host=f"evil.example:{_port(url)}")
    assert r.status_code == 421
    assert "--allow-host" in r.json()["error"]["message"]
    assert len(read_jsonl(fronts.log)) == before  # nothing reached the upstream


@pytest.mark.parametrize("which", ENDPOINTS)
def test_foreign_origin_is_403(fronts: SimpleNamespace, which: str) -> None:
    """A foreign browser Origin is refused with 403, whatever the Host."""
    before = len(read_jsonl(fronts.log))
    r = _post(_url(fronts, which), origin="http://evil.example")
    assert r.status_code == 403
    assert "--allow-origin" in r.json()["error"]["message"]
    assert len(read_jsonl(fronts.log)) == before


@pytest.mark.parametrize("which", ENDPOINTS)
@pytest.mark.parametrize("headers", [{}, {"origin": "http://localhost:3000"},
                                     {"origin": "http://127.0.0.1:8080", "host": "localhost"}])
def test_local_names_are_served(fronts: SimpleNamespace, which: str,
                                headers: dict[str, str]) -> None:
    """Local Host names and local Origins are served."""
    r = _post(_url(fronts, which), **headers)
    assert r.status_code == 200, r.text


def test_refused_requests_are_not_recorded(fronts: SimpleNamespace) -> None:
    """Refused requests leave nothing in the proxy's cassette."""
    url = fronts.proxy.url
    _post(url, host="evil.example")
    _post(url, origin="http://evil.example")
    if not fronts.cassette.exists():
        return
    with open_cassette(fronts.cassette) as c:
        for s in c.sessions():
            for m in c.messages(s):
                assert "evil" not in str(m.http), m.http


def test_allowed_host_and_origin_are_forwarded(fronts: SimpleNamespace) -> None:
    """--allow-host and --allow-origin admit more; the upstream gets the target's Host and the
    client's Origin as sent."""
    url = fronts.admitting.url
    before = len(read_jsonl(fronts.log))
    r = _post(url, host=f"mcp.example:{_port(url)}", origin="https://app.example")
    seen = read_jsonl(fronts.log)[before:]
    # the SDK server refuses a foreign Origin itself: the proxy kept it as sent
    assert r.status_code == 403
    assert seen and seen[0]["host"] == fronts.upstream.base.split("//")[1]
    assert _post(url, host="other.example").status_code == 421


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _send_huge_header(url: str, megabytes: int) -> bytes:
    """Send a request whose one header is ``megabytes`` MB; what came back before the close."""
    port = _port(url)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nx-big: ")
        try:
            for _ in range(megabytes):
                s.sendall(b"x" * 1_000_000)
        except OSError:
            pass  # refused mid-way: the answer is already there
        data = b""
        try:
            while chunk := s.recv(65536):
                data += chunk
        except OSError:
            pass
        return data


@pytest.mark.parametrize("which", ENDPOINTS)
def test_huge_header_is_431_memory_stays_flat(fronts: SimpleNamespace, which: str) -> None:
    """A 50 MB header is refused with 431 before anything is forwarded, the process grows by
    less than 8 MB, and the next request is served."""
    proc = getattr(fronts, which)
    before_log = len(read_jsonl(fronts.log))
    rss = _rss_kb(proc.popen.pid)
    answer = _send_huge_header(proc.url, 50)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert _rss_kb(proc.popen.pid) - rss < 8 * 1024
    assert len(read_jsonl(fronts.log)) == before_log
    assert _post(proc.url).status_code == 200


@pytest.mark.parametrize("which", ENDPOINTS)
def test_header_under_the_bound_is_served(fronts: SimpleNamespace, which: str) -> None:
    """Headers up to the bound (here 60 KB in all) pass."""
    assert _post(_url(fronts, which), **{"x-filler": "y" * 60_000}).status_code == 200


@pytest.mark.parametrize("which", ENDPOINTS)
def test_declared_huge_body_is_413_at_once(fronts: SimpleNamespace, which: str) -> None:
    """A Content-Length over the bound (64 MB) is refused with 413 before any body is sent."""
    with socket.create_connection(("127.0.0.1", _port(_url(fronts, which))), timeout=10) as s:
        t0 = time.monotonic()
        s.sendall(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                  b"accept: application/json, text/event-stream\r\n"
                  b"content-length: 100000000\r\n\r\n")
        head = s.recv(65536)
    assert head.startswith(b"HTTP/1.1 413 "), head[:200]
    assert time.monotonic() - t0 < 2
