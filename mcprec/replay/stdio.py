"""Serving a replay over our own stdin/stdout, as a stdio MCP server would."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator
from typing import Any

from ..cassette.models import StoredText
from ..transports.stdio import StdioEnds
from ..wire import LineFramer
from .engine import AsyncPlayback
from .lean import framed

DRAIN_TIMEOUT_S = 2.0
CLOSE_TIMEOUT_S = 5.0


async def serve_stdio(
    make_engine: Callable[[Any, Any], AsyncPlayback],
    *,
    stdin_fd: int = 0,
    stdout_fd: int = 1,
) -> AsyncPlayback:
    """Answer the client on stdin/stdout until it closes stdin; return the engine for its report.

    ``make_engine(send, send_stored)`` builds the engine around the coroutines it must use
    (``AsyncPlayback``'s ``send`` and ``send_stored``).
    """
    loop = asyncio.get_running_loop()
    ends = StdioEnds()
    # lines read, handled in batches: a pipelining client sends many per read
    lines: list[bytes | None] = []
    arrived = asyncio.Event()
    closed = asyncio.Event()
    # answers go out once per event-loop turn, together, rather than one write each
    out: list[bytes] = []
    # a large recorded answer goes out a piece at a time as the cassette gives it, the next once
    # stdout's transport has room again; what is sent meanwhile queues behind it
    later: list[Iterator[bytes]] = []
    writable = asyncio.Event()
    writable.set()
    pouring: list[asyncio.Task[None]] = []
    failed: list[Exception] = []

    def flush() -> None:
        w = ends.writer
        if out and w is not None and not w.is_closing():
            w.write(b"".join(out))
        out.clear()

    async def send(data: bytes, related: str | None) -> None:
        if not data:  # an empty message ends an HTTP stream: nothing to end on stdio
            return
        if later:
            later.append(framed(data))
            return
        if not out:
            loop.call_soon(flush)
        out.append(data)
        out.append(b"\n")

    async def send_stored(text: StoredText, related: str | None) -> None:
        later.append(framed(text))
        if not pouring:
            flush()  # what was sent before it
            pouring.append(loop.create_task(pour()))

    async def pour() -> None:
        try:
            while later:
                piece = next(later[0], None)
                if piece is None:
                    del later[0]
                    continue
                w = ends.writer
                if w is None or w.is_closing():
                    return
                w.write(piece)
                await writable.wait()
        except Exception as e:  # noqa: BLE001 - the cassette could not be read: the replay ends
            failed.append(e)
            later.clear()
            stop.set()
        finally:
            pouring.clear()

    def pour_the_rest() -> None:
        """At the end, what is still to pour goes into the transport at once (as every answer
        did before large ones were poured), for ``drain_and_close`` to write in the time left."""
        w = ends.writer
        if w is not None and not w.is_closing():
            for pieces in later:
                for piece in pieces:
                    w.write(piece)
        later.clear()

    engine = make_engine(send, send_stored)

    def on_line(line: bytes | None, terminated: bool = True) -> None:
        lines.append(line)
        arrived.set()

    framer = LineFramer(on_line)

    def on_eof() -> None:
        framer.close()
        on_line(None)

    def on_lost(exc: BaseException | None) -> None:
        closed.set()
        writable.set()
        on_line(None)

    stop = asyncio.Event()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)

    await ends.open(framer.feed, on_eof, pause=writable.clear, resume=writable.set,
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
        closing = loop.time() + CLOSE_TIMEOUT_S
        if pouring:  # a large answer still going out: it gets the time the rest would
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(pouring[0]), CLOSE_TIMEOUT_S)
            for t in pouring:
                t.cancel()
        pour_the_rest()
        ends.stop_reading()
        await ends.drain_and_close(timeout=max(0.0, closing - loop.time()))
        ends.restore()
    if failed:
        raise failed[0]
    return engine
