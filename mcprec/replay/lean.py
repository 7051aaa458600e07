"""Serving a replay on stdin/stdout with a blocking poll loop: no asyncio, nothing imported that
the first answer does not need.

Test suites launch ``mcprec replay`` once per test, so its start-up is paid hundreds of times
per run; importing asyncio alone (with the ssl it pulls in) cost more than the rest of the
start-up together (``python -X importtime``: ~40 ms of ~70 ms before this driver). The playback
is the same ``Playback`` the asyncio driver runs, so behaviour is identical.
"""

from __future__ import annotations

import os
import select
import signal
import time
# typing is imported for type checkers only: at run time it cost replay's start-up ~3-5 ms
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

from ..cassette.models import StoredText
from ..wire import LineFramer
from .playback import Playback

DRAIN_TIMEOUT_S = 2.0
READ_WAIT_S = 0.25
"""How long an answer waits for the client to read the notifications before it (a pipe)."""
TIMED_DRAIN_S = 30.0
READ_SIZE = 1 << 16
_IN = select.POLLIN | select.POLLPRI
_GONE = select.POLLERR | select.POLLHUP | select.POLLNVAL


class _Stop(Exception):
    """A signal asked us to stop."""


def _stop(signum: int, frame: Any) -> None:
    raise _Stop()


def serve_lean(playback: Playback, *, stdin_fd: int = 0, stdout_fd: int = 1) -> None:
    """Answer the client on stdin/stdout until it closes stdin (answers still in progress get
    ``DRAIN_TIMEOUT_S``), a signal stops us, or the recorded server's exit is replayed."""
    lines: list[bytes] = []
    framer = LineFramer(lambda line, terminated: lines.append(line))
    out = bytearray()
    # what goes out after ``out``, a piece at a time: a large recorded answer as it is read from
    # the cassette, and whatever was queued behind one
    later: list[Iterator[bytes]] = []
    blocking = os.get_blocking(stdout_fd)
    os.set_blocking(stdout_fd, False)
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    poller = select.poll()
    poller.register(stdin_fd, _IN)
    writing = False
    eof_at: float | None = None
    gone = False

    # the writes after ``out``, each a write of its own as the recorded server made them; one
    # that waits for the client to read the ones before (an answer after its notifications:
    # the TypeScript SDK drops a request's progress handler once it has read the answer)
    writes: list[tuple[bool, list[Any]]] = []
    unread: list[float] = []  # since when a write waits for the client to read (one at most)

    def queue(messages: list[Any]) -> None:
        for data, _ in messages:
            if not data:  # an empty message ends an HTTP stream: nothing to end on stdio
                continue
            if not later and not isinstance(data, StoredText):
                out.extend(data)
                out.extend(b"\n")
            else:
                later.append(framed(data))

    def collect() -> None:
        taken = playback.take_writes()
        if not taken:
            return
        if writes:
            writes.extend(taken)
        else:
            queue(taken[0][1])
            if len(taken) > 1:
                writes.extend(taken[1:])

    def next_write() -> bool:
        """Move the next write into ``out``, once the client has read what it waits for."""
        drain, messages = writes[0]
        if drain and _unread(stdout_fd):
            if not unread:
                unread.append(time.monotonic())
            if time.monotonic() - unread[0] < READ_WAIT_S:
                return False
        unread.clear()
        del writes[0]
        queue(messages)
        return True

    def write() -> bool:
        """Write what stdout takes now; False when the client has gone."""
        while True:
            while out or _refill(out, later):
                try:
                    n = os.write(stdout_fd, out)
                except BlockingIOError:
                    return True
                except (BrokenPipeError, ConnectionResetError):
                    return False
                del out[:n]
            if not writes or not next_write():
                return True

    try:
        playback.start()
        collect()
        while not playback.ended:
            now = time.monotonic()
            if eof_at is not None and _drained(playback, now - eof_at):
                break
            if not write():
                gone = True
                break
            if bool(out) != writing:
                writing = bool(out)
                poller.register(stdout_fd, select.POLLOUT) if writing else poller.unregister(
                    stdout_fd)
            deadline = playback.next_deadline()
            if eof_at is not None and deadline is None:
                deadline = eof_at + DRAIN_TIMEOUT_S
            timeout = None if deadline is None else max(0, int((deadline - now) * 1000) + 1)
            if unread:  # a write waits for the client to read: look again in a millisecond
                timeout = 1 if timeout is None else min(timeout, 1)
            for fd, ev in poller.poll(timeout):
                if fd == stdin_fd:
                    data = os.read(stdin_fd, READ_SIZE) if ev & (_IN | _GONE) else b""
                    if data:
                        framer.feed(data)
                    else:
                        framer.close()
                        poller.unregister(stdin_fd)
                        eof_at = time.monotonic()
                elif fd == stdout_fd and ev & _GONE:
                    gone = True
            if gone:
                break
            for line in lines:
                playback.receive(line)
                # each answer goes out as soon as it is ready, not with the rest of the batch:
                # the client reads it and sends its next request while the rest are answered
                # (5,000 small requests, 32 in flight, medians of 7 runs alternating with the
                # live trivial server at 63,200: 30,200 -> 33,000 req/s)
                collect()
                if (out or later) and not write():
                    gone = True
                    break
            lines.clear()
            if gone:
                break
            playback.tick()
            collect()
    except (_Stop, KeyboardInterrupt):
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if not gone:
            collect()
            for _, messages in writes:
                queue(messages)
            _finish_writing(stdout_fd, out, later)
        os.set_blocking(stdout_fd, blocking)
        if playback.ended:  # the recorded server exited: the client sees its end of file now
            os.close(stdout_fd)


def _drained(playback: Playback, since_eof: float) -> bool:
    """After the client's end of input: done when nothing is in progress; answers that wait
    for the client get ``DRAIN_TIMEOUT_S``, answers due at a time (``--timing``, a delay) are
    let out up to ``TIMED_DRAIN_S``."""
    if not playback.busy:
        return True
    if playback.next_deadline() is not None:
        return since_eof > TIMED_DRAIN_S
    return since_eof > DRAIN_TIMEOUT_S


def _unread(fd: int) -> bool:
    """Whether what was written to ``fd`` is not all read yet: a pipe (what is in it) or a
    socket (what its peer has not taken: Node.js gives a child's stdio as a socket pair); False
    for anything else, or where the system does not say."""
    import fcntl
    import stat
    import termios

    mode = os.fstat(fd).st_mode
    if stat.S_ISFIFO(mode):
        request = termios.FIONREAD
    elif stat.S_ISSOCK(mode):
        request = getattr(termios, "TIOCOUTQ", 0)  # SIOCOUTQ on Linux
        if not request:
            return False
    else:
        return False
    buf = bytearray(4)
    try:
        fcntl.ioctl(fd, request, buf)
    except OSError:
        return False
    return int.from_bytes(buf, "little") > 0


def framed(data: bytes | StoredText) -> Iterator[bytes]:
    """A message and its newline, in pieces: a ``StoredText`` as it is read from the cassette
    (a 100 MB answer held 1 MiB at a time, not whole, nor copied with the client's id)."""
    return data.pieces(b"\n") if isinstance(data, StoredText) else iter((data, b"\n"))


def _refill(out: bytearray, later: list[Iterator[bytes]]) -> bool:
    """Move the next piece of what waits behind ``out`` into it; False when nothing waits."""
    while later:
        piece = next(later[0], None)
        if piece is not None:
            out.extend(piece)
            return True
        del later[0]
    return False


def _finish_writing(fd: int, out: bytearray, later: list[Iterator[bytes]],
                    timeout: float = 5.0) -> None:
    """Write out what is left, waiting (bounded) for a slow reader."""
    end = time.monotonic() + timeout
    while (out or _refill(out, later)) and time.monotonic() < end:
        try:
            n = os.write(fd, out)
        except BlockingIOError:
            select.select([], [fd], [], max(0.0, end - time.monotonic()))
            continue
        except OSError:
            return
        del out[:n]
