"""Processes that record one cassette take turns: `mcprec replay --mode once` from several real
processes at once (parallel CI jobs) records once and replays the rest, every client answered;
a child of the lock's holder goes ahead."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from support.helpers import MCPREC, SDK_SERVER
from mcprec.cassette import open_cassette
from mcprec.cassette.lock import cassette_lock

LINES = b"".join(json.dumps(m).encode() + b"\n" for m in (
    {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))


def _talk(p: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """Send the lines, read the two answers, then close stdin (the server ends on EOF) and
    return (stdout, stderr)."""
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(LINES)
    p.stdin.flush()
    out = p.stdout.readline() + p.stdout.readline()
    rest, err = p.communicate(timeout=60)
    return out + rest, err


def test_replay_once_from_parallel_processes(tmp_path: Path) -> None:
    """Three `replay --mode once` at once on a missing cassette: one records, two replay; each
    client gets its tools/list answer and each exits 0; one session in the cassette."""
    cassette = tmp_path / "c.db"
    procs = [subprocess.Popen([*MCPREC, "replay", "-c", str(cassette), "--mode", "once", "--",
                               sys.executable, str(SDK_SERVER)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for _ in range(3)]
    with ThreadPoolExecutor(len(procs)) as pool:  # each client talks to its own at once
        outs = list(pool.map(_talk, procs))
    for p, (out, err) in zip(procs, outs):
        answers = [json.loads(line) for line in out.splitlines()]
        assert p.returncode == 0, err
        assert [a.get("id") for a in answers] == [0, 1], (out, err)
        assert "tools" in answers[1]["result"], err
    with open_cassette(cassette) as c:
        assert len(c.sessions()) == 1
    assert not (tmp_path / "c.db.lock").exists()


def test_a_child_of_the_holder_goes_ahead(tmp_path: Path) -> None:
    """While this process holds the lock, a `replay --mode once` it starts (as a test's client
    does under the plugin) records without waiting for it."""
    cassette = tmp_path / "c.db"
    with cassette_lock(cassette):
        p = subprocess.Popen([*MCPREC, "replay", "-c", str(cassette), "--mode", "once", "--",
                              sys.executable, str(SDK_SERVER)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = _talk(p)
    assert p.returncode == 0, err
    assert len(out.splitlines()) == 2
