"""Fuzz the HTTP front ends (replay server and recording proxy) with malformed requests.

Whatever arrives on the socket, each answers with an HTTP status or closes the connection; it
never crashes, never hangs, and keeps serving well-formed requests afterwards.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcprec import wire
from mcprec.record.writer import open_session_writer

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def _cassette(path: Path) -> Path:
    w = open_session_writer(path, "s", transport="stdio", target=["x"])
    w.message(wire.CLIENT_TO_SERVER, orjson.dumps(INIT), 0)
    w.message(wire.SERVER_TO_CLIENT, orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "f",
                                                                           "version": "1"}}}), 1)
    w.close()
    return path


def _start(argv: list[str], url_from_stderr: bool) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    stream = proc.stderr if url_from_stderr else proc.stdout
    line = stream.readline().decode()
    m = re.search(r"http://[\d.]+:\d+\S*", line)
    assert m, f"no URL in {line!r}"
    return proc, m.group(0)


@pytest.fixture(scope="module")
def endpoints(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A replay server, and a recording proxy in front of it."""
    tmp = tmp_path_factory.mktemp("fuzz")
    cassette = _cassette(tmp / "in.db")
    replay, replay_url = _start([sys.executable, "-m", "mcprec", "replay", str(cassette),
                                 "--http", "--listen", "127.0.0.1:0"], url_from_stderr=False)
    proxy, proxy_url = _start([sys.executable, "-m", "mcprec", "record", "--target", replay_url,
                               "--listen", "127.0.0.1:0", "-c", str(tmp / "out.db")],
                              url_from_stderr=True)
    yield {"replay": replay_url, "proxy": proxy_url}
    for p in (proxy, replay):
        p.send_signal(2)
        _, err = p.communicate(timeout=10)
        assert p.returncode == 0, err


def _hostport(url: str) -> tuple[str, int]:
    m = re.match(r"http://([\d.]+):(\d+)", url)
    assert m
    return m.group(1), int(m.group(2))


def _exchange(url: str, data: bytes, timeout: float = 5.0) -> bytes:
    """Send ``data``, read until the server closes (``Connection: close``) or goes quiet.

    No half-close: the server would take it for a client gone away. Going quiet is fine for a
    request whose declared body never fully arrives: the server is waiting for it, not hung.
    """
    out = b""
    with socket.create_connection(_hostport(url), timeout=timeout) as s:
        s.sendall(data)
        try:
            while chunk := s.recv(65536):
                out += chunk
        except (socket.timeout, ConnectionResetError):
            pass
    return out


def _healthy(url: str) -> None:
    body = orjson.dumps(INIT)
    resp = _exchange(url, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                          b"application/json\r\nAccept: application/json, text/event-stream\r\n"
                          b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
    assert resp.startswith(b"HTTP/1.1 200"), resp[:200]
    assert b'"serverInfo"' in resp


methods = st.sampled_from([b"GET", b"POST", b"DELETE", b"PUT", b"OPTIONS", b"P\x00ST", b""])
paths = st.sampled_from([b"/mcp", b"/sse", b"/messages?session_id=x", b"/", b"*", b"/%ff%00",
                         b"/mcp?" + b"a" * 3000])
headers = st.lists(st.tuples(
    st.sampled_from([b"Content-Type", b"Mcp-Session-Id", b"Accept", b"Origin", b"Content-Length",
                     b"Transfer-Encoding", b"Host", b"X-\xff"]),
    st.binary(max_size=30).filter(lambda b: b"\r" not in b and b"\n" not in b)), max_size=5)
bodies = st.one_of(st.binary(max_size=200), st.just(b"{"), st.just(b'{"jsonrpc":"2.0"}'),
                   st.just(b"[]"), st.just(orjson.dumps(INIT)))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["replay", "proxy"]), methods, paths, headers, bodies,
       st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/9", b""]))
def test_malformed_requests_get_a_status_or_a_close(endpoints: dict[str, str], target: str,
                                                    method: bytes, path: bytes,
                                                    hdrs: list[tuple[bytes, bytes]], body: bytes,
                                                    version: bytes) -> None:
    """Garbage in: an HTTP status (or a closed connection) out, and the server lives on."""
    url = endpoints[target]
    head = method + b" " + path + b" " + version + b"\r\nHost: 127.0.0.1\r\n"
    head += b"".join(k + b": " + v + b"\r\n" for k, v in hdrs)
    out = _exchange(url, head + b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
                    % (len(body), body), timeout=1.0)
    assert out == b"" or re.match(rb"HTTP/1\.[01] [1-5]\d\d", out), out[:200]
    assert not out.startswith(b"HTTP/1.1 5") or target == "proxy", out[:300]


def test_still_healthy_after_fuzzing(endpoints: dict[str, str]) -> None:
    """After the fuzzing, both front ends answer a well-formed initialize."""
    _healthy(endpoints["replay"])
    _healthy(endpoints["proxy"])
