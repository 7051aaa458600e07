"""The recording proxy's upstream side at the HTTP wire: what a real server may legitimately send
(bodies ending at connection close, interim 1xx answers, big bodies, compressed bodies, HEAD,
connections it closes between requests) and what it may fail to (answer in time)."""

from __future__ import annotations

import gzip
import json
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.http_helpers import RawRequest, RawUpstream, start_proxy
from mcprec.cassette import open_cassette

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def rpc(i: int, method: str = "tools/call", **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "method": method, "params": params}


def answer(req: RawRequest) -> bytes:
    msg = json.loads(req.body)
    return json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": msg["params"]}).encode()


def through_proxy(tmp_path: Path, handler: Any, *requests: Any, extra: tuple[str, ...] = ()
                  ) -> tuple[list[httpx.Response], RawUpstream, list[Any], str]:
    """Send ``requests`` (callables taking (client, url)) through a proxy to a raw upstream."""
    upstream = RawUpstream(handler)
    cas = tmp_path / "wire.db"
    proxy = start_proxy(upstream.url, cas, session="wire", extra=extra)
    try:
        with httpx.Client(timeout=20) as client:
            responses = [r(client, proxy.url) for r in requests]
    finally:
        proxy.stop()
        upstream.close()
    with open_cassette(cas) as c:
        messages = [m for s in c.sessions() for m in c.messages(s)]
    return responses, upstream, messages, proxy.stderr_text()


def post(body: Any) -> Any:
    return lambda client, url: client.post(url, content=json.dumps(body).encode(), headers=ACCEPT)


def test_body_ending_at_connection_close(tmp_path: Path) -> None:
    """An answer without Content-Length or chunking, ended by closing the connection, is whole."""
    def handle(req: RawRequest, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
                     b"\r\n" + answer(req))
        conn.close()

    (r1, r2), upstream, ms, _ = through_proxy(tmp_path, handle, post(rpc(1, x=1)), post(rpc(2, x=2)))
    assert (r1.status_code, r1.json()["result"]) == (200, {"x": 1})
    assert (r2.status_code, r2.json()["result"]) == (200, {"x": 2})
    assert len(upstream.requests) == 2
    assert [m.json["id"] for m in ms if m.kind == "response"] == [1, 2]


def test_interim_100_continue_is_skipped(tmp_path: Path) -> None:
    """A `100 Continue` before the answer is not mistaken for it."""
    def handle(req: RawRequest, conn: socket.socket) -> None:
        body = answer(req)
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-type: "
                     b"application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))

    (r,), _, ms, _ = through_proxy(tmp_path, handle, post(rpc(1, y="z")))
    assert r.status_code == 200 and r.json()["result"] == {"y": "z"}
    assert [m.kind for m in ms] == ["request", "response"]


def test_big_bodies_both_ways_byte_exact(tmp_path: Path) -> None:
    """A 3 MB request and a 6 MB chunked SSE answer pass unchanged and are recorded whole."""
    text = "0123456789abcdef" * (3 * 1024 * 1024 // 16)

    def handle(req: RawRequest, conn: socket.socket) -> None:
        msg = json.loads(req.body)
        data = json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                           "result": {"t": msg["params"]["t"] * 2}}).encode()
        event = b"event: message\ndata: " + data + b"\n\n"
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                     b"transfer-encoding: chunked\r\n\r\n")
        for i in range(0, len(event), 100_000):  # many chunks, as a server streams them
            piece = event[i:i + 100_000]
            conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        conn.sendall(b"0\r\n\r\n")

    (r,), upstream, ms, _ = through_proxy(tmp_path, handle, post(rpc(7, t=text)))
    assert upstream.requests[0].body == json.dumps(rpc(7, t=text)).encode()
    assert r.status_code == 200
    assert r.text.startswith("event: message\ndata: ") and r.text.endswith("\n\n")
    assert json.loads(r.text[len("event: message\ndata: "):])["result"]["t"] == text * 2
    resp = [m for m in ms if m.kind == "response"]
    assert len(resp) == 1 and resp[0].json["result"]["t"] == text * 2


def test_gzip_answer_forwarded_compressed_recorded_plain(tmp_path: Path) -> None:
    """A gzip-encoded JSON answer reaches the client compressed as sent; the cassette holds JSON."""
    def handle(req: RawRequest, conn: socket.socket) -> None:
        body = gzip.compress(answer(req))
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: "
                     b"gzip\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))

    def raw_post(client: httpx.Client, url: str) -> Any:
        with client.stream("POST", url, content=json.dumps(rpc(3, g=1)).encode(),
                           headers={**ACCEPT, "accept-encoding": "gzip"}) as r:
            return r, b"".join(r.iter_raw())

    ((r, raw),), _, ms, _ = through_proxy(tmp_path, handle, raw_post)
    assert r.headers["content-encoding"] == "gzip"
    assert json.loads(gzip.decompress(raw))["result"] == {"g": 1}
    assert [m.json for m in ms if m.kind == "response"] == [
        {"jsonrpc": "2.0", "id": 3, "result": {"g": 1}}]


def test_head_request_then_post_on_same_proxy(tmp_path: Path) -> None:
    """A HEAD (headers, no body) does not confuse the next exchange."""
    def handle(req: RawRequest, conn: socket.socket) -> None:
        if req.method == "HEAD":
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: 1234\r\n\r\n")
            return
        body = answer(req)
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\n\r\n%s" % (len(body), body))

    (h, r), _, _, _ = through_proxy(tmp_path, handle, lambda c, u: c.head(u), post(rpc(4)))
    assert h.status_code == 200 and h.content == b""
    assert r.status_code == 200 and r.json()["id"] == 4


def test_upstream_closing_idle_connections(tmp_path: Path) -> None:
    """When upstream closes its keep-alive connection after each answer, each request still works
    and reaches it exactly once."""
    def handle(req: RawRequest, conn: socket.socket) -> None:
        body = answer(req)
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\n\r\n%s" % (len(body), body))
        conn.shutdown(socket.SHUT_RDWR)
        conn.close()

    def later(i: int) -> Any:
        def go(client: httpx.Client, url: str) -> Any:
            time.sleep(0.05)  # the proxy has seen the close by now
            return client.post(url, json=rpc(i), headers=ACCEPT)
        return go

    rs, upstream, _, _ = through_proxy(tmp_path, handle, *(later(i) for i in range(5)))
    assert [r.json()["id"] for r in rs] == list(range(5))
    assert len(upstream.requests) == 5


def test_upstream_too_slow_is_504(tmp_path: Path) -> None:
    """An upstream that does not answer within --upstream-timeout gets the client a 504."""
    def handle(req: RawRequest, conn: socket.socket) -> None:
        time.sleep(3)

    t0 = time.monotonic()
    (r,), _, ms, err = through_proxy(tmp_path, handle, post(rpc(9)),
                                     extra=("--upstream-timeout", "0.5"))
    assert r.status_code == 504
    assert r.json()["id"] == 9 and "timed out" in r.json()["error"]["message"]
    assert time.monotonic() - t0 < 3
    assert any(m.http and m.http.get("status") == 504 for m in ms)
    assert "Traceback" not in err


@pytest.mark.parametrize("garbage", [b"NOT HTTP AT ALL\r\n\r\n", b""])
def test_upstream_garbage_or_silent_close_is_502(tmp_path: Path, garbage: bytes) -> None:
    """An upstream answering with garbage, or hanging up without a word, is a 502."""
    def handle(req: RawRequest, conn: socket.socket) -> None:
        conn.sendall(garbage)
        conn.close()

    (r,), _, _, err = through_proxy(tmp_path, handle, post(rpc(5)))
    assert r.status_code == 502
    assert r.json()["jsonrpc"] == "2.0" and r.json()["id"] == 5
    assert "Traceback" not in err


def test_a_held_pool_stops_reading_and_waits_past_its_timeout() -> None:
    """``Upstream.hold`` (the recorder is behind): a connection stops reading its answer at the
    next bytes to arrive, hands on what it read, waits past its timeout without failing (the
    silence is the proxy's own, not the upstream's), and reads on where it stopped once the hold
    ends: the body whole, byte for byte."""
    import asyncio

    from mcprec.transports.http_upstream import Upstream

    body = bytes(range(256)) * 16384  # 4 MiB

    def handle(req: RawRequest, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\n\r\n" % len(body) + body)

    upstream = RawUpstream(handle)

    async def main() -> None:
        pool = Upstream(f"http://127.0.0.1:{upstream.port}", timeout=0.2)
        got = bytearray()

        async def read() -> None:
            async for chunk in resp.aiter_raw():
                got.extend(chunk)

        pool.hold(True)
        resp = await pool.send("POST", "/mcp", [(b"host", b"127.0.0.1"),
                                                (b"content-length", b"2")], b"{}")
        reading = asyncio.get_running_loop().create_task(read())
        await asyncio.sleep(0.7)  # more than three timeouts
        assert not reading.done() and 0 < len(got) <= 1 << 20
        pool.hold(False)
        await asyncio.wait_for(reading, 10)
        assert got == body
        await resp.aclose()
        await pool.aclose()

    try:
        asyncio.run(main())
    finally:
        upstream.close()
