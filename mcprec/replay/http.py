"""Serving a replay over HTTP: Streamable HTTP, and the legacy HTTP+SSE transport.

Every client session (``initialize`` → a new ``Mcp-Session-Id``; or one legacy SSE connection)
gets its own engine and replays the recording independently. Answers go out in the recorded
mode (a JSON body, or an SSE stream carrying the request's notifications and server requests
before the response); messages the server sent on its own go on the session's GET stream.

Replay promises only what the recording had: a session id (``Mcp-Session-Id``) and a GET stream
when the recorded server issued a session id, SSE event ids when it sent them. An answer that
was not JSON-RPC (a plain-text ``401``) goes out as recorded: its status, the headers that
matter and its body. Host and Origin are checked as the recording proxy checks them.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs


from .. import _log, wire
from ..cassette import Cassette, Session
from ..cassette.connect import DatabaseError
from ..cassette.models import StoredText
from ..errors import CassetteError, McprecError
from ..matching import MatchOptions
from ..transports.http_serve import (
    BodyTooLarge, ClientGone, Trust, header, read_body, refuse, send_simple,
)
from ..transports.session_idle import DEFAULT_SESSION_IDLE_S, IdleSessions
from ..transports.sse import format_event, format_event_pieces
from .engine import ReplaySession
from .era import Era

if TYPE_CHECKING:
    from ..faults.rules import Faults

MAX_BODY = 64 * 1024 * 1024
GET_BUFFER = 10_000
LEGACY_ANSWER_GAP_S = 0.02
"""Legacy HTTP+SSE: how long an answer waits after the notifications written before it, so
that a client reads them apart (``AsyncPlayback``'s ``answer_gap``): all of a session's
messages share its one stream, and a socket does not say when the client has read."""
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
               (b"x-accel-buffering", b"no")]

Out = bytes | StoredText
"""A message for the client, as the engine gives it: a large recorded answer (a response or an
error, the client's id spliced in) as the ``StoredText`` it is read from, a piece at a time as
it is sent. One recorded 100 MB answer over HTTP, the replay server's peak RSS: 334 -> 40 MiB
as a JSON body, 434 -> 39-41 MiB as an SSE event (it had grown by 3 and 4 times the answer:
read whole, framed, chunked)."""


@dataclass
class _Promises:
    """What a recorded session's server offered over HTTP, so replay offers no more."""

    session_ids: bool
    get_stream: bool
    event_ids: bool | None = None  # looked up when first needed


_STATEFUL = _Promises(True, True, True)  # a recording of stdio or of the legacy transport


@dataclass
class _ClientSession:
    id: str
    engine: ReplaySession
    legacy: bool = False
    streams: dict[str, asyncio.Queue[Out]] = field(default_factory=dict)
    listening: int = 0
    """GET streams open: messages of no open request go there."""
    background: asyncio.Queue[Out] = field(default_factory=lambda: asyncio.Queue(GET_BUFFER))
    ended: asyncio.Event = field(default_factory=asyncio.Event)


class _Ended:
    """What an ended client session leaves behind: its unmatched requests (for the exit
    status) and, when a report is to be written, its report; never its engine."""

    __slots__ = ("stats", "unmatched", "_report")

    def __init__(self, unmatched: list[dict[str, Any]], report: dict[str, Any] | None) -> None:
        self.stats = self  # as an engine's ``stats.unmatched``
        self.unmatched = unmatched
        self._report = report

    def report(self) -> dict[str, Any]:
        return self._report if self._report is not None else {"unmatched": self.unmatched}


def _error(rid: Any, code: int, message: str) -> bytes:
    return wire.error_message(rid, code, message)


SESSION_NOT_FOUND = _error(None, -32600, "Session not found")
"""The answer (with 404) to a session id that is unknown, ended or expired, as the MCP SDK's
servers give it: the client then initializes a new session."""


class ReplayApp:
    """An ASGI app replaying one recorded session to any number of HTTP clients."""

    def __init__(
        self,
        cassette: Cassette,
        session: Session | Sequence[Session],
        *,
        options: MatchOptions | None = None,
        timing: float | None = None,
        bound_host: str = "127.0.0.1",
        allowed_origins: tuple[str, ...] = (),
        allowed_hosts: tuple[str, ...] = (),
        redact: Any = None,
        faults: Faults | None = None,
        protocol_version: str = "recorded",
        max_gap: float | None = None,
        live: Any = None,
        path: str | None = None,
        session_idle: float | None = DEFAULT_SESSION_IDLE_S,
        keep_reports: bool = False,
    ) -> None:
        """``session_idle``: end a client session that has had no request in flight for this
        many seconds (None: never). ``keep_reports``: keep each ended session's report for
        ``engines()`` (``--report``); otherwise an ended session leaves only its unmatched
        requests behind."""
        self.cassette = cassette
        self.path = None if path is None else path.rstrip("/")
        """The endpoint: anything else gets 404 (the legacy SSE endpoints aside); None: any."""
        self.session = session
        self.options = options
        self.timing = timing
        self.bound_host = bound_host
        self.allowed_origins = allowed_origins
        self.allowed_hosts = allowed_hosts
        self.redact = redact
        self.faults = faults  # shared by every client: nth counts across them
        self.protocol_version = protocol_version
        self.max_gap = max_gap
        self.notices: set[str] = set()  # a version notice is said once, not once per client
        self.live = live
        """new_episodes: the ``LiveHTTP`` every client's unmatched requests go to."""
        self.trust = Trust(bound_host, allowed_hosts, allowed_origins)
        self.sessions: dict[str, _ClientSession] = {}
        self.finished: list[_Ended] = []
        """Ended client sessions: one each with ``keep_reports``, else one for them all."""
        self.keep_reports = keep_reports
        self.idle: IdleSessions[str] = IdleSessions(session_idle, self._expired)
        if len(self._recorded()) > 1:  # read once, shared by every client's choice
            from .choose import shared_candidates

            shared_candidates(cassette, self._recorded(), options)
        self._sessionless: _ClientSession | None = None
        self._promises: dict[int, _Promises] = {}
        self.era = Era(s.protocol_version for s in self._recorded())
        """The revisions the recording speaks: a stateless one's requests are checked with
        their headers as a server of it checks them (``era.py``)."""
        self.failure: McprecError | None = None
        """The first error reading the cassette (corrupt, truncated): said on stderr at once,
        answered as a JSON-RPC error, and the exit status when the server stops."""

    # --- sessions ---------------------------------------------------------------------------

    def _new_session(self, legacy: bool = False) -> _ClientSession:
        sid = secrets.token_hex(16)
        holder: list[_ClientSession] = []

        async def send(data: Out, related: str | None) -> None:
            cs = holder[0]
            queue = None if cs.legacy or related is None else cs.streams.get(related)
            if queue is None and related is not None and not cs.legacy and not cs.listening \
                    and cs.streams:
                # its request's stream has closed and the client keeps no GET stream: the
                # stream of the request opened last (e.g. a tasks/result waiting for the task)
                queue = next(reversed(cs.streams.values()))
            target = queue if queue is not None else cs.background
            try:
                target.put_nowait(data)
            except asyncio.QueueFull:
                if isinstance(data, StoredText):
                    data.close()

        engine = ReplaySession(self.cassette, self.session, send, options=self.options,
                               timing=self.timing, redact=self.redact, label=sid[:8],
                               faults=self.faults, transport="http",
                               protocol_version=self.protocol_version, max_gap=self.max_gap,
                               notices=self.notices,
                               live=self.live.client(sid[:8]) if self.live is not None else None,
                               send_stored=send,
                               answer_gap=LEGACY_ANSWER_GAP_S if legacy else 0.0)
        cs = _ClientSession(sid, engine, legacy)
        holder.append(cs)
        self.sessions[sid] = cs
        self.idle.enter(sid)  # held by the request (or stream) that opens it
        return cs

    async def _end_session(self, cs: _ClientSession) -> None:
        """The client's session is over (DELETE, idle, a disconnect): everything it held is
        released; what it leaves behind is an ``_Ended``."""
        if cs.ended.is_set():
            return
        cs.ended.set()  # a GET stream of the session ends
        self.sessions.pop(cs.id, None)
        self.idle.forget(cs.id)
        await cs.engine.aclose()
        self._ended(cs.engine)

    def _ended(self, engine: ReplaySession) -> None:
        if self.keep_reports:
            engine.freeze()
            self.finished.append(_Ended(engine.stats.unmatched, engine.report()))
        elif engine.stats.unmatched:
            if not self.finished:
                self.finished.append(_Ended([], None))
            self.finished[0].unmatched.extend(engine.stats.unmatched)

    async def _expired(self, sid: str) -> None:
        cs = self.sessions.get(sid)
        if cs is not None:
            _log.info("replay", f"client {sid[:8]}'s session ended after "
                      f"{self.idle.idle:g} s without a request (--session-idle)")
            await self._end_session(cs)

    async def aclose(self) -> None:
        await self.idle.aclose()
        for cs in list(self.sessions.values()):
            await self._end_session(cs)
        if self._sessionless is not None:
            await self._end_session(self._sessionless)
        if self.live is not None:
            await self.live.aclose()

    def engines(self) -> list[Any]:
        """The ended client sessions (``_Ended``) and the engines of those still open: each
        with ``stats.unmatched`` and ``report()``."""
        return [*self.finished, *(cs.engine for cs in self.sessions.values())]

    def promises(self, session: Session) -> _Promises:
        """What the recorded ``session``'s server offered: a session id at ``initialize`` (and
        then a GET stream), SSE event ids."""
        found = self._promises.get(session.id)
        if found is not None:
            return found
        if session.transport != "http":
            found = _STATEFUL
        else:
            inits = self.cassette.requests(session, "initialize")
            answer = self.cassette.answer(session, inits[0].seq) if inits else None
            headers = (answer.http or {}).get("headers") if answer is not None else None
            issued = isinstance(headers, dict) and "mcp-session-id" in headers
            found = _Promises(issued, issued)
        self._promises[session.id] = found
        return found

    def event_ids(self, session: Session) -> bool:
        """Whether the recorded server gave its SSE events ids (the first SSE answer says)."""
        promises = self.promises(session)
        if promises.event_ids is None:
            promises.event_ids = False
            # a large message's text left in the cassette: a 100 MB answer (or one after the
            # first SSE message, read ahead) was read whole here, 100 of the 400 MiB an SSE
            # answer of 100 MB grew replay by
            for m in self.cassette.messages(session, lookup=True):
                if m.http and m.http.get("content_type") == "sse":
                    promises.event_ids = "event_id" in m.http
                    break
        return promises.event_ids

    # --- ASGI -------------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        refused = self.trust.refusal(scope)
        if refused is not None:
            await refuse(send, *refused)
            return
        started = False

        async def tracked(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._route(scope, receive, tracked)
        except ClientGone:
            return
        except (CassetteError, DatabaseError) as e:
            # a corrupt or truncated cassette: one line on stderr and an answer the client can
            # read, not uvicorn's bare 500 with nothing said (the exit status says it too)
            failure = e if isinstance(e, CassetteError) else CassetteError(
                f"{self.cassette.path}: cannot read the cassette ({e})")
            if self.failure is None:
                self.failure = failure
                _log.warning("replay", str(failure))
            if not started:
                body = wire.dumps({"jsonrpc": "2.0", "id": None, "error": {
                    "code": -32603, "message": f"mcprec replay: {failure}"}})
                await send_simple(send, 500, body)

    async def _route(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        sid = header(scope, b"mcp-session-id")
        if sid is None and scope["method"] == "POST" and scope["path"].rstrip("/").endswith(
                "/messages"):  # the legacy transport names its session in the query
            sid = (parse_qs(scope.get("query_string", b"").decode("latin-1")).get("session_id")
                   or [None])[0]
        if sid is None or sid not in self.sessions:
            await self._serve(scope, receive, send)
            return
        self.idle.enter(sid)  # a request in flight holds the session
        try:
            await self._serve(scope, receive, send)
        finally:
            self.idle.leave(sid)

    async def _serve(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        method = scope["method"]
        path = scope["path"].rstrip("/")
        if self.path is not None and path != self.path and not path.endswith(("/sse",
                                                                                "/messages")):
            await send_simple(send, 404, b"Not Found", b"text/plain; charset=utf-8")
            return
        if method == "GET" and path.endswith("/sse") and header(scope, b"mcp-session-id") is None:
            await self._legacy_stream(scope, receive, send)
        elif method == "POST" and path.endswith("/messages"):
            await self._legacy_post(scope, receive, send)
        elif method == "POST":
            await self._post(scope, receive, send)
        elif method == "GET":
            await self._get(scope, receive, send)
        elif method == "DELETE":
            cs = self.sessions.get(header(scope, b"mcp-session-id") or "")
            if cs is None:
                await send_simple(send, 404, SESSION_NOT_FOUND)
                return
            await self._end_session(cs)
            await send_simple(send, 200, b"")
        else:
            await send_simple(send, 405, _error(None, -32000, "Method not allowed"),
                              headers=[(b"allow", b"GET, POST, DELETE")])

    async def _post(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            body = await read_body(receive, MAX_BODY, scope)
        except BodyTooLarge:
            await send_simple(send, 413, _error(None, -32600, "mcprec: request body too large"))
            return
        c = wire.classify(body)
        if c.kind == wire.INVALID:
            code, msg = (-32700, "Parse error") if c.obj is None else (-32600, "Invalid Request")
            await send_simple(send, 400, _error(None, code, msg))
            return
        if c.kind == wire.REQUEST and not wire.valid_request_id(c.obj["id"]):
            await send_simple(send, 400, _error(None, -32600, wire.INVALID_ID))
            return
        if c.kind == wire.BATCH:
            await send_simple(send, 400, _error(None, -32600, "mcprec: batches are not replayed "
                                                "over HTTP; send one message per POST"))
            return
        sid = header(scope, b"mcp-session-id")
        if c.kind == wire.REQUEST and self.era:
            refusal = self.era.check(c.obj, _era_headers(scope))
            if refusal is not None:  # as a server of the recorded revision refuses it
                cs_refused = self.sessions.get(sid or "")
                if cs_refused is None:
                    if self._sessionless is None:
                        self._sessionless = self._new_session()
                    cs_refused = self._sessionless
                cs_refused.engine.playback.note_refusal(c.obj, refusal)
                await send_simple(send, refusal.status, refusal.answer(c.obj["id"]))
                return
        extra: list[tuple[bytes, bytes]] = []
        opening = False
        if sid is not None:
            cs = self.sessions.get(sid)
            if cs is None:
                await send_simple(send, 404, SESSION_NOT_FOUND)
                return
        elif c.kind == wire.REQUEST and c.method == "initialize":
            cs = self._new_session()
            extra.append((b"mcp-session-id", cs.id.encode()))
            opening = True
        else:
            if self._sessionless is None:  # stateless clients: one shared replay
                self._sessionless = self._new_session()
                self.idle.forget(self._sessionless.id)  # lasts as long as the server
            cs = self._sessionless
        if c.kind != wire.REQUEST:
            await cs.engine.receive(body)
            await send({"type": "http.response.start", "status": 202, "headers": extra})
            await send({"type": "http.response.body", "body": b""})
            return
        try:
            await self._answer(cs, c, body, scope, send, extra, opening)
        finally:
            if opening:
                self.idle.leave(cs.id)

    async def _opened(self, cs: _ClientSession, answer: dict[str, Any] | None) -> bool:
        """After an ``initialize`` opened ``cs``: whether the client gets its session id. Not
        when the recorded server issued none (a stateless server: its replay is the shared
        one of requests without a session id), nor when initialize failed."""
        if answer is not None or not self.promises(cs.engine.session).session_ids:
            self.sessions.pop(cs.id, None)
            self.idle.forget(cs.id)
            if answer is None and self._sessionless is None:
                self._sessionless = cs
            else:
                await self._end_session(cs)
            return False
        return True

    async def _answer(self, cs: _ClientSession, c: wire.Classified, body: bytes,
                      scope: dict[str, Any], send: Any, extra: list[tuple[bytes, bytes]],
                      opening: bool = False) -> None:
        key = c.rpc_id or "null"
        queue: asyncio.Queue[Out] = asyncio.Queue()
        cs.streams[key] = queue
        accepts_sse = "text/event-stream" in (header(scope, b"accept") or "text/event-stream")
        try:
            await cs.engine.receive(body)
            first = await queue.get()
            mode = cs.engine.modes.get(key, "")
            status = cs.engine.statuses.get(key)
            recorded = None
            if status is not None and first:  # an answer the recording proxy gave: read whole
                first = bytes(first)
                recorded = _http_answer(first)
            if opening and not await self._opened(cs, recorded):
                extra = [h for h in extra if h[0] != b"mcp-session-id"]
            only = cs.engine.status_only.get(key)
            if not first and only is not None:  # a fault: that status, an empty body
                retry = [(b"retry-after", b"1")] if only in (429, 503) else []
                await send_simple(send, only, b"", headers=[*extra, *retry])
                return
            if not first:  # the recorded upstream dropped this stream: drop it too
                await send({"type": "http.response.start", "status": 200,
                            "headers": [*SSE_HEADERS, *extra]})
                raise DroppedStream()
            if recorded is not None:  # an answer that was not JSON-RPC: as HTTP said it
                await _send_http_answer(send, recorded)
                return
            final = _finality(key, cs.engine.malformed)
            if final(first) and (mode != "sse" or not accepts_sse):
                await _send_json(send, status or 200, first, extra)
                return
            if not accepts_sse:  # the client cannot take a stream: the rest goes to GET
                cs.streams.pop(key, None)
                await cs.background.put(first)
                await _send_json(send, 200, await self._final(cs, key, queue), extra)
                return
            await send({"type": "http.response.start", "status": 200,
                        "headers": [*SSE_HEADERS, *extra]})
            n = 0
            msg = first
            ids = self.event_ids(cs.engine.session)
            while True:
                n += 1
                for piece in _event(msg, id=f"{cs.id[:8]}-{key}-{n}" if ids else None):
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
                if final(msg):
                    break
                msg = await queue.get()
                if not msg:
                    raise DroppedStream()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            cs.streams.pop(key, None)
            if cs.engine.gone and cs.id in self.sessions:  # a disconnect fault: it is over
                await self._end_session(cs)

    async def _final(self, cs: _ClientSession, key: str, queue: asyncio.Queue[Out]) -> Out:
        final = _finality(key, cs.engine.malformed)
        while True:
            msg = await queue.get()
            if not msg:
                raise DroppedStream()
            if final(msg):
                return msg
            await cs.background.put(msg)

    async def _get(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if "text/event-stream" not in (header(scope, b"accept") or ""):
            await send_simple(send, 406, _error(None, -32000, "GET needs Accept: "
                                                "text/event-stream"))
            return
        sid = header(scope, b"mcp-session-id")
        cs = self.sessions.get(sid or "")
        if cs is None and sid is None and not any(
                self.promises(s).get_stream for s in self._recorded()):
            # the recorded server offered no GET stream (a stateless server)
            await send_simple(send, 405, _error(None, -32000, "Method Not Allowed: the "
                                                "recorded server offers no GET stream"),
                              headers=[(b"allow", b"POST")])
            return
        if cs is None:
            await send_simple(send, 404 if sid else 400,
                              SESSION_NOT_FOUND if sid else
                              _error(None, -32600, "Mcp-Session-Id header required"))
            return
        await self._stream_background(cs, receive, send, first=None)

    def _recorded(self) -> list[Session]:
        return [self.session] if isinstance(self.session, Session) else list(self.session)

    async def _stream_background(self, cs: _ClientSession, receive: Any, send: Any,
                                 first: bytes | None) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        if first is not None:
            await send({"type": "http.response.body", "body": first, "more_body": True})
        loop = asyncio.get_running_loop()
        gone = loop.create_task(_disconnected(receive))
        ended = loop.create_task(cs.ended.wait())
        cs.listening += 1
        try:
            while cs.id in self.sessions:
                getter = loop.create_task(cs.background.get())
                done, _ = await asyncio.wait({getter, gone, ended},
                                             return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:  # the client left, or its session ended (DELETE)
                    getter.cancel()
                    break
                for piece in _event(getter.result()):
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
            if not gone.done():  # the session ended: so does its stream
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            cs.listening -= 1
            gone.cancel()
            ended.cancel()
            if cs.legacy:
                await self._end_session(cs)

    async def _legacy_stream(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        cs = self._new_session(legacy=True)
        prefix = scope["path"].rstrip("/")[: -len("/sse")]
        endpoint = f"{prefix}/messages?session_id={cs.id}".encode()
        await self._stream_background(cs, receive, send,
                                      first=format_event(endpoint, event="endpoint"))

    async def _legacy_post(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        cs = self.sessions.get((query.get("session_id") or [""])[0])
        if cs is None or not cs.legacy:
            await send_simple(send, 404, SESSION_NOT_FOUND)
            return
        try:
            body = await read_body(receive, MAX_BODY, scope)
        except BodyTooLarge:
            await send_simple(send, 413, _error(None, -32600, "mcprec: request body too large"))
            return
        await cs.engine.receive(body)
        await send_simple(send, 202, b"Accepted", content_type=b"text/plain")


_ERA_HEADERS = (b"mcp-protocol-version", b"mcp-method", b"mcp-name")


def _era_headers(scope: dict[str, Any]) -> dict[str, str]:
    """The headers a stateless server checks against the body, by lower-case name."""
    return {k.decode("latin-1").lower(): v.decode("latin-1")
            for k, v in scope["headers"] if k.lower() in _ERA_HEADERS}


class DroppedStream(Exception):
    """Raised out of the app to cut a response short, as the recorded upstream did (the
    server closes the connection mid-response)."""


def _http_answer(data: bytes) -> dict[str, Any] | None:
    """What HTTP said, from the error the recording proxy recorded for an answer that was not
    JSON-RPC (``data.mcprec == "http_answer"``: status, headers, body); None for others."""
    c = wire.classify(data)
    if c.kind != wire.ERROR:
        return None
    err = c.obj.get("error")
    found = err.get("data") if isinstance(err, dict) else None
    if isinstance(found, dict) and found.get("mcprec") == "http_answer" and isinstance(
            found.get("status"), int):
        return found
    return None


async def _send_http_answer(send: Any, recorded: dict[str, Any]) -> None:
    headers = recorded.get("headers")
    body = str(recorded.get("body") or "").encode()
    out = [(k.encode("latin-1"), str(v).encode("latin-1"))
           for k, v in (headers.items() if isinstance(headers, dict) else ())]
    await send({"type": "http.response.start", "status": recorded["status"],
                "headers": [*out, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _finality(key: str, malformed: set[str]) -> Any:
    """What ends the response to request ``key``: its answer, or, when a fault malforms that
    answer, whatever is neither a notification nor a request."""
    if key not in malformed:
        return lambda data: _is_answer(data, key)

    def final(data: Out) -> bool:
        if isinstance(data, StoredText):  # a recorded response or error: nothing else is one
            return True
        return wire.classify(data).kind not in (wire.NOTIFICATION, wire.REQUEST)

    return final


def _is_answer(data: Out, key: str) -> bool:
    if isinstance(data, StoredText):
        # a recorded response or error with the client's id spliced in (what ``classify`` of
        # the whole text says, without reading it): that id, as ``classify`` gives its text
        inserted = data.inserted
        return inserted is not None and wire.id_text(wire.loads(inserted)) == key
    c = wire.classify(data)
    return c.kind in (wire.RESPONSE, wire.ERROR) and (c.rpc_id or "null") == key


async def _send_json(send: Any, status: int, data: Out,
                     headers: list[tuple[bytes, bytes]]) -> None:
    """``send_simple`` of ``data``; a large answer with its size as its content-length, then in
    pieces as they are read from the cassette."""
    if not isinstance(data, StoredText):
        await send_simple(send, status, data, headers=headers)
        return
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode()), *headers]})
    pieces = data.pieces()
    try:
        piece = next(pieces, b"")
        for after in pieces:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            piece = after
        await send({"type": "http.response.body", "body": piece})
    finally:
        data.close()


def _event(data: Out, id: str | None = None) -> Iterator[bytes]:
    """``format_event(data, id=id)``: at once, or a large answer in pieces as it is read."""
    if isinstance(data, StoredText):
        return format_event_pieces(data.pieces(), id=id)
    return iter((format_event(data, id=id),))


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
