"""The recording reverse proxy for one MCP endpoint over HTTP.

Streamable HTTP (2025-03-26 on): POST carries client messages and is answered with JSON or an
SSE stream; GET opens the server's own SSE stream; DELETE ends the session. The legacy HTTP+SSE
transport (2024-11-05): GET opens an SSE stream whose first event names the endpoint to POST to.

Every request is forwarded exactly once and every response streamed on as it arrives, chunk by
chunk, unchanged; a copy of each chunk goes to an SSE parser that records each event the moment
its blank line arrives. Each MCP session (``Mcp-Session-Id``, or one legacy SSE connection)
becomes its own session in the cassette. Secret headers are redacted before recording.

When the recorder falls far behind (16 MiB waiting for it at ``RecorderProcess``), the proxy
takes in no more until it catches up: no upstream connection reads on (``Upstream.hold``), no
request is begun or read on; what was read is still relayed and recorded. Memory stays bounded,
nothing is lost or reordered, and the recorder never needs the proxy to read: it catches up.

The proxy must not make the server less safe than it was: it rewrites ``Host`` to the target's,
which switches off the server's own DNS-rebinding protection, so it checks the client's ``Host``
and ``Origin`` itself first (``http_serve.Trust``), and bounds a request's head and body. Answers
that are not JSON-RPC (a plain-text 401) and failures (an upstream gone mid-stream) are recorded
as JSON-RPC errors to the request they answer, marked ``synthetic``, so replay can say the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import orjson

from .. import _log, wire
from ..redact import Redactor, default_redactor
from ..wire import CLIENT_TO_SERVER, SERVER_TO_CLIENT
from .http_answers import http_answer, http_answer_note
from .http_answers import answers as _answers
from .http_routing import SessionRouter
from .http_serve import BodyTooLarge, ClientGone, Trust, header, read_body, refuse, send_simple
from .http_upstream import (
    Upstream, UpstreamError, UpstreamResponse, UpstreamTarget, UpstreamTimeout,
    UpstreamUnreachable,
)
from .recording import SessionRecording
from .session_idle import DEFAULT_SESSION_IDLE_S, IdleSessions
from .sse import SSEParser, format_event

HOP_BY_HOP = frozenset({
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
    b"trailer", b"trailers", b"transfer-encoding", b"upgrade", b"host", b"content-length",
})
MAX_BODY = 64 * 1024 * 1024
DEFAULT_TIMEOUT_S = 300.0
class AbortStream(Exception):
    """Raised inside the app to drop the client's connection mid-response, as upstream did."""


def _jsonrpc_error_body(rid: Any, message: str, data: Any = None) -> bytes:
    return wire.error_message(rid, -32000, message, data)


def _http_answer(rid: str, resp: UpstreamResponse, body: bytes) -> bytes:
    return http_answer(rid, resp.status_code, resp.headers, body)


def _client_messages(body: bytes) -> list[tuple[Any, bytes]]:
    """The client messages a request body carries, each parsed and as its bytes."""
    if not body:
        return []
    c = wire.classify(body)
    if c.kind == wire.BATCH:
        return [(item, wire.dumps(item)) for item in c.obj]
    return [(c.obj, body)]


class RecordingProxy:
    """An ASGI app forwarding to ``target`` and recording into ``cassette``."""

    def __init__(
        self,
        target: str,
        cassette: str | os.PathLike[str],
        *,
        session: str | None = None,
        tags: dict[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_body: int = MAX_BODY,
        redact: Redactor | None = None,
        trust: Trust | None = None,
        session_idle: float | None = DEFAULT_SESSION_IDLE_S,
        sample: float | None = None,
        seed: int | None = None,
        recordings: Callable[..., Any],
        faults: Any = None,
    ) -> None:
        """``session_idle``: a session (by ``Mcp-Session-Id``) without a request in flight for
        this many seconds is ended in the cassette (None: only DELETE or the end of the proxy
        ends it); if its client comes back, what it sends goes to a new cassette session.
        ``recordings(cassette, target, session=, tags=, redact=, on_pressure=, sample=, seed=)``
        opens the cassette sessions the proxy reports to
        (``mcprec.record.http_sessions.ProxyRecordings``): the proxy relays, the recording side
        writes. ``faults``: a ``faults.live.LiveFaults`` (``mcprec record --fault``): the
        answers its rules pick are rewritten before they reach the client, and recorded as
        the client received them; every other exchange is relayed as it is."""
        self._faults = faults
        self.upstream = UpstreamTarget(target)
        self.target = self.upstream.url
        """The target as shown and stored: credentials in it replaced."""
        self.upstream_origin = self.upstream.origin
        self.upstream_netloc = self.upstream.netloc
        self.path = self.upstream.path
        self.timeout = timeout
        self.max_body = max_body
        self.trust = trust if trust is not None else Trust("127.0.0.1")
        self.listen_origin = ""  # set once bound, to rewrite legacy endpoint URLs
        self._client: Upstream | None = None
        self._taking = asyncio.Event()
        """Set while the recorder keeps up: requests are read and forwarded."""
        self._taking.set()
        self._recordings = recordings(cassette, self.target, session=session, tags=tags,
                                      redact=redact, on_pressure=self._recorder_behind,
                                      sample=sample, seed=seed)
        self._redact = redact if redact is not None else default_redactor()
        if getattr(self._redact, "needs_salt", False):  # pseudonyms in headers as in messages
            from ..redact.manifest import salted_for

            # the file recorded into first (every file of a rotating recording has its salt)
            self._redact = salted_for(self._redact, self._recordings.cassette_path)
        self._redacted: dict[tuple[tuple[bytes, bytes], ...], dict[str, str]] = {}
        self._router = SessionRouter(self._recordings.open, self._recordings.close,
                                     getattr(self._recordings, "stale", None))
        self.idle: IdleSessions[str] = IdleSessions(session_idle, self._router.ended)
        self._exchanges = itertools.count(1)

    @property
    def lost(self) -> bool:
        """Whether recording lost messages (a write to the cassette failed): said by the
        recordings once they are closed."""
        return bool(getattr(self._recordings, "lost", False))

    @property
    def sessions(self) -> list[str]:
        """The names of the cassette sessions recorded so far (the first 1,000)."""
        return self._recordings.names

    @property
    def session_count(self) -> int:
        """How many cassette sessions were recorded so far."""
        return self._recordings.count

    @property
    def files(self) -> list[Any]:
        """The cassette files recorded into, in order (several when rotating)."""
        return list(getattr(self._recordings, "files", ()))

    @property
    def sessions_skipped(self) -> int:
        """How many sessions ``--sample`` left out (forwarded, not recorded)."""
        return self._recordings.skipped

    def held(self) -> dict[str, int]:
        """What the proxy holds per session now (for tests and diagnostics): MCP sessions
        routed by id, sessions being recorded, sessions whose idle time is counted."""
        return {"routed": self._router.open_sessions, "recording":
                self._recordings.open_sessions, "idle_tracked": len(self.idle)}

    # --- lifecycle --------------------------------------------------------------------------

    def _http(self) -> Upstream:
        if self._client is None:
            self._client = Upstream(self.upstream_origin, self.timeout)
        return self._client

    def _recorder_behind(self, behind: bool) -> None:
        """The recorder is far behind: take in nothing more, neither upstream answers nor client
        requests, until it catches up (what was read goes on to the client and the recorder)."""
        if behind:
            self._taking.clear()
        else:
            self._taking.set()
        self._http().hold(behind)

    async def aclose(self) -> None:
        """End every session, wait until all is committed, and close upstream connections."""
        await self.idle.aclose()
        await self._recordings.aclose()
        self._router.clear()
        if self._client is not None:
            await self._client.aclose()

    # --- ASGI -------------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        refused = self.trust.refusal(scope)
        if refused is not None:  # before anything is read, forwarded or recorded
            await refuse(send, *refused)
            return
        started = False

        async def tracking_send(message: dict[str, Any]) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self._handle(scope, receive, tracking_send)
        except (ClientGone, AbortStream):
            if started:
                raise AbortStream() from None  # drop the connection: the response is cut short
        except Exception as e:  # noqa: BLE001 - one line, never a traceback
            _log.warning("proxy", f"proxy error on {scope['method']} {scope['path']}: "
                         f"{type(e).__name__}: {e}")
            if started:
                raise AbortStream() from None
            await send_simple(send, 502, _jsonrpc_error_body(None, f"mcprec: proxy error: {e}"))

    async def _handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        sid = header(scope, b"mcp-session-id")
        if sid is None:
            await self._exchange(scope, receive, send, None)
            return
        self.idle.enter(sid)  # a request in flight (a GET stream too) holds the session
        try:
            await self._exchange(scope, receive, send, sid)
        finally:
            self.idle.leave(sid)

    async def _exchange(self, scope: dict[str, Any], receive: Any, send: Any,
                        sid: str | None) -> None:
        method = scope["method"]
        raw_path = scope.get("raw_path") or scope["path"].encode()
        query = scope.get("query_string", b"")
        target_path = raw_path.decode("latin-1") + (("?" + query.decode("latin-1")) if query else "")
        if not self._taking.is_set():  # the recorder is behind: no new exchange until it is not
            await self._taking.wait()
        try:
            body = await read_body(receive, self.max_body, scope, self._taking) \
                if method in ("POST", "PUT") else b""
        except BodyTooLarge:
            await send_simple(send, 413, _jsonrpc_error_body(
                None, f"mcprec: request body larger than {self.max_body} bytes"))
            return
        exchange = next(self._exchanges)
        req_headers = [(k, v) for k, v in scope["headers"] if k not in HOP_BY_HOP]
        messages = _client_messages(body)
        is_init = any(isinstance(o, dict) and o.get("method") == "initialize" for o, _ in messages)
        probe = not is_init and any(isinstance(o, dict) and o.get("method") == "server/discover"
                                    for o, _ in messages)
        writer, fresh = self._router.request(method, sid, target_path, is_init, probe=probe)
        meta = {"exchange": exchange, "method": method, "path": target_path,
                "headers": self._redacted_headers(req_headers)}
        first_request_id = None
        for obj, raw in messages:
            if writer is not None:
                writer.message(CLIENT_TO_SERVER, raw, http=meta)
                meta = {"exchange": exchange}
            if first_request_id is None and isinstance(obj, dict) and "method" in obj \
                    and "id" in obj:
                first_request_id = wire.id_text(obj["id"])
            if self._faults is not None:
                self._faults.client(raw)
        headers = self._upstream_headers(req_headers, body)
        try:
            resp = await self._http().send(method, target_path, headers, body)
        except UpstreamTimeout as e:
            await self._upstream_failed(send, writer, exchange, 504, f"upstream timed out: {e}",
                                        first_request_id)
            self._router.settle(writer, fresh)
            return
        except UpstreamUnreachable as e:
            await self._upstream_failed(
                send, writer, exchange, 502, f"upstream {self.upstream_origin} unreachable: {e}",
                first_request_id)
            self._router.settle(writer, fresh)
            return
        except UpstreamError as e:
            await self._upstream_failed(
                send, writer, exchange, 502, f"upstream {self.upstream_origin} sent no valid "
                f"answer: {e}", first_request_id)
            self._router.settle(writer, fresh)
            return
        try:
            await self._relay(scope, receive, send, resp, writer, exchange, sid,
                              first_request_id, method, fresh)
        finally:
            await resp.aclose()
            self._router.settle(writer, fresh)

    def _upstream_headers(self, req_headers: list[tuple[bytes, bytes]], body: bytes
                          ) -> list[tuple[bytes, bytes]]:
        out = [(b"host", self.upstream_netloc.encode())]
        if body:
            out.append((b"content-length", str(len(body)).encode()))
        authorization = self.upstream.authorization  # from the target URL's credentials
        for k, v in req_headers:
            if k == b"origin" and self.listen_origin and v.decode("latin-1") == self.listen_origin:
                v = self.upstream_origin.encode()
            elif k == b"authorization":
                authorization = None  # the client's own wins
            out.append((k, v))
        if authorization is not None:
            out.append((b"authorization", authorization))
        return out

    async def _upstream_failed(self, send: Any, writer: SessionRecording | None, exchange: int,
                               status: int, message: str, rid: str | None) -> None:
        body = _jsonrpc_error_body(orjson.loads(rid) if rid else None, f"mcprec: {message}")
        if writer is not None:
            writer.message(SERVER_TO_CLIENT, body, http={"exchange": exchange, "status": status,
                                                         "error": message, "synthetic": True},
                           context=rid)
        _log.warning("proxy", message)
        await send_simple(send, status, body)

    async def _relay(self, scope: dict[str, Any], receive: Any, send: Any, resp: UpstreamResponse,
                     writer: SessionRecording | None, exchange: int, sid: str | None,
                     rid: str | None, method: str, fresh: bool = False) -> None:
        new_sid = resp.headers.get("mcp-session-id")
        self._router.answered(writer, fresh, new_sid, resp.status_code)
        if fresh and new_sid and sid is None:  # the countdown of a new session begins
            self.idle.enter(new_sid)
            self.idle.leave(new_sid)
        content_type = resp.headers.get("content-type", "")
        is_sse = content_type.startswith("text/event-stream")
        resp_headers = [(k, v) for k, v in resp.headers.raw if k.lower() not in HOP_BY_HOP]
        meta: dict[str, Any] = {
            "exchange": exchange, "status": resp.status_code,
            "content_type": "sse" if is_sse else ("json" if "json" in content_type else
                                                   content_type.split(";")[0] or None),
            "stream": "get" if method == "GET" else method.lower(),
            "headers": self._redacted_headers(resp_headers),
        }
        if self._faults is not None and method == "POST" and rid is not None and \
                self._faults.wants(rid):
            await self._relay_faulted(receive, send, resp, resp_headers, writer, meta, is_sse,
                                      rid)
            return
        if method == "DELETE":
            await self._send_whole(send, resp, resp_headers)
            self._router.deleted(sid, resp.status_code)
            if sid is not None and 200 <= resp.status_code < 300:
                self.idle.forget(sid)
            return
        if not is_sse:
            try:
                body = await self._send_whole(send, resp, resp_headers)
            except UpstreamError as e:  # cut or invalid before its end: nothing was sent yet
                await self._upstream_failed(send, writer, exchange, 502,
                                            f"upstream sent a broken answer: {e}", rid)
                return
            if writer is None or not body:
                return
            body = _decoded(body, resp.headers.get("content-encoding"))
            if rid is not None and resp.status_code >= 300 and not _answers(body, rid):
                # not JSON-RPC (a plain-text 401, an HTML page): recorded as the error the
                # client's call ends with, and what HTTP said, for replay to say it again
                writer.message(SERVER_TO_CLIENT, _http_answer(rid, resp, body), http={
                    **meta, "synthetic": True,
                    "error": http_answer_note(resp.status_code, meta["content_type"])},
                    context=rid)
            elif "json" in content_type or resp.status_code >= 400:
                writer.message(SERVER_TO_CLIENT, body, http=meta, context=rid)
            return
        # SSE: stream it on, chunk by chunk; record each event as it completes
        await send({"type": "http.response.start", "status": resp.status_code,
                    "headers": resp_headers})
        parser = SSEParser()
        context = rid if method == "POST" else None
        legacy_rewrite = method == "GET" and sid is None
        gone = asyncio.Event()
        # a client leaving can only leave us waiting on upstream while upstream still sends
        watcher = None if resp.received_all else asyncio.get_running_loop().create_task(
            _watch_disconnect(receive, gone, resp))
        ended = False
        answered = rid is None or context is None  # whether the client's call got its answer
        try:
            async for chunk in resp.aiter_raw(idle_timeout=False):
                if legacy_rewrite:
                    events = parser.feed(chunk)
                    chunk, writer = self._legacy_endpoint(chunk, events, writer)
                    legacy_rewrite = False
                else:
                    events = parser.feed(chunk)
                # the last chunk ends the response in the same write, when it is known to be last
                ended = resp.at_end
                await send({"type": "http.response.body", "body": chunk, "more_body": not ended})
                if writer is None:  # a GET without session id, not a legacy stream
                    writer = self._router.sessionless()
                for ev in events:
                    if ev.event == "endpoint" or writer is None or not ev.data:
                        # an event without data (e.g. the priming event of 2025-11-25: an id and
                        # empty data) carries no message; the stream's metadata goes on the next
                        continue
                    m: dict[str, Any] = dict(meta) if meta else {"exchange": exchange}
                    if ev.id is not None:
                        m["event_id"] = ev.id
                    if ev.event != "message":
                        m["event"] = ev.event
                    writer.message(SERVER_TO_CLIENT, ev.data, http=m,
                                   context=context if writer.session.transport != "sse" else
                                   "auto")
                    meta = {}
                if not answered and rid is not None:
                    answered = any(b'"id"' in ev.data and _answers(ev.data, rid) for ev in events)
        except UpstreamError as e:
            if gone.is_set():
                return
            await self._stream_failed(send, writer, exchange, e, None if answered else rid,
                                      f"{method} {scope['path']}")
            return
        finally:
            if watcher is not None:
                watcher.cancel()
        if not gone.is_set() and not ended:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _relay_faulted(self, receive: Any, send: Any, resp: UpstreamResponse,
                             headers: list[tuple[bytes, bytes]],
                             writer: SessionRecording | None, meta: dict[str, Any],
                             is_sse: bool, rid: str) -> None:
        """An answer the fault rules rewrite (``record --fault``): read as events (SSE) or
        whole (JSON), each server message passed through the rules, what the client gets sent
        as events (or as JSON when it is one message in place of one) and recorded so, the
        fault marked. A dropped answer leaves the client's call waiting until it goes away."""
        faults = self._faults
        if not is_sse:
            body = _decoded(await resp.aread(), resp.headers.get("content-encoding"))
            out = faults.server(body) if body else None
            if out is None or len(out) == 1:
                data, mark = (body, None) if out is None else out[0]
                plain = [(k, v) for k, v in headers if k.lower() != b"content-encoding"]
                await send({"type": "http.response.start", "status": resp.status_code,
                            "headers": [*plain, (b"content-length", str(len(data)).encode())]})
                await send({"type": "http.response.body", "body": data})
                if writer is not None and data:
                    writer.message(SERVER_TO_CLIENT, data, http=meta, context=rid, fault=mark)
                return
            events = out
            chunks = None
        else:
            events = []
            chunks = resp.aiter_raw(idle_timeout=False)
        sse_headers = [(k, v) for k, v in headers if k.lower() not in (
            b"content-type", b"content-encoding")]
        await send({"type": "http.response.start", "status": 200, "headers": [
            *sse_headers, (b"content-type", b"text/event-stream"),
            (b"cache-control", b"no-cache")]})
        m: dict[str, Any] = {**meta, "content_type": "sse"}
        parser = SSEParser()
        answered = False

        async def relay(data: bytes, mark: Any, event_id: str | None = None) -> None:
            nonlocal m, answered
            await send({"type": "http.response.body", "body": format_event(data, id=event_id),
                        "more_body": True})
            if writer is not None:
                writer.message(SERVER_TO_CLIENT, data, http=m, context=rid, fault=mark)
            m = {"exchange": meta["exchange"]}
            answered = answered or _answers(data, rid) or (
                mark is not None and mark.get("what") == "answer")

        for data, mark in events:
            await relay(data, mark)
        if chunks is not None:
            with contextlib.suppress(UpstreamError):
                async for chunk in chunks:
                    for ev in parser.feed(chunk):
                        if not ev.data:
                            continue
                        out = faults.server(ev.data)
                        for data, mark in (out if out is not None else [(ev.data, None)]):
                            await relay(data, mark, ev.id if out is None else None)
        if not answered:  # dropped: the client's call waits, as for a server that never answers
            while (await receive())["type"] != "http.disconnect":
                pass
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _stream_failed(self, send: Any, writer: SessionRecording | None, exchange: int,
                             e: UpstreamError, rid: str | None, what: str) -> None:
        """The upstream went away in the middle of an SSE answer: end the client's stream, with
        a JSON-RPC error for the call still waiting on it, so that the call fails at once."""
        error = f"upstream dropped the stream: {e}"
        body = b""
        if rid is not None:
            body = _jsonrpc_error_body(orjson.loads(rid), f"mcprec: {error}")
        if writer is not None:  # no call waiting (a GET stream): a marker that replay skips
            writer.message(SERVER_TO_CLIENT, body, http={
                "exchange": exchange, "content_type": "sse", "error": error, "synthetic": True},
                context=rid)
        _log.warning("proxy", f"upstream dropped an SSE stream ({what}); ending the client's"
                     + (f" with an error for request id={rid}" if rid is not None else ""))
        await send({"type": "http.response.body", "body": format_event(body) if body else b"",
                    "more_body": False})

    def _legacy_endpoint(self, chunk: bytes, events: list[Any], writer: SessionRecording | None
                         ) -> tuple[bytes, SessionRecording | None]:
        """On a legacy SSE stream, the first event names the POST endpoint: start a session for
        it, and point absolute endpoint URLs at the proxy instead of the upstream."""
        for ev in events:
            if ev.event != "endpoint":
                continue
            endpoint = ev.data.decode("utf-8", "replace")
            if endpoint.startswith(self.upstream_origin) and self.listen_origin:
                chunk = chunk.replace(self.upstream_origin.encode(), self.listen_origin.encode(), 1)
                endpoint = endpoint[len(self.upstream_origin):]
            parts = urlsplit(endpoint)
            key = parts.path + (f"?{parts.query}" if parts.query else "")
            # the endpoint event is transport plumbing, not an MCP message: not recorded as one
            writer = self._router.legacy_stream(key)
            return chunk, writer
        return chunk, writer

    async def _send_whole(self, send: Any, resp: UpstreamResponse,
                          headers: list[tuple[bytes, bytes]]) -> bytes:
        body = await resp.aread()  # as sent: content coding kept
        await send({"type": "http.response.start", "status": resp.status_code,
                    "headers": [*headers, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
        return body

    def _redacted_headers(self, headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
        """Raw headers redacted by the header rules, remembered: a session sends the same
        headers with every request (and a server answers with the same ones), and redacting
        them afresh cost ~15 µs a time. The dict is shared: never modify it."""
        key = tuple(headers)
        out = self._redacted.get(key)
        if out is None:
            out = self._redact.redact_headers(
                (k.decode("latin-1"), v.decode("latin-1")) for k, v in headers)
            if len(self._redacted) >= 1024:
                self._redacted.clear()
            self._redacted[key] = out
        return out


def _decoded(body: bytes, encoding: str | None) -> bytes:
    """The body as the client's HTTP library will see it, for the cassette."""
    if not encoding or encoding == "identity":
        return body
    import zlib

    try:
        if encoding in ("gzip", "x-gzip"):
            return zlib.decompress(body, 16 + zlib.MAX_WBITS)
        if encoding == "deflate":
            try:
                return zlib.decompress(body)
            except zlib.error:
                return zlib.decompress(body, -zlib.MAX_WBITS)
    except zlib.error:
        pass
    return body


async def _watch_disconnect(receive: Any, gone: asyncio.Event, resp: UpstreamResponse) -> None:
    """When the client leaves mid-stream, close the upstream stream too: never hang on it."""
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            gone.set()
            with contextlib.suppress(Exception):
                await resp.aclose()
            return
