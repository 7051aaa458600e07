"""Back-pressure made visible: when the recorder falls behind, the tap pauses forwarding until it
catches up, and the session keeps how often and how long, which `show` and `sessions --json`
print. Recorded through the real tap, with a recorder that truly cannot keep up."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from helpers import PEERS, recorded, run_mcprec
from mcprec.cassette.recorder_process import HIGH_WATER

FLOOD = [sys.executable, str(PEERS / "flood_server.py")]
COUNT, SIZE = 800, 100_000
"""80 MB at once: well past what is held for a stalled recorder before the tap pauses (its
32 MiB backlog, the 1 MiB pipe, the tap's 16 MiB)."""
HOLD = 0.3
"""Seconds the recorder is kept stalled once the tap has paused."""
GO = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'


def _wait_for(said: bytearray, marker: bytes, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while marker not in said:
        assert time.monotonic() < deadline, f"no {marker!r} on mcprec's stderr: {bytes(said)!r}"
        time.sleep(0.01)


def test_a_stalled_recorder_pauses_forwarding_and_show_says_so(tmp_path: Path) -> None:
    """The recorder cannot commit (another writer holds the cassette's lock) while the server
    floods: the tap pauses, says so once, resumes when the lock is released, and forwards every
    byte. The session then says how often and how long forwarding waited, and the bound; a
    session that never paused says nothing of it."""
    cassette, out = tmp_path / "c.db", tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPREC_")}
    with open(out, "wb") as stdout:
        proc = subprocess.Popen(
            recorded(cassette, *FLOOD, str(COUNT), str(SIZE), extra=["-s", "flood"]),
            stdin=subprocess.PIPE, stdout=stdout, stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stderr is not None
    said = bytearray()
    errors = proc.stderr

    def read_stderr() -> None:
        while chunk := os.read(errors.fileno(), 65536):
            said.extend(chunk)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        _wait_for(said, b"flood: ready")  # the server runs: the session row is written
        lock = sqlite3.connect(cassette, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # the recorder's commits wait for this
        proc.stdin.write(GO)
        proc.stdin.flush()
        _wait_for(said, b"forwarding waits for it to catch up")
        time.sleep(HOLD)
        lock.execute("ROLLBACK")
        lock.close()
        deadline = time.monotonic() + 30
        while out.stat().st_size < COUNT * SIZE and time.monotonic() < deadline:
            time.sleep(0.01)
        assert out.stat().st_size == COUNT * SIZE  # every byte forwarded
        proc.stdin.close()
        assert proc.wait(30) == 0, bytes(said)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(5)
    errors.close()
    assert bytes(said).count(b"forwarding waits") == 1  # the warning, once

    calm = run_mcprec("record", "-c", str(cassette), "-s", "calm", "--", *FLOOD, "3", "1000",
                      input=GO)
    assert calm.returncode == 0, calm.stderr
    assert b"forwarding waits" not in calm.stderr

    listed = {s["name"]: s for s in json.loads(run_mcprec("sessions", str(cassette),
                                                          "--json").stdout)}
    flood = listed["flood"]
    assert (flood["status"], flood["messages"]) == ("complete", COUNT + 1)
    paused = flood["backpressure"]
    assert paused["pauses"] >= 1 and paused["paused_ms"] >= HOLD * 1000, paused
    assert paused["bound_bytes"] == HIGH_WATER
    assert listed["calm"]["backpressure"] is None
    assert listed["calm"]["messages"] == 4

    shown = run_mcprec("show", str(cassette), "flood").stdout.decode().splitlines()
    n = paused["pauses"]
    said_paused = [ln for ln in shown if ln.startswith("forwarding paused")]
    assert len(said_paused) == 1 and re.fullmatch(
        rf"forwarding paused {n} times? \([0-9.]+ m?s in all\) waiting for the recorder "
        r"\(memory bound 16 MiB\)", said_paused[0]), shown[:5]
    assert "forwarding paused" not in run_mcprec("show", str(cassette), "calm").stdout.decode()


def test_a_recorder_that_dies_ends_the_pause(tmp_path: Path) -> None:
    """Forwarding paused for a recorder that then dies resumes: nothing waits for a recorder
    that is gone (the traffic is still forwarded, no longer recorded)."""
    import asyncio
    import signal

    from mcprec.cassette import Cassette
    from mcprec.cassette.recorder_process import CHUNK, RecorderProcess

    cassette = tmp_path / "c.db"
    Cassette.open(cassette, create=True).close()
    recorder = RecorderProcess(cassette)
    os.kill(recorder.pid, signal.SIGKILL)
    assert recorder.wait(10) == -signal.SIGKILL
    said: list[bool] = []
    recorder.on_pressure = said.append

    async def flood() -> None:
        recorder.send(CHUNK, 1, 0, b"x" * (HIGH_WATER + 1))  # past the mark before any write
        assert said == [True]
        await asyncio.sleep(0.05)  # the write finds the pipe broken

    asyncio.run(flood())
    recorder.end_input()
    assert said == [True, False] and recorder.broken
    assert recorder.pause_totals()[0] == 1
