"""Recording in a process of its own, so that it never competes with forwarding.

The tap (or the HTTP proxy) sends what it sees down a pipe to a recorder process and goes on:
per chunk read, one small header and the bytes, appended to a buffer that is written to the pipe
once per event-loop turn. The recorder process frames lines, redacts, classifies, pairs and
commits, in batches, on its own interpreter and CPU. When it falls far behind, the buffer's high
water mark pauses reading at the tap (memory stays flat). If mcprec is killed outright, the
recorder still gets everything already written to the pipe, commits it, and marks the session
incomplete.

Frames: ``<B kind><B direction><I session><Q t_ns><I length>`` + payload.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import orjson

from .. import wire
from .writer import AUTO, redacted_head

_HEAD = struct.Struct("<BBIQI")
CHUNK, EOF, MESSAGE, STDERR, SYNC, CLOSE = range(6)
_DIRS = (wire.CLIENT_TO_SERVER, wire.SERVER_TO_CLIENT)
_DIR_CODE = {d: i for i, d in enumerate(_DIRS)}

DEFAULT_MAX_MESSAGE = 256 * 1024 * 1024
"""Longer messages are forwarded whole but recorded as their first this-many bytes."""
COMMIT_DELAY = 0.01
"""Seconds a trickle of messages may wait to be committed together (bounded by 2000 rows)."""
HIGH_WATER = 16 * 1024 * 1024
LOW_WATER = 4 * 1024 * 1024
RULES_ENV = "MCPREC_RECORDER_RULES"


class RecorderProcess:
    """The parent's end: a recorder process for one cassette, shared by its sessions."""

    def __init__(self, path: str | os.PathLike[str], rules: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        env = dict(os.environ)
        env[RULES_ENV] = orjson.dumps(rules or {}).decode()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "mcprec.cassette.process", str(self.path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
            start_new_session=True,  # a Ctrl-C for mcprec must not stop the recording
        )
        assert self._proc.stdin is not None
        self._fd = self._proc.stdin.fileno()
        os.set_blocking(self._fd, False)
        self._buf = bytearray()
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
        if self.broken:
            return
        self._buf += _HEAD.pack(kind, direction, session_id, t_ns, len(payload))
        self._buf += payload
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop here: write at once
            self.flush_blocking()
            return
        if loop is not self._loop:
            self._loop, self._scheduled, self._watching = loop, False, False
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._flush)
        if not self._pressed and len(self._buf) > HIGH_WATER and self.on_pressure is not None:
            self._pressed = True
            self.on_pressure(True)

    def _flush(self) -> None:
        self._scheduled = False
        if self.broken or not self._buf:
            return
        try:
            while self._buf:
                n = os.write(self._fd, self._buf)
                del self._buf[:n]
        except BlockingIOError:
            pass
        except (BrokenPipeError, OSError) as e:
            self._broke(e)
            return
        if self._buf and not self._watching and self._loop is not None:
            self._watching = True
            self._loop.add_writer(self._fd, self._flush)
        elif not self._buf and self._watching and self._loop is not None:
            self._watching = False
            self._loop.remove_writer(self._fd)
        if self._pressed and len(self._buf) < LOW_WATER and self.on_pressure is not None:
            self._pressed = False
            self.on_pressure(False)

    def flush_blocking(self) -> None:
        """Write everything buffered, waiting for the recorder as long as it takes."""
        if self._watching and self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_writer(self._fd)
            self._watching = False
        if self.broken or not self._buf:
            return
        os.set_blocking(self._fd, True)
        try:
            while self._buf:
                n = os.write(self._fd, self._buf)
                del self._buf[:n]
        except OSError as e:
            self._broke(e)
        finally:
            with contextlib.suppress(OSError):
                os.set_blocking(self._fd, False)

    def _broke(self, e: BaseException) -> None:
        self.broken = True
        self._buf.clear()
        print(f"mcprec: the recorder for {self.path} stopped ({e}); traffic is still forwarded "
              "but no longer recorded", file=sys.stderr, flush=True)

    def sync(self, session_id: int) -> None:
        """Block until the recorder has committed everything sent so far."""
        self.send(SYNC, session_id, 0)
        self.flush_blocking()
        if not self.broken:
            assert self._proc.stdout is not None
            if not self._proc.stdout.read(1):
                self._broke(EOFError("no acknowledgement"))

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
        except subprocess.TimeoutExpired:
            return None
        finally:
            if self._proc.stdout is not None:
                self._proc.stdout.close()


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
        extra = orjson.dumps({"http": http, "context": context}) \
            if http is not None or context != AUTO else b""
        payload = struct.pack("<I", len(raw)) + raw + extra
        self.recorder.send(MESSAGE, self.session.id, self.now() if t_ns is None else t_ns,
                           payload, _DIR_CODE[direction])

    def stderr_line(self, line: bytes, t_ns: int | None = None) -> None:
        self.stderr_chunk(line + b"\n", self.now() if t_ns is None else t_ns)

    def sync(self, timeout: float | None = None) -> bool:
        self.recorder.sync(self.session.id)
        return not self.recorder.broken

    def close(self, *, exit_code: int | None = None, status: str = "complete") -> None:
        """End the session. A shared recorder goes on (the frame is written with the rest);
        an own one is closed, which waits until everything is committed."""
        if self._closed:
            return
        self._closed = True
        self.recorder.send(CLOSE, self.session.id, self.now(),
                           orjson.dumps({"exit_code": exit_code, "status": status}))
        if self._own:
            code = self.recorder.close()
            if code not in (0, None):
                self.error = RuntimeError(f"the recorder exited with code {code}")


def create_recorded_session(path: str | os.PathLike[str], name: str, *, transport: str,
                            target: Any, tags: dict[str, str] | None, redact: Any,
                            recorder_pid: int | None) -> Any:
    """Add the session row (secrets in its target and tags redacted) before recording starts,
    so that a bad cassette or a taken name fails at once."""
    from .store import Cassette

    target, tags = redacted_head(redact, target, tags)
    with Cassette.open(path, create=True) as c:
        return c.create_session(name, transport=transport, target=target, tags=tags,
                                recorder_pid=recorder_pid)


# --- the recorder process ------------------------------------------------------------------------


def _main(path: str) -> int:
    import signal

    from ..redact import Redactor, Rules
    from .store import Cassette
    from .writer import Recorder, TimedFramer

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # mcprec decides when recording ends
    rules = orjson.loads(os.environ.get(RULES_ENV) or "{}")
    redactor = None if rules.get("off") else Redactor(Rules.from_dict(rules))
    limit = int(rules.get("max_message_size") or DEFAULT_MAX_MESSAGE)
    warned: set[int] = set()

    def oversize(rec: Any, direction: str, head: bytes, size: int, t: int) -> None:
        """Forwarded whole by the tap; kept here as its first ``limit`` bytes, marked."""
        rec.add(direction, t, head, {"truncated": True, "size": size})
        if rec.session.id not in warned:
            warned.add(rec.session.id)
            print(f"mcprec: a {size:,}-byte message is larger than --max-message-size "
                  f"{limit:,}: forwarded whole, recorded truncated", file=sys.stderr, flush=True)
    cassette = Cassette.open(path)
    recorders: dict[int, Any] = {}
    framers: dict[tuple[int, int], TimedFramer] = {}
    closed: set[int] = set()

    def recorder(sid: int) -> Any:
        rec = recorders.get(sid)
        if rec is None:
            rec = recorders[sid] = Recorder(cassette.connection, cassette.session_by_id(sid),
                                            path=path, redact=redactor)
        return rec

    def framer(sid: int, d: int) -> TimedFramer:
        f = framers.get((sid, d))
        if f is None:
            rec = recorder(sid)
            if d == 2:
                f = TimedFramer(lambda line, t: rec.add_stderr(t, line), limit,
                                lambda head, size, t: rec.add_stderr(t, head))
            else:
                f = TimedFramer(lambda line, t, direction=_DIRS[d]: rec.add(direction, t, line),
                                limit, lambda head, size, t, direction=_DIRS[d]: oversize(
                                    rec, direction, head, size, t))
            framers[(sid, d)] = f
        return f

    inp = sys.stdin.buffer.raw if hasattr(sys.stdin.buffer, "raw") else sys.stdin.buffer
    out = sys.stdout.buffer
    fd = inp.fileno()
    buf = b""
    eof = False
    first_pending: float | None = None
    while not eof:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            eof = True
        buf = buf + chunk if buf else chunk
        pos = 0
        acks = 0
        n = len(buf)
        while n - pos >= _HEAD.size:
            kind, d, sid, t_ns, length = _HEAD.unpack_from(buf, pos)
            end = pos + _HEAD.size + length
            if end > n:
                break
            payload = buf[pos + _HEAD.size:end]
            pos = end
            if kind == CHUNK:
                framer(sid, d).feed_at(payload, t_ns)
            elif kind == STDERR:
                framer(sid, 2).feed_at(payload, t_ns)
            elif kind == MESSAGE:
                (raw_len,) = struct.unpack_from("<I", payload)
                raw = payload[4:4 + raw_len]
                extra = orjson.loads(payload[4 + raw_len:]) if len(payload) > 4 + raw_len \
                    else {}
                recorder(sid).add(_DIRS[d], t_ns, raw, extra.get("http"),
                                  extra.get("context", AUTO))
            elif kind == EOF:
                framer(sid, d).close()
            elif kind == SYNC:
                acks += 1
            elif kind == CLOSE:
                info = orjson.loads(payload)
                for key in [k for k in framers if k[0] == sid]:
                    framers.pop(key).close()
                recorder(sid).finish(exit_code=info.get("exit_code"),
                                     status=info.get("status") or "complete")
                closed.add(sid)
            if sum(r.pending for r in recorders.values()) >= 5000:
                for r in recorders.values():
                    r.commit()
        buf = buf[pos:]
        # Commit at once when asked (--durable), at the end, or when much is pending; else
        # wait a little for more, so that a trickle of messages is not one commit each (each
        # commit costs CPU that the client and server, on the same cores, would rather have).
        pending = sum(r.pending for r in recorders.values())
        if pending and not acks and not eof and pending < 2000:
            if first_pending is None:
                first_pending = time.monotonic()
            wait = COMMIT_DELAY - (time.monotonic() - first_pending)
            if wait > 0 and select.select([fd], [], [], wait)[0]:
                continue  # more has come: read it, then decide again
        first_pending = None
        for r in recorders.values():
            r.commit()
        if acks:
            out.write(b"k" * acks)
            out.flush()
    # the pipe closed: mcprec is done, or died; whatever it sent is committed
    for (sid, _), f in list(framers.items()):
        if sid not in closed:
            f.close()
    for sid, r in recorders.items():
        if sid not in closed:
            r.finish(status="incomplete")
    with contextlib.suppress(Exception):
        cassette.connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
    cassette.close()
    return 0


if __name__ == "__main__":
    sys.stdout.flush()
    code = _main(sys.argv[1])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # nothing left to tear down: skip the interpreter's shutdown
