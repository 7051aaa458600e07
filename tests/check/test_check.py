"""`mcprec check` against real servers: the SDK server (stdio and HTTP), the conformance peer,
server-everything (stdio and streamableHttp) and two servers broken on purpose. Each check's
verdict, the exit status as a CI gate, the JUnit report valid against the JUnit XSD, the probe
session kept in the cassette, and every server still answering afterwards."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import xmlschema

from support.helpers import EVERYTHING_DIR, PEERS, REPO, SDK_SERVER, run_mcprec
from support.http_helpers import Proc, _first_stdout_url, start_everything, start_sdk_http

XSD = xmlschema.XMLSchema(str(REPO / "tests" / "data" / "junit.xsd"))
PY = sys.executable
BROKEN = [PY, str(PEERS / "broken_server.py")]
EVERYTHING_STDIO = ["node", str(EVERYTHING_DIR / "dist" / "index.js"), "stdio"]
EVERYTHING_SLOW = 'trigger-long-running-operation={"duration": 2, "steps": 4}'
SDK_SLOW = 'slow={"steps": 4, "delay_ms": 250}'
HTTP_CHECKS = ("http.origin", "http.host", "http.session-missing", "http.session-stale",
               "http.protocol-version", "http.resumption")


def check(*args: str, cassette: Path | None = None) -> tuple[int, dict[str, Any], str]:
    """Run `mcprec check -f json`: exit status, the report, stderr."""
    out = run_mcprec("check", "-f", "json", *(["-c", str(cassette)] if cassette else []), *args,
                     timeout=120)
    err = out.stderr.decode("utf-8", "replace")
    assert out.stdout, err
    return out.returncode, json.loads(out.stdout), err


def verdicts(report: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["status"] for c in report["checks"]}


def failed(report: dict[str, Any]) -> set[str]:
    return {c["id"] for c in report["checks"] if c["status"] == "fail"}


def still_answers(url: str) -> None:
    """The server takes a new session after the check: it was not crashed."""
    r = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}},
        headers={"accept": "application/json, text/event-stream"}, timeout=10)
    assert r.status_code == 200, r.text
    assert '"protocolVersion"' in r.text


@pytest.fixture
def open_http() -> Iterator[Proc]:
    """tests/peers/open_http_server.py: any Host, any Origin, session ids never checked."""
    p = Proc([PY, str(PEERS / "open_http_server.py")], ready=_first_stdout_url,
             what="the open HTTP peer")
    yield p
    p.kill()


def test_sdk_server_stdio(tmp_path: Path) -> None:
    """The SDK server passes the protocol checks; lint finds its log messages sent without the
    logging capability; the probe session is kept in the cassette given."""
    db = tmp_path / "c.db"
    code, report, _ = check("--call", "echo", "--slow", SDK_SLOW, "--", PY, str(SDK_SERVER),
                            cassette=db)
    v = verdicts(report)
    assert code == 1
    assert failed(report) == {"lint"}
    assert "CAP001" in next(c["why"] for c in report["checks"] if c["id"] == "lint")
    for passing in ("lifecycle.initialize", "lifecycle.ping", "errors.unknown-method",
                    "errors.invalid-params", "tools.call", "tools.unknown",
                    "tools.invalid-arguments", "resources.read", "resources.unknown",
                    "prompts.get", "prompts.unknown", "progress.notify",
                    "cancellation.unknown-request", "cancellation.in-flight",
                    "lifecycle.alive", "lifecycle.exit"):
        assert v[passing] == "pass", passing
    assert v["logging.set-level"] == "skip"  # not declared
    assert not any(i.startswith("http.") for i in v)
    assert report["cassette"] == str(db) and report["sessions"] == ["check"]
    shown = run_mcprec("sessions", str(db))
    assert b"check" in shown.stdout
    probe = run_mcprec("show", str(db), "check")
    assert b"mcprec/check-unknown-method" in probe.stdout and b"notifications/cancelled" in \
        probe.stdout
    again, report2, _ = check("--call", "echo", "--", PY, str(SDK_SERVER), cassette=db)
    assert report2["sessions"] == ["check-2"] and again == 0


def test_sdk_server_paginated_cursors(tmp_path: Path) -> None:
    """Lists served in pages are walked to their end; an invalid cursor is refused."""
    out = run_mcprec("check", "-f", "json", "--call", "echo", "--", "env",
                     "MCPREC_TEST_SERVER_PAGE_SIZE=5", PY, str(SDK_SERVER), timeout=120)
    report = json.loads(out.stdout)
    v = verdicts(report)
    assert out.returncode == 0, report
    assert v["pagination.walk"] == v["pagination.bad-cursor"] == "pass"
    walk = next(c["why"] for c in report["checks"] if c["id"] == "pagination.walk")
    assert "resources/list 3" in walk and "tools/list 2" in walk


def test_broken_stdio_server() -> None:
    """A result for an unknown method and a cancelled call still answered: those fail, the rest
    passes, and the server was not crashed by the bad input."""
    code, report, _ = check("--slow", "sleep", "--", *BROKEN)
    v = verdicts(report)
    assert code == 1
    assert failed(report) == {"errors.unknown-method", "cancellation.in-flight", "lint"}
    assert v["tools.call"] == v["tools.unknown"] == v["tools.invalid-arguments"] == "pass"
    assert v["lifecycle.alive"] == v["lifecycle.exit"] == "pass"
    assert v["resources.list"] == "skip"


def test_everything_stdio(everything_server: list[str]) -> None:
    """server-everything: every capability it declares exercised; its -32603 for missing params
    and its progress after a cancellation are the failures."""
    code, report, _ = check("--slow", EVERYTHING_SLOW, "--", *everything_server)
    v = verdicts(report)
    assert code == 1
    assert failed(report) == {"errors.invalid-params", "lint"}
    for passing in ("tools.call", "resources.read", "prompts.get", "logging.set-level",
                    "logging.invalid-level", "progress.notify", "cancellation.in-flight",
                    "lifecycle.alive", "lifecycle.exit"):
        assert v[passing] == "pass", passing
    assert "PRG006" in next(c["why"] for c in report["checks"] if c["id"] == "lint")


def test_everything_http_fails_dns_rebinding(tmp_path: Path) -> None:
    """server-everything over Streamable HTTP answers 200 to a foreign Host and Origin, and 400
    in an ended session: those checks fail; the server still answers afterwards."""
    p = start_everything("streamableHttp")
    try:
        code, report, _ = check("--target", p.url, "--slow", EVERYTHING_SLOW,
                                cassette=tmp_path / "e.db")
        v = verdicts(report)
        assert code == 1
        assert {"http.host", "http.origin", "http.session-stale"} <= failed(report)
        assert v["http.session-missing"] == v["http.protocol-version"] == "pass"
        assert v["http.resumption"] == "pass"
        assert "200" in next(c["why"] for c in report["checks"] if c["id"] == "http.host")
        assert v["tools.call"] == v["lifecycle.alive"] == "pass"
        still_answers(p.url)
    finally:
        p.kill()


def test_sdk_http_server_passes_transport_checks() -> None:
    """The SDK's HTTP server (with an event store) refuses every bad transport input and resumes
    a stream; it still answers afterwards."""
    p = start_sdk_http("--event-store")
    try:
        code, report, _ = check("--target", p.url, "--call", "echo", "--slow", SDK_SLOW)
        v = verdicts(report)
        assert all(v[c] == "pass" for c in HTTP_CHECKS), report
        assert v["cancellation.in-flight"] == "pass"  # it answers -32800: stopped, and says so
        assert failed(report) == {"lint"} and code == 1  # CAP001: logs without logging
        still_answers(p.url)
    finally:
        p.kill()


def test_conformance_peer_passes_everything() -> None:
    """A server that does everything by the book: exit 0."""
    p = Proc([PY, str(PEERS / "conformance_server.py")], ready=_first_stdout_url,
             what="the conformance peer")
    try:
        code, report, _ = check("--target", p.url)
        assert code == 0, failed(report)
        assert report["passed"] is True and report["counts"]["fail"] == 0
        still_answers(p.url)
    finally:
        p.kill()


def test_open_http_server(open_http: Proc) -> None:
    """Any Host, any Origin, session ids and protocol version never checked: each transport
    check fails (resumption is skipped: JSON answers), the JSON-RPC ones pass."""
    code, report, _ = check("--target", open_http.url)
    v = verdicts(report)
    assert code == 1
    assert failed(report) == {"http.origin", "http.host", "http.session-missing",
                              "http.session-stale", "http.protocol-version"}
    assert v["http.resumption"] == "skip"
    assert v["errors.unknown-method"] == v["tools.call"] == v["lint"] == "pass"
    still_answers(open_http.url)


def test_junit_report_is_valid(open_http: Proc, tmp_path: Path) -> None:
    """--format junit: valid against the JUnit XSD, a test case per check, failures and skips
    where the text report says so; the summary goes to stderr with -o."""
    out = tmp_path / "check.xml"
    r = run_mcprec("check", "--target", open_http.url, "-f", "junit", "-o", str(out))
    assert r.returncode == 1
    assert b"5 failed" in r.stderr and str(out).encode() in r.stderr
    XSD.validate(str(out))
    root = ET.parse(out).getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert root.get("failures") == "5" and len(cases) == int(root.get("tests") or 0)
    assert cases["http.host"].find("failure") is not None
    assert cases["http.resumption"].find("skipped") is not None
    assert cases["tools.call"].find("failure") is None
    assert cases["http.host"].get("classname") == "mcprec.check.http"


def test_text_and_github_formats() -> None:
    """One line per check in text; a ::error annotation per failure in github."""
    text = run_mcprec("check", "--slow", "sleep", "--", *BROKEN, timeout=120)
    lines = text.stdout.decode().splitlines()
    assert text.returncode == 1
    assert any(line.split()[:2] == ["FAIL", "errors.unknown-method"] for line in lines)
    assert any(line.split()[:2] == ["pass", "tools.call"] for line in lines)
    assert lines[-1].startswith("Result: FAILED: ")
    gh = run_mcprec("check", "-f", "github", "--", *BROKEN, timeout=120)
    errors = [line for line in gh.stdout.decode().splitlines() if line.startswith("::error")]
    assert len(errors) == 1 and "errors.unknown-method" in errors[0]


@pytest.mark.parametrize("args, message", [
    ((), "give either a server command"),
    (("--", "mcprec-no-such-server-command"), "command not found"),
    (("--target", "http://127.0.0.1:1/mcp"), "cannot reach"),
    (("--target", "ftp://example"), "http:// or https://"),
    (("--call", "echo={", "--", PY), "not JSON"),
    (("--header", "X: y", "--", PY), "--header goes with --target"),
])
def test_could_not_run_is_exit_2(args: tuple[str, ...], message: str) -> None:
    """Bad arguments and servers that cannot start or be reached: one line, exit 2."""
    r = run_mcprec("check", *args)
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert message in err and "Traceback" not in err
    assert err.startswith("mcprec: ")


def test_server_that_crashes_on_bad_input() -> None:
    """A server that exits on an unknown method: that check fails, the rest is skipped, and
    lifecycle.alive and lifecycle.exit say the server was lost."""
    code, report, _ = check("--", *BROKEN, "--crash")
    v = verdicts(report)
    assert code == 1
    assert failed(report) == {"errors.unknown-method", "lifecycle.alive", "lifecycle.exit"}
    assert v["tools.call"] == "skip"
    why = {c["id"]: c["why"] for c in report["checks"]}
    assert "went away" in why["errors.unknown-method"] and "code 3" in why["lifecycle.exit"]


def test_server_that_never_answers() -> None:
    """No answer to initialize: a failure after --timeout, not a hang; the server that ignores
    its closed input is stopped after --exit-timeout."""
    code, report, err = check("--timeout", "1", "--exit-timeout", "1", "--",
                              PY, "-c", "import time; time.sleep(60)")
    v = verdicts(report)
    assert code == 1
    assert v["lifecycle.initialize"] == "fail" and v["lifecycle.exit"] == "fail"
    assert v["tools.list"] == "skip"
    assert report["seconds"] < 15
    assert "Traceback" not in err and "never retrieved" not in err
