"""A bare asyncio stdio relay: the baseline for what relaying alone costs, without recording.

    python bench/bare_relay.py -- SERVER_CMD...
    python bench/bare_relay.py --uvloop -- SERVER_CMD...

``--uvloop``: the relay as mcprec's tap runs it where its stdin and stdout are pipes (uvloop's
loop, the server started with ``Popen`` and plain pipes, those driven by the loop's pipe
transports): what relaying alone costs the tap as it is built.

Spawns the server and forwards our stdin to its stdin and its stdout to our stdout, each chunk
written the moment it is read, using the same asyncio pipe transports as mcprec's tap, with the
same back-pressure (pause reading one side while the other side's write buffer is full).
No framing, no parsing, no recording. The server's stderr is inherited. Exits with the server's
exit code once it has exited and its stdout is drained.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading


class _Reader(asyncio.Protocol):
    def __init__(self, on_data, on_eof) -> None:  # type: ignore[no-untyped-def]
        self.on_data, self.on_eof, self.done = on_data, on_eof, False

    def data_received(self, data: bytes) -> None:
        self.on_data(data)

    def eof_received(self) -> bool:
        self._end()
        return False

    def connection_lost(self, exc: BaseException | None) -> None:
        self._end()

    def _end(self) -> None:
        if not self.done:
            self.done = True
            self.on_eof()


class _Writer(asyncio.BaseProtocol):
    def __init__(self, pause, resume) -> None:  # type: ignore[no-untyped-def]
        self.pause, self.resume = pause, resume
        self.closed = asyncio.get_running_loop().create_future()

    def pause_writing(self) -> None:
        self.pause()

    def resume_writing(self) -> None:
        self.resume()

    def connection_lost(self, exc: BaseException | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


class _Child(asyncio.SubprocessProtocol):
    def __init__(self, relay: "Relay") -> None:
        self.relay = relay

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.relay.out.write(data)

    def pipe_connection_lost(self, fd: int, exc: BaseException | None) -> None:
        if fd == 1:
            self.relay.stdout_eof.set()

    def process_exited(self) -> None:
        self.relay.exited.set()

    def pause_writing(self) -> None:
        self.relay.inp.pause_reading()

    def resume_writing(self) -> None:
        self.relay.inp.resume_reading()


class Relay:
    async def run(self, argv: list[str]) -> int:
        loop = asyncio.get_running_loop()
        self.exited, self.stdout_eof = asyncio.Event(), asyncio.Event()
        proc, _ = await loop.subprocess_exec(
            lambda: _Child(self), *argv,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=None,
        )
        child_in = proc.get_pipe_transport(0)
        child_out = proc.get_pipe_transport(1)
        self.out, wproto = await loop.connect_write_pipe(
            lambda: _Writer(child_out.pause_reading, child_out.resume_reading),
            os.fdopen(os.dup(1), "wb", buffering=0),
        )

        def client_eof() -> None:
            if not child_in.is_closing():
                child_in.close()

        def client_data(data: bytes) -> None:
            if not child_in.is_closing():
                child_in.write(data)

        self.inp, _ = await loop.connect_read_pipe(
            lambda: _Reader(client_data, client_eof), os.fdopen(os.dup(0), "rb", buffering=0)
        )
        await self.exited.wait()
        try:
            await asyncio.wait_for(self.stdout_eof.wait(), 2.0)
        except asyncio.TimeoutError:
            pass
        self.inp.close()
        self.out.close()
        try:
            await asyncio.wait_for(asyncio.shield(wproto.closed), 5.0)
        except asyncio.TimeoutError:
            pass
        proc.close()
        code = proc.get_returncode()
        return 1 if code is None else (128 - code if code < 0 else code)


class PipedRelay:
    """The same relay with the server on plain pipes (``Popen``), as mcprec's tap has it."""

    async def run(self, argv: list[str]) -> int:
        loop = asyncio.get_running_loop()
        exited, stdout_eof = asyncio.Event(), asyncio.Event()
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None
        threading.Thread(target=lambda: (proc.wait(), loop.call_soon_threadsafe(exited.set)),
                         daemon=True).start()
        child_out: asyncio.ReadTransport | None = None
        inp: asyncio.ReadTransport | None = None
        out, wproto = await loop.connect_write_pipe(
            lambda: _Writer(lambda: child_out and child_out.pause_reading(),
                            lambda: child_out and child_out.resume_reading()),
            os.fdopen(os.dup(1), "wb", buffering=0))
        child_in, _ = await loop.connect_write_pipe(
            lambda: _Writer(lambda: inp and inp.pause_reading(),
                            lambda: inp and inp.resume_reading()), proc.stdin)
        child_out, _ = await loop.connect_read_pipe(
            lambda: _Reader(out.write, stdout_eof.set), proc.stdout)

        def client_data(data: bytes) -> None:
            if not child_in.is_closing():
                child_in.write(data)

        inp, _ = await loop.connect_read_pipe(
            lambda: _Reader(client_data, child_in.close),
            os.fdopen(os.dup(0), "rb", buffering=0))
        await exited.wait()
        try:
            await asyncio.wait_for(stdout_eof.wait(), 2.0)
        except asyncio.TimeoutError:
            pass
        inp.close()
        out.close()
        try:
            await asyncio.wait_for(asyncio.shield(wproto.closed), 5.0)
        except asyncio.TimeoutError:
            pass
        code = proc.returncode
        return 1 if code is None else (128 - code if code < 0 else code)


def main() -> None:
    argv = sys.argv[1:]
    uv = bool(argv) and argv[0] == "--uvloop"
    if uv:
        argv = argv[1:]
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        sys.exit("usage: bare_relay.py [--uvloop] -- SERVER_CMD...")
    if uv:
        import uvloop

        sys.exit(uvloop.run(PipedRelay().run(argv)))
    sys.exit(asyncio.run(Relay().run(argv)))


if __name__ == "__main__":
    main()
