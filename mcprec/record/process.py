"""Recording in a process of its own, so that it never competes with forwarding.

The tap (or the HTTP proxy) sends what it sees down a pipe to a recorder process and goes on:
per chunk read, one small header and the bytes, appended to a buffer that is written to the pipe
once per event-loop turn. In the recorder process a reader thread empties the pipe as fast as it
fills and cuts lines; the main thread redacts, classifies, pairs and commits them in batches, on
its own interpreter, at a lower CPU priority than forwarding. When it falls far behind, its
backlog bound stops the reader, and then the tap's buffer's high water mark pauses reading at the
tap (memory stays bounded: mcprec says so once, and the session keeps how often and how long
forwarding paused, which ``show`` prints). The recorder runs in a process group of its own and
outlives the tap: at the end the tap hands over the rest, waits until the session is marked as
ended (readers then wait for it to be complete) and exits with the server's code; the recorder
commits what remains and marks the session complete. If mcprec is killed outright, the
recorder still gets everything already written to the pipe, commits it, and marks the session
incomplete.

This module is the tap's end (``RecorderProcess``, ``ProcessSessionWriter``); ``child`` is the
recorder process; ``frames`` is what they say to each other.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import itertools
import os
import select
import struct
import sys
import threading
import time
from pathlib import Path

# asyncio, subprocess and typing serve the tap's end (``RecorderProcess``), imported there: the
# recorder process, started as the tap starts, reaches its first read sooner without them
# (the process started, opened a cassette and ended on EOF: 124 -> 85 ms, medians of 11; in
# the 100 KB benchmark the tap had filled its 16 MiB bound before the recorder first read)
TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from typing import Any, Callable

import orjson

from .. import _log
from ..cassette.rows import mark_ended
from .frames import (
    ACK_COMMITTED,
    ACK_LOST,
    _DIR_CODE,
    _HEAD,
    _IOV,
    _JOIN_BELOW,
    CHUNK,
    CLOSE,
    END_MARK_TIMEOUT,
    EOF,
    HIGH_WATER,
    LOW_WATER,
    MAX_BACKLOG,
    MESSAGE,
    PIPE_SIZE,
    RULES_ENV,
    STDERR,
    SYNC,
)
from .writer import AUTO, redacted_head


LAST_COMMIT_WAIT = 0.05
"""Seconds the tap waits, at its end, for the recorder to commit the rest: a loss it meets by
then makes the exit status 74; a later one is said on stderr and in the cassette only."""

class RecorderProcess:
    """The parent's end: a recorder process for one cassette, shared by its sessions."""

    def __init__(self, path: str | os.PathLike[str], rules: dict[str, Any] | None = None) -> None:
        import asyncio
        import subprocess

        self._subprocess = subprocess
        self._running_loop = asyncio.get_running_loop
        self.path = Path(path)
        env = dict(os.environ)
        env[RULES_ENV] = orjson.dumps(rules or {}).decode()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "mcprec.record.child", str(self.path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
            start_new_session=True,  # a Ctrl-C for mcprec must not stop the recording
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._fd = self._proc.stdin.fileno()
        self._ack_fd = self._proc.stdout.fileno()
        with contextlib.suppress(OSError):  # room for bursts between the recorder's reads
            fcntl.fcntl(self._fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        os.set_blocking(self._fd, False)
        self.pauses = 0  # how often forwarding paused for the recorder, and for how long
        self.paused_ns = 0
        self._paused_at = 0
        # what is sent and not yet written, as the pieces it came in (headers and payloads):
        # written with writev, never joined. A bytearray that was appended to and cut from the
        # front moved its whole backlog in memory at each append once the recorder was behind:
        # the tap spent 34% of its CPU in memmove on 100 KB messages. Tap CPU per pipelined 100 KB
        # request (both ways, 4 in flight, 1,500 requests): 453 -> 213 µs (bare asyncio relay: 273)
        self._out: collections.deque[bytes | memoryview] = collections.deque()
        self._out_bytes = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scheduled = False
        self._watching = False
        self.broken = False
        self.lost = False
        """The recorder said a write failed: messages forwarded are not all recorded."""
        self.on_pressure: Callable[[bool], None] | None = None
        self._pressed = False

    @property
    def pid(self) -> int:
        return self._proc.pid

    # --- frames out -------------------------------------------------------------------------

    def send(self, kind: int, session_id: int, t_ns: int, payload: bytes = b"",
             direction: int = 0) -> None:
        self.send_pieces(kind, session_id, t_ns, (payload,), direction)

    def send_pieces(self, kind: int, session_id: int, t_ns: int, pieces: tuple[bytes, ...],
                    direction: int = 0) -> None:
        """``send`` of the payload made of ``pieces``, without joining them (a 100 MB message
        that the HTTP proxy records is not copied into its frame)."""
        if self.broken:
            return
        size = sum(map(len, pieces))
        head = _HEAD.pack(kind, direction, session_id, t_ns, size)
        out = self._out
        if size <= _JOIN_BELOW:
            out.append(b"".join((head, *pieces)))  # one small piece: cheaper than several
        else:
            out.append(head)
            # a bytes piece is kept as it is (immutable); anything else is copied once
            out.extend(p if type(p) is bytes else bytes(p) for p in pieces if p)
        self._out_bytes += len(head) + size
        try:
            loop = self._running_loop()
        except RuntimeError:  # no event loop here: write at once
            self.flush_blocking()
            return
        if loop is not self._loop:
            self._loop, self._scheduled, self._watching = loop, False, False
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._flush)
        if not self._pressed and self._out_bytes > HIGH_WATER and self.on_pressure is not None:
            self._pressed = True
            self.pauses += 1
            self._paused_at = time.monotonic_ns()
            if self.pauses == 1:
                _log.warning("record", f"the recorder of {self.path} is {self._out_bytes >> 20} "
                             f"MiB behind (beyond its own {MAX_BACKLOG >> 20} MiB): forwarding "
                             "waits for it to catch up, so that memory stays bounded")
            self.on_pressure(True)

    def pause_totals(self) -> tuple[int, int]:
        """How often forwarding has paused for the recorder so far, and for how many ns in all
        (a pause still going counts until now)."""
        ongoing = time.monotonic_ns() - self._paused_at if self._pressed else 0
        return self.pauses, self.paused_ns + ongoing

    def _write_some(self) -> None:
        """One writev of what is waiting (up to ``_IOV`` pieces); drops what it wrote."""
        out = self._out
        n = os.writev(self._fd, list(itertools.islice(out, _IOV)) if len(out) > _IOV else out)
        self._out_bytes -= n
        while n:
            first = out[0]
            if len(first) <= n:
                n -= len(first)
                out.popleft()
            else:
                out[0] = memoryview(first)[n:]
                break

    def _flush(self) -> None:
        self._scheduled = False
        if self.broken or not self._out:
            return
        try:
            while self._out:
                self._write_some()
        except BlockingIOError:
            pass
        except (BrokenPipeError, OSError) as e:
            self._broke(e)
            return
        if self._out and not self._watching and self._loop is not None:
            self._watching = True
            self._loop.add_writer(self._fd, self._flush)
        elif not self._out and self._watching and self._loop is not None:
            self._watching = False
            self._loop.remove_writer(self._fd)
        if self._pressed and self._out_bytes < LOW_WATER:
            self._ease()

    def _ease(self) -> None:
        """The pause ends: the recorder has caught up, or is gone (what waits for it must not
        wait forever)."""
        self._pressed = False
        self.paused_ns += time.monotonic_ns() - self._paused_at
        if self.on_pressure is not None:
            self.on_pressure(False)

    def flush_blocking(self) -> None:
        """Write everything buffered, waiting for the recorder as long as it takes."""
        if self._watching and self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_writer(self._fd)
            self._watching = False
        if self.broken or not self._out:
            return
        os.set_blocking(self._fd, True)
        try:
            while self._out:
                self._write_some()
        except OSError as e:
            self._broke(e)
        finally:
            with contextlib.suppress(OSError):
                os.set_blocking(self._fd, False)
        if self._pressed:  # all written
            self._ease()

    def _broke(self, e: BaseException) -> None:
        self.broken = True
        self._out.clear()
        self._out_bytes = 0
        if self._pressed:
            self._ease()
        _log.warning("record", f"the recorder for {self.path} stopped ({e}); traffic is still "
                     "forwarded but no longer recorded")

    def sync(self, session_id: int) -> None:
        """Block until the recorder has committed everything sent so far."""
        self.send(SYNC, session_id, 0)
        self.flush_blocking()
        if not self.broken and not self.read_ack(ACK_COMMITTED, None):
            self._broke(EOFError("no acknowledgement"))

    def read_ack(self, want: bytes, timeout: float | None) -> bool:
        """Wait for the recorder's acknowledgement ``want`` (``k``: committed)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._ack_fd], [], [], left)[0]:
                    return False
            try:
                got = os.read(self._ack_fd, 1)
            except OSError:
                return False
            if not got:
                return False
            if got == ACK_LOST:
                self.lost = True
            elif got == want:
                return True

    def drain_acks(self) -> None:
        """Read what the recorder said and nobody waited for (``lost``), without waiting."""
        with contextlib.suppress(OSError, ValueError):
            while select.select([self._ack_fd], [], [], 0)[0]:
                got = os.read(self._ack_fd, 4096)
                if not got:
                    return
                if ACK_LOST in got:
                    self.lost = True


    def close(self, timeout: float | None = None) -> int | None:
        """Flush, end the recorder and wait for it to commit everything."""
        self.end_input()
        return self.wait(timeout)

    def end_input(self) -> None:
        """Write what is buffered and close the pipe (on the thread that sends frames)."""
        self.flush_blocking()
        self.broken = True  # nothing more may be sent
        assert self._proc.stdin is not None
        with contextlib.suppress(OSError):
            self._proc.stdin.close()

    def finished(self) -> bool:
        """Whether the recorder has exited (its pipe then closed on this side)."""
        if self._proc.poll() is None:
            return False
        self.wait(0)
        return True

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the recorder to commit everything and exit (any thread)."""
        try:
            code = self._proc.wait(timeout)
        except self._subprocess.TimeoutExpired:
            return None  # still writing: what it says is read later (drain_acks, detach)
        self.drain_acks()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        return code

    def detach(self) -> None:
        """Leave the recorder to finish on its own: it outlives this process, if need be."""
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        # reaped when it exits, while this process lives on (the library used in-process)
        threading.Thread(target=self._proc.wait, name="mcprec-recorder-reaper",
                         daemon=True).start()


class ProcessSessionWriter:
    """One session recorded through a ``RecorderProcess``; the ``SessionWriter`` interface."""

    def __init__(self, recorder: RecorderProcess, session: Any, *, own: bool = True) -> None:
        self.recorder = recorder
        self.session = session
        self.cassette_path = recorder.path
        self.start_ns = time.monotonic_ns()
        self.error: BaseException | None = None
        self._own = own
        self._closed = False
        # the recorder's pauses before this session (a shared recorder's): not this session's
        pauses, paused_ns = recorder.pause_totals()
        self._pauses_before = (pauses - recorder._pressed, paused_ns)

    def now(self) -> int:
        return time.monotonic_ns() - self.start_ns

    def set_pressure_callback(self, callback: Callable[[bool], None]) -> None:
        self.recorder.on_pressure = callback

    def chunk(self, direction: str, data: bytes, t_ns: int) -> None:
        """Raw bytes of one stdio stream, as read; the recorder frames the lines."""
        self.recorder.send(CHUNK, self.session.id, t_ns, data, _DIR_CODE[direction])

    def stream_end(self, direction: str) -> None:
        """The stream ended: its last line, if unterminated, is a message too."""
        self.recorder.send(EOF, self.session.id, self.now(), b"", _DIR_CODE[direction])

    def stderr_chunk(self, data: bytes, t_ns: int) -> None:
        self.recorder.send(STDERR, self.session.id, t_ns, data)

    def message(self, direction: str, raw: bytes, t_ns: int | None = None,
                http: dict[str, Any] | None = None, context: str | None = AUTO,
                fault: dict[str, Any] | None = None) -> None:
        if self._closed:  # ended (an HTTP session's DELETE): the recorder has let it go
            return
        extra = orjson.dumps({"http": http, "context": context}) \
            if http is not None or context != AUTO else b""
        if fault is not None:
            extra = orjson.dumps({"http": http, "context": context, "fault": fault})
        self.recorder.send_pieces(MESSAGE, self.session.id, self.now() if t_ns is None else t_ns,
                                  (struct.pack("<I", len(raw)), raw, extra), _DIR_CODE[direction])

    def stderr_line(self, line: bytes, t_ns: int | None = None) -> None:
        self.stderr_chunk(line + b"\n", self.now() if t_ns is None else t_ns)

    def sync(self, timeout: float | None = None) -> bool:
        self.recorder.sync(self.session.id)
        return not self.recorder.broken

    def close(self, *, exit_code: int | None = None, status: str = "complete") -> None:
        """End the session. A shared recorder goes on (the frame is written with the rest).
        An own one gets the rest and is left to commit it: this returns once the session is
        marked as ended, so that readers wait until the recorder has completed it."""
        if self._closed:
            return
        self._closed = True
        info: dict[str, Any] = {"exit_code": exit_code, "status": status}
        pauses, paused_ns = self.recorder.pause_totals()
        pauses -= self._pauses_before[0]
        if pauses:  # forwarding waited for the recorder: the session's row says how long
            info["backpressure"] = {
                "pauses": pauses, "paused_ms": (paused_ns - self._pauses_before[1]) // 1_000_000,
                "bound_bytes": HIGH_WATER}
        self.recorder.send(CLOSE, self.session.id, self.now(), orjson.dumps(info))
        if self._own:
            # the rest committed, briefly waited for: a write that fails on it (a full disk)
            # is then known here, for the exit status, and not only said on stderr. Briefly:
            # waiting out the commit of a burst's backlog cost the exit 24 -> 164 ms
            # (bench_record, exit right after the small burst)
            self.recorder.send(SYNC, self.session.id, 0)
            self.recorder.flush_blocking()
            if not self.recorder.broken:
                self.recorder.read_ack(ACK_COMMITTED, LAST_COMMIT_WAIT)
            self.recorder.end_input()
            # marked here, not by the recorder: its threads share one interpreter, which a
            # 100 MB message keeps busy for a second
            # (on failure the recorder marks it as it reads the close)
            mark_ended(self.cassette_path, [self.session.id], exit_code,
                       timeout=END_MARK_TIMEOUT)
            code = self.recorder.wait(0)
            if code is not None and code != 0:
                self.error = RuntimeError(f"the recorder exited with code {code}")
            self.recorder.drain_acks()
            self.recorder.detach()

    @property
    def lost(self) -> bool:
        """Whether the recorder said, by now, that a write to the cassette failed."""
        if not self.recorder.lost:
            self.recorder.drain_acks()
        return self.recorder.lost


def create_recorded_session(path: str | os.PathLike[str], name: str, *, transport: str,
                            target: Any, tags: dict[str, str] | None, redact: Any,
                            recorder_pid: int | None) -> Any:
    """Add the session row (secrets in its target and tags redacted) before recording starts,
    so that a bad cassette or a taken name fails at once."""
    from ..cassette.store import Cassette
    from ..redact.manifest import for_recording

    with Cassette.open(path, create=True) as c:
        redact, manifest = for_recording(redact, c)  # keyed by the cassette's salt, if hashing
        target, tags = redacted_head(redact, target, tags)
        session = c.create_session(name, transport=transport, target=target, tags=tags,
                                   recorder_pid=recorder_pid)
        if manifest is not None:
            c.set_redaction_manifest(session, manifest)
        return session


# --- the recorder process ------------------------------------------------------------------------
