"""The mock client: re-drive a real (new) server with a session's recorded client traffic.

Client messages are sent in recorded order, each once the responses the client had seen before
sending it (in the recording) have arrived from the new server, and once the live server sent the
message the recorded one came after (its cause, ``verify/order.py``): a cancel goes after the
live second progress notification. Values the server minted and the client sent back (task ids,
cursors, created ids) are sent as the live server minted them. Requests the new server makes of
the client (sampling, elicitation, roots, ping) are answered from the recording: the n-th request
of a method gets the recorded answer to the n-th recorded one, under the new server's id. The new
run is recorded as a session of its own, to be diffed against the original.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


from .. import _log, wire
from ..cassette import Cassette, Message, Session
from ..record.recorder import AUTO
from ..errors import ServerStartError
from ..transports.http_client import HTTPClientError, StreamableHTTPClient
from ..transports.stdio import end_process
from .order import Cause, ClientOrder, Places, at, describe, rewrite
from .pending import PendingRun

DEFAULT_TIMEOUT_S = 30.0
PATIENCE_FACTOR = 10
PATIENCE_S = 5.0
"""How long a client message waits for its cause from the live server: ``PATIENCE_FACTOR`` times
the recorded delay, at least ``PATIENCE_S`` more than it, at most the timeout. A slower server
(a loaded CI machine) still sends the cause in time; a server that no longer sends it is not
waited for the whole timeout."""


@dataclass
class DriveResult:
    sent: int = 0
    answered: int = 0
    timed_out: list[str] = field(default_factory=list)
    exit_code: int | None = None
    server_requests_unanswerable: list[str] = field(default_factory=list)
    gone: str | None = None
    """Why the server stopped answering before the recording's traffic was played (it exited,
    its connection was refused), or None."""
    stderr_tail: list[str] = field(default_factory=list)
    """The server's last stderr lines (stdio)."""
    hung: bool = False
    """The server did not answer the first request in time (it was then stopped)."""
    order: list[str] = field(default_factory=list)
    """When each client message with a cause was sent: after the live server's corresponding
    message, or at the recorded delay (the live server never sent it)."""
    minted: dict[str, str] = field(default_factory=dict)
    """Recorded minted value -> the live server's, for those the client sent back rewritten."""


class Driver:
    """Plays the client side of ``session`` against a server, recording to ``writer``.

    Transports implement ``_start``, ``_send`` and ``_stop``, and hand every message from the
    server to ``_from_server``.
    """

    def __init__(self, cassette: Cassette, session: Session, writer: PendingRun, *,
                 timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.cassette = cassette
        self.session = session
        self.writer = writer
        self.timeout = timeout
        self.result = DriveResult()
        self._answers: dict[str, asyncio.Future[dict[str, Any] | None]] = {}
        self._server_requests_seen: dict[str, int] = defaultdict(int)
        self._recorded_server_requests: dict[str, list[Message]] = {}
        self._answers_received: list[Any] = []
        self._gone: str | None = None
        self._gone_event = asyncio.Event()
        self._order: ClientOrder | None = None
        self._live_places = Places()
        self._seen: dict[Any, asyncio.Event] = {}
        self._sent_at: dict[int, float] = {}
        self._renamed: dict[str, str] = {}
        self._polls = 0
        self._last_sent: float | None = None
        self._seen_at: dict[Any, float] = {}

    def _lost(self, why: str) -> None:
        """The server cannot answer any more: every wait ends now, nothing more is sent."""
        if self._gone is None:
            self._gone = why
        self._gone_event.set()
        for fut in self._answers.values():
            if not fut.done():
                fut.set_result(None)

    async def _start(self) -> None:
        raise NotImplementedError

    async def _send(self, raw: bytes, recorded: Message | None = None) -> None:
        """Send ``raw`` (``recorded``: the recorded client message it plays, if one)."""
        raise NotImplementedError

    async def _stop(self) -> None:
        raise NotImplementedError

    async def run(self) -> DriveResult:
        messages = list(self.cassette.messages(self.session))
        self._order = order = ClientOrder(messages)
        by_seq = {m.seq: m for m in messages}
        recorded_answers = {m.reply_to: m for m in messages if m.direction == wire.SERVER_TO_CLIENT
                            and m.kind in (wire.RESPONSE, wire.ERROR) and m.reply_to is not None}
        for m in messages:
            if m.direction == wire.SERVER_TO_CLIENT and m.kind == wire.REQUEST and m.method:
                self._recorded_server_requests.setdefault(m.method, []).append(m)
        answered_before = _answers_seen_before(messages)
        answered = {m.reply_to for m in messages if m.direction == wire.SERVER_TO_CLIENT
                    and m.kind in (wire.RESPONSE, wire.ERROR)}
        expected = [m.rpc_id for m in messages if m.direction == wire.CLIENT_TO_SERVER
                    and m.kind == wire.REQUEST and m.seq in answered and m.rpc_id is not None]
        first = next((m for m in messages if m.direction == wire.CLIENT_TO_SERVER
                      and m.kind == wire.REQUEST and m.seq in answered), None)
        watchdog: asyncio.Task[None] | None = None
        await self._start()
        try:
            for m in messages:
                if m.direction != wire.CLIENT_TO_SERVER or m.kind in (wire.RESPONSE, wire.ERROR):
                    continue  # answers to the server's requests are sent as those arrive
                for rid in answered_before.get(m.seq, ()):
                    await self._wait_answer(rid)
                cause = order.causes.get(m.seq)
                if cause is not None and self._gone is None:
                    await self._after(m, cause, by_seq)
                raw = await self._minted_for(m) if m.seq in order.sends_back else m.raw
                if self._gone is not None:
                    break
                if m.kind == wire.REQUEST and m.rpc_id is not None:
                    self._answers.setdefault(m.rpc_id, asyncio.get_running_loop().create_future())
                self._sent_at[m.seq] = self._last_sent = asyncio.get_running_loop().time()
                await self._send(raw, m)
                self.result.sent += 1
                if m.method == "tasks/get" and m.rpc_id is not None \
                        and _task_status(recorded_answers.get(m.seq)) in TERMINAL:
                    await self._poll_task(m, raw)
                if m is first and m.rpc_id is not None:  # sent on as recorded meanwhile
                    watchdog = asyncio.get_running_loop().create_task(self._first_answer(m))
            for rid in expected:  # a request cancelled in the recording was never answered
                await self._wait_answer(rid)
            if watchdog is not None:
                await watchdog
        finally:
            if watchdog is not None and not watchdog.done():
                watchdog.cancel()
            await self._stop()
        self.result.gone = self._gone
        self.result.minted = {k: v for k, v in self._renamed.items()}
        return self.result

    def _event(self, place: Any) -> asyncio.Event:
        ev = self._seen.get(place)
        if ev is None:
            ev = self._seen[place] = asyncio.Event()
        return ev

    async def _after(self, m: Message, cause: Cause, by_seq: dict[int, Message]) -> None:
        """Wait for the live server's message at the place of ``m``'s cause (then as long as the
        recorded client took to react to it); when it never
        comes (the request it was sent for is answered, the server is gone, or the patience
        passed: ten times the recorded delay, at least 5 s more than it, at most ``--timeout``),
        send ``m`` at the recorded delay from that request (or at once, when that is past)."""
        loop = asyncio.get_running_loop()
        seen = self._event(cause.place)
        what = f"{m.method or m.kind}"
        request = by_seq.get(cause.request) if cause.request is not None else None
        if request is not None and request.rpc_id is not None:
            what += f" (of id {request.rpc_id})" if m.method == "notifications/cancelled" else ""
        if not seen.is_set():
            start = (self._sent_at.get(cause.request, loop.time()) if cause.request is not None
                     else self._last_sent or loop.time())
            waits: set[asyncio.Future[Any]] = {loop.create_task(seen.wait()),
                                               loop.create_task(self._gone_event.wait())}
            answer = (self._answers.get(request.rpc_id) if request is not None
                      and request.rpc_id is not None else None)
            if answer is not None and not answer.done():
                waits.add(answer)
            patience = min(self.timeout, max(PATIENCE_FACTOR * cause.delay_s,
                                             cause.delay_s + PATIENCE_S))
            try:
                await asyncio.wait(waits, timeout=max(0.0, start + patience - loop.time()),
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    if w is not answer:
                        w.cancel()
            if not seen.is_set():
                await asyncio.sleep(max(0.0, start + cause.delay_s - loop.time()))
                self.result.order.append(
                    f"{what} sent {cause.delay_s * 1000:.0f} ms after its request, as recorded: "
                    f"the live server never sent {describe(cause.place)}")
                return
        seen_at = self._seen_at.get(cause.place, loop.time())
        await asyncio.sleep(max(0.0, seen_at + cause.reaction_s - loop.time()))
        self.result.order.append(f"{what} sent after the live server's "
                                 f"{describe(cause.place)}, as recorded")

    async def _poll_task(self, m: Message, raw: bytes) -> None:
        """The recorded client polled this task until it ended: poll the live task (as
        ``tasks/get`` with ids of verify's own) until it ends too, within the timeout, however
        many polls that takes."""
        assert m.rpc_id is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        rid = m.rpc_id
        request = wire.loads(raw)
        while self._gone is None:
            await self._wait_answer(rid)
            fut = self._answers.get(rid)
            answer = fut.result() if fut is not None and fut.done() else None
            status = _task_status(answer)
            if status is None or status in TERMINAL or rid in self.result.timed_out:
                return
            result = answer.get("result") if isinstance(answer, dict) else None
            interval = result.get("pollInterval") if isinstance(result, dict) else None
            wait = min(1.0, max(0.05, interval / 1000 if isinstance(interval, (int, float))
                                else 0.2))
            if loop.time() + wait > deadline:
                self.result.timed_out.append(rid)
                return
            await asyncio.sleep(wait)
            self._polls += 1
            poll_id = f"mcprec-verify-poll-{self._polls}"
            rid = wire.id_text(poll_id)
            self._answers[rid] = loop.create_future()
            await self._send(wire.dumps({**request, "id": poll_id}), m)
            self.result.sent += 1

    async def _minted_for(self, m: Message) -> bytes:
        """``m`` with the minted values it sends back as the live server minted them (waiting,
        within the timeout, for the live message that mints them)."""
        assert self._order is not None
        values = self._order.sends_back.get(m.seq, [])
        for value in values:
            place = self._order.minted[value][0]
            seen = self._event(place)
            if not seen.is_set() and self._gone is None and not (
                    place[0] == "answer" and place[1] in self.result.timed_out):
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(seen.wait(), self.timeout)
        renamed = {v: self._renamed[v] for v in values if v in self._renamed}
        if not renamed:
            return m.raw
        return wire.dumps(rewrite(m.json, renamed))

    def _live_place(self, c: wire.Classified, raw: bytes) -> None:
        """Note the place of a live server message, and the values it minted where the recorded
        one minted values the client sent back."""
        place = self._live_places.place(c.kind, c.method, c.rpc_id, c.obj)
        if place is None or self._order is None:
            return
        for value in self._order.by_place.get(place, ()):
            live = self._order.live_value(value, at(c.obj, self._order.minted[value][1]), raw)
            if live is not None:
                self._renamed[value] = live
        self._seen_at.setdefault(place, asyncio.get_running_loop().time())
        self._event(place).set()

    async def _first_answer(self, m: Message) -> None:
        """A server that does not answer the session's first request (``initialize``, or a
        stateless session's first) within the timeout is hung: nothing more is sent."""
        assert m.rpc_id is not None
        await self._wait_answer(m.rpc_id)
        if m.rpc_id in self.result.timed_out:
            self.result.hung = True
            self._lost(f"did not answer {m.method or 'the first request'} within "
                       f"{self.timeout:g} s")

    async def _wait_answer(self, rid: str) -> None:
        fut = self._answers.get(rid)
        if fut is None or rid in self.result.timed_out or self._gone is not None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(fut), self.timeout)
        except asyncio.TimeoutError:
            if rid not in self.result.timed_out:
                self.result.timed_out.append(rid)

    async def _from_server(self, raw: bytes, http: dict[str, Any] | None = None,
                           context: str | None = AUTO) -> None:
        """Record one message from the server; resolve answers, answer its requests."""
        self.writer.message(wire.SERVER_TO_CLIENT, raw, http=http, context=context)
        c = wire.classify(raw)
        self._live_place(c, raw)
        if c.kind in (wire.RESPONSE, wire.ERROR) and c.rpc_id is not None:
            fut = self._answers.get(c.rpc_id)
            if fut is not None and not fut.done():
                fut.set_result(c.obj)
                self.result.answered += 1
                self._answers_received.append(c.obj)
        elif c.kind == wire.REQUEST and c.method is not None:
            await self._answer_server(c)

    async def _answer_server(self, c: wire.Classified) -> None:
        method = c.method or ""
        n = self._server_requests_seen[method]
        self._server_requests_seen[method] += 1
        recorded = self._recorded_server_requests.get(method, [])
        answer = self.cassette.answer(self.session, recorded[n].seq) if n < len(recorded) else None
        rid = c.obj.get("id")
        if answer is not None and isinstance(answer.json, dict):
            reply = {**answer.json, "id": rid}
            if self._order is not None and answer.seq in self._order.sends_back:
                renamed = {v: self._renamed[v] for v in self._order.sends_back[answer.seq]
                           if v in self._renamed}
                reply = rewrite(reply, renamed) if renamed else reply
        elif method == "ping":
            reply = {"jsonrpc": "2.0", "id": rid, "result": {}}
        else:
            self.result.server_requests_unanswerable.append(method)
            reply = {"jsonrpc": "2.0", "id": rid, "error": {
                "code": -32601, "message": f"mcprec verify: the recording has no answer to "
                                           f"{method} #{n + 1}"}}
        await self._send(wire.dumps(reply))

class StdioDriver(Driver):
    """The mock client over stdio: spawns the server ``argv``."""

    def __init__(self, cassette: Cassette, session: Session, argv: Sequence[str],
                 writer: PendingRun, *, timeout: float = DEFAULT_TIMEOUT_S,
                 env: dict[str, str] | None = None) -> None:
        super().__init__(cassette, session, writer, timeout=timeout)
        self.argv = list(argv)
        self.env = env
        self._proc: asyncio.subprocess.Process | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False

    async def _start(self) -> None:
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=self.env, limit=1 << 30,
            )
        except OSError as e:
            raise ServerStartError(f"cannot start server {self.argv[0]}: {e.strerror or e}") from e
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._read()), loop.create_task(self._read_stderr())]

    async def _send(self, raw: bytes, recorded: Message | None = None) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self.writer.message(wire.CLIENT_TO_SERVER, raw)
        try:
            self._proc.stdin.write(raw + b"\n")
            await self._proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        while line := await self._proc.stdout.readline():
            await self._from_server(line[:-1] if line.endswith(b"\n") else line)
        if not self._stopping:  # the server closed its output on its own: it is gone
            self._lost("closed its stdout (exited?) before answering the recording's requests")

    async def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        while line := await self._proc.stderr.readline():
            text = line.rstrip(b"\r\n")
            self.writer.stderr_line(text)
            self.result.stderr_tail = [*self.result.stderr_tail[-2:],
                                       text.decode("utf-8", "replace")]

    async def _stop(self) -> None:
        proc = self._proc
        assert proc is not None
        self._stopping = True
        await end_process(proc, grace=1.0 if self._gone else 5.0)
        for task in self._tasks:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, 2.0)
        self.result.exit_code = proc.returncode


class HTTPDriver(Driver):
    """The mock client over Streamable HTTP: POSTs each message to ``url``."""

    def __init__(self, cassette: Cassette, session: Session, url: str, writer: PendingRun,
                 *, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        super().__init__(cassette, session, writer, timeout=timeout)
        self.url = url
        self._http = StreamableHTTPClient(url, timeout=timeout)
        self._posts: set[asyncio.Task[None]] = set()
        self._get: asyncio.Task[None] | None = None
        self._exchanges = 0
        self._initialized_follows = any(
            m.method == "notifications/initialized" and m.direction == wire.CLIENT_TO_SERVER
            for m in cassette.messages(session))

    async def _start(self) -> None:
        await self._http.open()

    async def _send(self, raw: bytes, recorded: Message | None = None) -> None:
        self._exchanges += 1
        exchange = self._exchanges
        headers = protocol_headers(recorded)
        if headers and recorded is not None and raw != recorded.raw and self._renamed:
            # Mcp-Name holds a URI or a name: with the minted values the body now holds
            headers = {k: rewrite(v, self._renamed) for k, v in headers.items()}
        self.writer.message(wire.CLIENT_TO_SERVER, raw, http={
            "exchange": exchange, "method": "POST", **({"headers": headers} if headers else {})})
        c = wire.classify(raw)
        task = asyncio.get_running_loop().create_task(self._post(raw, c, exchange, headers))
        self._posts.add(task)
        task.add_done_callback(self._posts.discard)
        if c.method == "initialize" or c.kind != wire.REQUEST:
            # initialize: the session id and protocol version come with its answer. A
            # notification or an answer is accepted at once (202): delivered before what the
            # client sent after it, as a client's own writes are (initialized before tools/list)
            await task

    async def _post(self, raw: bytes, c: wire.Classified, exchange: int,
                    headers: dict[str, str] | None = None) -> None:
        rid = c.rpc_id if c.kind == wire.REQUEST else None

        async def received(data: bytes, how: dict[str, Any]) -> None:
            await self._from_server(data, {"exchange": exchange, **how}, context=rid)

        try:
            reply = await self._http.post(raw, received, headers, answer_for=rid)
        except HTTPClientError as e:
            if c.kind == wire.REQUEST:  # refused, reset, timed out: no answer will come
                self._lost(f"could not be reached: {e.reason}")
            else:
                _log.warning("verify", f"verify: {e}")
            return
        if c.method == "initialize" and reply.status == 200:
            self._after_initialize()
        elif c.method == "notifications/initialized":
            self._listen()

    def _after_initialize(self) -> None:
        for m in reversed(self._answers_received):
            result = m.get("result") if isinstance(m, dict) else None
            if isinstance(result, dict) and "protocolVersion" in result:
                self._http.protocol_version = str(result["protocolVersion"])
                break
        if not self._initialized_follows:
            self._listen()

    def _listen(self) -> None:
        """Open the session's GET stream when the SDK clients do: once ``initialized`` is
        accepted (what the server sends on its own before that is lost, live and here alike),
        or after ``initialize`` when the recorded client never sent ``initialized``."""
        if self._http.session_id and self._get is None:
            self._get = asyncio.get_running_loop().create_task(self._http.listen(
                lambda data, how: self._from_server(data, how, context=None)))

    async def _stop(self) -> None:
        if self._posts:
            await asyncio.wait(set(self._posts), timeout=self.timeout)
        if self._get is not None:
            self._get.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._get
        await self._http.close()


PROTOCOL_HEADERS = ("mcp-protocol-version", "mcp-method", "mcp-name")
"""The request headers a revision's server reads (2026-07-28: ``Mcp-Method`` and ``Mcp-Name`` on
every request, ``MCP-Protocol-Version`` without an ``initialize``): sent as recorded."""


def protocol_headers(recorded: Message | None) -> dict[str, str]:
    """The protocol headers the recorded client sent with ``recorded`` (over HTTP)."""
    http = recorded.http if recorded is not None else None
    sent = http.get("headers") if isinstance(http, dict) else None
    if not isinstance(sent, dict):
        return {}
    return {k.lower(): str(v) for k, v in sent.items() if k.lower() in PROTOCOL_HEADERS}


TERMINAL = frozenset({"completed", "failed", "cancelled"})
"""A task's terminal statuses (2025-11-25)."""


def _task_status(answer: Any) -> str | None:
    """The status in a ``tasks/get`` answer (a ``Message`` or its JSON), or None."""
    obj = answer.json if isinstance(answer, Message) else answer
    result = obj.get("result") if isinstance(obj, dict) else None
    status = result.get("status") if isinstance(result, dict) else None
    return status if isinstance(status, str) else None


def _answers_seen_before(messages: list[Message]) -> dict[int, list[str]]:
    """For each client message (by seq): ids of the client's requests whose answers the client
    had received before it sent that message, and had not yet waited for."""
    out: dict[int, list[str]] = {}
    request_id: dict[int, str] = {}
    arrived: list[str] = []
    for m in messages:
        if m.direction == wire.CLIENT_TO_SERVER:
            if m.kind == wire.REQUEST and m.rpc_id is not None:
                request_id[m.seq] = m.rpc_id
            if arrived:
                out[m.seq] = arrived
                arrived = []
        elif m.kind in (wire.RESPONSE, wire.ERROR) and m.reply_to in request_id:
            arrived.append(request_id[m.reply_to])
    return out


def drive_stdio(cassette: Cassette, session: Session, argv: Sequence[str], writer: PendingRun,
                *, timeout: float = DEFAULT_TIMEOUT_S) -> DriveResult:
    """Run the mock client over stdio to completion (blocking)."""
    return asyncio.run(StdioDriver(cassette, session, argv, writer, timeout=timeout).run())


def drive_http(cassette: Cassette, session: Session, url: str, writer: PendingRun,
               *, timeout: float = DEFAULT_TIMEOUT_S) -> DriveResult:
    """Run the mock client over Streamable HTTP to completion (blocking)."""
    return asyncio.run(HTTPDriver(cassette, session, url, writer, timeout=timeout).run())
