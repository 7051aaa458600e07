"""Listening for HTTP: binding (with clear errors), serving an ASGI app with uvicorn, and the
checks every mcprec HTTP endpoint makes before anything else: Host and Origin (``Trust``, against
DNS rebinding), the size of a request's head (431) and body (413)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from ..errors import UsageError

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})

ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[dict[str, Any]]],
                    Callable[[dict[str, Any]], Awaitable[None]]], Awaitable[None]]


def parse_listen(value: str) -> tuple[str, int]:
    """``127.0.0.1:8080`` / ``:8080`` / ``8080`` / ``[::1]:0`` -> (host, port)."""
    text = value.strip()
    host = "127.0.0.1"
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise UsageError(f"cannot parse --listen {value!r}; use HOST:PORT")
        host, text = text[1:end], text[end + 1:].lstrip(":")
    elif ":" in text:
        h, _, text = text.rpartition(":")
        host = h or host
    try:
        port = int(text)
    except ValueError:
        raise UsageError(f"cannot parse --listen {value!r}; use HOST:PORT, e.g. 127.0.0.1:8080")
    if not 0 <= port <= 65535:
        raise UsageError(f"port {port} is out of range (0-65535)")
    return host, port


def bind(host: str, port: int) -> socket.socket:
    """A listening socket, or a one-line error saying why not (port in use, bad address)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted connections only when the
    # listening socket says TCP (uvloop always does); without it, a response written as headers
    # then body waits for the client's delayed ACK (~40 ms) under Nagle
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(1024)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise UsageError(
                f"cannot listen on {host}:{port}: the port is in use; choose another with "
                "--listen HOST:PORT (port 0 picks a free one)"
            ) from None
        raise UsageError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.setblocking(False)
    return sock


def url_of(sock: socket.socket, path: str = "/mcp") -> str:
    host, port = sock.getsockname()[:2]
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}{path}"


async def serve_app(
    app: ASGIApp,
    sock: socket.socket,
    *,
    on_ready: Callable[[], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve ``app`` on ``sock`` until SIGINT/SIGTERM (or ``stop`` is set)."""
    import uvicorn

    config = uvicorn.Config(
        app, log_config=None, log_level="critical", access_log=False, lifespan="off", ws="none",
        timeout_graceful_shutdown=1, timeout_keep_alive=30, server_header=False,
        date_header=False,
        # the apps read no client address or scheme: no X-Forwarded-* middleware on every request
        proxy_headers=False, interface="asgi3", http=_http_protocol(),
    )
    server = uvicorn.Server(config)
    quiet_uvicorn()
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.005)
    if on_ready is not None and server.started:
        on_ready()
    if stop is not None:
        waiter = asyncio.get_running_loop().create_task(stop.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            server.should_exit = True
        waiter.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


class _CoalescingTransport:
    """A response's head and body leave in one system call.

    uvicorn writes a response's head as soon as the app sends ``http.response.start`` and its
    body on ``http.response.body``: two sends where one does, and on loopback each costs about
    as much as the rest of a small exchange. Here a write is held until the next one, which
    sends both at once (``writelines``); a write that no other follows in the same event-loop
    iteration leaves at the end of it (``call_soon``), and any before close. The same bytes in
    the same order.
    """

    __slots__ = ("_transport", "_loop", "_pending", "_scheduled")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: bytes | None = None
        self._scheduled = False

    def write(self, data: bytes) -> None:
        pending = self._pending
        if pending is None:
            self._pending = data
            if not self._scheduled:
                self._scheduled = True
                self._loop.call_soon(self._flush)
        else:
            self._pending = None
            self._transport.writelines((pending, data))

    def _flush(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, None
        if pending is not None and not self._transport.is_closing():
            self._transport.write(pending)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending = None
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


MAX_HEADER_BYTES = 64 * 1024
"""A request's head (request line and headers) larger than this is refused with 431 before the
app sees it; the connection is closed. Common servers take 8 to 64 KB."""
_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json"
              b"\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s")


def _http_protocol() -> Any:
    """uvicorn's httptools protocol writing through a ``_CoalescingTransport``, refusing heads
    larger than ``MAX_HEADER_BYTES``."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # pragma: no cover - httptools is a dependency
        return "auto"

    class CoalescingHttpToolsProtocol(HttpToolsProtocol):
        # httptools buffers a header until it is complete, and uvicorn sets no bound: a client
        # sending a 50 MB header grew the process by as much. Count the bytes that arrive while
        # a head is incomplete instead, and refuse past the bound.
        _head_bytes = 0
        _in_head = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.transport = _CoalescingTransport(transport, self.loop)  # type: ignore[assignment]

        def data_received(self, data: bytes) -> None:
            if self._head_bytes > MAX_HEADER_BYTES:
                return  # refused: the connection is closing
            super().data_received(data)
            if self._in_head:
                self._head_bytes += len(data)
                if self._head_bytes > MAX_HEADER_BYTES:
                    body = (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":'
                            b'"mcprec: request headers larger than %d bytes"}}' % MAX_HEADER_BYTES)
                    self.transport.write(_TOO_LARGE % (len(body), body))
                    self.transport.close()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._in_head = True
            self._head_bytes = 0

        def on_headers_complete(self) -> None:
            self._in_head = False
            super().on_headers_complete()

    return CoalescingHttpToolsProtocol


class IdleWatch:
    """An ASGI app in front of another that sets ``stop`` after ``limit`` seconds of silence:
    no request in flight and nothing received or sent. A GET stream held open (the client
    listening for the server's own messages) is not a request in flight; what it carries is
    traffic."""

    def __init__(self, app: Any, limit: float, stop: asyncio.Event) -> None:
        import time

        self.app = app
        self.limit = limit
        self.stop = stop
        self.busy = 0
        self._clock = time.monotonic
        self.last = self._clock()
        self.fired = False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        listening = scope.get("method") == "GET"
        self.busy += not listening
        self.last = self._clock()

        async def noted_receive() -> Any:
            message = await receive()
            self.last = self._clock()
            return message

        async def noted_send(message: dict[str, Any]) -> None:
            self.last = self._clock()
            await send(message)

        try:
            await self.app(scope, noted_receive, noted_send)
        finally:
            self.busy -= not listening
            self.last = self._clock()

    async def watch(self) -> None:
        """Set ``stop`` once the silence has lasted ``limit``."""
        while True:
            left = self.last + self.limit - self._clock()
            if self.busy == 0 and left <= 0:
                self.fired = True
                self.stop.set()
                return
            # busy: look again soon, the silence starts when the last request ends
            await asyncio.sleep(max(0.01, left if self.busy == 0 else min(self.limit, 0.25)))


def run_app(app: Any, sock: socket.socket, *, announce: Callable[[], None],
            cleanup: Callable[[], Awaitable[None]], max_idle: float | None = None) -> bool:
    """Serve ``app`` on ``sock`` (uvloop when installed) until SIGINT/SIGTERM, or ``max_idle``
    seconds of silence (see ``IdleWatch``); ``announce`` once listening, ``cleanup`` on the way
    out whatever happens. True when it ended for silence."""
    idle: list[IdleWatch] = []

    async def main() -> None:
        stop = None
        served = app
        watcher = None
        if max_idle is not None:
            stop = asyncio.Event()
            idle.append(IdleWatch(app, max_idle, stop))
            served = idle[0]
            watcher = asyncio.get_running_loop().create_task(idle[0].watch())
        try:
            await serve_app(served, sock, on_ready=announce, stop=stop)
        finally:
            if watcher is not None:
                watcher.cancel()
            await cleanup()

    # SIGTERM ends the server as SIGINT does: uvicorn shuts down gracefully on either, then
    # raises the signal again under the handler it found; with Python's default there, SIGTERM
    # would kill the process before the code after serving (the replay's report and exit
    # status, the recording's last commits) could run. Served, it has done its work.
    import signal
    import threading

    main_thread = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, _served) if main_thread else None
    try:
        try:
            import uvloop
        except ImportError:
            asyncio.run(main())
            return bool(idle and idle[0].fired)
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        asyncio.run(main())
        return bool(idle and idle[0].fired)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, before)


def _served(signum: int, frame: Any) -> None:
    """SIGTERM raised again by uvicorn once it has shut down on it: nothing more to do."""


def header(scope: dict[str, Any], name: bytes) -> str | None:
    for k, v in scope["headers"]:
        if k == name:
            return v.decode("latin-1")
    return None


class Trust:
    """Who may talk to an mcprec HTTP endpoint: the DNS-rebinding checks of the MCP SDK's
    transport security, made by the recording proxy and by replay alike, before anything is
    read, forwarded or recorded.

    A listener on a loopback address answers only to local ``Host`` names (``421`` otherwise,
    or when there is none); a browser ``Origin`` must be a local one (``403`` otherwise).
    ``hosts`` and ``origins`` admit more: ``name`` (any port), ``name:port``, ``name:*``;
    an origin as ``scheme://host[:port]`` or ``scheme://host:*``; ``*`` admits anything.
    """

    __slots__ = ("bound_host", "hosts", "origins", "_check_host")

    def __init__(self, bound_host: str, hosts: Iterable[str] = (),
                 origins: Iterable[str] = ()) -> None:
        self.bound_host = bound_host
        self.hosts = tuple(h.lower() for h in hosts)
        self.origins = tuple(o.lower().rstrip("/") for o in origins)
        self._check_host = "*" not in self.hosts and _is_loopback(bound_host)

    def refusal(self, scope: dict[str, Any]) -> tuple[int, str] | None:
        """``(status, message)`` when the request must be refused, else None."""
        host = origin = None
        for k, v in scope["headers"]:
            if k == b"host":
                host = v.decode("latin-1")
            elif k == b"origin":
                origin = v.decode("latin-1")
        if self._check_host and not self.host_ok(host):
            return 421, (f"mcprec: Host {host!r} is not allowed here (DNS-rebinding protection); "
                         "add it with --allow-host" if host else
                         "mcprec: a Host header is required (DNS-rebinding protection)")
        if origin is not None and not self.origin_ok(origin):
            return 403, (f"mcprec: Origin {origin!r} is not allowed; add it with --allow-origin")
        return None

    def host_ok(self, host: str | None) -> bool:
        if not host:
            return False
        name, port = _split_host(host.lower())
        if name in LOCAL_HOSTS or name == self.bound_host:
            return True
        return any(a == name or a == f"{name}:{port}" or a == f"{name}:*" for a in self.hosts)

    def origin_ok(self, origin: str) -> bool:
        if "*" in self.origins:
            return True
        low = origin.lower().rstrip("/")
        if low in self.origins:
            return True
        parts = urlsplit(low)
        name, _ = _split_host(parts.netloc)
        if f"{parts.scheme}://{name}:*" in self.origins:
            return True
        return parts.scheme in ("http", "https") and name in LOCAL_HOSTS


def _split_host(host: str) -> tuple[str, str]:
    """``name:port`` / ``[::1]:port`` -> (name, port); the name of IPv6 addresses in brackets."""
    if host.startswith("["):
        end = host.find("]")
        return host[:end + 1], host[end + 2:]
    name, _, port = host.partition(":")
    return name, port


def _is_loopback(host: str) -> bool:
    if host in LOCAL_HOSTS:
        return True
    import ipaddress

    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def refuse(send: Callable[[dict[str, Any]], Awaitable[None]], status: int,
                 message: str) -> None:
    """A refusal as JSON-RPC error (no request id: none was read), like every mcprec error."""
    import orjson

    await send_simple(send, status, orjson.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message}}))


async def send_simple(send: Callable[[dict[str, Any]], Awaitable[None]], status: int,
                      body: bytes, content_type: bytes = b"application/json",
                      headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type),
                            (b"content-length", str(len(body)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class ClientGone(Exception):
    """The HTTP client disconnected before its request was read."""


class BodyTooLarge(Exception):
    """The request body is larger than the configured limit."""


async def read_body(receive: Callable[[], Awaitable[dict[str, Any]]], limit: int,
                    scope: dict[str, Any] | None = None,
                    taking: asyncio.Event | None = None) -> bytes:
    """The whole request body; raises ``BodyTooLarge`` (at once, without reading, when the
    ``scope``'s Content-Length says so) or ``ClientGone``. While ``taking`` is clear, no more
    is read (uvicorn then stops reading the connection once 64 KiB of it wait)."""
    if scope is not None:
        declared = header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise BodyTooLarge()
    parts: list[bytes] = []
    size = 0
    while True:
        if taking is not None and not taking.is_set():
            await taking.wait()
        msg = await receive()
        if msg["type"] == "http.disconnect":
            raise ClientGone()
        chunk = msg.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge()
        parts.append(chunk)
        if not msg.get("more_body"):
            return b"".join(parts)


def quiet_uvicorn() -> None:
    """An aborted stream is an expected event here, not an 'Exception in ASGI application'."""
    import logging

    logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
