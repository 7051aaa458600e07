"""The stdio tap: a transparent byte pump between our stdin/stdout and a child server.

Forwarding uses the event loop's non-blocking pipe transports directly (uvloop's where our ends
are pipes or sockets: ``run_loop``): each chunk is written on the moment it is read (no line
buffering, no parsing, no reordering); the same chunks go to the session's recording
(``recording.SessionRecording``), which cuts them into messages elsewhere (in a recorder
process of its own, for ``mcprec record``). The server gets plain pipes (``PipedChild``).
Back-pressure is passed through: when one side stops reading, we stop reading from the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import queue
import selectors
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .. import _log
from ..errors import ServerStartError
from ..wire import CLIENT_TO_SERVER, SERVER_TO_CLIENT
from .recording import NullRecording, SessionRecording

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
FORWARD_PIPE_SIZE = 1024 * 1024
"""The pipes the tap forwards through are widened to this (Linux's default is 64 KiB): a 100 KB
message then crosses each of them in one write and one read instead of a write, a wait for the
reader and a second write. Measured (120 pipelined 100 KB requests, 4 in flight, CPU per request,
medians of 6 runs): the tap 500 -> 375 µs, the echo server 250 -> 167 µs, 277 -> 349 req/s."""


def _widen_pipe(fd: int) -> None:
    """Give a pipe ``FORWARD_PIPE_SIZE`` bytes of room, if it is a pipe and the system allows
    (it refuses past the user's share of pipe memory: the pipe then stays as it was)."""
    with contextlib.suppress(OSError, AttributeError, ValueError):
        if stat.S_ISFIFO(os.fstat(fd).st_mode) and \
                fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) < FORWARD_PIPE_SIZE:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, FORWARD_PIPE_SIZE)


# --- our own stdin/stdout as asyncio transports ------------------------------------------------


class _SyncFileWriter:
    """A write 'transport' for a regular file on stdout (pipes' transports refuse files)."""

    def __init__(self, fd: int, on_lost: Callable[[BaseException | None], None]) -> None:
        self._fd = fd
        self._on_lost = on_lost
        self._closed = False

    def write(self, data: bytes) -> None:
        if self._closed:
            return
        view = memoryview(data)
        try:
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
        except OSError as e:
            self._closed = True
            self._on_lost(e)

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True


class _ReadProto(asyncio.Protocol):
    def __init__(self, on_data: Callable[[bytes], None], on_eof: Callable[[], None]) -> None:
        self._on_data = on_data
        self._on_eof = on_eof
        self._eof = False

    def data_received(self, data: bytes) -> None:
        self._on_data(data)

    def eof_received(self) -> bool:
        self._fire_eof()
        return False

    def connection_lost(self, exc: BaseException | None) -> None:
        self._fire_eof()

    def _fire_eof(self) -> None:
        if not self._eof:
            self._eof = True
            self._on_eof()


class _WriteProto(asyncio.BaseProtocol):
    def __init__(self, pause: Callable[[], None], resume: Callable[[], None],
                 lost: Callable[[BaseException | None], None]) -> None:
        self._pause, self._resume, self._lost = pause, resume, lost
        self.closed = asyncio.get_running_loop().create_future()

    def pause_writing(self) -> None:
        self._pause()

    def resume_writing(self) -> None:
        self._resume()

    def connection_lost(self, exc: BaseException | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        self._lost(exc)


def _is_regular(fd: int) -> bool:
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        return False


class StdioEnds:
    """Our stdin as a reader and our stdout as a writer, both non-blocking and flow-controlled."""

    def __init__(self) -> None:
        self.reader: Any = None
        self.writer: Any = None
        self._write_proto: _WriteProto | None = None
        self._restore: list[tuple[int, bool]] = []
        self._reader_thread: threading.Thread | None = None
        self._stop_reading = threading.Event()

    async def open(
        self,
        on_data: Callable[[bytes], None],
        on_eof: Callable[[], None],
        pause: Callable[[], None],
        resume: Callable[[], None],
        on_lost: Callable[[BaseException | None], None],
        stdin_fd: int = 0,
        stdout_fd: int = 1,
    ) -> None:
        # stdout first: nothing may be read before there is somewhere to write it
        await self.open_writer(pause, resume, on_lost, stdout_fd)
        await self.open_reader(on_data, on_eof, stdin_fd)

    async def open_writer(self, pause: Callable[[], None], resume: Callable[[], None],
                          on_lost: Callable[[BaseException | None], None],
                          stdout_fd: int = 1) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(OSError):
            self._restore.append((stdout_fd, os.get_blocking(stdout_fd)))
        if _is_regular(stdout_fd):
            self.writer = _SyncFileWriter(stdout_fd, on_lost)
        else:
            out = os.fdopen(os.dup(stdout_fd), "wb", buffering=0)
            self.writer, self._write_proto = await loop.connect_write_pipe(
                lambda: _WriteProto(pause, resume, on_lost), out
            )

    async def open_reader(self, on_data: Callable[[bytes], None], on_eof: Callable[[], None],
                          stdin_fd: int = 0) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(OSError):
            self._restore.append((stdin_fd, os.get_blocking(stdin_fd)))
        if _is_regular(stdin_fd) or not _is_pollable(stdin_fd):
            self._start_thread_reader(loop, stdin_fd, on_data, on_eof)
        else:
            inp = os.fdopen(os.dup(stdin_fd), "rb", buffering=0)
            self.reader, _ = await loop.connect_read_pipe(lambda: _ReadProto(on_data, on_eof), inp)

    def _start_thread_reader(self, loop: asyncio.AbstractEventLoop, fd: int,
                             on_data: Callable[[bytes], None], on_eof: Callable[[], None]) -> None:
        def pump() -> None:
            try:
                while not self._stop_reading.is_set():
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        break
                    loop.call_soon_threadsafe(on_data, chunk)
            except (OSError, RuntimeError):  # RuntimeError: the loop closed; we are done
                return
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(on_eof)

        self._reader_thread = threading.Thread(target=pump, name="mcprec-stdin", daemon=True)
        self._reader_thread.start()

    def pause_reading(self) -> None:
        if self.reader is not None and not self.reader.is_closing():
            self.reader.pause_reading()

    def resume_reading(self) -> None:
        if self.reader is not None and not self.reader.is_closing():
            self.reader.resume_reading()

    def stop_reading(self) -> None:
        self._stop_reading.set()
        if self.reader is not None:
            self.reader.close()

    async def drain_and_close(self, timeout: float) -> None:
        """Wait (bounded) until everything written has reached stdout, then close it."""
        w = self.writer
        if w is None:
            return
        if not w.is_closing():
            w.close()
        if self._write_proto is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._write_proto.closed), timeout)

    def restore(self) -> None:
        for fd, blocking in self._restore:
            with contextlib.suppress(OSError):
                os.set_blocking(fd, blocking)


def _is_pollable(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
        return False
    # Some character devices cannot be polled (epoll refuses /dev/null with EPERM); asyncio
    # would only find out in a callback, leaving the tap waiting for input that never comes.
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
    except (OSError, ValueError):
        return False
    return True


# --- stderr pass-through -------------------------------------------------------------------


class _StderrPassthrough:
    """Writes the server's stderr to ours from a thread, so a stalled stderr never blocks us."""

    def __init__(self, fd: int = 2) -> None:
        self._fd = fd
        self._q: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="mcprec-stderr", daemon=True)
        self._thread.start()

    def write(self, data: bytes) -> None:
        self._q.put(data)

    def _run(self) -> None:
        while (data := self._q.get()) is not None:
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(self._fd, view):]
            except OSError:
                pass

    def close(self, timeout: float = 1.0) -> None:
        self._q.put(None)
        self._thread.join(timeout)


async def end_process(proc: asyncio.subprocess.Process, grace: float = 5.0,
                      term_grace: float = 3.0) -> int:
    """Close a child's stdin (EOF: the polite way to end an MCP server), give it ``grace``
    seconds, then SIGTERM, then SIGKILL. Returns its exit code."""
    if proc.stdin is not None and not proc.stdin.is_closing():
        proc.stdin.close()
    for sig, wait in ((None, grace), (signal.SIGTERM, term_grace), (signal.SIGKILL, None)):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
        try:
            return await asyncio.wait_for(proc.wait(), wait)
        except asyncio.TimeoutError:
            continue
    return await proc.wait()  # pragma: no cover - SIGKILL cannot be ignored


# --- the tap ----------------------------------------------------------------------------------


class PipedChild:
    """The server, started with ``subprocess.Popen`` and plain pipes, read and written through
    the running loop's pipe transports: what ``loop.subprocess_exec`` gives, on any loop.
    uvloop's own ``subprocess_exec`` hands the child socket pairs, which a server sees (and
    some treat as sockets); here it has pipes on either loop, as under a shell."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self._pipes: dict[int, Any] = {}

    @classmethod
    async def start(cls, argv: Sequence[str], *, env: dict[str, str] | None, cwd: str | None,
                    on_stdout: Callable[[bytes], None], on_stdout_end: Callable[[], None],
                    on_stderr: Callable[[bytes], None], on_exit: Callable[[], None],
                    pause: Callable[[], None], resume: Callable[[], None]) -> PipedChild:
        """Start ``argv``: what it writes goes to ``on_stdout`` / ``on_stderr``, the end of its
        stdout to ``on_stdout_end``, its exit to ``on_exit``; ``pause`` / ``resume`` when its
        stdin is full / has room. The same protocols as our own ends (``StdioEnds``)."""
        loop = asyncio.get_running_loop()
        popen = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, cwd=cwd, bufsize=0,
            start_new_session=True,  # terminal signals reach us once; we forward them
        )
        child = cls(popen)
        assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
        for pipe in (popen.stdin, popen.stdout):
            _widen_pipe(pipe.fileno())
        try:
            child._pipes[0], _ = await loop.connect_write_pipe(
                lambda: _WriteProto(pause, resume, lambda exc: None), popen.stdin)
            child._pipes[1], _ = await loop.connect_read_pipe(
                lambda: _ReadProto(on_stdout, on_stdout_end), popen.stdout)
            child._pipes[2], _ = await loop.connect_read_pipe(
                lambda: _ReadProto(on_stderr, lambda: None), popen.stderr)
        except BaseException:
            child.close()
            popen.wait()  # killed: reaped here, as no thread waits for it yet
            raise

        def reap() -> None:  # what asyncio's own child watcher does: a thread waits for it
            popen.wait()
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
                loop.call_soon_threadsafe(on_exit)

        threading.Thread(target=reap, name="mcprec-server-reaper", daemon=True).start()
        return child

    def get_pipe_transport(self, fd: int) -> Any:
        return self._pipes.get(fd)

    def send_signal(self, sig: int) -> None:
        self._popen.send_signal(sig)  # nothing once it has been reaped

    def signal_group(self, sig: int) -> None:
        """``sig`` to the server's process group (its own session): its children too."""
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            os.killpg(self._popen.pid, sig)

    def get_returncode(self) -> int | None:
        return self._popen.returncode

    def close(self) -> None:
        """Close the pipes; a server still running is killed (as asyncio's transport does)."""
        for pipe in self._pipes.values():
            pipe.close()
        if self._popen.poll() is None:
            with contextlib.suppress(ProcessLookupError, OSError):
                self._popen.kill()


def _pipe_or_socket(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def run_loop(main: Any, ends: Sequence[int] = (0, 1)) -> Any:
    """Run the coroutine ``main`` on uvloop when it is installed and the fds ``ends`` (our
    stdin and stdout) are pipes or sockets, as a client that starts us gives; else on
    asyncio's loop. A bare relay on the tap's pipe transports, 20,000 pipelined small
    requests: 205,000-241,000 req/s on uvloop against 145,000-164,000 on asyncio's loop (6
    runs). Not on a terminal, a file or /dev/null: uvloop's write transport reads
    its fd to see it close, and on a terminal that is also stdin it took what was typed (and
    failed); given /dev/null, libuv aborts the process."""
    if all(_pipe_or_socket(fd) for fd in ends):
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.run(main)
    return asyncio.run(main)


class StdioTap:
    """Relays our stdin/stdout to a server process and reports every chunk to a recording."""

    def __init__(
        self,
        argv: Sequence[str],
        recording: SessionRecording | None = None,
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        exit_timeout: float = 5.0,
        kill_timeout: float = 3.0,
        stdin_fd: int = 0,
        stdout_fd: int = 1,
        stderr_fd: int = 2,
        before_forward: Callable[[], None] | None = None,
        faults: Any = None,
    ) -> None:
        """``faults``: a ``faults.live.LiveFaults`` (``mcprec record --fault``): the server's
        messages are rewritten by its rules before they reach the client, and recorded as
        the client received them. Without it, bytes are relayed as read, unchanged."""
        if not argv:
            raise ServerStartError("no server command given; put it after `--`", exit_code=2)
        self.argv = list(argv)
        self.recording = recording or NullRecording()
        self.env = env
        self.cwd = cwd
        self.exit_timeout = exit_timeout
        self.kill_timeout = kill_timeout
        self.client = StdioEnds()
        self._fds = (stdin_fd, stdout_fd, stderr_fd)
        self._before_forward = before_forward
        self._start = self.recording.start_ns
        self._sent_any = False
        self._signals: list[int] = []
        self._exit_handle: asyncio.TimerHandle | None = None
        self._holds: set[str] = set()  # why reading stops now (see ``_hold``)
        self._faults = faults
        self._from_client = b""  # with faults: the client's unfinished line
        self._from_server = b""  # with faults: the server's unfinished line

    # -- hot path: server -> client
    def _server_data(self, data: bytes) -> None:
        self._sent_any = True
        t = time.monotonic_ns() - self._start
        if self._before_forward is not None:
            self._chunk(SERVER_TO_CLIENT, data, t)  # durable: committed before forwarded
            self._before_forward()
            self.client.writer.write(data)
        else:
            self.client.writer.write(data)
            self._chunk(SERVER_TO_CLIENT, data, t)

    # -- hot path: client -> server
    def _client_data(self, data: bytes) -> None:
        t = time.monotonic_ns() - self._start
        stdin = self._stdin
        if self._before_forward is not None:
            self._chunk(CLIENT_TO_SERVER, data, t)
            self._before_forward()
            if stdin is not None and not stdin.is_closing():
                stdin.write(data)
            return
        if stdin is not None and not stdin.is_closing():
            stdin.write(data)
        self._chunk(CLIENT_TO_SERVER, data, t)

    # -- with faults (record --fault): whole lines, the server's rewritten by the rules
    def _client_data_faulted(self, data: bytes) -> None:
        self._client_data(data)  # forwarded and recorded as read
        buf = self._from_client + data
        end = buf.rfind(b"\n")
        self._from_client = buf[end + 1:]
        if end >= 0:
            for line in buf[:end].split(b"\n"):
                if line.strip():
                    self._faults.client(line.rstrip(b"\r"))

    def _server_data_faulted(self, data: bytes) -> None:
        buf = self._from_server + data
        end = buf.rfind(b"\n")
        self._from_server = buf[end + 1:]
        if end < 0:
            return
        self._sent_any = True
        lines = buf[:end + 1]
        if not self._faults.waiting():  # nothing to fault: the whole lines as they are
            self._relay_server(lines)
            return
        plain = bytearray()
        for line in lines.splitlines(keepends=True):
            out = self._faults.server(line.rstrip(b"\r\n")) if line.strip() else None
            if out is None:
                plain += line
                continue
            if plain:
                self._relay_server(bytes(plain))
                plain.clear()
            for raw, mark in out:
                t = time.monotonic_ns() - self._start
                self.recording.message(SERVER_TO_CLIENT, raw, t, fault=mark)
                if self._before_forward is not None:
                    self._before_forward()
                self.client.writer.write(raw + b"\n")
        if plain:
            self._relay_server(bytes(plain))

    def _relay_server(self, data: bytes) -> None:
        t = time.monotonic_ns() - self._start
        if self._before_forward is not None:
            self._chunk(SERVER_TO_CLIENT, data, t)
            self._before_forward()
            self.client.writer.write(data)
        else:
            self.client.writer.write(data)
            self._chunk(SERVER_TO_CLIENT, data, t)

    def _server_stdout_closed_faulted(self) -> None:
        if self._from_server:  # a last line without its newline: as it came
            rest, self._from_server = self._from_server, b""
            self._sent_any = True
            self._relay_server(rest)
        self._server_stdout_closed()

    def _server_stderr(self, data: bytes) -> None:
        self._errout.write(data)
        self.recording.stderr_chunk(data, time.monotonic_ns() - self._start)

    def _start_failed(self) -> None:
        self._errout.close()
        if self.client.writer is not None:
            self.client.writer.close()
        self.client.restore()

    def _server_out(self) -> Any:
        """The read end of the server's stdout, once the server runs."""
        return self._proc.get_pipe_transport(1) if self._proc is not None else None

    def _pause_server(self) -> None:  # the client is not reading: stop reading the server
        self._hold("client_full", True)

    def _resume_server(self) -> None:
        self._hold("client_full", False)

    def _pressure(self, paused: bool) -> None:
        """The recorder is far behind: stop reading both sides until it catches up."""
        self._hold("recorder", paused)

    def _hold(self, why: str, on: bool) -> None:
        """Set one reason to stop reading, and read each side only while nothing holds it: the
        server while the client takes what we write and the recorder keeps up, the client while
        the server takes what we write and the recorder keeps up. (Each reason once paused and
        resumed on its own: a client that caught up resumed reading the server while the
        recorder still held it, and the tap's memory grew past its bound, to 394 MiB.)"""
        if on:
            self._holds.add(why)
        else:
            self._holds.discard(why)
        holds = self._holds
        child_out = self._server_out()
        if child_out is not None and not child_out.is_closing():
            if "recorder" in holds or "client_full" in holds:
                child_out.pause_reading()
            else:
                child_out.resume_reading()
        if "recorder" in holds or "server_full" in holds:
            self.client.pause_reading()
        else:
            self.client.resume_reading()

    # -- lifecycle events
    def _client_eof(self) -> None:
        self._client_closed = True
        if self._stdin is not None and not self._stdin.is_closing():
            self._stdin.close()  # EOF for the server
        self._arm_exit_timer()

    def _client_lost(self, exc: BaseException | None) -> None:
        # Our stdout is gone (the client went away): the server can no longer be heard.
        self.client.stop_reading()
        self._client_eof()

    def _server_stdout_closed(self) -> None:
        self._stdout_eof.set()

    def _server_exited(self) -> None:
        self._exited.set()

    def _arm_exit_timer(self) -> None:
        if self._exit_handle is None and not self._exited.is_set():
            loop = asyncio.get_running_loop()
            self._exit_handle = loop.call_later(self.exit_timeout, self._escalate, signal.SIGTERM)

    def _escalate(self, sig: int) -> None:
        if self._exited.is_set() or self._proc is None:
            return
        self._escalated = True  # the whole group: children that outlive the server too
        self._proc.signal_group(sig)
        if sig == signal.SIGTERM:
            loop = asyncio.get_running_loop()
            loop.call_later(self.kill_timeout, self._escalate, signal.SIGKILL)

    def _on_signal(self, sig: int) -> None:
        self._signals.append(sig)
        if self._exited.is_set():
            return
        if self._signals.count(sig) > 1 and sig == signal.SIGINT:
            self._escalate(signal.SIGKILL)  # a second Ctrl-C means now
            return
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError, OSError):
                self._proc.send_signal(sig)
        self._arm_exit_timer()

    async def run(self) -> int:
        """Run until the server exits; return its exit code (128+N when killed by signal N)."""
        loop = asyncio.get_running_loop()
        stdin_fd, stdout_fd, stderr_fd = self._fds
        self._exited = asyncio.Event()
        self._stdout_eof = asyncio.Event()
        self._client_closed = False
        self._escalated = False
        self._stdin: Any = None
        self._chunk = self.recording.chunk
        self._proc: PipedChild | None = None
        if hasattr(self.recording, "set_pressure_callback"):
            self.recording.set_pressure_callback(self._pressure)
        self._errout = _StderrPassthrough(stderr_fd)
        # our stdout before the server: what it says at once must have somewhere to go
        await self.client.open_writer(self._pause_server, self._resume_server,
                                      self._client_lost, stdout_fd)
        try:
            faulted = self._faults is not None
            transport = await PipedChild.start(
                self.argv, env=self.env, cwd=self.cwd,
                on_stdout=self._server_data_faulted if faulted else self._server_data,
                on_stdout_end=self._server_stdout_closed_faulted if faulted else
                self._server_stdout_closed, on_stderr=self._server_stderr,
                on_exit=self._server_exited,
                # the server's stdin is full: stop reading the client
                pause=lambda: self._hold("server_full", True),
                resume=lambda: self._hold("server_full", False))
        except FileNotFoundError as e:
            self._start_failed()
            raise ServerStartError(f"cannot start server: command not found: {self.argv[0]}") from e
        except PermissionError as e:
            self._start_failed()
            raise ServerStartError(
                f"cannot start server: permission denied: {self.argv[0]}", exit_code=126
            ) from e
        except OSError as e:
            self._start_failed()
            raise ServerStartError(f"cannot start server {self.argv[0]}: {e.strerror or e}") from e
        self._proc = transport
        self._stdin = transport.get_pipe_transport(0)
        for fd in (stdin_fd, stdout_fd):
            _widen_pipe(fd)
        installed = []
        for sig in FORWARDED_SIGNALS:
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                loop.add_signal_handler(sig, self._on_signal, sig)
                installed.append(sig)
        try:
            await self.client.open_reader(
                self._client_data if self._faults is None else self._client_data_faulted,
                self._client_eof, stdin_fd)
            await self._exited.wait()
            # the server is gone; collect what it wrote before dying (bounded: a grandchild
            # may hold its stdout open)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stdout_eof.wait(), 2.0)
        finally:
            # Closing our ends below fires the client-EOF callbacks; what counts is whether the
            # client had closed before the server exited.
            client_closed = self._client_closed
            for sig in installed:
                loop.remove_signal_handler(sig)
            if self._exit_handle is not None:
                self._exit_handle.cancel()
            self.client.stop_reading()
            self.recording.stream_end(CLIENT_TO_SERVER)
            self.recording.stream_end(SERVER_TO_CLIENT)
            await self.client.drain_and_close(timeout=5.0)
            self.client.restore()
            self._errout.close()
            transport.close()
            if self._escalated:  # the server had to be stopped: none of its group is left
                transport.signal_group(signal.SIGKILL)
        code = transport.get_returncode()
        if code is None:
            code = 1
        if not self._sent_any and code != 0 and not client_closed and not self._signals:
            _log.warning("record", f"server {self.argv[0]} exited with code {code} before sending "
                         "anything (its stderr is above)")
        return 128 - code if code < 0 else code
