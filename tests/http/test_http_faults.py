"""HTTP faults: upstream down or cutting a stream, clients leaving mid-stream, ports in use,
malformed bodies, and the replay server's Origin / Host / session checks."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from support.helpers import dump, run_mcprec
from support.http_helpers import (
    RawRequest, RawUpstream, free_port, read_jsonl, run_http_session, run_sync, start_proxy,
    start_replay, start_sdk_http,
)
from mcprec.cassette import open_cassette

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"}}}
MALFORMED = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", '


def initialize(client: httpx.Client, url: str) -> dict[str, str]:
    """initialize + initialized over raw HTTP; the headers for the session's next requests."""
    r = client.post(url, json=INIT, headers=ACCEPT)
    assert r.status_code == 200, r.text
    headers = {**ACCEPT, "mcp-session-id": r.headers["mcp-session-id"],
               "mcp-protocol-version": "2025-11-25"}
    r = client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                    headers=headers)
    assert r.status_code == 202
    return headers


@pytest.fixture(scope="module")
def sdk(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The SDK HTTP peer behind a running proxy; one short session recorded as 'short'."""
    tmp = tmp_path_factory.mktemp("faults")
    log = tmp / "requests.jsonl"
    upstream = start_sdk_http(requests_log=log)
    cas = tmp / "faults.db"
    proxy = start_proxy(upstream.url, cas, session="short")

    async def short(s: Any, run: Any) -> None:
        run.results["tools/list"] = dump(await s.list_tools())

    run_sync(lambda: run_http_session(proxy.url, short))
    yield SimpleNamespace(upstream=upstream, proxy=proxy, cassette=cas, log=log)
    proxy.stop()
    upstream.stop()


@pytest.fixture(scope="module")
def replay(sdk: SimpleNamespace) -> Any:
    """`mcprec replay --http` of the session 'short'."""
    proc = start_replay(sdk.cassette, "short")
    yield proc
    proc.stop()


# --- upstream faults --------------------------------------------------------------------------


def test_upstream_down_gives_502_jsonrpc_error(tmp_path: Path) -> None:
    """With nothing listening upstream, the client promptly gets 502 and a JSON-RPC error."""
    cas = tmp_path / "down.db"
    proxy = start_proxy(f"http://127.0.0.1:{free_port()}/mcp", cas, session="down")
    try:
        t0 = time.monotonic()
        r = httpx.post(proxy.url, json=INIT, headers=ACCEPT, timeout=15)
        took = time.monotonic() - t0
    finally:
        code, _ = proxy.stop()
    assert r.status_code == 502
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == 1
    assert "unreachable" in body["error"]["message"]
    assert took < 5
    assert code == 0


def test_upstream_down_is_recorded(tmp_path: Path) -> None:
    """The request and the proxy's 502 answer (marked synthetic) are in the cassette."""
    cas = tmp_path / "down.db"
    proxy = start_proxy(f"http://127.0.0.1:{free_port()}/mcp", cas, session="down")
    try:
        httpx.post(proxy.url, json=INIT, headers=ACCEPT, timeout=15)
    finally:
        proxy.stop()
    with open_cassette(cas) as c:
        ms = list(c.messages("down"))
        status = c.session("down").status
    assert [(m.direction, m.kind, m.method) for m in ms] == [
        ("client_to_server", "request", "initialize"), ("server_to_client", "error", "initialize")]
    assert ms[1].http["status"] == 502 and ms[1].http["synthetic"] is True
    assert status == "complete"


def _cutting_upstream() -> RawUpstream:
    """Answers initialize with JSON; any other request with one SSE event, then hangs up."""

    def handle(req: RawRequest, conn: socket.socket) -> None:
        msg = json.loads(req.body)
        if msg.get("method") == "initialize":
            body = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "serverInfo": {"name": "cutter", "version": "0"}}}).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"mcp-session-id: cut-1\r\ncontent-length: %d\r\n\r\n%s"
                         % (len(body), body))
            return
        event = (b'id: e1\nevent: message\ndata: {"jsonrpc":"2.0",'
                 b'"method":"notifications/progress","params":{"progressToken":2,"progress":1}}'
                 b'\n\n')
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                     b"transfer-encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n" % (len(event), event))
        time.sleep(0.2)
        conn.shutdown(socket.SHUT_RDWR)
        conn.close()

    return RawUpstream(handle)


@pytest.fixture
def cut_stream(tmp_path: Path) -> SimpleNamespace:
    """A client reading an SSE response that the upstream cuts after one event."""
    upstream = _cutting_upstream()
    cas = tmp_path / "cut.db"
    proxy = start_proxy(upstream.url, cas, session="cut")
    received = b""
    error: Exception | None = None
    try:
        with httpx.Client(timeout=10) as client:
            r = client.post(proxy.url, json=INIT, headers=ACCEPT)
            headers = {**ACCEPT, "mcp-session-id": r.headers["mcp-session-id"]}
            t0 = time.monotonic()
            try:
                with client.stream("POST", proxy.url, headers=headers, json={
                        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "x", "_meta": {"progressToken": 2}}}) as resp:
                    for chunk in resp.iter_raw():
                        received += chunk
            except httpx.HTTPError as e:
                error = e
            took = time.monotonic() - t0
            after = client.post(proxy.url, json=INIT, headers=ACCEPT)
    finally:
        code, _ = proxy.stop()
        upstream.close()
    with open_cassette(cas) as c:
        ms = list(c.messages("cut"))
    return SimpleNamespace(received=received, error=error, took=took, after=after, code=code,
                           messages=ms, stderr=proxy.stderr_text())


def test_upstream_cut_reaches_the_client(cut_stream: SimpleNamespace) -> None:
    """The client gets the event sent before the cut, then a JSON-RPC error for its request
    (id 2) that ends its stream, at once: the pending call fails instead of waiting."""
    assert b'"progress":1' in cut_stream.received
    last = cut_stream.received.strip().split(b"\n\n")[-1]
    error = json.loads(last.split(b"data: ", 1)[1])
    assert error["id"] == 2 and "dropped the stream" in error["error"]["message"]
    assert cut_stream.error is None
    assert cut_stream.took < 5


def test_upstream_cut_does_not_hang_the_proxy(cut_stream: SimpleNamespace) -> None:
    """After the cut the proxy serves the next request and exits 0 on SIGINT, one-line note."""
    assert cut_stream.after.status_code == 200
    assert cut_stream.code == 0
    assert "upstream dropped an SSE stream" in cut_stream.stderr
    assert "Traceback" not in cut_stream.stderr


def test_upstream_cut_event_is_recorded(cut_stream: SimpleNamespace) -> None:
    """The event forwarded before the cut is in the cassette, with its event id, then the error
    the proxy ended the stream with, marked synthetic and answering request 2."""
    progress = [m for m in cut_stream.messages if m.method == "notifications/progress"]
    assert len(progress) == 1
    assert progress[0].json["params"]["progress"] == 1
    assert progress[0].http["event_id"] == "e1"
    failed = [m for m in cut_stream.messages if m.http and m.http.get("synthetic")]
    assert [(m.kind, m.rpc_id, m.reply_to is not None) for m in failed] == [("error", "2", True)]
    assert "dropped" in failed[0].http["error"]


# --- client faults ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def left_mid_stream(sdk: SimpleNamespace) -> SimpleNamespace:
    """A client hangs up after 3 events of a long SSE answer, then asks for tools/list."""
    with httpx.Client(timeout=10) as client:
        headers = initialize(client, sdk.proxy.url)
        events = 0
        with client.stream("POST", sdk.proxy.url, headers=headers, json={
                "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                    "name": "stream", "arguments": {"steps": 200, "delay_ms": 50},
                    "_meta": {"progressToken": 2}}}) as resp:
            for line in resp.iter_lines():
                events += line.startswith("data:")
                if events == 3:
                    break  # leaving the block closes the connection mid-stream
        t0 = time.monotonic()
        after = client.post(sdk.proxy.url, headers=headers,
                            json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
        took = time.monotonic() - t0
    return SimpleNamespace(after=after, took=took, sid=headers["mcp-session-id"])


def test_client_leaving_mid_stream_leaves_proxy_healthy(sdk: SimpleNamespace,
                                                        left_mid_stream: SimpleNamespace) -> None:
    """A client that hangs up during a long SSE response does not disturb the next request."""
    r = left_mid_stream.after
    assert r.status_code == 200 and b'"id":3' in r.content
    assert left_mid_stream.took < 2
    assert sdk.proxy.popen.poll() is None
    assert "Traceback" not in sdk.proxy.stderr_text()


def test_client_leaving_mid_stream_request_reached_upstream_once(
        sdk: SimpleNamespace, left_mid_stream: SimpleNamespace) -> None:
    """The abandoned call reached upstream exactly once, not retried."""
    calls = [e for e in read_jsonl(sdk.log)
             if e.get("rpc") == "tools/call" and e["sid"] == left_mid_stream.sid]
    assert [e["id"] for e in calls] == [2]


def test_malformed_json_to_proxy_is_forwarded_as_is(tmp_path: Path) -> None:
    """The proxy passes a malformed body upstream byte for byte and relays upstream's answer."""
    answer = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"upstream says no"}}'

    def handle(req: RawRequest, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\n\r\n%s" % (len(answer), answer))

    upstream = RawUpstream(handle)
    proxy = start_proxy(upstream.url, tmp_path / "bad.db")
    try:
        r = httpx.post(proxy.url, content=MALFORMED, headers=ACCEPT, timeout=10)
    finally:
        proxy.stop()
        upstream.close()
    assert [q.body for q in upstream.requests] == [MALFORMED]
    assert r.status_code == 400 and r.content == answer


def test_malformed_json_to_proxy_answered_as_the_sdk_server_does(sdk: SimpleNamespace) -> None:
    """Upstream decides: through the proxy the SDK server's answer equals the direct one."""
    direct = httpx.post(sdk.upstream.url, content=MALFORMED, headers=ACCEPT, timeout=10)
    proxied = httpx.post(sdk.proxy.url, content=MALFORMED, headers=ACCEPT, timeout=10)
    assert direct.status_code >= 400
    assert (proxied.status_code, proxied.json()) == (direct.status_code, direct.json())


# --- ports in use -----------------------------------------------------------------------------


@pytest.fixture
def busy_port() -> Any:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        yield s.getsockname()[1]


def _one_line_usage_error(proc: Any) -> str:
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mcprec: "), err
    return lines[0]


def test_record_listen_port_in_use(busy_port: int, tmp_path: Path) -> None:
    """`record --target --listen` on a busy port: one `mcprec:` line, exit 2, no cassette."""
    proc = run_mcprec("record", "--target", "http://127.0.0.1:9/mcp", "--listen",
                      f"127.0.0.1:{busy_port}", "-c", str(tmp_path / "x.db"), timeout=20)
    assert "in use" in _one_line_usage_error(proc)
    assert not (tmp_path / "x.db").exists()


def test_replay_listen_port_in_use(busy_port: int, sdk: SimpleNamespace) -> None:
    """`replay --http --listen` on a busy port: one `mcprec:` line, exit 2."""
    proc = run_mcprec("replay", str(sdk.cassette), "-s", "short", "--http", "--listen",
                      f"127.0.0.1:{busy_port}", timeout=20)
    assert "in use" in _one_line_usage_error(proc)


# --- the replay server's checks ---------------------------------------------------------------


def test_replay_malformed_json_is_400_parse_error(replay: Any) -> None:
    """A malformed body gets 400 and a JSON-RPC parse error (-32700)."""
    r = httpx.post(replay.url, content=MALFORMED, headers=ACCEPT, timeout=10)
    assert r.status_code == 400
    assert r.json()["error"]["code"] == -32700


def test_replay_request_id_mcp_does_not_allow_is_400_invalid_request(replay: Any) -> None:
    """An id that is neither a string nor an integer gets 400 and Invalid Request (-32600)."""
    r = httpx.post(replay.url, content=b'{"jsonrpc":"2.0","id":true,"method":"initialize",'
                   b'"params":{}}', headers=ACCEPT, timeout=10)
    assert r.status_code == 400
    assert r.json()["id"] is None and r.json()["error"]["code"] == -32600


def test_replay_wrong_origin_is_403(replay: Any) -> None:
    """A browser Origin that is not local is refused with 403."""
    r = httpx.post(replay.url, json=INIT, headers={**ACCEPT, "origin": "http://evil.example"},
                   timeout=10)
    assert r.status_code == 403
    assert r.json()["error"]["message"]


def test_replay_local_origin_is_accepted(replay: Any) -> None:
    """A local Origin (the replay server's own) is accepted."""
    r = httpx.post(replay.url, json=INIT, headers={**ACCEPT, "origin": replay.base}, timeout=10)
    assert r.status_code == 200


def test_replay_wrong_host_is_421(replay: Any) -> None:
    """A Host header naming another host (DNS rebinding) is refused with 421."""
    r = httpx.post(replay.url, json=INIT, headers={**ACCEPT, "host": "evil.example"}, timeout=10)
    assert r.status_code == 421


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
def test_replay_unknown_session_is_404(replay: Any, method: str) -> None:
    """A request naming an Mcp-Session-Id the server never issued gets 404."""
    headers = {**ACCEPT, "mcp-session-id": "no-such-session"}
    if method == "GET":
        headers["accept"] = "text/event-stream"
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) if method == "POST" \
        else None
    r = httpx.request(method, replay.url, content=body, headers=headers, timeout=10)
    assert r.status_code == 404


def test_replay_serves_after_faults(replay: Any) -> None:
    """After all of the above the replay server still answers a real client."""
    async def short(s: Any, run: Any) -> None:
        run.results["tools/list"] = dump(await s.list_tools())

    run = run_sync(lambda: run_http_session(replay.url, short))
    assert [t["name"] for t in run.results["tools/list"]["tools"]][:2] == ["add", "echo"]
    assert replay.popen.poll() is None


