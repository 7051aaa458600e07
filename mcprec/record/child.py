"""The recorder process: reads frames from the tap, cuts lines, and has them redacted, paired and
committed by a ``Recorder`` (``mcprec.record.recorder``) in batches, at a lower CPU priority than
forwarding. Started by ``process.RecorderProcess`` as ``python -m mcprec.record.child PATH``."""

from __future__ import annotations

import collections
import contextlib
import os
import struct
import sys
import threading
import time

# asyncio, subprocess and typing serve the tap's end (``RecorderProcess``), imported there: the
# recorder process, started as the tap starts, reaches its first read sooner without them
# (the process started, opened a cassette and ended on EOF: 124 -> 85 ms, medians of 11; in
# the 100 KB benchmark the tap had filled its 16 MiB bound before the recorder first read)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

import orjson

from .. import _log
from ..errors import CassetteError
from ..cassette import rows
from ..cassette.rows import (
    DatabaseError,
    checkpoint,
    manual_checkpoints,
    open_marker,
    release_reserve,
)
from .frames import (
    ACK_COMMITTED,
    ACK_LOST,
    _DIRS,
    _HEAD,
    CHUNK,
    CLOSE,
    COMMIT_DELAY,
    DEFAULT_MAX_MESSAGE,
    EOF,
    HIGH_WATER,
    MAX_BACKLOG,
    MESSAGE,
    PIPE_SIZE,
    RULES_ENV,
    STDERR,
    SYNC,
)
from .writer import AUTO


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

BATCH_DELAY = 0.002
"""After a small read the reader waits this long before the next, so that it wakes once per
batch of messages, not once per message (a busy tap fills the pipe meanwhile: 1 MiB)."""
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
        from ..cassette.connect import connect

        conn: Any = None
        while True:
            self._asked.wait()
            self._asked.clear()
            if self._pending:
                self._pending = False
                try:
                    if conn is None:
                        conn = connect(self._path, wait=False)
                    checkpoint(conn)
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
    events: list[tuple[Any, ...]] = []
    marker: list[Any] = []  # its own connection: the end is marked at once, not after the rest
    first = open_marker(path)
    if first is not None:
        marker.append(first)
    open_sids: set[int] = set()  # sessions with frames and no close yet

    def mark_ended(sid: int, exit_code: Any) -> None:
        """ended_at while status is still 'recording': readers wait until it is complete."""
        if not marker:
            conn = open_marker(path)
            if conn is None:
                return  # the writing thread reports cassette errors
            marker.append(conn)
        rows.mark_ended(path, [sid], exit_code, conn=marker[0])

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

    from ..cassette.store import Cassette
    from ..redact import Redactor, Rules
    from .recorder import Recorder

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # mcprec decides when recording ends
    rules = orjson.loads(os.environ.get(RULES_ENV) or "{}")
    redactor = None if rules.get("off") else Redactor(Rules.from_dict(rules))
    limit = int(rules.get("max_message_size") or DEFAULT_MAX_MESSAGE)
    warned: set[int] = set()
    cassette = Cassette.open(path, wait=False)
    if redactor is not None and redactor.needs_salt:
        from ..redact.manifest import recorder_salt

        redactor = recorder_salt(redactor, cassette)
    manual_checkpoints(cassette.connection)
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
            rec.on_fail = lambda: _ack(ACK_LOST)
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
                rec = recorder(sid)
                rec.add(_DIRS[d], t, raw, extra.get("http"), extra.get("context", AUTO))
                if "fault" in extra:  # record --fault: what the client got instead
                    rec.fault(extra["fault"])
            elif tag == _SYNC:
                acks += 1
            elif tag == _CLOSE:
                _, sid, info, _n = ev
                end_streams(sid)
                paused = info.get("backpressure")
                if paused:  # before the session is complete: readers wait for that
                    with contextlib.suppress(DatabaseError, CassetteError):
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
            _ack(ACK_COMMITTED * acks)
        if since_checkpoint >= CHECKPOINT_BYTES:
            since_checkpoint = 0
            checkpointer.ask()
    for r in recorders.values():  # closed ones were let go
        r.finish(status="incomplete")
    checkpointer.close()
    with contextlib.suppress(Exception):
        checkpoint(cassette.connection)
    release_reserve(cassette.connection)
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
