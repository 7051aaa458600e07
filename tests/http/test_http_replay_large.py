"""Replaying a large answer over HTTP (``replay --http``): sent from the cassette in pieces, as a
JSON body (its size as content-length) or as an SSE event, never read whole, and byte for byte
what replay sent when it read the answer whole; a recorded 100 MB answer served without holding
it in memory."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.helpers import LARGE_CALL, LARGE_INITIALIZE, LARGE_INITIALIZED, proc_status_bytes
from support.http_helpers import start_replay
from mcprec import wire
from mcprec.cassette.models import PIECE, STORED_APART, StoredText
from mcprec.cassette.store import Cassette
from mcprec.record.recorder import Recorder
from mcprec.replay import model as model_module
from mcprec.faults.rules import Faults, parse_rule
from mcprec.replay.http import ReplayApp
from mcprec.replay.playback import candidates
from mcprec.transports.http_serve import bind, serve_app, url_of
from mcprec.transports.sse import SSEParser, format_event, format_event_pieces

C2S, S2C = wire.CLIENT_TO_SERVER, wire.SERVER_TO_CLIENT
BOTH = "application/json, text/event-stream"
CALL_ID = "call-7"
INITIALIZE, INITIALIZED, CALL = LARGE_INITIALIZE, LARGE_INITIALIZED, LARGE_CALL
NOTE = {"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"level": "info", "data": "drawing"}}


def _data(size: int) -> str:
    return base64.b64encode(os.urandom(size // 4 * 3)).decode()


def _compact(size: int) -> bytes:
    result = {"content": [{"type": "image", "data": _data(size), "mimeType": "image/png"}]}
    return b'{"jsonrpc":"2.0","id":1,"result":%s}' % orjson.dumps(result)


def _pretty() -> bytes:
    """An answer of some 3 MiB whose blanks hold ``\\n``, ``\\r\\n`` and ``\\r`` (an SSE event
    then carries it over several ``data:`` lines), some where the pieces it is read in meet: a
    ``\\r`` ending one piece and a ``\\n`` starting the next."""
    head = b'{"jsonrpc":"2.0","id":1,"result":{"content":['
    end = len(b'{"jsonrpc":"2.0","id":1')  # where the id ends: the pieces start there
    seps = [b",\n", b",\r\n", b",\r", b", \n\n "]
    items = [b'"%s"' % _data(997 + i % 13).encode() for i in range(3000)]
    body = bytearray(head)
    for i, item in enumerate(items):
        body += item + (seps[i % 4] if i + 1 < len(items) else b"")
    body += b"]}}"
    for boundary in (end + PIECE, end + 2 * PIECE):  # blanks where two pieces meet
        at = body.index(b",", boundary - 1200) + 1
        body[at:at] = b" " * (boundary - 1 - at) + b"\r\n"
        assert body[boundary - 1:boundary + 1] == b"\r\n"
    text = bytes(body)
    assert orjson.loads(text)["id"] == 1 and len(text) > 2 * PIECE + end
    return text


def _record(path: Path, answer: bytes, *, sse: bool) -> None:
    """A session recorded through the HTTP proxy: ``initialize`` (the server issued a session
    id), then a ``tools/call`` answered with ``answer``: on an SSE stream after a log message
    (``sse``, with event ids), or as a JSON body."""
    with Cassette.open(path, create=True) as c:
        s = c.create_session("s", transport="http", target="http://127.0.0.1:9/mcp", tags={})
        rec = Recorder(c.connection, s)

        def post(exchange: int) -> dict[str, Any]:
            return {"exchange": exchange, "method": "POST", "path": "/mcp", "headers": {}}

        def answered(exchange: int, mode: str, **more: Any) -> dict[str, Any]:
            return {"exchange": exchange, "status": 200, "content_type": mode, "stream": "post",
                    "headers": {"content-type": "text/event-stream" if mode == "sse" else
                                "application/json", "mcp-session-id": "abc"}, **more}

        rec.add(C2S, 0, orjson.dumps(INITIALIZE), http=post(1))
        rec.add(S2C, 1, orjson.dumps({"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "big", "version": "1"}}}), http=answered(1, "json"),
            context="0")
        rec.add(C2S, 2, orjson.dumps(INITIALIZED), http=post(2))
        rec.add(C2S, 3, orjson.dumps(CALL), http=post(3))
        if sse:
            rec.add(S2C, 4, orjson.dumps(NOTE), http=answered(3, "sse", event_id="e1"),
                    context="1")
            rec.add(S2C, 5, bytearray(answer), http=answered(3, "sse", event_id="e2"),
                    context="1")
        else:
            rec.add(S2C, 4, bytearray(answer), http=answered(3, "json"), context="1")
        rec.finish(exit_code=0)


def _expected(answer: bytes) -> bytes:
    return wire.with_id(answer, CALL_ID) or b""


# --- the replay server in-process, so that a test can see how the answer is read --------------


class _Served:
    """``ReplayApp`` on ``serve_app`` (as ``replay --http`` serves it), in a thread of its own."""

    def __init__(self, path: Path, faults: list[str]) -> None:
        self.ready = threading.Event()
        self.failed: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(path, faults), daemon=True)
        self._thread.start()
        assert self.ready.wait(20), self.failed

    def _run(self, path: Path, faults: list[str]) -> None:
        async def main() -> None:
            with Cassette.open(path) as c:
                app = ReplayApp(c, candidates(c, None), faults=Faults(
                    [parse_rule(f) for f in faults], seed=1) if faults else None)
                sock = bind("127.0.0.1", 0)
                self.url = url_of(sock)
                self.loop = asyncio.get_running_loop()
                self.stop = asyncio.Event()
                try:
                    await serve_app(app, sock, on_ready=self.ready.set, stop=self.stop)
                finally:
                    await app.aclose()

        try:
            asyncio.run(main())
        except BaseException as e:  # noqa: BLE001 - said by the test
            self.failed.append(e)
            self.ready.set()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self._thread.join(10)
        assert not self.failed, self.failed


def _exchange(url: str, accept: str) -> tuple[str, tuple[int, list[tuple[bytes, bytes]], bytes]]:
    """initialize, initialized, then the call with ``CALL_ID``: (the session id, and the call's
    status, headers and body as the client got them)."""
    with httpx.Client(timeout=30) as client:
        opened = client.post(url, json=INITIALIZE, headers={"accept": BOTH})
        sid = opened.headers["mcp-session-id"]
        client.post(url, json=INITIALIZED, headers={"accept": BOTH, "mcp-session-id": sid})
        r = client.post(url, json={**CALL, "id": CALL_ID},
                        headers={"accept": accept, "mcp-session-id": sid})
        return sid, (r.status_code, r.headers.raw, r.content)


def _legacy(base: str) -> tuple[str, bytes]:
    """The legacy HTTP+SSE transport: the SSE stream's bytes up to the call's answer."""
    with httpx.Client(timeout=30) as client, client.stream("GET", base + "/sse") as stream:
        parser = SSEParser()
        got = bytearray()
        chunks = stream.iter_bytes()
        events: list[Any] = []
        while not events:
            got += (chunk := next(chunks))
            events += parser.feed(chunk)
        endpoint = events[0].data.decode()
        for m in (INITIALIZE, INITIALIZED, {**CALL, "id": CALL_ID}):
            assert client.post(base + endpoint, json=m).status_code == 202
        while not any(e.data.startswith(b'{"jsonrpc":"2.0","id":"call') for e in events):
            got += (chunk := next(chunks))
            events += parser.feed(chunk)
        return endpoint.rpartition("=")[2], bytes(got)


def _unread(c: Cassette, m: Any) -> bytes:
    raise AssertionError(f"message seq {m.seq} was read whole")


def _joined(text: StoredText) -> bytes:
    raise AssertionError("a large answer was read whole (bytes(StoredText))")


def _serve(path: Path, accept: str, faults: list[str]) -> tuple[Any, ...]:
    served = _Served(path, faults)
    try:
        if accept == "legacy":
            sid, got = _legacy(served.url.rpartition("/")[0])
        else:
            sid, got = _exchange(served.url, accept)
    finally:
        served.close()

    def same(b: bytes) -> bytes:  # the session id is new each time
        return b.replace(sid.encode(), b"SID").replace(sid[:8].encode(), b"SID8")

    if isinstance(got, bytes):
        return (same(got),)
    status, headers, body = got
    return status, [(k, same(v)) for k, v in headers], same(body)


CASES = {  # (recorded, what the client accepts, faults)
    "json answer": ("json", BOTH, []),
    "sse answer, client takes JSON only": ("sse", "application/json", []),
    "sse answer": ("sse", BOTH, []),
    "sse answer, pretty": ("pretty", BOTH, []),
    "json answer, pretty": ("pretty", "application/json", []),
    "legacy transport": ("sse", "legacy", []),
    "legacy transport, pretty": ("pretty", "legacy", []),
    "wrong id on purpose": ("sse", BOTH, ["tools/call malformed=wrong-id"]),
    "truncated on purpose": ("sse", BOTH, ["tools/call malformed=truncate"]),
    "disconnect after": ("sse", BOTH, ["tools/call disconnect=after"]),
}
# a malformed answer on purpose is read whole by the engine, as before (that with a wrong id is
# then sent from the cassette in pieces)
READ_WHOLE = ("truncated on purpose", "wrong id on purpose")


@pytest.mark.parametrize("case", list(CASES))
def test_large_answer_goes_out_as_it_did_whole(tmp_path: Path, case: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Over HTTP a large answer goes out from the cassette in pieces, never read whole: the
    client gets the very status, headers and body (JSON, or the SSE events with their ids)
    it got when the answer was read whole and spliced."""
    recorded, accept, faults = CASES[case]
    answer = _pretty() if recorded == "pretty" else _compact(3 * 2**20)
    assert len(answer) > STORED_APART
    path = tmp_path / "big.db"
    _record(path, answer, sse=recorded != "json")
    with monkeypatch.context() as m:  # the answer read whole, as replay did before
        m.setattr(model_module, "stored_with_id", lambda message, rid: None)
        before = _serve(path, accept, faults)
    if case not in READ_WHOLE:
        monkeypatch.setattr(Cassette, "raw_of", _unread)
        monkeypatch.setattr(StoredText, "__bytes__", _joined)
    now = _serve(path, accept, faults)
    assert now == before
    if faults:
        return
    want = _expected(answer)
    if accept == "legacy":
        assert SSEParser().feed(now[0])[-1].data == _lines_joined(want)
        return
    status, headers, body = now
    heads = {k.lower(): v for k, v in headers}
    assert status == 200
    if accept == "application/json" or recorded == "json":
        assert heads[b"content-type"] == b"application/json"
        assert heads[b"content-length"] == str(len(want)).encode() and body == want
    else:
        assert heads[b"content-type"] == b"text/event-stream"
        assert body == format_event(orjson.dumps(NOTE), id='SID8-"call-7"-1') + format_event(
            want, id='SID8-"call-7"-2')
        assert [e.data for e in SSEParser().feed(body)] == [orjson.dumps(NOTE),
                                                             _lines_joined(want)]


def _lines_joined(data: bytes) -> bytes:
    """What an SSE client reads for ``data``: its lines (ended by CR LF, CR or LF) joined by LF;
    for JSON written with line breaks between its tokens, the same JSON."""
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60) | st.lists(st.sampled_from([b"a", b"\n", b"\r", b"\r\n", b"xy"]),
                                          max_size=30).map(b"".join),
       st.lists(st.integers(0, 60), max_size=8), st.sampled_from([None, "message", "x"]),
       st.sampled_from([None, "s-1-2"]))
def test_event_in_pieces_is_the_event_whole(data: bytes, cuts: list[int], event: str | None,
                                            id: str | None) -> None:
    """``format_event_pieces`` gives, piece by piece, the bytes ``format_event`` gives for the
    whole data, newlines (and a ``\\r\\n`` cut in two) wherever the pieces meet."""
    at = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    pieces = [data[a:b] for a, b in zip(at, at[1:])]
    framed = list(format_event_pieces(iter(pieces), event=event, id=id))
    assert b"".join(framed) == format_event(data, event=event, id=id)
    assert len(framed) == max(1, len(pieces))


# --- a recorded 100 MB answer, served by `mcprec replay --http` ----------------------------------

HUGE = 100 * 2**20
GROWTH_LIMIT = 40 * 2**20


@pytest.fixture(scope="module")
def huge(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """A session whose tools/call answer is 100 MB; the answer with the client's id."""
    path = tmp_path_factory.mktemp("huge") / "huge.db"
    answer = _compact(HUGE)
    _record(path, answer, sse=True)
    return path, _expected(answer)


@pytest.mark.parametrize("accept", ["application/json", BOTH])
def test_a_100_mb_answer_is_not_held_in_memory(huge: tuple[Path, bytes], accept: str) -> None:
    """The replay server's peak RSS grows by far less than a 100 MB answer while it sends it
    (by 1 GiB and more when it read the answer whole); the client gets it byte for byte."""
    path, want = huge
    proc = start_replay(path)
    try:
        pid = proc.popen.pid
        with httpx.Client(timeout=60) as client:
            sid = client.post(proc.url, json=INITIALIZE,
                              headers={"accept": BOTH}).headers["mcp-session-id"]
            headers = {"accept": accept, "mcp-session-id": sid}
            client.post(proc.url, json=INITIALIZED, headers=headers)
            base = proc_status_bytes(pid, "VmHWM")
            got = hashlib.sha256()
            n = 0
            with client.stream("POST", proc.url, json={**CALL, "id": CALL_ID},
                               headers=headers) as r:
                for chunk in r.iter_raw(1 << 20):
                    got.update(chunk)
                    n += len(chunk)
            peak = proc_status_bytes(pid, "VmHWM")
    finally:
        proc.stop()
    head, tail = b"", b""
    if accept == BOTH:  # the log message, then the answer, as SSE events
        assert r.headers["content-type"] == "text/event-stream"
        event_id = f'{sid[:8]}-"{CALL_ID}"-'
        head = format_event(orjson.dumps(NOTE), id=event_id + "1") + (
            b"event: message\nid: %s2\ndata: " % event_id.encode())
        tail = b"\n\n"
    else:
        assert r.headers["content-length"] == str(len(want))
    expected = hashlib.sha256(head)
    expected.update(want)
    expected.update(tail)
    assert r.status_code == 200
    assert (n, got.hexdigest()) == (len(head) + len(want) + len(tail), expected.hexdigest())
    grew = peak - base
    assert grew < GROWTH_LIMIT, f"peak RSS grew by {grew / 2**20:.0f} MiB"
