"""Replay and the protocol version: a client offering another version than the recorded client
is told once (stderr, --report); --protocol-version rewrite answers with the client's version.
The recording is of a raw client offering 2025-03-26 to the SDK server; the replays are driven
by the official SDK client, which offers a newer version."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.helpers import MCPREC, SDK_SERVER, recorded, run_client, run_mcprec
from support.http_helpers import run_http_session, start_replay

OLD = "2025-03-26"


def _lines(*objs: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objs)


def record_old_client(cassette: Path, session: str = "old") -> None:
    """Record a raw client offering ``OLD`` to tests/peers/sdk_server.py: initialize, list tools."""
    proc = subprocess.Popen(recorded(cassette, sys.executable, str(SDK_SERVER),
                                     extra=("-s", session)),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(_lines({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": OLD, "capabilities": {},
        "clientInfo": {"name": "old-client", "version": "1"}}}))
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    assert answer["result"]["protocolVersion"] == OLD
    proc.stdin.write(_lines({"jsonrpc": "2.0", "method": "notifications/initialized"},
                            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
    proc.stdin.flush()
    assert "tools" in json.loads(proc.stdout.readline())["result"]
    _, err = proc.communicate(timeout=30)  # closes stdin: the client is done
    assert proc.returncode == 0, err


@pytest.fixture(scope="module")
def old_cassette(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("versions") / "old.db"
    record_old_client(path)
    return path


async def _list_tools(session: Any, run: Any) -> None:
    run.results["tools"] = [t.name for t in (await session.list_tools()).tools]


def _notices(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "protocol version" in line]


def test_stdio_replay_says_once_that_the_client_offers_another_version(
        old_cassette: Path, tmp_path: Path) -> None:
    """The SDK client gets the recorded version; stderr and the report say what it offered."""
    report = tmp_path / "report.json"
    run = run_client([*MCPREC, "replay", str(old_cassette), "--report", str(report)],
                     _list_tools)
    assert run.results["initialize"]["protocolVersion"] == OLD
    assert run.results["tools"]
    notices = _notices(run.stderr)
    assert len(notices) == 1, run.stderr
    assert f"offered {OLD}" in notices[0] and "--protocol-version rewrite" in notices[0]
    versions = json.loads(report.read_text())["protocol_version"]
    assert versions["recorded"] == OLD and versions["answered"] == OLD
    assert versions["offered"] != OLD


def test_stdio_replay_rewrites_the_version_to_the_clients(old_cassette: Path,
                                                          tmp_path: Path) -> None:
    """--protocol-version rewrite: initialize is answered with the version the client offered."""
    report = tmp_path / "report.json"
    run = run_client([*MCPREC, "replay", str(old_cassette), "--protocol-version", "rewrite",
                      "--report", str(report)], _list_tools)
    offered = json.loads(report.read_text())["protocol_version"]["offered"]
    assert run.results["initialize"]["protocolVersion"] == offered != OLD
    assert run.results["tools"]
    assert len(_notices(run.stderr)) == 1


def test_asyncio_driver_rewrites_too(old_cassette: Path, tmp_path: Path) -> None:
    """The asyncio driver (mode new_episodes, nothing forwarded) rewrites like the lean one."""
    run = run_client([*MCPREC, "replay", str(old_cassette), "--mode", "new_episodes",
                      "--protocol-version", "rewrite", "--", sys.executable, str(SDK_SERVER)],
                     _list_tools)
    assert run.results["initialize"]["protocolVersion"] != OLD
    assert run.results["tools"]
    assert len(_notices(run.stderr)) == 1


def test_http_replay_rewrites_and_says_once_for_many_clients(old_cassette: Path,
                                                             tmp_path: Path) -> None:
    """Over HTTP: two SDK clients get the rewritten version; one notice; the report has it."""
    report = tmp_path / "report.json"
    proc = start_replay(old_cassette, extra=["--protocol-version", "rewrite",
                                             "--report", str(report)])
    try:
        runs = [anyio.run(run_http_session, proc.url, _list_tools) for _ in range(2)]
    finally:
        code, _ = proc.stop()
    assert code == 0, proc.stderr_text()
    for run in runs:
        assert run.results["initialize"]["protocolVersion"] != OLD
        assert run.results["tools"]
    assert len(_notices(proc.stderr_text())) == 1, proc.stderr_text()
    data = json.loads(report.read_text())
    assert all(s["protocol_version"]["answered"] != OLD for s in data["sessions"])


def test_same_version_says_nothing(tmp_path: Path) -> None:
    """A client offering the recorded version: no notice, nothing in the report."""
    cassette = tmp_path / "c.db"
    record_old_client(cassette)
    report = tmp_path / "report.json"
    init = _lines({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": OLD, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}})
    out = run_mcprec("replay", str(cassette), "--report", str(report), input=init)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["result"]["protocolVersion"] == OLD
    assert b"protocol version" not in out.stderr
    assert "protocol_version" not in json.loads(report.read_text())


def test_bad_policy_is_one_line(old_cassette: Path) -> None:
    """An unknown --protocol-version value: a one-line usage error, exit 2."""
    out = run_mcprec("replay", str(old_cassette), "--protocol-version", "newest")
    assert out.returncode == 2
    assert out.stderr.decode().count("\n") == 1 and b"Traceback" not in out.stderr


@pytest.mark.parametrize("extra", [["--protocol-version", "rewrite"],
                                   ["--protocol-version", "recorded"],
                                   ["--protocol-version", "newest"]])
def test_fast_path_and_full_command_line_agree_on_versions(extra: list[str],
                                                           old_cassette: Path) -> None:
    """The click-free entry answers --protocol-version as the full command line does."""
    from test_entry import FAST, FULL, run

    init = _lines({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "x", "version": "1"}}})
    fast = run(FAST, "replay", str(old_cassette), *extra, stdin=init)
    full = run(FULL, "replay", str(old_cassette), *extra, stdin=init)
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        full.returncode, full.stdout, full.stderr)
    assert b"Traceback" not in fast.stderr
