"""Back-pressure through the recording HTTP proxy: when the recorder falls behind, the proxy stops
taking in more (upstream answers, client requests) until it catches up, so that its memory stays
bounded; every byte still arrives unchanged, and the sessions that waited say so in `show`.
Recorded through the real proxy (`mcprec record --target`), in front of a real Streamable HTTP
server, with a recorder that truly cannot keep up (another writer holds the cassette's lock)."""

from __future__ import annotations

import hashlib
import http.client
import importlib.util
import json
import re
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from support.helpers import PEERS, assert_show_says_paused, proc_status_bytes, run_mcprec
from support.http_helpers import Proc, _first_stdout_url, start_proxy
from mcprec.cassette import open_cassette
from mcprec.record.process import HIGH_WATER

_spec = importlib.util.spec_from_file_location("big_http_server", PEERS / "big_http_server.py")
assert _spec is not None and _spec.loader is not None
peer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peer)

STREAM = (100, 1_000_000)
"""One tools/call answered by an SSE stream of 100 notifications of 1 MB."""
BLOBS = (10, 3_000_000)
"""Ten tools/call answered in JSON with 3 MB each, one after the other."""
UPLOADS = (30, 1_000_000)
"""Thirty tools/call whose requests carry 1 MB each, one after the other."""
TOTAL = STREAM[0] * STREAM[1] + BLOBS[0] * BLOBS[1] + UPLOADS[0] * UPLOADS[1]
HOLD = 0.5
"""Seconds of the stall the pauses must add up to at least. The recorder is kept stalled for
twice that once the proxy has first paused: that first pause may end before the stall's own
begins, when the recorder's writing thread (at nice 19, behind on busy CPUs) first takes from
its backlog and only then finds its commit waiting for the lock (one run under the full suite:
478 ms of pauses in a 500 ms stall)."""
MAX_GROWTH = 64 * 1024 * 1024
"""How far the proxy's peak RSS may rise above what it had before (33 MiB): the 16 MiB it holds
for the recorder, and what is in flight (a 3 MB answer read whole, copied to be recorded; 1 MiB
read ahead per upstream connection). 160 MB move through it: it rose by 39-42 MiB (without the
bound, by 135-141 MiB)."""


def call(rid: int, tool: str, **arguments: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                         "params": {"name": tool, "arguments": arguments}})


def upload(i: int) -> bytes:
    """The ``i``-th upload request."""
    return call(200 + i, "upload", data=chr(65 + i % 26) * UPLOADS[1])


class Client:
    """One keep-alive connection to the proxy, speaking for one MCP session."""

    made: list[http.client.HTTPConnection] = []

    def __init__(self, url: str, sid: str | None) -> None:
        m = re.match(r"http://([^:/]+):(\d+)(/\S*)", url)
        assert m, url
        self.conn = http.client.HTTPConnection(m.group(1), int(m.group(2)), timeout=60)
        self.made.append(self.conn)
        self.path = m.group(3)
        self.sid = sid

    def post(self, msg: dict[str, Any] | bytes) -> http.client.HTTPResponse:
        headers = {"content-type": "application/json",
                   "accept": "application/json, text/event-stream"}
        if self.sid is not None:
            headers["mcp-session-id"] = self.sid
        self.conn.request("POST", self.path, msg if type(msg) is bytes else orjson.dumps(msg),
                          headers)
        return self.conn.getresponse()

    def open(self) -> None:
        """initialize and notifications/initialized: the session id from the answer."""
        resp = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "backpressure-test", "version": "1"}}})
        resp.read()
        self.sid = resp.getheader("mcp-session-id")
        assert resp.status == 200 and self.sid
        resp = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert (resp.status, resp.read()) == (202, b"")


def _digest(resp: http.client.HTTPResponse) -> tuple[int, str]:
    h, n = hashlib.sha256(), 0
    while chunk := resp.read(1 << 20):
        h.update(chunk)
        n += len(chunk)
    return n, h.hexdigest()


def test_a_stalled_recorder_pauses_the_proxy_and_memory_stays_bounded(tmp_path: Path) -> None:
    """160 MB move through the proxy while the recorder cannot commit: an SSE stream, JSON
    answers and request bodies at once. The proxy pauses, says so once, resumes when the lock is
    released; every byte arrives unchanged, the session is complete with every message, the pause
    is counted and `show` prints it, and the proxy's peak RSS stays far below what went
    through. Every session open during the pause counts it (the whole proxy waited); one opened
    after says nothing of it."""
    cassette = tmp_path / "http.db"
    server = Proc([sys.executable, str(PEERS / "big_http_server.py")], ready=_first_stdout_url,
                  what="the big HTTP peer")
    proxy = None
    try:
        proxy = start_proxy(server.url, cassette, session="big")
        first = Client(proxy.url, None)
        first.open()  # the session's row is written: nothing more needs the lock but commits
        Client(proxy.url, None).open()  # a session open all along, with nothing in flight
        idle_rss = proc_status_bytes(proxy.popen.pid, "VmRSS")
        lock = sqlite3.connect(cassette, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # the recorder's commits wait for this
        got: dict[str, Any] = {}
        failed: list[BaseException] = []

        def stream() -> None:
            resp = Client(proxy.url, first.sid).post(call(1, "stream", count=STREAM[0],
                                                          size=STREAM[1]))
            got["stream"] = (resp.status, _digest(resp))

        def blobs() -> None:
            c = Client(proxy.url, first.sid)
            got["blobs"] = [(r.status, _digest(r)) for r in
                            (c.post(call(100 + i, "blob", size=BLOBS[1]))
                             for i in range(BLOBS[0]))]

        def uploads() -> None:
            c = Client(proxy.url, first.sid)
            got["uploads"] = [(r.status, r.read()) for r in (
                c.post(upload(i)) for i in range(UPLOADS[0]))]

        def run(fn: Any) -> threading.Thread:
            def guarded() -> None:
                try:
                    fn()
                except BaseException as e:  # noqa: BLE001 - reported by the test
                    failed.append(e)
            t = threading.Thread(target=guarded, daemon=True)
            t.start()
            return t

        t0 = time.monotonic()
        clients = [run(stream), run(blobs), run(uploads)]
        deadline = time.monotonic() + 20
        while not any("forwarding waits" in line for line in proxy.err):
            assert time.monotonic() < deadline and not failed, (failed, proxy.stderr_text())
            time.sleep(0.01)
        time.sleep(2 * HOLD)
        lock.execute("ROLLBACK")
        lock.close()
        for t in clients:
            t.join(30)
        took = time.monotonic() - t0
        assert not failed, failed
        hwm = proc_status_bytes(proxy.popen.pid, "VmHWM")

        def expect(body: bytes) -> tuple[int, str]:
            return len(body), hashlib.sha256(body).hexdigest()

        assert got["stream"] == (200, expect(peer.sse_body(1, *STREAM)))  # every byte
        assert got["blobs"] == [(200, expect(peer.blob(100 + i, BLOBS[1])))
                                for i in range(BLOBS[0])]
        assert [status for status, _ in got["uploads"]] == [200] * UPLOADS[0]
        assert all(json.loads(body)["result"]["content"][0]["text"] == str(UPLOADS[1])
                   for _, body in got["uploads"])  # every byte went up

        later = Client(proxy.url, None)  # after the pause: none of it is this session's
        later.open()
        later.conn.request("DELETE", later.path, headers={"mcp-session-id": later.sid or ""})
        assert later.conn.getresponse().status == 200
        code, _ = proxy.stop()
        assert code == 0, proxy.stderr_text()
    finally:
        for conn in Client.made:
            conn.close()
        if proxy is not None:
            proxy.kill()
        server.kill()
    said = proxy.stderr_text()
    assert said.count("forwarding waits") == 1, said  # the warning, once
    print(f"\n{TOTAL / 1e6:.0f} MB in {took:.2f} s; proxy RSS {idle_rss / 2**20:.1f} MiB "
          f"before, peak {hwm / 2**20:.1f} MiB")
    assert hwm - idle_rss < MAX_GROWTH, (idle_rss, hwm)

    listed = {s["name"]: s for s in json.loads(run_mcprec("sessions", str(cassette),
                                                          "--json").stdout)}
    big, idle, calm = listed["big"], listed["big-2"], listed["big-3"]
    messages = 3 + (1 + STREAM[0] + 1) + 2 * BLOBS[0] + 2 * UPLOADS[0]
    assert (big["status"], big["messages"]) == ("complete", messages)
    with open_cassette(cassette) as c:  # recorded as sent, in order
        sent = [m.raw for m in c.messages("big", kinds=("notification", "response"))
                if m.direction == "server_to_client"]
        asked = [m.raw for m in c.messages("big", kinds=("request",)) if m.size > UPLOADS[1]]
    assert asked == [upload(i) for i in range(UPLOADS[0])]
    assert [m for m in sent if b'"method"' in m[:40]] == [
        peer.notification(i, STREAM[1]) for i in range(STREAM[0])]
    assert [m for m in sent if len(m) > BLOBS[1]] == [
        peer.blob(100 + i, BLOBS[1]) for i in range(BLOBS[0])]
    paused = big["backpressure"]
    assert paused["pauses"] >= 1 and paused["paused_ms"] >= HOLD * 1000, paused
    assert paused["bound_bytes"] == HIGH_WATER
    # the whole proxy waited: every session open meanwhile counts the pauses, idle or not
    assert (idle["messages"], idle["backpressure"]) == (3, paused)
    assert (calm["status"], calm["messages"], calm["backpressure"]) == ("complete", 3, None)

    assert_show_says_paused(cassette, "big", paused["pauses"])
    assert "forwarding paused" not in run_mcprec("show", str(cassette), "big-3").stdout.decode()
