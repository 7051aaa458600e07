"""Back-pressure made visible: when the recorder falls behind, the tap pauses forwarding until it
catches up, and the session keeps how often and how long, which `show` and `sessions --json`
print. Recorded through the real tap, with a recorder that truly cannot keep up."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from support.helpers import PEERS, assert_show_says_paused, proc_status_bytes, recorded, run_mcprec
from mcprec.record.process import HIGH_WATER

FLOOD = [sys.executable, str(PEERS / "flood_server.py")]
COUNT, SIZE = 800, 100_000
"""80 MB at once: well past what is held for a stalled recorder before the tap pauses (its
32 MiB backlog, the 1 MiB pipe, the tap's 16 MiB)."""
HOLD = 0.3
"""Seconds of the stall the pauses must add up to at least. The recorder is kept stalled for
twice that once the tap has first paused: that first pause may end before the stall's own
begins, when the recorder's writing thread (at nice 19, behind on busy CPUs) first takes from
its backlog and only then finds its commit waiting for the lock."""
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
        time.sleep(2 * HOLD)
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

    assert_show_says_paused(cassette, "flood", paused["pauses"])
    assert "forwarding paused" not in run_mcprec("show", str(cassette), "calm").stdout.decode()

    # an export carries it (a timing: not with --no-timing), and an import restores it
    dump, copy = tmp_path / "c.jsonl", tmp_path / "copy.db"
    assert run_mcprec("export", str(cassette), "-o", str(dump)).returncode == 0
    assert run_mcprec("import", str(dump), str(copy)).returncode == 0
    copied = {s["name"]: s for s in json.loads(run_mcprec("sessions", str(copy),
                                                          "--json").stdout)}
    assert copied["flood"]["backpressure"] == paused
    assert copied["calm"]["backpressure"] is None
    assert b"backpressure" not in run_mcprec("export", str(cassette), "--no-timing").stdout


def test_a_recorder_that_dies_ends_the_pause(tmp_path: Path) -> None:
    """Forwarding paused for a recorder that then dies resumes: nothing waits for a recorder
    that is gone (the traffic is still forwarded, no longer recorded)."""
    import asyncio
    import signal

    from mcprec.cassette import Cassette
    from mcprec.record.process import CHUNK, RecorderProcess

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


def test_a_client_that_keeps_up_does_not_lift_the_recorders_pause(tmp_path: Path) -> None:
    """The client reads every byte through a pipe, a little slower than the server writes, while
    the recorder is stalled: the tap stays paused for the recorder (its memory within its bound)
    instead of reading the server again each time the client has caught up. Before, the
    client's catching up resumed reading the server, and the tap held everything the recorder
    could not take: 150 MB went through a tap whose peak grew by over 100 MiB."""
    cassette = tmp_path / "c.db"
    count = 1500
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPREC_")}
    proc = subprocess.Popen(
        recorded(cassette, *FLOOD, str(count), str(SIZE), extra=["-s", "flood"]),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    said, got = bytearray(), [0]
    errors, output = proc.stderr, proc.stdout

    def read_stderr() -> None:
        while chunk := os.read(errors.fileno(), 65536):
            said.extend(chunk)

    def read_stdout() -> None:  # a client that reads 64 KiB at a time, a little slower than
        while chunk := os.read(output.fileno(), 65536):  # the server writes
            got[0] += len(chunk)
            time.sleep(0.0005)

    threads = [threading.Thread(target=f, daemon=True) for f in (read_stderr, read_stdout)]
    for t in threads:
        t.start()
    try:
        _wait_for(said, b"flood: ready")
        before = proc_status_bytes(proc.pid, "VmHWM") / 2**20
        lock = sqlite3.connect(cassette, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        proc.stdin.write(GO)
        proc.stdin.flush()
        _wait_for(said, b"forwarding waits for it to catch up")
        time.sleep(1.0)  # the client has long caught up with what the tap let through
        grown = proc_status_bytes(proc.pid, "VmHWM") / 2**20 - before
        lock.execute("ROLLBACK")
        lock.close()
        deadline = time.monotonic() + 60
        while got[0] < count * SIZE and time.monotonic() < deadline:
            time.sleep(0.01)
        assert got[0] == count * SIZE
        proc.stdin.close()
        assert proc.wait(60) == 0, bytes(said)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for t in threads:
        t.join(5)
    errors.close()
    output.close()
    # the tap's bound (16 MiB) and the pieces in flight; 150 MB would have piled up before
    assert grown < HIGH_WATER / 2**20 + 24, f"the tap grew by {grown:.0f} MiB while paused"
    flood = {s["name"]: s for s in json.loads(run_mcprec("sessions", str(cassette),
                                                         "--json").stdout)}["flood"]
    assert (flood["status"], flood["messages"]) == ("complete", count + 1)
    assert flood["backpressure"]["pauses"] >= 1
