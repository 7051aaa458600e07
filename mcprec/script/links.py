"""How the scripted client reaches a server: the two ``Link``s.

- ``PipeLink``: newline-delimited JSON-RPC over two pipes whose far ends are a stdio tap's
  stdin and stdout (``transports.stdio.StdioTap`` with ``stdin_fd`` / ``stdout_fd``), so the
  tap that records every host's session records this one too.
- ``HTTPLink``: Streamable HTTP (POST per message, JSON or SSE answers, the session's GET
  stream, DELETE at the end), pointed at the recording proxy or straight at a server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import wire
from .client import ScriptedClient

if TYPE_CHECKING:
    from ..transports.recording import SessionRecording

_CLOSE_WAIT_S = 5.0


class _WriteEnd(asyncio.BaseProtocol):
    def __init__(self) -> None:
        self.lost = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: BaseException | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)


class PipeLink:
    """The client's ends of two pipes; ``tap_stdin`` and ``tap_stdout`` are the tap's."""

    def __init__(self, client: ScriptedClient) -> None:
        self.client = client
        self.tap_stdin, self._out = os.pipe()  # we write, the tap reads
        self._in, self.tap_stdout = os.pipe()  # the tap writes, we read
        self._transport: Any = None
        self._reading: asyncio.Task[None] | None = None

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 30)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                     os.fdopen(self._in, "rb", buffering=0))
        self._transport, _ = await loop.connect_write_pipe(_WriteEnd,
                                                           os.fdopen(self._out, "wb", buffering=0))
        self._reading = loop.create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while line := await reader.readline():
                line = line[:-1] if line.endswith(b"\n") else line
                line = line[:-1] if line.endswith(b"\r") else line
                if line.strip():
                    with contextlib.suppress(OSError):
                        await self.client.received(line)
        except (OSError, ValueError):  # a broken pipe, or a line past the 1 GiB limit
            pass
        finally:
            self.client.lost("it closed its stdout")

    async def send(self, raw: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(raw + b"\n")

    async def close(self) -> None:
        """End of input for the server: the tap closes the server's stdin."""
        if self._transport is not None:
            self._transport.close()

    def tap_done(self) -> None:
        """The tap has ended: close our copies of its ends, so that our reader sees the end."""
        for fd in (self.tap_stdin, self.tap_stdout):
            with contextlib.suppress(OSError):
                os.close(fd)

    async def wait_closed(self) -> None:
        if self._reading is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._reading, _CLOSE_WAIT_S)


class HTTPLink:
    """A Streamable HTTP client session at ``url``; ``headers`` go with every request."""

    def __init__(self, client: ScriptedClient, url: str, headers: dict[str, str] | None = None,
                 connect_timeout: float = 10.0) -> None:
        from .. import __version__
        from ..transports.http_client import StreamableHTTPClient

        self.client = client
        self.url = url
        self.connect_timeout = connect_timeout
        self._http = StreamableHTTPClient(
            url, headers={"user-agent": f"mcprec/{__version__}", **(headers or {})},
            timeout=None, connect_timeout=connect_timeout)
        self._posts: set[asyncio.Task[None]] = set()
        self._stream: asyncio.Task[None] | None = None

    async def open(self) -> None:
        await self._http.open()

    async def send(self, raw: bytes) -> None:
        c = wire.classify(raw)
        if c.method == "notifications/initialized":
            await self._open_stream()  # before the server may say anything on its own
        task = asyncio.get_running_loop().create_task(self._post(raw, c))
        self._posts.add(task)
        task.add_done_callback(self._posts.discard)
        if c.method == "initialize":
            await task  # the session id comes with its answer
            version = self.client.server_result.get("protocolVersion")
            if isinstance(version, str):
                self._http.protocol_version = version

    async def _received(self, data: bytes, _how: dict[str, Any]) -> None:
        await self.client.received(data)

    async def _post(self, raw: bytes, c: wire.Classified) -> None:
        from ..transports.http_client import HTTPClientError

        try:
            reply = await self._http.post(raw, self._received)
        except HTTPClientError as e:
            if c.kind == wire.REQUEST:
                self.client.lost(str(e))
            return
        if reply.status >= 400 and c.kind == wire.REQUEST and \
                self.client.awaits(c.rpc_id):  # an HTTP error, not a JSON-RPC answer
            self.client.lost(f"HTTP {reply.status} to {c.method}: "
                             f"{reply.body[:200].decode('utf-8', 'replace').strip()}")

    async def _open_stream(self) -> None:
        """The session's GET stream, for what the server sends outside any request. Waits
        until the server has answered it (a server without one answers 405)."""
        if not self._http.session_id or self._stream is not None:
            return
        answered = asyncio.Event()
        self._stream = asyncio.get_running_loop().create_task(
            self._http.listen(self._received, lambda _status: answered.set()))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(answered.wait(), self.connect_timeout)

    async def close(self) -> None:
        """Let answers in flight arrive, then end the session (DELETE)."""
        if self._posts:
            _, late = await asyncio.wait(set(self._posts), timeout=_CLOSE_WAIT_S)
            for task in late:  # e.g. a cancelled request's stream, left open by the server
                task.cancel()
        if self._stream is not None:
            self._stream.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._stream
        await self._http.close()


# --- a server and the scripted client, connected ------------------------------------------------


@dataclass
class Tapped:
    """A stdio server behind a tap; ``exit_code`` is set once it has exited."""

    exit_code: int | None = None


@contextlib.asynccontextmanager
async def tapped_server(argv: Sequence[str], client: ScriptedClient,
                        recording: SessionRecording | None = None, *,
                        env: dict[str, str] | None = None, cwd: str | None = None,
                        exit_timeout: float = 5.0,
                        before_forward: Callable[[], None] | None = None,
                        ) -> AsyncIterator[Tapped]:
    """Run ``argv`` behind a ``StdioTap`` (recording to ``recording``, or nowhere) with
    ``client`` on its client side. Leaving the block ends the server's input and waits for it
    to exit; a server that cannot start raises ``ServerStartError`` there."""
    from ..transports.stdio import StdioTap

    link = PipeLink(client)
    client.link = link
    tap = StdioTap(argv, recording, env=env, cwd=cwd, exit_timeout=exit_timeout,
                   stdin_fd=link.tap_stdin, stdout_fd=link.tap_stdout,
                   before_forward=before_forward)
    tapping = asyncio.get_running_loop().create_task(tap.run())
    tapping.add_done_callback(lambda _: link.tap_done())
    server = Tapped()
    try:
        await link.open()
        try:
            yield server
        finally:
            await link.close()
        server.exit_code = await tapping
    finally:
        if not tapping.done():
            tapping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await tapping
        await link.wait_closed()


@contextlib.asynccontextmanager
async def http_server(url: str, client: ScriptedClient,
                      headers: dict[str, str] | None = None) -> AsyncIterator[HTTPLink]:
    """``client`` in a Streamable HTTP session with ``url``, ended (DELETE) on leaving."""
    link = HTTPLink(client, url, headers)
    client.link = link
    await link.open()
    try:
        yield link
    finally:
        await link.close()
