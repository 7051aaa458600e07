"""The recorder holds a burst: while the tap forwards messages faster than ``HOLD_RATE``, the
recorder process keeps what it reads and records it when the burst pauses (at most ``HOLD_MAX``
seconds, ``HOLD_BYTES`` bytes later), so that its work does not take the CPU from the client,
the tap and the server. A trickle, a sync (--durable), a close and the end are recorded at once,
and what is held is not lost when the tap dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from support.helpers import LINE_SERVER, recorded, sqlite
from mcprec import open_cassette
from mcprec.record.child import BATCH_DELAY, FAST_FROM, FAST_RATE, HOLD_BYTES, HOLD_MAX, HOLD_RATE, QUIET, TAKE_BYTES, _Inbox


def _event(size: int) -> tuple[int, int]:
    return (0, size)  # an event's size is its last field


def test_a_trickle_is_taken_at_once() -> None:
    inbox = _Inbox()
    for _ in range(5):
        inbox.put([_event(1000)])
        t = time.monotonic()
        assert inbox.take(None) == [_event(1000)]
        assert time.monotonic() - t < HOLD_MAX / 2  # not held: it returns without waiting
    assert 1000 < HOLD_RATE * BATCH_DELAY  # what makes it a trickle


def test_a_burst_waits_for_its_pause() -> None:
    inbox = _Inbox()
    size = int(HOLD_RATE * QUIET) * 4  # four times what a trickle brings in QUIET seconds
    inbox.put([_event(size)])
    t = time.monotonic()
    assert inbox.take(None) == [_event(size)]
    assert time.monotonic() - t >= QUIET * 0.9  # held until nothing more came for QUIET


def test_a_burst_that_resumes_after_a_pause_is_held_again() -> None:
    """A pause ends the hold for one take (the reader may only have been slow to run)."""
    inbox = _Inbox()
    size = TAKE_BYTES  # one event a take
    inbox.put([_event(size), _event(size)])
    assert inbox.take(None) == [_event(size)]
    inbox.put([_event(size)])  # the burst goes on
    t = time.monotonic()
    assert inbox.take(None) == [_event(size)]
    assert time.monotonic() - t >= QUIET * 0.9


def test_urgent_events_and_a_full_hold_are_taken_at_once() -> None:
    for events, urgent in (([_event(int(HOLD_RATE * QUIET) * 4)], True),
                           ([_event(HOLD_BYTES // 2), _event(HOLD_BYTES // 2)], False)):
        inbox = _Inbox()
        inbox.put(events, urgent)
        t = time.monotonic()
        taken = []
        while len(taken) < len(events):
            taken += inbox.take(None)
        assert time.monotonic() - t < QUIET * 0.9


def test_a_burst_too_fast_to_wait_out_is_taken_as_it_comes() -> None:
    """FAST_FROM bytes faster than FAST_RATE would fill every buffer before the hold ran out:
    taken without waiting for a pause. The same bytes slower are held, as any burst."""
    assert FAST_FROM < HOLD_BYTES and FAST_RATE > HOLD_RATE
    inbox = _Inbox()
    inbox.put([_event(FAST_FROM)])
    t = time.monotonic()
    assert inbox.take(None) == [_event(FAST_FROM)]
    assert time.monotonic() - t < QUIET * 0.9
    inbox = _Inbox()
    inbox.put([_event(FAST_FROM // 2)])
    time.sleep(FAST_FROM / FAST_RATE * 1.5)  # nobody takes meanwhile: no pause is seen
    inbox.put([_event(FAST_FROM // 2)])
    t = time.monotonic()
    assert inbox.take(None) == [_event(FAST_FROM // 2)]  # a take's worth
    assert time.monotonic() - t >= QUIET * 0.9


def test_a_long_burst_is_held_no_longer_than_hold_max() -> None:
    """A stream that never pauses is recorded as it goes on, after HOLD_MAX at first."""
    inbox = _Inbox()
    done = threading.Event()

    def flood() -> None:  # ~64 MiB/s, for four times HOLD_MAX
        end = time.monotonic() + 4 * HOLD_MAX
        while time.monotonic() < end:
            inbox.put([_event(65536)])
            time.sleep(0.001)
        done.set()

    t = time.monotonic()
    thread = threading.Thread(target=flood)
    thread.start()
    try:
        assert inbox.take(None)
        assert time.monotonic() - t < 3 * HOLD_MAX and not done.is_set()
        # once a hold ends, everything held is taken without holding again
        while inbox.items:
            inbox.take(None)
    finally:
        thread.join()


COUNT = 4000
BURST = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % i for i in range(COUNT))


def _start(cassette: Path) -> subprocess.Popen[bytes]:
    """`mcprec record` in front of tests/peers/line_server.py, answered once (so started)."""
    proc = subprocess.Popen(recorded(cassette, sys.executable, str(LINE_SERVER)),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b'{"jsonrpc":"2.0","id":"first","method":"ping"}\n')
    proc.stdin.flush()
    proc.stdout.readline()
    return proc


def _burst(proc: subprocess.Popen[bytes]) -> list[bytes]:
    """COUNT pipelined requests, written all at once; their answers, as read."""
    assert proc.stdin is not None and proc.stdout is not None
    stdin = proc.stdin
    writer = threading.Thread(target=lambda: (stdin.write(BURST), stdin.flush()))
    writer.start()
    answers = [proc.stdout.readline() for _ in range(COUNT)]
    writer.join()
    assert all(a.endswith(b"\n") for a in answers)
    return [a.rstrip(b"\n") for a in answers]


def _recorded_burst(cassette: Path, statuses: tuple[str, ...]) -> tuple[list[bytes], list[bytes]]:
    """Once the recorder has ended the session: the burst's requests and answers recorded."""
    deadline = time.monotonic() + 30
    while True:  # the recorder reads the end of its pipe, then marks the session ended
        with open_cassette(cassette) as c:
            s = c.session()
            if s.status != "recording" or time.monotonic() > deadline:
                break
        time.sleep(0.05)
    with open_cassette(cassette) as c:
        s = c.session()
        assert s.status in statuses
        messages = list(c.messages(s))[2:]  # after the first ping and its answer
    return ([m.raw for m in messages if m.direction == "client_to_server"],
            [m.raw for m in messages if m.direction == "server_to_client"])


def test_a_burst_held_when_the_tap_is_killed_is_recorded(tmp_path: Path) -> None:
    """kill -9 of mcprec right after a pipelined burst: its recorder, which may hold the burst,
    reads the end of the pipe and records all it was handed."""
    cassette = tmp_path / "c.db"
    proc = _start(cassette)
    answers = _burst(proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    for pipe in (proc.stdin, proc.stdout):
        assert pipe is not None
        pipe.close()
    asked, said = _recorded_burst(cassette, ("incomplete",))
    assert asked == BURST.splitlines()
    # the answers, bar those of the tap's last event-loop turn (forwarded, then killed before
    # the turn's end hands its chunks to the recorder)
    assert said == answers[:len(said)] and len(said) > COUNT // 2


def test_sigterm_to_the_recorder_records_what_it_holds(tmp_path: Path) -> None:
    """A service manager that stops everything sends the recorder SIGTERM too: it records what
    it has read (a burst it was holding, say) before it ends."""
    cassette = tmp_path / "c.db"
    proc = _start(cassette)
    with sqlite(cassette) as conn:  # the tap has started: its recorder is known
        (recorder,) = conn.execute("SELECT recorder_pid FROM sessions").fetchone()
    answers = _burst(proc)
    os.kill(recorder, signal.SIGTERM)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    assert proc.wait(30) == 0
    proc.stdout.close()
    # complete when the tap's close reached it in time
    asked, said = _recorded_burst(cassette, ("incomplete", "complete"))
    # all it had read: nearly all of the burst (not what was still in its pipe)
    assert asked == BURST.splitlines()[:len(asked)] and len(asked) > COUNT // 2
    assert said == answers[:len(said)] and len(said) > COUNT // 2
