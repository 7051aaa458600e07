"""What HTTP said, recorded and replayed: a plain-text 401 from a stdlib server, credentials in
``--target``, secret headers (grepped for in the cassette's bytes and its WAL), and the scan of
old cassettes with headers in clear."""

from __future__ import annotations

import base64
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from support.helpers import PEERS, run_mcprec
from support.http_helpers import Proc, read_jsonl, start_proxy, start_replay
from mcprec.cassette import open_cassette

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"}}}
URL_PASSWORD = "pw-Zq81xUv"  # noqa: S105 - a test value, searched for in the cassette
SECRETS = {"x-access-key": "AK-7c1e9f20d4", "x-signature": "sig-5e0b3a9d77",
           "x-tenant-pin": "pin-48213977"}
TOKEN = "let-me-in-4f2a"  # noqa: S105


def start_auth_server(log: Path) -> Proc:
    """tests/peers/auth_server.py: a stdlib server answering 401 in plain text without a token."""
    return Proc([sys.executable, str(PEERS / "auth_server.py"), "--token", TOKEN,
                 "--requests-log", str(log)],
                ready=lambda stream, line: line if stream == "stdout" else None,
                what="the stdlib auth peer")


def on_disk(cassette: Path) -> bytes:
    """The cassette's bytes and those of its WAL (and journal), where secrets could linger."""
    return b"".join(p.read_bytes() for p in cassette.parent.glob(cassette.name + "*"))


@pytest.fixture(scope="module")
def auth(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Through a proxy whose --target holds credentials: an initialize without a token (401),
    one with secret headers and the client's own bearer token; then a replay of it."""
    tmp = tmp_path_factory.mktemp("auth")
    log = tmp / "requests.jsonl"
    upstream = start_auth_server(log)
    target = upstream.url.replace("http://", f"http://ann:{URL_PASSWORD}@")
    cassette = tmp / "auth.db"
    proxy = start_proxy(target, cassette, session="auth", extra=["--redact-key", "X-Tenant-Pin"])
    try:
        refused = httpx.post(proxy.url, json=INIT, headers=ACCEPT, timeout=10)
        allowed = httpx.post(proxy.url, json=INIT, timeout=10, headers={
            **ACCEPT, **SECRETS, "authorization": f"Bearer {TOKEN}"})
        raw_on_disk = on_disk(cassette)  # while recording: the WAL holds the newest pages
    finally:
        code, _ = proxy.stop()
        upstream.stop()
    replay = start_replay(cassette, "auth")
    try:
        replayed = httpx.post(replay.url, json=INIT, headers=ACCEPT, timeout=10)
    finally:
        replay.stop()
    with open_cassette(cassette) as c:
        messages = list(c.messages("auth"))
        second = list(c.messages("auth-2"))  # each initialize opens a session
        target_stored = c.session("auth").target
    yield SimpleNamespace(refused=refused, allowed=allowed, replayed=replayed, code=code,
                          log=read_jsonl(log), stderr=proxy.stderr_text(), cassette=cassette,
                          raw=raw_on_disk + on_disk(cassette), messages=messages, second=second,
                          target=target_stored, upstream=upstream)


def test_live_401_passes_through_unchanged(auth: SimpleNamespace) -> None:
    """The client gets the server's 401, plain text and challenge, as the server sent them."""
    r = auth.refused
    assert r.status_code == 401
    assert r.headers["content-type"] == "text/plain; charset=utf-8"
    assert r.headers["www-authenticate"].startswith("Bearer error=")
    assert r.text.startswith("Unauthorized")


def test_401_replays_with_status_headers_and_body(auth: SimpleNamespace) -> None:
    """Replay answers the recorded 401 at once: its status, Content-Type, WWW-Authenticate and
    body, and no session id (the server issued none)."""
    live, replayed = auth.refused, auth.replayed
    assert replayed.status_code == 401
    for name in ("content-type", "www-authenticate"):
        assert replayed.headers[name] == live.headers[name]
    assert replayed.content == live.content
    assert "mcp-session-id" not in replayed.headers


def test_401_is_recorded_as_an_error_saying_what_http_said(auth: SimpleNamespace) -> None:
    """The cassette holds the 401 as the initialize's JSON-RPC error, marked synthetic, with its
    status, challenge and body: stdio clients of the replay get that error."""
    answer = auth.messages[1]
    assert (answer.kind, answer.reply_to, answer.http["status"]) == ("error", 0, 401)
    assert answer.http["synthetic"] is True and "HTTP 401" in answer.http["error"]
    data = answer.json["error"]["data"]
    assert data["status"] == 401 and data["body"].startswith("Unauthorized")
    assert data["headers"]["www-authenticate"] == auth.refused.headers["www-authenticate"]


def test_url_credentials_become_basic_authorization(auth: SimpleNamespace) -> None:
    """The upstream gets the URL's credentials as Authorization: Basic, and its own host:port as
    Host, never the credentials."""
    first = {k.lower(): v for k, v in auth.log[0]["headers"].items()}
    expected = base64.b64encode(f"ann:{URL_PASSWORD}".encode()).decode()
    assert first["authorization"] == f"Basic {expected}"
    assert first["host"] == auth.upstream.base.split("//")[1]


def test_client_authorization_wins_over_url_credentials(auth: SimpleNamespace) -> None:
    """A request carrying its own Authorization keeps it: the URL's credentials are not added."""
    second = {k.lower(): v for k, v in auth.log[1]["headers"].items()}
    assert second["authorization"] == f"Bearer {TOKEN}"
    assert auth.allowed.status_code == 200


def test_secret_headers_reach_upstream_as_sent(auth: SimpleNamespace) -> None:
    """X-Access-Key, X-Signature and a --redact-key header reach the upstream unchanged."""
    second = {k.lower(): v for k, v in auth.log[1]["headers"].items()}
    assert {k: second[k] for k in SECRETS} == SECRETS


@pytest.mark.parametrize("secret", [URL_PASSWORD, TOKEN, *SECRETS.values()])
def test_no_secret_on_disk(auth: SimpleNamespace, secret: str) -> None:
    """No secret used (URL password, bearer token, secret headers) is in the cassette's bytes or
    its WAL, during recording or after."""
    assert secret.encode() not in auth.raw


def test_url_password_never_printed(auth: SimpleNamespace) -> None:
    """The banner and the stored target show the URL with its credentials redacted."""
    assert URL_PASSWORD not in auth.stderr
    assert "[REDACTED]@127.0.0.1" in auth.stderr
    assert auth.target.startswith("http://[REDACTED]@127.0.0.1:")


def test_secret_headers_are_redacted_in_the_cassette(auth: SimpleNamespace) -> None:
    """The stored request headers hold placeholders for the secret ones, the scheme kept."""
    headers = auth.second[0].http["headers"]
    assert {k: headers[k] for k in SECRETS} == dict.fromkeys(SECRETS, "[REDACTED]")
    assert headers["authorization"] == "Bearer [REDACTED]"


def _record_in(cwd: Path, target: str, cassette: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``mcprec record --target`` run in ``cwd`` (whose config it reads); (process, its URL)."""
    from support.http_helpers import RECORDING, clean_env

    proc = subprocess.Popen([sys.executable, "-m", "mcprec", "record", "--target", target,
                             "--listen", "127.0.0.1:0", "-c", str(cassette), "-s", "old"],
                            cwd=cwd, env=clean_env(), stderr=subprocess.PIPE)
    assert proc.stderr is not None
    for raw in proc.stderr:
        m = RECORDING.match(raw.decode())
        if m:
            return proc, m.group(1)
    raise AssertionError(f"the proxy did not start (exit {proc.wait()})")


def test_scan_finds_headers_in_clear_and_redact_cleans_them(tmp_path: Path) -> None:
    """A cassette recorded with the default rules off keeps headers in clear: scan flags them
    by name (with --redact-key for a name no default covers), redact cleans them."""
    (tmp_path / "mcprec.toml").write_text("[redact]\ndefaults = false\nenv = false\n")
    upstream = start_auth_server(tmp_path / "requests.jsonl")
    cassette = tmp_path / "old.db"
    proxy, url = _record_in(tmp_path, upstream.url, cassette)
    try:
        httpx.post(url, json=INIT, timeout=10,
                   headers={**ACCEPT, **SECRETS, "authorization": f"Bearer {TOKEN}"})
    finally:
        proxy.send_signal(signal.SIGINT)
        proxy.communicate(timeout=10)
        upstream.stop()
    assert SECRETS["x-access-key"].encode() in on_disk(cassette)
    scan = run_mcprec("scan", str(cassette), "--redact-key", "x-tenant-pin")
    said = (scan.stdout + scan.stderr).decode()
    assert scan.returncode == 1, said
    for name in (*SECRETS, "authorization"):
        assert f"secret header {name}" in said, name
    assert run_mcprec("redact", str(cassette), "--redact-key", "x-tenant-pin").returncode == 0
    for value in (*SECRETS.values(), TOKEN):
        assert value.encode() not in on_disk(cassette), value
    assert run_mcprec("scan", str(cassette), "--redact-key", "x-tenant-pin").returncode == 0
