"""Serving a replay over our own stdin/stdout, as a stdio MCP server would."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from typing import Any

from ..transports.stdio import StdioEnds
from ..wire import LineFramer
from .engine import AsyncPlayback

DRAIN_TIMEOUT_S = 2.0


async def serve_stdio(
    make_engine: Callable[[Any], AsyncPlayback],
    *,
    stdin_fd: int = 0,
    stdout_fd: int = 1,
) -> AsyncPlayback:
    """Answer the client on stdin/stdout until it closes stdin; return the engine for its report.

    ``make_engine(send)`` builds the engine around the ``send`` coroutine it must use.
    """
    loop = asyncio.get_running_loop()
    ends = StdioEnds()
    # lines read, handled in batches: a pipelining client sends many per read
    lines: list[bytes | None] = []
    arrived = asyncio.Event()
    closed = asyncio.Event()
    # answers go out once per event-loop turn, together, rather than one write each
    out: list[bytes] = []

    def flush() -> None:
        w = ends.writer
        if out and w is not None and not w.is_closing():
            w.write(b"".join(out))
        out.clear()

    async def send(data: bytes, related: str | None) -> None:
        if not data:  # an empty message ends an HTTP stream: nothing to end on stdio
            return
        if not out:
            loop.call_soon(flush)
        out.append(data)
        out.append(b"\n")

    engine = make_engine(send)

    def on_line(line: bytes | None, terminated: bool = True) -> None:
        lines.append(line)
        arrived.set()

    framer = LineFramer(on_line)

    def on_eof() -> None:
        framer.close()
        on_line(None)

    def on_lost(exc: BaseException | None) -> None:
        closed.set()
        on_line(None)

    stop = asyncio.Event()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)

    await ends.open(framer.feed, on_eof, pause=lambda: None, resume=lambda: None,
                    on_lost=on_lost, stdin_fd=stdin_fd, stdout_fd=stdout_fd)

    async def pump() -> None:
        await engine.start()
        while True:
            await arrived.wait()
            arrived.clear()
            batch = lines[:]
            lines.clear()
            for line in batch:
                if line is None:
                    return
                await engine.receive(line)

    pump_task = loop.create_task(pump())
    stop_task = loop.create_task(stop.wait())
    # the recorded server exited here: close the connection as it did
    end_task = loop.create_task(engine.ended.wait())
    try:
        await asyncio.wait({pump_task, stop_task, end_task}, return_when=asyncio.FIRST_COMPLETED)
        if pump_task.done():
            pump_task.result()
            if not closed.is_set():  # EOF: let answers in progress go out, briefly
                await engine.drain(DRAIN_TIMEOUT_S)
    finally:
        for t in (pump_task, stop_task, end_task):
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t
        for sig in installed:
            loop.remove_signal_handler(sig)
        await engine.aclose()
        flush()
        ends.stop_reading()
        await ends.drain_and_close(timeout=5.0)
        ends.restore()
    return engine
