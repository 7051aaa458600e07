"""Secrets in URLs and command lines (userinfo, ?token=, NAME=VALUE, --flag=value) never reach
the terminal, the cassette, its WAL, export or OpenTelemetry; scan finds them in stored targets;
the recording proxy still connects with the credentials it was given."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx

from support.helpers import SDK_SERVER, run_mcprec, sqlite
from support.http_helpers import start_proxy, start_sdk_http
from mcprec.cassette import open_cassette
from mcprec.redact.urls import redact_argv, redact_url
from support.otlp_receiver import serve_receiver

ENV_TOKEN = "envtok-5d1f0c9a77"  # noqa: S105 - test values, searched for everywhere
FLAG_KEY = "flagkey-9a0e44c1"
URL_PASSWORD = "urlpw-71c3aa02"  # noqa: S105
QUERY_TOKEN = "qtok-2b8e61f5d0"  # noqa: S105
SECRETS = (ENV_TOKEN, FLAG_KEY, URL_PASSWORD, QUERY_TOKEN)
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}


def _lines(*msgs: dict[str, object]) -> bytes:
    return b"".join(json.dumps(m).encode() + b"\n" for m in msgs)


def on_disk(cassette: Path) -> bytes:
    """The cassette's bytes and those of its WAL."""
    return b"".join(p.read_bytes() for p in cassette.parent.glob(cassette.name + "*"))


def _assert_absent(what: str, data: bytes | str) -> None:
    raw = data if isinstance(data, bytes) else data.encode()
    for secret in SECRETS:
        assert secret.encode() not in raw, (what, secret)


def _everywhere(cassette: Path, wal_bytes: bytes) -> None:
    """No secret in the cassette (and its WAL while recording), sessions, show, export, OTel."""
    _assert_absent("file", on_disk(cassette) + wal_bytes)
    for args in (["sessions", str(cassette)], ["sessions", str(cassette), "--json"],
                 ["show", str(cassette)], ["export", str(cassette)]):
        done = run_mcprec(*args)
        assert done.returncode == 0, done.stderr
        _assert_absent(" ".join(args[:1]), done.stdout + done.stderr)
    with serve_receiver() as receiver:
        done = run_mcprec("export", str(cassette), "--otlp", receiver.url)
        assert done.returncode == 0, done.stderr
        spans = receiver.spans()
    assert spans
    _assert_absent("otel", repr([(s.span, s.resource) for s in spans]))


def test_the_redactor() -> None:
    """Userinfo, secret query parameters, NAME=VALUE, --flag=value and --flag value."""
    assert redact_url(f"https://ann:{URL_PASSWORD}@h:8/mcp?token={QUERY_TOKEN}&page=2#x") == \
        "https://[REDACTED]@h:8/mcp?token=[REDACTED]&page=2#x"
    assert redact_url("http://h/?X-Amz-Signature=ab&api_key=cd&sort=name") == \
        "http://h/?X-Amz-Signature=[REDACTED]&api_key=[REDACTED]&sort=name"
    assert redact_argv(["env", f"MYSVC_TOKEN={ENV_TOKEN}", "python", "s.py", f"--api-key={FLAG_KEY}",
                        "--password", "pw", "-s", "x", "--session", "y", "--port=80"]) == \
        ["env", "MYSVC_TOKEN=[REDACTED]", "python", "s.py", "--api-key=[REDACTED]", "--password",
         "[REDACTED]", "-s", "x", "--session", "y", "--port=80"]


def test_stdio_argv_secrets(tmp_path: Path) -> None:
    """`record -- env MYSVC_TOKEN=… python srv.py --api-key=… --url http://u:p@…?token=…`:
    the stored target has placeholders, nothing prints a secret; scan finds an old cassette's."""
    cassette = tmp_path / "c.db"
    done = run_mcprec(
        "record", "-c", str(cassette), "-s", "s", "--", "env", f"MYSVC_TOKEN={ENV_TOKEN}",
        sys.executable, str(SDK_SERVER), f"--api-key={FLAG_KEY}",
        f"--origin=http://ann:{URL_PASSWORD}@example.com/?token={QUERY_TOKEN}",
        input=_lines(INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}))
    assert done.returncode == 0, done.stderr
    _assert_absent("record", done.stdout + done.stderr)
    with open_cassette(cassette) as c:
        target = c.session("s").target
    assert "MYSVC_TOKEN=[REDACTED]" in target and "--api-key=[REDACTED]" in target
    _everywhere(cassette, b"")
    assert run_mcprec("scan", str(cassette)).returncode == 0
    with sqlite(cassette) as conn:  # a cassette recorded before targets were redacted
        conn.execute("UPDATE sessions SET target = ?",
                     (json.dumps(["env", f"MYSVC_TOKEN={ENV_TOKEN}", "python", "s.py"]),))
    scanned = run_mcprec("scan", str(cassette))
    assert scanned.returncode == 1 and b"target" in scanned.stdout, scanned
    _assert_absent("scan", scanned.stdout + scanned.stderr)
    assert run_mcprec("redact", str(cassette)).returncode == 0
    assert run_mcprec("scan", str(cassette)).returncode == 0
    _assert_absent("file after redact", on_disk(cassette))


def test_proxy_with_credentials_records_stateless_requests(tmp_path: Path) -> None:
    """A --target with user:password and ?token=: requests without Mcp-Session-Id (a stateless
    server) are relayed (not 502), the upstream gets the credentials; the banner, the stored
    target, the file, its WAL, export and OTel show placeholders."""
    upstream = start_sdk_http("--stateless", "--json-response")
    cassette = tmp_path / "h.db"
    target = upstream.url.replace("http://", f"http://ann:{URL_PASSWORD}@") + \
        f"?token={QUERY_TOKEN}&v=1"
    proxy = start_proxy(target, cassette)
    try:
        answers = [httpx.post(proxy.url, json=msg, headers={**ACCEPT, "mcp-protocol-version":
                                                             "2025-11-25"}, timeout=10)
                   for msg in (INIT, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})]
        wal = on_disk(cassette)
    finally:
        code, _ = proxy.stop()
        upstream.stop()
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    assert "tools" in answers[1].json()["result"]
    assert code == 0
    _assert_absent("banner", proxy.stderr_text())
    assert "[REDACTED]@127.0.0.1" in proxy.stderr_text()
    with open_cassette(cassette) as c:
        targets = [s.target for s in c.sessions()]
    assert targets and all(t.startswith("http://[REDACTED]@127.0.0.1:") and
                           f"token=[REDACTED]&v=1" in t for t in targets), targets
    _everywhere(cassette, wal)


def test_otlp_url_secrets_are_not_printed(tmp_path: Path) -> None:
    """An --otlp URL's password and ?token= stay off stderr when the collector is down (export
    and record) and when the URL is bad."""
    cassette = tmp_path / "c.db"
    done = run_mcprec("record", "-c", str(cassette), "--", sys.executable, str(SDK_SERVER),
                      input=_lines(INIT))
    assert done.returncode == 0, done.stderr
    down = f"http://ann:{URL_PASSWORD}@127.0.0.1:9/?token={QUERY_TOKEN}"
    for args in (["export", str(cassette), "--otlp", down, "--otlp-retries", "0"],
                 ["export", str(cassette), "--otlp", down.replace(":9/", ":x/")],
                 ["export", str(cassette), "--otlp", down.replace("http", "ftp")],
                 ["record", "-c", str(cassette), "--otlp", down, "--", sys.executable,
                  str(SDK_SERVER)]):
        done = run_mcprec(*args, input=_lines(INIT))
        assert b"mcprec:" in done.stderr, (args, done.stderr)
        _assert_absent(args[0], done.stdout + done.stderr)
