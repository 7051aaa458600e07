"""The recording proxy's upstream side: a lean HTTP/1.1 client for one origin.

One keep-alive connection per exchange in flight, reused LIFO; httptools (the C parser uvicorn
uses) parses the answer. The request goes out as the proxy built it (request line with the
client's raw path, the client's headers minus hop-by-hop, Host and Content-Length), the answer
comes back as status, raw headers and body chunks as they arrive, transfer coding removed and
content coding untouched. A request is never retried: a failed exchange is the client's 502.

A connection stops reading its answer while 1 MiB of it waits for the client, and every
connection stops while the pool is held (``Upstream.hold``: the recorder is behind); what was
read is still handed on, and reading resumes where it stopped, nothing lost or reordered.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any
from urllib.parse import urlsplit


class UpstreamTarget:
    """The ``--target`` URL, split at parse time: credentials in it (``user:pass@``) become an
    ``Authorization: Basic`` header, and are in no other form (never in ``Host``, never shown)."""

    __slots__ = ("url", "origin", "netloc", "path", "authorization")

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            from ..errors import UsageError

            shown = url if "@" not in url else "(a URL with credentials)"
            raise UsageError(f"--target must be an http(s) URL, got {shown!r}")
        userinfo, at, hostport = parts.netloc.rpartition("@")
        self.netloc = hostport
        """``host[:port]``: the Host header the upstream gets."""
        self.origin = f"{parts.scheme}://{hostport}"
        self.path = parts.path or "/"
        self.authorization: bytes | None = None
        """``Basic …`` from the URL's credentials, for requests that carry no Authorization."""
        rest = parts.path + (f"?{parts.query}" if parts.query else "")
        if at:
            import base64
            from urllib.parse import unquote

            user, _, password = userinfo.partition(":")
            token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
            self.authorization = f"Basic {token}".encode()
        from ..redact.urls import redact_url

        self.url = redact_url(f"{parts.scheme}://{'x@' if at else ''}{hostport}{rest}")
        """The URL as shown and stored: credentials and secret query parameters replaced by
        ``[REDACTED]`` (``mcprec.redact.urls``); the connection uses the parts above."""


class UpstreamError(Exception):
    """The upstream could not be reached, or broke the exchange."""


class UpstreamUnreachable(UpstreamError):
    """No connection to the upstream could be made."""


class UpstreamTimeout(UpstreamError):
    """The upstream took longer than the timeout to connect or to send the next bytes."""


class UpstreamDropped(UpstreamError):
    """The upstream closed the connection (or sent invalid HTTP) in the middle of a body."""


_HIGH_WATER = 1 << 20  # stop reading from upstream while this much waits for the client
_LOW_WATER = 1 << 18
_MAX_IDLE = 256


class UpstreamHeaders:
    """Response headers: ``raw`` as received (name case kept), ``get`` by lower-case name."""

    __slots__ = ("raw", "_map")

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self.raw = raw
        self._map: dict[str, str] = {}
        for k, v in raw:
            name = k.decode("latin-1").lower()
            value = v.decode("latin-1")
            self._map[name] = f"{self._map[name]}, {value}" if name in self._map else value

    def get(self, name: str, default: Any = None) -> Any:
        return self._map.get(name, default)


class _Hold:
    """Whether reading answers is held for a reason outside any exchange, and the connections
    that stopped for it, to resume when it ends. Shared by a pool's connections."""

    __slots__ = ("on", "stopped")

    def __init__(self) -> None:
        self.on = False
        self.stopped: set[_Connection] = set()


class UpstreamResponse:
    """One answer: status and headers at once, the body read as it arrives."""

    __slots__ = ("status_code", "headers", "_conn", "_pool", "_done")

    def __init__(self, status: int, headers: UpstreamHeaders, conn: _Connection,
                 pool: Upstream) -> None:
        self.status_code = status
        self.headers = headers
        self._conn = conn
        self._pool = pool
        self._done = False

    @property
    def received_all(self) -> bool:
        """The whole body has arrived (some of it may still wait to be read)."""
        return self._conn.complete

    @property
    def at_end(self) -> bool:
        """The whole body has arrived and been read."""
        return self._conn.complete and not self._conn._chunks

    async def aiter_raw(self, idle_timeout: bool = True) -> Any:
        """The body, chunk by chunk as it arrives. An event stream may stay silent for as long
        as it likes (``idle_timeout=False``): the timeout is for the answer to begin."""
        conn = self._conn
        while True:
            chunk = conn.next_chunk_nowait()
            if chunk is None:
                chunk = await conn.next_chunk(idle_timeout)
                if chunk is None:
                    return
            yield chunk

    async def aread(self) -> bytes:
        conn = self._conn
        parts: list[bytes] = []
        while True:
            chunk = conn.next_chunk_nowait()
            if chunk is None:
                chunk = await conn.next_chunk()
                if chunk is None:
                    return b"".join(parts)
            parts.append(chunk)

    async def aclose(self) -> None:
        """Give the connection back for reuse when the answer was read whole, else close it."""
        if not self._done:
            self._done = True
            self._pool.release(self._conn)


class _Connection(asyncio.Protocol):
    def __init__(self, timeout: float, hold: _Hold | None = None) -> None:
        import httptools

        self.timeout = timeout
        self.hold = hold if hold is not None else _Hold()
        self.loop = asyncio.get_running_loop()
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.error: BaseException | None = None
        self.complete = False
        self.keep_alive = True
        self.head: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] | None = None
        self._headers: list[tuple[bytes, bytes]] = []
        self._chunks: collections.deque[bytes] = collections.deque()
        self._buffered = 0
        self._paused = False  # reading stopped: 1 MiB waits for the client, or the pool is held
        self._stops = 0  # times reading stopped: a timer tells a silence the proxy caused
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._skip = False          # a 1xx interim answer: not the response
        self._until_eof = False     # a body without length: it ends when the connection does
        self._head_request = False
        self._drain: asyncio.Future[None] | None = None

    # asyncio protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        import httptools

        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._broken(UpstreamDropped(f"invalid HTTP from upstream: {e}"))
            assert self.transport is not None
            self.transport.close()

    def eof_received(self) -> bool | None:
        return None  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.head is not None and not self.head.done():
            self.head.set_exception(UpstreamError(
                "upstream closed the connection without answering"
                + (f" ({exc})" if exc else "")))
        elif not self.complete:
            if self._until_eof and exc is None:
                self.complete = True
            else:
                self._broken(UpstreamDropped("upstream closed the connection mid-body"
                                             + (f" ({exc})" if exc else "")))
        self._wake()
        if self._drain is not None and not self._drain.done():
            self._drain.set_exception(UpstreamError("upstream closed the connection"))

    def pause_writing(self) -> None:
        if self._drain is None or self._drain.done():
            self._drain = self.loop.create_future()

    def resume_writing(self) -> None:
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._headers = []

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self._skip = True
            return
        self.keep_alive = self.parser.should_keep_alive()
        lengths = {k.lower() for k, _ in self._headers}
        chunked = any(k.lower() == b"transfer-encoding" and b"chunked" in v.lower()
                      for k, v in self._headers)
        no_body = self._head_request or status in (204, 304)
        self._until_eof = not no_body and not chunked and b"content-length" not in lengths
        if self.head is not None and not self.head.done():
            self.head.set_result((status, self._headers))
        if self._head_request:
            self.complete = True  # no body follows; the parser cannot tell: do not reuse
            self.keep_alive = False

    def on_body(self, body: bytes) -> None:
        if self._skip or self.complete:
            return
        self._chunks.append(body)
        self._buffered += len(body)
        if not self._paused and (self._buffered > _HIGH_WATER or self.hold.on) \
                and self.transport is not None:
            # held: stopped at the next bytes to arrive, not at once, which would take a list
            # of the connections reading (at most one read more each, handed on as usual)
            self._paused = True
            self._stops += 1
            self.transport.pause_reading()
            if self.hold.on:
                self.hold.stopped.add(self)
        self._wake()

    def on_message_complete(self) -> None:
        if self._skip:
            self._skip = False
            return
        self.complete = True
        self._wake()

    # driving
    def _broken(self, e: BaseException) -> None:
        if self.head is not None and not self.head.done():
            self.head.set_exception(e)
        elif self.error is None and not self.complete:
            self.error = e
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _timed_out(self, fut: asyncio.Future[Any], what: str) -> None:
        if not fut.done():
            fut.set_exception(UpstreamTimeout(f"no {what} from upstream within {self.timeout:g} s"))
            self.error = self.error or UpstreamTimeout("timed out")
            if self.transport is not None:
                self.transport.close()

    async def exchange(self, head: bytes, body: bytes, method: str
                       ) -> tuple[int, list[tuple[bytes, bytes]]]:
        assert self.transport is not None
        self.complete = False
        self.error = None
        self._head_request = method == "HEAD"
        self.head = fut = self.loop.create_future()
        if len(body) < 65536:
            self.transport.write(head + body)
        else:
            self.transport.write(head)
            self.transport.write(body)
        if self._drain is not None and not self._drain.done():
            await self._drain
        self._timer = self.loop.call_later(self.timeout, self._idle, fut, self._stops, "answer")
        try:
            return await fut
        finally:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _idle(self, fut: asyncio.Future[Any], stops: int, what: str) -> None:
        """Nothing from upstream for ``timeout`` seconds: its silence, unless this connection
        stopped reading meanwhile (the pool held: the silence was the proxy's own); then the
        wait starts again."""
        if self._paused or self._stops != stops:
            self._timer = self.loop.call_later(self.timeout, self._idle, fut, self._stops, what)
            return
        self._timed_out(fut, what)

    def next_chunk_nowait(self) -> bytes | None:
        if self._chunks:
            chunk = self._chunks.popleft()
            self._buffered -= len(chunk)
            if self._paused and self._buffered < _LOW_WATER:
                self.resume()
            return chunk
        return None

    def resume(self) -> None:
        """Read again, unless the pool is held (then when it ends)."""
        if self.hold.on:
            self.hold.stopped.add(self)
        elif self.transport is not None and not self.transport.is_closing():
            self._paused = False
            self.transport.resume_reading()

    async def next_chunk(self, idle_timeout: bool = True) -> bytes | None:
        """The next body chunk, or None at the end of the body."""
        while True:
            chunk = self.next_chunk_nowait()
            if chunk is not None:
                return chunk
            if self.complete:
                return None
            if self.error is not None:
                raise self.error
            self._waiter = fut = self.loop.create_future()
            if idle_timeout:
                self._timer = self.loop.call_later(self.timeout, self._idle, fut, self._stops,
                                                   "data")
            try:
                await fut
            finally:
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
                self._waiter = None

    @property
    def reusable(self) -> bool:
        return (self.complete and self.keep_alive and not self.closed and self.error is None
                and not self._chunks and self.transport is not None
                and not self.transport.is_closing())


class Upstream:
    """Keep-alive HTTP/1.1 connections to one origin."""

    def __init__(self, origin: str, timeout: float, connect_timeout: float = 10.0) -> None:
        parts = urlsplit(origin)
        self.host = parts.hostname or "127.0.0.1"
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._idle: list[_Connection] = []
        self._ssl: Any = None
        self._hold = _Hold()

    def _ssl_context(self) -> Any:
        if self._ssl is None:
            import ssl

            try:
                import certifi

                self._ssl = ssl.create_default_context(cafile=certifi.where())
            except ImportError:  # pragma: no cover - certifi comes with httpx
                self._ssl = ssl.create_default_context()
        return self._ssl

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(
                lambda: _Connection(self.timeout, self._hold), self.host, self.port,
                ssl=self._ssl_context() if self.tls else None,
                server_hostname=self.host if self.tls else None), self.connect_timeout)
        except asyncio.TimeoutError:
            raise UpstreamTimeout(f"connecting took longer than {self.connect_timeout:g} s") \
                from None
        except OSError as e:
            raise UpstreamUnreachable(f"{type(e).__name__}: {e}") from None
        return conn

    async def send(self, method: str, target: str, headers: list[tuple[bytes, bytes]],
                   body: bytes) -> UpstreamResponse:
        conn = None
        while self._idle:
            c = self._idle.pop()
            if c.reusable:
                conn = c
                break
            if c.transport is not None:
                c.transport.close()
        if conn is None:
            conn = await self._connect()
        head = b"".join([method.encode("latin-1"), b" ", target.encode("latin-1"),
                         b" HTTP/1.1\r\n",
                         *(b"%s: %s\r\n" % kv for kv in headers), b"\r\n"])
        try:
            status, raw = await conn.exchange(head, body, method)
        except BaseException:
            if conn.transport is not None:
                conn.transport.close()
            raise
        return UpstreamResponse(status, UpstreamHeaders(raw), conn, self)

    def hold(self, on: bool) -> None:
        """Stop reading answers on every connection (each stops at the next bytes to arrive),
        or read again where each stopped. What was read is still handed on meanwhile."""
        hold = self._hold
        if on == hold.on:
            return
        hold.on = on
        if on:
            return
        stopped, hold.stopped = hold.stopped, set()
        for conn in stopped:
            if conn._paused and conn._buffered < _LOW_WATER:
                conn.resume()

    def release(self, conn: _Connection) -> None:
        if conn.reusable and len(self._idle) < _MAX_IDLE:
            self._idle.append(conn)
        elif conn.transport is not None:
            conn.transport.close()

    async def aclose(self) -> None:
        for c in self._idle:
            if c.transport is not None:
                c.transport.close()
        self._idle.clear()
