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

Frames: ``<B kind><B direction><I session><Q t_ns><I length>`` + payload.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import itertools
import os
import select
import sqlite3
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
    import subprocess
    from typing import Any, Callable

import orjson

from .. import _log, wire
from ..errors import CassetteError
from . import schema
from .writer import AUTO, redacted_head

_HEAD = struct.Struct("<BBIQI")
CHUNK, EOF, MESSAGE, STDERR, SYNC, CLOSE = range(6)
_DIRS = (wire.CLIENT_TO_SERVER, wire.SERVER_TO_CLIENT)
_DIR_CODE: dict[str, int] = {d: i for i, d in enumerate(_DIRS)}

DEFAULT_MAX_MESSAGE = 256 * 1024 * 1024
"""Longer messages are forwarded whole but recorded as their first this-many bytes."""
COMMIT_DELAY = 0.01
"""Seconds a trickle of messages may wait to be committed together (bounded by 2000 rows)."""
HIGH_WATER = 16 * 1024 * 1024
LOW_WATER = HIGH_WATER - 256 * 1024
"""Paused at ``HIGH_WATER``, the tap resumes once the recorder has taken 256 KiB: a pause lasts
as long as the recorder needs for that, not for megabytes. 400 pipelined 100 KB requests behind
a recorder that cannot keep up (bench_record large, 6 rounds, same run): a 4 MiB step with the
writing thread taking 8 MiB at a time -> 2 MiB and 1 MiB: p99 469 -> 135 ms, req/s 210 -> 231;
-> 256 KiB, 256 KiB and commits of 2 MiB (three runs, against the 2 MiB step in each): p99
32-40 -> 17-18 ms at the same throughput."""
END_MARK_TIMEOUT = 1.5
"""Seconds the tap waits, at its end, to mark the session as ended (for the write lock, while the
recorder commits): past that it exits all the same, inside the 2 s an SDK client gives a server
before it kills the process group; the recorder marks it too, as it reads the close."""
_MARK_ENDED = ("UPDATE sessions SET ended_at = ?, exit_code = ? WHERE id = ? AND "
               "status = 'recording'")
RULES_ENV = "MCPREC_RECORDER_RULES"
_JOIN_BELOW = 4096
"""A payload up to this size is sent joined to its header (one piece); a larger one as its own."""
_IOV = 512
"""Pieces per writev (Linux takes up to 1024)."""


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
            [sys.executable, "-m", "mcprec.cassette.recorder_process", str(self.path)],
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
        if not self.broken and not self._read_ack(b"k", None):
            self._broke(EOFError("no acknowledgement"))

    def _read_ack(self, want: bytes, timeout: float | None) -> bool:
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
            if got == want:
                return True


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

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the recorder to commit everything and exit (any thread)."""
        try:
            return self._proc.wait(timeout)
        except self._subprocess.TimeoutExpired:
            return None
        finally:
            if self._proc.stdout is not None:
                self._proc.stdout.close()

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
                http: dict[str, Any] | None = None, context: str | None = AUTO) -> None:
        if self._closed:  # ended (an HTTP session's DELETE): the recorder has let it go
            return
        extra = orjson.dumps({"http": http, "context": context}) \
            if http is not None or context != AUTO else b""
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
            self.recorder.end_input()
            # marked here, not by the recorder: its threads share one interpreter, which a
            # 100 MB message keeps busy for a second
            try:
                conn = sqlite3.connect(self.cassette_path, timeout=END_MARK_TIMEOUT,
                                       isolation_level=None)
                try:
                    conn.execute(_MARK_ENDED, (schema.now_iso(), exit_code, self.session.id))
                finally:
                    conn.close()
            except sqlite3.Error:
                pass  # the recorder marks it as it reads the close
            code = self.recorder.wait(0)
            if code is not None and code != 0:
                self.error = RuntimeError(f"the recorder exited with code {code}")
            self.recorder.detach()


def create_recorded_session(path: str | os.PathLike[str], name: str, *, transport: str,
                            target: Any, tags: dict[str, str] | None, redact: Any,
                            recorder_pid: int | None) -> Any:
    """Add the session row (secrets in its target and tags redacted) before recording starts,
    so that a bad cassette or a taken name fails at once."""
    from .store import Cassette

    from ..redact_manifest import for_recording

    with Cassette.open(path, create=True) as c:
        redact, manifest = for_recording(redact, c)  # keyed by the cassette's salt, if hashing
        target, tags = redacted_head(redact, target, tags)
        session = c.create_session(name, transport=transport, target=target, tags=tags,
                                   recorder_pid=recorder_pid)
        if manifest is not None:
            c.set_redaction_manifest(session, manifest)
        return session


# --- the recorder process ------------------------------------------------------------------------


class _Lines:
    """Cuts one stream into lines, as ``wire.LineFramer`` does (same lines, same limit), but a
    line spanning chunks grows in one bytearray that is handed on whole: a 100 MB message is
    held once, not as a list of chunks plus their join."""

    __slots__ = ("partial", "size", "limit", "t")

    def __init__(self, limit: int) -> None:
        self.partial = bytearray()
        self.size = 0  # bytes of the line in progress (more than ``partial`` past the limit)
        self.limit = limit
        self.t = 0  # the time of the last chunk: a line's time is that of the chunk ending it

    def feed(self, data: bytes | bytearray, a: int, b: int, t: int,
             line: Callable[[Any, int], None]) -> None:
        """Cut ``data[a:b]``, read at ``t``; ``line(bytes, size)`` gets each finished line (its
        first ``limit`` bytes, and its full size)."""
        self.t = t
        nl = data.find(b"\n", a, b)
        if nl < 0:
            self._keep(data, a, b)
            return
        if self.size:
            self._keep(data, a, nl)
            self._end(line)
        else:
            line(data[a:nl] if nl - a <= self.limit else data[a:a + self.limit], nl - a)
        start = nl + 1
        nl = data.find(b"\n", start, b)
        limit = self.limit
        while nl >= 0:
            line(data[start:nl] if nl - start <= limit else data[start:start + limit], nl - start)
            start = nl + 1
            nl = data.find(b"\n", start, b)
        if start < b:
            self._keep(data, start, b)

    def _keep(self, data: bytes | bytearray, a: int, b: int) -> None:
        room = self.limit - len(self.partial)
        if room > 0:
            self.partial += memoryview(data)[a:min(b, a + room)]
        self.size += b - a

    def _end(self, line: Callable[[Any, int], None]) -> None:
        done, size = self.partial, self.size
        self.partial, self.size = bytearray(), 0
        line(done, size)

    def close(self, line: Callable[[Any, int], None]) -> None:
        if self.size:
            self._end(line)


# events from the reader thread to the writing thread
_CHUNK, _END, _MSG, _SYNC, _CLOSE, _EOF = range(6)

MAX_BACKLOG = 32 * 1024 * 1024
"""Bytes read but not yet recorded that the recorder holds before it stops reading (then the
pipe and the tap's buffer fill, and the tap pauses at its high water mark)."""
BATCH_DELAY = 0.002
"""After a small read the reader waits this long before the next, so that it wakes once per
batch of messages, not once per message (a busy tap fills the pipe meanwhile: 1 MiB)."""
PIPE_SIZE = 1024 * 1024
TAKE_BYTES = 256 * 1024
"""The writing thread takes at most this much from the reader at a time (a larger message whole):
room in the backlog, and so in the pipe and the tap's buffer, frees in steps this small, so that
a tap paused at its high water mark resumes within this much recording (see ``LOW_WATER``)."""
RECORDER_NICE = 19
"""The recorder yields the CPU to forwarding: on 2 cores, a busy client, tap and server would
otherwise share them with it; it catches up when they idle. 20,000 small requests, 32 in
flight (bench_record.py, same runs): nice 10 gave 0.34-0.62x the bare relay's throughput,
nice 19 0.76-0.98x."""
HOLD_MAX = 0.25
"""While the tap forwards a burst, the recorder holds what it reads, up to this many seconds (and
``HOLD_BYTES``), and records it when the input pauses for ``QUIET`` seconds: on 2 cores, its
work during the burst took CPU from the client, tap and server, even at nice 19. 20,000 small
requests, 32 in flight (bench_record.py, 5 rounds alternating with the tree before): 88,900 ->
133,700 req/s, 0.57x -> 0.93x the bare relay's in the same rounds; the recorder's CPU during
the load 8-11 -> 1-1.5 µs a request. A sync (--durable), a close and the end are recorded at
once."""
HOLD_BYTES = 16 * 1024 * 1024
HOLD_RATE = 16 * 1024 * 1024
"""Bytes a second: what comes slower is recorded as it comes, as before. A recorder that works
between the messages of a ping-pong keeps the CPUs from idling, which costs a VM's vCPU tens of
µs to wake from: 3,000 pings, 9 rounds, held: p50 +29.8 µs over direct (-7.6 µs not held)."""
FAST_RATE = (MAX_BACKLOG + HIGH_WATER) / HOLD_MAX
FAST_FROM = 4 * 1024 * 1024
"""Bytes a second past which a burst is recorded as it comes (once ``FAST_FROM`` bytes have
come): as fast as that, it would fill the backlog and the tap's buffer before the hold ran out,
and then forwarding waits for the recorder all the same; idle meanwhile, the recorder only makes
that wait longer. 400 pipelined 100 KB requests (~420 MB/s), held up to ``HOLD_BYTES`` first,
against recorded from 4 MiB on (5 alternated runs): 1,831-1,955 -> 2,052-2,538 req/s. Small
messages come at most at ~170 MB/s here (400,000 requests a second, direct): still held."""
QUIET = 0.01
"""The reader hands on what it read every ``BATCH_DELAY`` while the tap writes; on 2 busy CPUs it
may wait a few ms more for its turn."""
COMMIT_BYTES = 512 * 1024
"""Message bytes the writing thread commits together at most (a trickle waits up to
``COMMIT_DELAY``)."""
PREPARE_COUNT = 64
PREPARE_BYTES = 64 * 1024
"""A take holding this many messages, or bytes, is made into rows at once (``Recorder.prepare``);
a smaller one waits for more, or for the commit (redacting a batch costs ~1.4 µs a small
message from 50 messages on, 4.8 from 10).

Behind a recorder that cannot keep up, the tap resumes each time the reader makes room, so a
pause lasts as long as the writing thread's longest step. Traced (400 pipelined 100 KB
requests, 4 in flight): rows made at commit, commits of 2 MiB and reads of a whole pipe (1 MiB)
made steps of 4-5 ms. Rows made per take, reads no larger than the backlog has room for (see
``_read_frames``) and commits of 512 KiB (``COMMIT_BYTES``; small messages commit at 2,000 rows
first): bench_record large, 7 rounds alternating with the tree before, p99 11.1-20.0 (median
12.4) -> 5.8-15.4 (9.4) ms, lower in each round; 1,348 -> 1,467 req/s."""
CHECKPOINT_BYTES = 64 * 1024 * 1024
"""The recorder's connection does not checkpoint at each commit (a 100 MB message: commit
0.41-0.53 s with SQLite's automatic checkpoint, 0.05-0.09 s without); a thread of its own
checkpoints once this much has been committed (``_Checkpointer``), and the recorder at the end."""


class _Checkpointer:
    """Checkpoints the cassette's WAL on a connection and thread of its own, when asked.

    A checkpoint copies what was committed into the database file: for 64 MiB, 0.15-0.22 s, more
    than committing it took. On the writing thread it stopped recording for that long, in the
    middle of a burst, while the tap's buffer filled and forwarding paused. A PASSIVE checkpoint
    takes no write lock, and sqlite3 lets go of the GIL while it runs: the writing thread goes on
    committing meanwhile."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._asked = threading.Event()
        self._pending = False  # asked and not yet done (done before stopping, too)
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="mcprec-recorder-checkpoint",
                                        daemon=True)
        self._thread.start()

    def ask(self) -> None:
        self._pending = True
        self._asked.set()

    def _run(self) -> None:
        from .store import connect

        conn: sqlite3.Connection | None = None
        while True:
            self._asked.wait()
            self._asked.clear()
            if self._pending:
                self._pending = False
                try:
                    if conn is None:
                        conn = connect(self._path, wait=False)
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except Exception:  # noqa: BLE001 - the writing thread reports cassette errors;
                    pass  # the last checkpoint, at the end, is the writing thread's
            if self._stop:
                break
        if conn is not None:
            conn.close()

    def close(self) -> None:
        self._stop = True
        self._asked.set()
        self._thread.join()


class _Inbox:
    """Events handed from the reader thread to the writing thread, with the bytes they hold."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.items: collections.deque[tuple[Any, ...]] = collections.deque()
        self.bytes = 0
        # since the inbox was last empty: when the first event came, how many bytes came, and
        # when the latest did
        self.first_at = self.last_at = 0.0
        self.came = 0
        self.urgent = False  # an event held must be recorded at once (a sync, a close, the end)
        self.draining = False  # a hold ran out: take without holding until all is taken

    def hurry(self) -> None:
        """Record what is held at once (see ``_hold``)."""
        with self.cond:  # an RLock: the thread that holds it may call this (a signal handler)
            self.urgent = True
            self.cond.notify_all()

    def put(self, events: list[tuple[Any, ...]], urgent: bool = False) -> None:
        size = sum(ev[-1] for ev in events)  # each event ends with the bytes it holds
        now = time.monotonic()
        with self.cond:
            if not self.items:
                self.first_at, self.came = now, 0
            self.last_at = now
            self.items.extend(events)
            self.bytes += size
            self.came += size
            self.urgent = self.urgent or urgent
            self.cond.notify_all()

    def _hold(self) -> None:
        """While a burst is being forwarded, wait (see ``HOLD_MAX``). A pause of the burst
        ends the wait for one take, and the next waits again if the burst has resumed (a reader
        that was not scheduled for a while looks like a pause); past ``HOLD_MAX`` or
        ``HOLD_BYTES``, at ``FAST_RATE``, or for an urgent event, all is taken without
        waiting."""
        while self.items and not self.draining:
            now = time.monotonic()
            if self.came < HOLD_RATE * max(now - self.first_at, BATCH_DELAY):
                return  # a trickle: recorded as it comes
            if self.urgent or self.bytes >= HOLD_BYTES or now >= self.first_at + HOLD_MAX \
                    or (self.came >= FAST_FROM and self.came > FAST_RATE * (now - self.first_at)):
                self.draining = True
                return
            quiet = self.last_at + QUIET - now
            if quiet <= 0:
                return
            self.cond.wait(min(quiet, self.first_at + HOLD_MAX - now))

    def take(self, timeout: float | None, most: int = 5000) -> list[tuple[Any, ...]]:
        """Up to ``most`` events (fewer bytes than a batch), waiting up to ``timeout`` for one."""
        with self.cond:
            if not self.items:
                self.cond.wait(timeout)
            self._hold()
            items, size = self.items, 0
            out: list[tuple[Any, ...]] = []
            while items and len(out) < most and size < TAKE_BYTES:
                ev = items.popleft()
                size += ev[-1]
                out.append(ev)
            self.bytes -= size
            if not items:
                self.urgent = self.draining = False
            self.cond.notify_all()
            return out

    def wait_for_room(self) -> None:
        with self.cond:
            while self.bytes > MAX_BACKLOG and self.items:
                self.cond.wait()


def _ack(what: bytes) -> None:
    with contextlib.suppress(OSError):
        os.write(1, what)


def _read_frames(fd: int, path: str, inbox: _Inbox) -> None:
    """The reader thread: reads the pipe as fast as the tap writes it and hands its frames on
    (the writing thread cuts the lines: here, that work would take the CPU from a burst that the
    writing thread waits out, ``HOLD_MAX``); marks a session as ended (still being written) the
    moment its close is read."""
    from .schema import now_iso
    from .store import connect

    events: list[tuple[Any, ...]] = []
    marker: list[Any] = []  # its own connection: the end is marked at once, not after the rest
    with contextlib.suppress(Exception):
        marker.append(connect(path, wait=False))
    open_sids: set[int] = set()  # sessions with frames and no close yet

    def mark_ended(sid: int, exit_code: Any) -> None:
        """ended_at while status is still 'recording': readers wait until it is complete."""
        try:
            if not marker:
                marker.append(connect(path, wait=False))
            marker[0].execute(_MARK_ENDED, (now_iso(), exit_code, sid))
        except Exception:  # noqa: BLE001 - the writing thread reports cassette errors
            pass

    pending = bytearray()  # the start of a frame still arriving
    need = 0  # its length: a large frame (a whole HTTP message) gathers before it is parsed
    data: bytes | bytearray
    while True:
        try:
            # no more than the backlog has room for (a take at least): the tap's buffer drains
            # in steps of what the writing thread takes, not of a whole pipe
            data = os.read(fd, min(PIPE_SIZE, max(TAKE_BYTES, MAX_BACKLOG - inbox.bytes)))
        except OSError:
            data = b""
        if not data:
            break
        if pending:
            pending += data
            if len(pending) < need:
                continue
            data = pending
        pos, n, urgent = 0, len(data), False
        while n - pos >= _HEAD.size:
            kind, d, sid, t_ns, length = _HEAD.unpack_from(data, pos)
            a = pos + _HEAD.size
            end = a + length
            if end > n:
                break
            pos = end
            open_sids.add(sid)
            if kind == CHUNK or kind == STDERR:
                if data is pending:  # changed below: the frame's own bytes
                    events.append((_CHUNK, sid, 2 if kind == STDERR else d, t_ns,
                                   bytes(memoryview(data)[a:end]), 0, length, length))
                else:
                    events.append((_CHUNK, sid, 2 if kind == STDERR else d, t_ns, data, a, end,
                                   length))
            elif kind == MESSAGE:
                (raw_len,) = struct.unpack_from("<I", data, a)
                events.append((_MSG, sid, d, t_ns, data[a + 4:a + 4 + raw_len],
                               data[a + 4 + raw_len:end], length))
            elif kind == EOF:
                events.append((_END, sid, d, 0))
            elif kind == SYNC:
                events.append((_SYNC, 0))
                urgent = True
            elif kind == CLOSE:
                info = orjson.loads(data[a:end])
                mark_ended(sid, info.get("exit_code"))
                open_sids.discard(sid)
                events.append((_CLOSE, sid, info, 0))
                urgent = True
        if data is pending:
            del pending[:pos]
        else:
            pending = bytearray(data[pos:])
        need = _HEAD.unpack_from(pending)[-1] + _HEAD.size if len(pending) >= _HEAD.size else 0
        if events:
            inbox.put(events, urgent)
            events = []
            inbox.wait_for_room()
        if not urgent and len(data) < PIPE_SIZE // 16:
            time.sleep(BATCH_DELAY)
    # the pipe closed: mcprec is done, or died; what it sent is recorded, the rest ended now
    for sid in open_sids:
        mark_ended(sid, None)
    events.append((_EOF, 0))
    inbox.put(events, True)
    for conn in marker:
        conn.close()


def _main(path: str) -> int:
    import signal

    from ..redact import Redactor, Rules
    from .store import Cassette
    from .writer import Recorder

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # mcprec decides when recording ends
    rules = orjson.loads(os.environ.get(RULES_ENV) or "{}")
    redactor = None if rules.get("off") else Redactor(Rules.from_dict(rules))
    limit = int(rules.get("max_message_size") or DEFAULT_MAX_MESSAGE)
    warned: set[int] = set()
    cassette = Cassette.open(path, wait=False)
    if redactor is not None and redactor.needs_salt:
        from ..redact_manifest import recorder_salt

        redactor = recorder_salt(redactor, cassette)
    cassette.connection.execute("PRAGMA wal_autocheckpoint = 0")
    live = None  # MCPREC_OTLP: spans of what is committed, built and sent by threads of its own
    if os.environ.get("MCPREC_OTLP"):
        from ..otel.live import LiveExport

        live = LiveExport.from_env(path)
    recorders: dict[int, Any] = {}  # the sessions not closed yet

    def recorder(sid: int) -> Any:
        rec = recorders.get(sid)
        if rec is None:
            rec = recorders[sid] = Recorder(cassette.connection, cassette.session_by_id(sid),
                                            path=path, redact=redactor)
        return rec

    def oversize(rec: Any, direction: str, head: Any, size: int, t: int) -> None:
        """Forwarded whole by the tap; kept here as its first ``limit`` bytes, marked."""
        rec.add(direction, t, bytes(head), {"truncated": True, "size": size})
        if rec.session.id not in warned:
            warned.add(rec.session.id)
            _log.warning("record", f"a {size:,}-byte message is larger than "
                         f"--max-message-size {limit:,}: forwarded whole, recorded truncated")

    # per stream (session, direction; 2: stderr): its lines, and where they go
    streams: dict[tuple[int, int], tuple[_Lines, Callable[[Any, int], None]]] = {}

    def stream(sid: int, d: int) -> tuple[_Lines, Callable[[Any, int], None]]:
        got = streams.get((sid, d))
        if got is None:
            got = streams[(sid, d)] = open_stream(recorder(sid), d)
        return got

    def open_stream(rec: Any, d: int) -> tuple[_Lines, Callable[[Any, int], None]]:
        lines = _Lines(limit)  # a line's time is that of the chunk that ended it
        if d == 2:
            return lines, lambda line, full: rec.add_stderr(lines.t, line)
        direction = _DIRS[d]

        def sink(line: Any, full: int) -> None:
            if full > limit:
                oversize(rec, direction, line, full, lines.t)
            else:
                rec.add(direction, lines.t, line)
        return lines, sink

    def end_streams(sid: int | None) -> None:
        """The streams of session ``sid`` (None: all) ended: each one's last line, if
        unterminated, is a message too."""
        for key in [k for k in streams if sid is None or k[0] == sid]:
            c, sink = streams.pop(key)
            c.close(sink)

    inbox = _Inbox()
    stopping: list[int] = []

    def stop(signum: int, frame: Any) -> None:
        """SIGTERM (a service manager stopping everything, say): record what was read, held or
        not, and end; the rest of what the tap forwards is no longer recorded."""
        stopping.append(signum)
        inbox.hurry()

    signal.signal(signal.SIGTERM, stop)
    reader = threading.Thread(target=_read_frames, name="mcprec-recorder-reader",
                              args=(0, path, inbox), daemon=True)
    reader.start()
    # after the reader starts: on Linux a thread's nice is its own, and the reader, whose work is
    # small, must keep its pace for the hold to see when a burst pauses (the checkpointer, started
    # below, inherits this thread's)
    with contextlib.suppress(OSError):
        os.nice(RECORDER_NICE)
    checkpointer = _Checkpointer(path)
    eof = False
    first_pending: float | None = None
    since_checkpoint = 0
    while not eof:
        wait = None if first_pending is None else max(
            0.0, COMMIT_DELAY - (time.monotonic() - first_pending))
        events = inbox.take(wait)
        acks = 0
        for ev in events:
            tag = ev[0]
            if tag == _CHUNK:
                _, sid, d, t, data, a, b, _n = ev
                c, sink = stream(sid, d)
                c.feed(data, a, b, t, sink)
            elif tag == _END:  # a stream that never had a chunk has nothing to end
                ended = streams.pop((ev[1], ev[2]), None)
                if ended is not None:
                    ended[0].close(ended[1])
            elif tag == _MSG:
                _, sid, d, t, raw, more, _n = ev
                extra = orjson.loads(more) if more else {}
                recorder(sid).add(_DIRS[d], t, raw, extra.get("http"),
                                  extra.get("context", AUTO))
            elif tag == _SYNC:
                acks += 1
            elif tag == _CLOSE:
                _, sid, info, _n = ev
                end_streams(sid)
                paused = info.get("backpressure")
                if paused:  # before the session is complete: readers wait for that
                    with contextlib.suppress(sqlite3.Error):
                        cassette.set_backpressure(sid, **paused)
                recorder(sid).finish(exit_code=info.get("exit_code"),
                                     status=info.get("status") or "complete")
                if live is not None:
                    live.closed(sid, info.get("status") or "complete")
                recorders.pop(sid, None)  # committed and marked: nothing of it is kept
                warned.discard(sid)
            elif tag == _EOF:  # mcprec is done, or died: what it sent is recorded
                end_streams(None)
                eof = True
        if stopping and not inbox.items:
            eof = True
        for r in recorders.values():
            count, size = r.unprepared
            if count >= PREPARE_COUNT or size >= PREPARE_BYTES:
                r.prepare()
        pending = sum(r.pending for r in recorders.values())
        if pending:
            if first_pending is None:
                first_pending = time.monotonic()
            # at once when asked (--durable), at the end, when much is waiting; else a trickle
            # of messages waits a little, so that it is not one commit each (each commit costs
            # CPU that the client and server, on the same cores, would rather have)
            if acks or eof or pending >= 2000 \
                    or sum(r.pending_bytes for r in recorders.values()) >= COMMIT_BYTES \
                    or time.monotonic() - first_pending >= COMMIT_DELAY:
                for r in recorders.values():
                    since_checkpoint += r.pending_bytes
                    r.commit()
                first_pending = None
                if live is not None:
                    live.committed(recorders)
        if acks:
            _ack(b"k" * acks)
        if since_checkpoint >= CHECKPOINT_BYTES:
            since_checkpoint = 0
            checkpointer.ask()
    for r in recorders.values():  # closed ones were let go
        r.finish(status="incomplete")
    checkpointer.close()
    with contextlib.suppress(Exception):
        cassette.connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
    cassette.close()
    if live is not None:
        live.close()
    return 0


if __name__ == "__main__":
    _log.to_stderr()
    sys.stdout.flush()
    try:
        code = _main(sys.argv[1])
    except CassetteError as e:  # e.g. the cassette was removed before the recorder opened it
        print(f"mcprec: the recorder cannot write: {e}", file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # nothing left to tear down: skip the interpreter's shutdown
