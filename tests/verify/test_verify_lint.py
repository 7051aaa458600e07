"""`mcprec verify --lint`: the new run is also checked against the spec, in one step."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.helpers import PEERS, recorded, run_mcprec
from support.line_client import LineClient, reap_line_clients  # noqa: F401

SERVER = [sys.executable, str(PEERS / "causal_server.py")]
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo"}}


@pytest.fixture(autouse=True)
def _reap(reap_line_clients: object) -> object:
    """Kill what a failing test left running."""
    yield


def test_clean_run_verifies_and_lints_clean(tmp_path: Path) -> None:
    """A well-behaved session: same answers, no findings, exit 0."""
    cassette = tmp_path / "c.db"
    client = LineClient(recorded(cassette, *SERVER, extra=("-s", "s")))
    client.send(INIT)
    assert client.recv() is not None
    client.send(INITIALIZED, CALL)
    assert client.recv() is not None
    assert client.close()[0] == 0
    out = run_mcprec("verify", str(cassette), "-s", "s", "--lint", "--", *SERVER)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
    assert out.stderr.startswith(b"clean: 1 session(s)")


def test_findings_make_verify_fail(tmp_path: Path) -> None:
    """A client that sent initialized before the initialize result (replayed as recorded)
    gives the new run a lifecycle finding: verify --lint exits 1 and names the rule."""
    cassette = tmp_path / "c.db"
    lines = b"".join(json.dumps(m).encode() + b"\n" for m in (INIT, INITIALIZED, CALL))
    done = subprocess.run(recorded(cassette, *SERVER, extra=("-s", "s")), input=lines,
                          capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    out = run_mcprec("verify", str(cassette), "-s", "s", "--lint", "--", *SERVER)
    assert out.returncode == 1
    assert b"LIF005" in out.stderr and b"Result: EQUAL" in out.stdout
