"""A client session's state ends with the session, in the recording proxy and in replay --http:
a DELETE releases it, and so does --session-idle for a client that left without one (replay then
answers its session id 404, as the SDK's servers do). Replay's choice among many recorded
sessions shares one read of them between all its clients.

The upstream is the official SDK (tests/peers/http_server.py); the proxy and the replay server
run in a thread of the test (to look at what they hold) or as `mcprec` processes.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from support.http_helpers import start_proxy, start_replay, start_sdk_http
from support.helpers import run_mcprec
from mcprec.cassette import Cassette
from mcprec.record.http_sessions import ProxyRecordings
from mcprec.replay.choose import shared_candidates
from mcprec.replay.http import ReplayApp
from mcprec.replay.playback import candidates
from mcprec.transports.http_proxy import RecordingProxy
from mcprec.transports.http_serve import bind, serve_app, url_of

HEAD = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "lifetime", "version": "1"}}}
SESSIONS = 4


def _open(client: httpx.Client, url: str) -> str:
    r = client.post(url, content=orjson.dumps(INIT), headers=HEAD)
    assert r.status_code == 200, r.text
    sid = r.headers["mcp-session-id"]
    r = client.post(url, content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                    headers={**HEAD, "mcp-session-id": sid})
    assert r.status_code == 202
    return sid


def _call(client: httpx.Client, url: str, sid: str, text: str) -> httpx.Response:
    return client.post(url, content=orjson.dumps({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": text}}}),
        headers={**HEAD, "mcp-session-id": sid})


def _session(url: str, text: str, delete: bool = True) -> str:
    with httpx.Client(timeout=30) as client:
        sid = _open(client, url)
        r = _call(client, url, sid, text)
        assert r.status_code == 200 and text in r.text, r.text
        if delete:
            assert client.delete(url, headers={"mcp-session-id": sid}).status_code == 200
    return sid


class _Served:
    """An ASGI app made by ``make()`` served on 127.0.0.1 in a thread of its own."""

    def __init__(self, make: Callable[[], Any], path: str = "/mcp") -> None:
        self.ready = threading.Event()
        self.failed: list[BaseException] = []
        self.app: Any = None
        self._make = make
        self._path = path
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self.ready.wait(20), self.failed

    def _run(self) -> None:
        async def main() -> None:
            self.app = self._make()
            sock = bind("127.0.0.1", 0)
            self.url = url_of(sock, self._path)
            self.loop = asyncio.get_running_loop()
            self.stop = asyncio.Event()
            try:
                await serve_app(self.app, sock, on_ready=self.ready.set, stop=self.stop)
            finally:
                await self.app.aclose()

        try:
            asyncio.run(main())
        except BaseException as e:  # noqa: BLE001 - said by the test
            self.failed.append(e)
            self.ready.set()

    def call(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` on the server's loop (what it holds is read there)."""
        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self._thread.join(20)
        assert not self.failed, self.failed


def _until(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


@pytest.fixture(scope="module")
def upstream() -> Iterator[Any]:
    proc = start_sdk_http()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def many(upstream: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cassette of ``SESSIONS`` recorded sessions, each calling echo with its own text."""
    cassette = tmp_path_factory.mktemp("lifetime") / "many.db"
    proxy = start_proxy(upstream.url, cassette, "rec")
    try:
        for i in range(SESSIONS):
            _session(proxy.url, f"text-{i}")
    finally:
        proxy.stop()
    return cassette


def test_proxy_releases_sessions_on_delete_and_when_idle(upstream: Any, tmp_path: Path) -> None:
    """The proxy holds nothing of a DELETEd session, nor of one idle past --session-idle."""
    cassette = tmp_path / "proxy.db"
    served = _Served(lambda: RecordingProxy(upstream.url, cassette, session_idle=0.3,
                                          recordings=ProxyRecordings))
    try:
        for i in range(5):
            _session(served.url, f"deleted-{i}")
        held = served.call(served.app.held)
        assert held == {"routed": 0, "recording": 0, "idle_tracked": 0}
        for i in range(3):
            _session(served.url, f"left-{i}", delete=False)
        assert served.call(served.app.held)["routed"] == 3
        assert _until(lambda: served.call(served.app.held) == {
            "routed": 0, "recording": 0, "idle_tracked": 0})
    finally:
        served.close()
    with Cassette.open(cassette) as c:
        sessions = c.sessions()
        assert len(sessions) == 8
        assert {s.status for s in sessions} == {"complete"}


def test_replay_releases_client_sessions_and_shares_candidates(many: Path) -> None:
    """Clients that DELETE leave nothing behind; all of them choose from one shared read."""
    with Cassette.open(many) as c:
        found = candidates(c, None)
        assert len(found) == SESSIONS
        served = _Served(lambda: ReplayApp(c, found))
        try:
            shared = shared_candidates(c, found, None)
            assert shared is not None
            with httpx.Client(timeout=30) as client:
                sid = _open(client, served.url)
                r = _call(client, served.url, sid, "text-2")
                assert "text-2" in r.text
                choice = served.call(lambda: served.app.sessions[sid].engine.playback.choice)
                assert choice._shared is shared and choice.remaining == 1
                assert choice.session.name == "rec-3"  # the third recorded, named from 1
                client.delete(served.url, headers={"mcp-session-id": sid})
            for i in range(20):
                _session(served.url, f"text-{i % SESSIONS}")
            assert served.call(lambda: (len(served.app.sessions), len(served.app.idle),
                                        len(served.app.finished))) == (0, 0, 0)
        finally:
            served.close()


def test_replay_idle_client_gets_404_after_session_idle(many: Path) -> None:
    """A client back after --session-idle finds its session gone: 404 and a JSON-RPC error."""
    proc = start_replay(many, extra=["--session-idle", "300ms"])
    try:
        with httpx.Client(timeout=30) as client:
            sid = _open(client, proc.url)
            assert "text-1" in _call(client, proc.url, sid, "text-1").text
            time.sleep(1.2)
            r = _call(client, proc.url, sid, "text-1")
            assert r.status_code == 404
            assert r.json() == {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32600, "message": "Session not found"}}
            fresh = _open(client, proc.url)  # a new session works as ever
            assert "text-0" in _call(client, proc.url, fresh, "text-0").text
    finally:
        code, _ = proc.stop()
    assert code == 0
    assert any("--session-idle" in line for line in proc.err), proc.err


def test_replay_open_get_stream_holds_session_until_delete(many: Path) -> None:
    """An open GET stream keeps its session past --session-idle; DELETE ends it and its stream."""
    with Cassette.open(many) as c:
        found = candidates(c, "rec")
        served = _Served(lambda: ReplayApp(c, found, session_idle=0.2))
        try:
            ended = threading.Event()
            with httpx.Client(timeout=30) as client:
                sid = _open(client, served.url)

                def listen() -> None:
                    with httpx.Client(timeout=30) as other, other.stream(
                            "GET", served.url, headers={"accept": "text/event-stream",
                                                        "mcp-session-id": sid}) as r:
                        assert r.status_code == 200
                        for _ in r.iter_bytes():
                            pass
                    ended.set()

                t = threading.Thread(target=listen, daemon=True)
                t.start()
                time.sleep(1.0)
                assert served.call(lambda: sid in served.app.sessions)
                assert client.delete(served.url, headers={"mcp-session-id": sid}
                                     ).status_code == 200
                assert ended.wait(10), "the GET stream did not end with its session"
                t.join(10)
            assert served.call(lambda: (len(served.app.sessions), len(served.app.idle))) == (0, 0)
        finally:
            served.close()


def test_session_idle_takes_a_duration_or_off(many: Path) -> None:
    """--session-idle rejects what is not a duration with one line and exit 2."""
    r = run_mcprec("replay", str(many), "--http", "--session-idle", "soon")
    assert r.returncode == 2
    assert b"--session-idle" in r.stderr and b"Traceback" not in r.stderr


def _sampled(upstream: Any, cassette: Path, *flags: str, sessions: int = 12) -> list[str]:
    proxy = start_proxy(upstream.url, cassette, "s", extra=flags)
    try:
        for i in range(sessions):
            _session(proxy.url, f"sampled-{i}")
    finally:
        proxy.stop()
    if not cassette.exists():
        return []
    with Cassette.open(cassette) as c:
        return sorted(m.json["params"]["arguments"]["text"] for s in c.sessions()
                      for m in c.requests(s, "tools/call"))


def test_sample_records_a_seeded_fraction_of_sessions(upstream: Any, tmp_path: Path) -> None:
    """--sample 0.5 --seed 7 records about half the sessions, the same ones every run."""
    first = _sampled(upstream, tmp_path / "a.db", "--sample", "0.5", "--seed", "7")
    again = _sampled(upstream, tmp_path / "b.db", "--sample", "0.5", "--seed", "7")
    assert first == again
    assert 0 < len(first) < 12
    assert len(_sampled(upstream, tmp_path / "c.db", "--sample", "1", sessions=3)) == 3


def test_sample_needs_a_fraction_and_target(tmp_path: Path) -> None:
    """A --sample outside (0, 1], or --seed alone, is refused with one line and exit 2."""
    for args in (["--sample", "0"], ["--sample", "1.5"], ["--seed", "3"]):
        r = run_mcprec("record", "--target", "http://127.0.0.1:9/mcp", "-c",
                       str(tmp_path / "x.db"), *args)
        assert r.returncode == 2, (args, r.stderr)
        assert b"Traceback" not in r.stderr
