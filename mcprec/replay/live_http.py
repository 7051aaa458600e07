"""The real HTTP server behind ``replay --http --mode new_episodes --target URL``.

The HTTP counterpart of ``live.LiveServer``. On the first request the recording cannot answer,
one MCP session is opened with the server at ``URL`` (``initialize`` with the recorded client's
parameters, then ``notifications/initialized``; neither is recorded), and every unmatched
request of every replay client goes there, under an id of its own. What the server sends back
on that request's response (JSON, or an event stream with notifications and requests of its
own) goes to the client that asked, and the request, the answer and everything between are
appended to the replayed session, as the recording proxy would have recorded them (exchange,
status, content type), so that a later replay answers them. The session's GET stream is read
too: what the server sends there (the SDK server asks for sampling there) goes to the client
whose forwarded request is in progress, and is recorded as sent while handling it.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import TYPE_CHECKING, Any

from .. import wire
from ..cassette import Cassette, Session
from ..record.writer import SessionWriter
from ..record.writer import AUTO
from ..errors import ReplayError
from ..transports.http_client import HTTPClientError, StreamableHTTPClient
from .live import _append_writer

if TYPE_CHECKING:
    from .engine import AsyncPlayback

INIT_TIMEOUT_S = 30.0


class LiveHTTP:
    """One MCP session with the live server at ``url``, shared by every replay client."""

    def __init__(self, url: str, cassette: Cassette, session: Session, *,
                 timeout: float = 300.0, redact: Any = None) -> None:
        from urllib.parse import urlsplit

        from ..transports.http_upstream import UpstreamTarget

        target = UpstreamTarget(url)  # a URL that is not http(s): a usage error, now
        parts = urlsplit(url)
        self._endpoint = target.origin + parts.path + (f"?{parts.query}" if parts.query else "")
        self._authorization = target.authorization  # from user:password@ in the URL
        self.url = target.url
        """The URL as shown: credentials in it replaced."""
        self.cassette = cassette
        self.session = session
        self.timeout = timeout
        self.redact = redact
        self._http = StreamableHTTPClient(
            self._endpoint, timeout=timeout,
            headers={"authorization": self._authorization.decode()}
            if self._authorization is not None else None)
        self._starting = asyncio.Lock()
        self._started = False
        self._ids = itertools.count(1)
        self._exchanges = itertools.count(1)
        self._live_ids: dict[tuple[str, str], int] = {}  # (client label, client id) -> live id
        self._writer: SessionWriter | None = None
        self._inflight: list[tuple[AsyncPlayback, str]] = []  # forwarded requests in progress
        self._listener: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def client(self, label: str) -> _ClientLive:
        """The fallback one replay client uses (``label`` tells the clients apart)."""
        return _ClientLive(self, label)

    async def aclose(self) -> None:
        for task in [*self._tasks, *([self._listener] if self._listener else [])]:
            task.cancel()
        for task in [*self._tasks, *([self._listener] if self._listener else [])]:
            try:
                await task
            except BaseException:  # noqa: BLE001 - cancelled, or failed: it is over either way
                pass
        await self._http.close()
        if self._writer is not None:
            self._writer.close(status=self.session.status)

    # --- for one client ---------------------------------------------------------------------

    async def forward(self, obj: dict[str, Any], engine: AsyncPlayback, label: str) -> None:
        await self._ensure_started()
        client_id = obj.get("id")
        related = wire.id_text(client_id)
        live_id = next(self._ids)
        self._live_ids[(label, related)] = live_id
        here = (engine, related)
        self._inflight.append(here)
        try:
            answer = await self._post({**obj, "id": live_id}, engine, related)
        finally:
            self._live_ids.pop((label, related), None)
            self._inflight.remove(here)
        if answer is None:
            raise ReplayError(f"the live server at {self.url} sent no answer to "
                              f"{obj.get('method')}")
        await engine.send(wire.dumps({**answer, "id": client_id}), related)

    async def client_message(self, obj: dict[str, Any], label: str) -> bool:
        """Pass a client's notification on once the live session is open (a cancellation
        names the live id); False: the replay handles it too."""
        if not self._started:
            return False
        if obj.get("method") == "notifications/cancelled":
            params = obj.get("params") or {}
            live_id = self._live_ids.get((label, wire.id_text(params.get("requestId"))))
            if live_id is None:
                return False
            obj = {**obj, "params": {**params, "requestId": live_id}}
        elif obj.get("method") in ("notifications/initialized", None):
            return False  # the live session was initialized on its own
        await self._notify(obj, record=True)
        return False

    # --- internals --------------------------------------------------------------------------

    async def _ensure_started(self) -> None:
        async with self._starting:
            if self._started:
                return
            await self._http.open()  # kept when a first try failed: the next one reuses it
            init = self.cassette.requests(self.session, "initialize")
            if init:
                try:
                    answer = await asyncio.wait_for(
                        self._post({**init[0].json, "id": f"mcprec-init-{next(self._ids)}"},
                                   None, None, record=False), INIT_TIMEOUT_S)
                except asyncio.TimeoutError:
                    raise ReplayError(f"the live server at {self.url} did not answer initialize "
                                      f"in {INIT_TIMEOUT_S:.0f} s") from None
                result = answer.get("result") if isinstance(answer, dict) else None
                if not isinstance(result, dict):
                    raise ReplayError(f"the live server at {self.url} refused initialize: "
                                      f"{wire.dumps(answer).decode()[:200]}")
                if isinstance(result.get("protocolVersion"), str):
                    self._http.protocol_version = result["protocolVersion"]
                await self._notify({"jsonrpc": "2.0", "method": "notifications/initialized"},
                                   record=False)
            self._writer = _append_writer(self.cassette, self.session, self.redact)
            self._started = True
            if self._http.session_id:  # a stateful server: its own messages come on the GET stream
                opened = asyncio.Event()
                self._listener = asyncio.get_running_loop().create_task(self._listen(opened))
                # open before the first forwarded request: what the server sends there with no
                # stream open is lost (the SDK server asks for sampling there)
                waiter = asyncio.ensure_future(opened.wait())
                await asyncio.wait({self._listener, waiter}, timeout=INIT_TIMEOUT_S,
                                   return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()

    async def _listen(self, opened: asyncio.Event) -> None:
        """The live session's GET stream, for as long as it lasts."""

        async def received(data: bytes, _how: dict[str, Any]) -> None:
            self._from_get(data)

        try:
            await self._http.listen(received, lambda _status: opened.set())
        except Exception:  # noqa: BLE001 - the stream ended; forwarded requests go on
            return

    def _from_get(self, data: bytes) -> None:
        """A message on the GET stream: to the client whose forwarded request is in progress
        (a request of the server's is answered by it), recorded as sent while handling it."""
        c = wire.classify(data)
        self._record(wire.SERVER_TO_CLIENT, data, {"stream": "get"}, AUTO)
        target = self._inflight[-1] if self._inflight else None
        if c.kind == wire.REQUEST:
            task = asyncio.get_running_loop().create_task(self._ask(c.obj, target))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        elif c.kind == wire.NOTIFICATION and target is not None:
            engine, related = target
            task = asyncio.get_running_loop().create_task(engine.send(data, related))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _ask(self, obj: dict[str, Any], target: tuple[AsyncPlayback, str] | None) -> None:
        """Have a client answer a request of the live server's, and send the answer back."""
        if target is None:  # no client is waiting on the server: nobody to ask
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": obj.get("id"), "error": {
                "code": -32601, "message": "mcprec replay: no client is waiting to answer this"}}
        else:
            engine, related = target
            answer = await engine.request_client(obj, related)
            reply = {**answer, "id": obj.get("id")}
        try:
            await self._notify(reply, record=True)
        except ReplayError:
            pass

    def _record(self, direction: str, raw: bytes, http: dict[str, Any],
                context: str | None = None) -> None:
        if self._writer is not None:
            self._writer.message(direction, raw, http=http, context=context)

    async def _notify(self, obj: dict[str, Any], *, record: bool) -> None:
        raw = wire.dumps(obj)
        exchange = next(self._exchanges)
        if record:
            self._record(wire.CLIENT_TO_SERVER, raw, {"exchange": exchange, "method": "POST"})
        try:  # a 202 with no body: nothing more to record
            await self._http.post(raw, _nothing)
        except HTTPClientError as e:
            raise ReplayError(f"the live server at {self.url} could not be reached: "
                              f"{e.reason}") from None

    async def _post(self, obj: dict[str, Any], engine: AsyncPlayback | None,
                    related: str | None, *, record: bool = True) -> dict[str, Any] | None:
        """POST a request; relay what comes back on its response; return its answer."""
        raw = wire.dumps(obj)
        rid = wire.id_text(obj.get("id"))
        exchange = next(self._exchanges)
        if record:
            self._record(wire.CLIENT_TO_SERVER, raw, {"exchange": exchange, "method": "POST"})
        answer: dict[str, Any] | None = None

        async def received(data: bytes, how: dict[str, Any]) -> None:
            nonlocal answer
            found = await self._from_server(data, {"exchange": exchange, **how}, rid, engine,
                                            related, record)
            answer = found if found is not None else answer

        try:
            reply = await self._http.post(raw, received)
        except HTTPClientError as e:
            raise ReplayError(f"the live server at {self.url} could not be reached: "
                              f"{e.reason}") from None
        if not reply.messages and reply.status >= 400:
            raise ReplayError(f"the live server at {self.url} answered {obj.get('method')} "
                              f"with HTTP {reply.status}")
        return answer

    async def _from_server(self, data: bytes, http: dict[str, Any], rid: str,
                           engine: AsyncPlayback | None, related: str | None,
                           record: bool) -> dict[str, Any] | None:
        """One message on a request's response: its answer (returned), or a notification or a
        request of the server's, relayed to the client."""
        c = wire.classify(data)
        if record:
            self._record(wire.SERVER_TO_CLIENT, data, http, rid)
        if c.kind in (wire.RESPONSE, wire.ERROR) and (c.rpc_id or "") == rid:
            return c.obj  # type: ignore[no-any-return]
        if engine is None:
            return None
        if c.kind == wire.NOTIFICATION:
            await engine.send(data, related)
        elif c.kind == wire.REQUEST:
            answer = await engine.request_client(c.obj, related)
            reply = {**answer, "id": c.obj.get("id")}
            await self._notify(reply, record=record)
        return None


class _ClientLive:
    """``LiveFallback`` for one replay client over a shared ``LiveHTTP``: closing it leaves the
    shared session open (the app closes that at the end)."""

    def __init__(self, shared: LiveHTTP, label: str) -> None:
        self.shared = shared
        self.label = label

    async def forward(self, obj: dict[str, Any], engine: AsyncPlayback) -> None:
        await self.shared.forward(obj, engine, self.label)

    async def client_message(self, obj: dict[str, Any]) -> bool:
        return await self.shared.client_message(obj, self.label)

    async def aclose(self) -> None:
        pass


async def _nothing(_data: bytes, _how: dict[str, Any]) -> None:
    """A notification's or an answer's POST: the server says nothing back on it."""
