"""The client side of one Streamable HTTP session: what every mcprec part that talks to an HTTP
MCP server as its client shares (the verify mock client, the scripted client, replay's live
fallback).

A message goes out as a POST; what comes back on that POST (one JSON answer, or an event stream
of the server's notifications, requests and the answer) is handed over message by message. The
session's GET stream carries what the server says outside any request. The session id comes
with the ``initialize`` answer and goes with every later request, as does the protocol version
once the caller knows it; ``close`` ends the session with a DELETE.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..errors import McprecError
from .http_answers import answers, http_answer, http_answer_note

OnMessage = Callable[[bytes, dict[str, Any]], Awaitable[None]]
"""Called with each message the server sends and how it came (``status`` and ``content_type``
``json`` / ``sse`` on a POST's response; ``stream: get`` on the GET stream)."""

BOTH = "application/json, text/event-stream"


class HTTPClientError(McprecError):
    """A request to the server failed at the HTTP level (refused, reset, timed out);
    ``reason`` says how, without the URL."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class Reply:
    """How the server answered one POST."""

    status: int
    content_type: str
    messages: int
    """How many JSON-RPC messages the response carried."""
    body: bytes = b""
    """The body when it was neither JSON nor an event stream (e.g. an HTTP error's text)."""


class StreamableHTTPClient:
    """One client session with the Streamable HTTP endpoint ``url``. ``headers`` go with every
    request; ``timeout`` bounds each POST (None: no bound; the GET stream is never bounded)."""

    def __init__(self, url: str, *, headers: dict[str, str] | None = None,
                 timeout: float | None = None, connect_timeout: float = 10.0) -> None:
        self.url = url
        self.extra_headers = dict(headers or {})
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        """Sent as ``Mcp-Protocol-Version`` once set (the caller reads it from the
        ``initialize`` answer)."""
        self._http: Any = None

    async def open(self) -> None:
        """Ready to send (again a no-op once open)."""
        if self._http is not None:
            return
        import httpx

        _warm_up()

        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(self.timeout, connect=self.connect_timeout), trust_env=False)

    def headers(self, accept: str = BOTH) -> dict[str, str]:
        h = {**self.extra_headers, "content-type": "application/json", "accept": accept}
        if self.session_id:
            h["mcp-session-id"] = self.session_id
        if self.protocol_version:
            h["mcp-protocol-version"] = self.protocol_version
        return h

    async def post(self, raw: bytes, on_message: OnMessage,
                   headers: dict[str, str] | None = None, *,
                   answer_for: str | None = None) -> Reply:
        """POST one message; each message of the response to ``on_message`` as it arrives.
        ``headers``: this request's own (over the session's). ``answer_for``: the id (JSON text)
        of the request ``raw`` is: an HTTP error that does not answer it in JSON-RPC (a
        plain-text 401, a 400 whose JSON has no id) goes to ``on_message`` as the JSON-RPC error
        the recording proxy records for it (``synthetic``)."""
        import httpx

        from .sse import SSEParser

        try:
            async with self._http.stream("POST", self.url, content=raw,
                                         headers={**self.headers(), **(headers or {})}) as resp:
                sid = resp.headers.get("mcp-session-id")
                if sid and not self.session_id:
                    self.session_id = sid
                ctype = resp.headers.get("content-type", "")
                reply = Reply(resp.status_code, ctype, 0)
                meta = {"status": resp.status_code}
                if ctype.startswith("text/event-stream"):
                    parser = SSEParser()
                    async for chunk in resp.aiter_bytes():
                        for event in parser.feed(chunk):
                            if event.data:
                                reply.messages += 1
                                await on_message(event.data, {**meta, "content_type": "sse"})
                    return reply
                body = await resp.aread()
                if answer_for is not None and resp.status_code >= 300 \
                        and not answers(body, answer_for):
                    reply.messages = 1
                    kind = "json" if "json" in ctype else (ctype.split(";")[0] or None)
                    await on_message(
                        http_answer(answer_for, resp.status_code, resp.headers, body),
                        {**meta, "content_type": kind, "synthetic": True,
                         "error": http_answer_note(resp.status_code, kind)})
                elif "json" in ctype and body.strip():
                    reply.messages = 1
                    await on_message(body, {**meta, "content_type": "json"})
                else:
                    reply.body = body
                return reply
        except httpx.HTTPError as e:
            reason = f"{type(e).__name__}: {e}"
            raise HTTPClientError(f"POST {self.url} failed: {reason}", reason) from None

    async def listen(self, on_message: OnMessage, opened: Callable[[int], None] | None = None
                     ) -> None:
        """The session's GET stream, until it ends: ``opened(status)`` once the server has
        answered it (a server without one answers 405), each message to ``on_message``."""
        import httpx

        from .sse import SSEParser

        status = 0
        try:
            async with self._http.stream(
                    "GET", self.url, headers=self.headers("text/event-stream"),
                    timeout=httpx.Timeout(None, connect=self.connect_timeout)) as resp:
                status = resp.status_code
                if opened is not None:
                    opened(status)
                if status != 200:
                    return
                parser = SSEParser()
                async for chunk in resp.aiter_bytes():
                    for event in parser.feed(chunk):
                        if event.data:
                            await on_message(event.data, {"stream": "get"})
        except httpx.HTTPError:
            return
        finally:
            if opened is not None and not status:
                opened(0)  # never answered: whoever waits goes on

    async def close(self) -> None:
        """End the session (DELETE, when the server gave it an id) and the connection."""
        if self._http is None:
            return
        if self.session_id:
            with contextlib.suppress(Exception):
                await self._http.delete(self.url, headers=self.headers())
        await self._http.aclose()


def _warm_up() -> None:
    """Import now what httpx's connection pool and the responses import on their first use
    (anyio's parts, loaded lazily: ~40 ms), so that the first request's latency is the
    server's alone (verify compares it with the recorded one)."""
    import importlib

    import anyio

    from . import sse  # noqa: F401

    for name in ("Lock", "Event", "Semaphore", "CancelScope", "connect_tcp", "connect_unix",
                 "create_memory_object_stream", "fail_after", "move_on_after"):
        getattr(anyio, name, None)
    for module in ("anyio.abc", "anyio.lowlevel", "anyio.streams.tls", "sniffio"):
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    with contextlib.suppress(Exception):  # the running loop's backend, loaded on first use
        anyio.get_current_task()
