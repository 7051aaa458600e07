"""The replay engine: one recorded session played as a server to one client, over any transport.

The transport hands every client message to ``receive()`` and sends what the engine gives to
``send``. For each request the engine finds the recorded one (see ``matching``; with several
recorded sessions, ``choose`` narrows them to the one this client's traffic matches), then plays
what the server did while handling it, in recorded order: notifications (progress tokens
rewritten to the client's), server-to-client requests (fresh ids), and the response (with the
client's id). A message the recording shows waiting for a client message (``waits_for``: a
cancellation, the answer to a server-to-client request) waits for the same message now, and
nothing else waits. Messages the server sent on its own are played after the client message
they followed in the recording.

A request the recording never answered ends as the recording did: a server that exited while
handling it exits now (``ended``, with its exit code), a request the client cancelled stays
unanswered once cancelled, and anything else gets a JSON-RPC error at once that says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


from .. import wire
from ..cassette import Cassette, Message, Session
from ..errors import McprecError, NoMatchError, ReplayError
from ..matching import Match, MatchOptions
from ..redact import Redactor, default_redactor
from .choose import SessionChoice

Send = Callable[[bytes, "str | None"], Awaitable[None]]
"""``send(message_bytes, related)``: deliver one message to the client. ``related`` is the id
text of the client request it belongs to (HTTP routes it onto that request's stream), or None.
An empty message means: end that request's stream abruptly, as the recorded upstream did."""

NO_MATCH_CODE = -32000
UNANSWERED_CODE = -32001
INTERNAL_ERROR = -32603
CANCELLED = "notifications/cancelled"
# 2026-07-28: events of subscriptions/listen carry the listen request's id here
_SUBSCRIPTION_KEY = "io.modelcontextprotocol/subscriptionId"
# Answered with an empty result when nothing was recorded for them: their result carries nothing.
EMPTY_RESULT_METHODS = frozenset(
    {"ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)
# How long a message waits for a client notification it waited for in the recording (a
# cancellation) before it is played anyway: twice the recorded wait, within these bounds.
CAUSE_WAIT_MIN_S = 1.0
CAUSE_WAIT_MAX_S = 30.0


class LiveFallback(Protocol):
    """Where unmatched requests go in ``new_episodes`` mode (a real server, started lazily)."""

    async def forward(self, obj: dict[str, Any], engine: ReplaySession) -> None: ...

    async def client_message(self, obj: dict[str, Any]) -> bool: ...

    async def aclose(self) -> None: ...


@dataclass
class ReplayStats:
    requests: int = 0
    matched: int = 0
    repeated: int = 0
    unmatched: list[dict[str, Any]] = field(default_factory=list)
    unanswered: list[dict[str, Any]] = field(default_factory=list)
    """Matched requests the recording has no usable answer for (the server exited, the
    session was cut off, the answer was recorded truncated), with the reason."""
    forwarded: int = 0


def _dumps(obj: Any) -> bytes:
    return wire.dumps(obj)


def error_response(rid: Any, code: int, message: str, data: Any = None) -> bytes:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return _dumps({"jsonrpc": "2.0", "id": rid, "error": err})


class _Play:
    """One replayed request in progress: what it may still wait for."""

    __slots__ = ("key", "request", "answers", "cancelled", "notified", "expects_cancel")

    def __init__(self, key: str, request: Message) -> None:
        self.key = key
        self.request = request
        self.answers: dict[int, asyncio.Event] = {}  # recorded client answer seq -> arrived
        self.cancelled = asyncio.Event()
        self.notified: dict[str, asyncio.Event] = {}  # client notification method -> arrived
        self.expects_cancel = False

    def answer_event(self, seq: int) -> asyncio.Event:
        ev = self.answers.get(seq)
        if ev is None:
            ev = self.answers[seq] = asyncio.Event()
        return ev

    def notified_event(self, method: str) -> asyncio.Event:
        ev = self.notified.get(method)
        if ev is None:
            ev = self.notified[method] = asyncio.Event()
        return ev


class ReplaySession:
    """Plays one recorded session to one client.

    ``session`` is the recorded session, or several: then each client gets the one its
    traffic matches (``choose.SessionChoice``), the first given among equals.
    """

    def __init__(
        self,
        cassette: Cassette,
        session: Session | Sequence[Session],
        send: Send,
        *,
        options: MatchOptions | None = None,
        timing: float | None = None,
        live: LiveFallback | None = None,
        log: Callable[[str], None] | None = None,
        redact: Redactor | None = None,
        server_stderr: Callable[[str], None] | None = None,
        label: str = "",
    ) -> None:
        self.cassette = cassette
        sessions = [session] if isinstance(session, Session) else list(session)
        self.choice = SessionChoice(cassette, sessions, options)
        self.timing = timing
        self.live = live
        self.stats = ReplayStats()
        # the recording was redacted: redact incoming requests alike, so that they still match
        self._redactor = redact if redact is not None else default_redactor()
        self._send = send
        self._log = log or _stderr
        self._server_stderr = server_stderr
        self._label = label
        self._announced: Session | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._plays: dict[str, _Play] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._next_id = 0
        self._notes: dict[tuple[int, str], list[Message]] = {}
        self._notes_next: dict[str, int] = {}
        self.modes: dict[str, str] = {}
        """Per client request id text: how the recorded answer came over HTTP (json or sse)."""
        self.statuses: dict[str, int] = {}
        """Per client request id text: an HTTP status the recorded answer came with (a failure
        the recording proxy answered for an unreachable upstream)."""
        self._followers_cache: dict[tuple[int, int], list[Message]] = {}
        self._any_followers: dict[int, bool] = {}
        self._messages: dict[tuple[int, int], Message | None] = {}
        self._stderr_lines: dict[int, list[Any]] = {}
        self._stderr_next: dict[int, int] = {}
        self._unplayed: list[Message] | None = None
        self.client_answers: list[tuple[Message, dict[str, Any]]] = []
        self.ended = asyncio.Event()
        """Set when the recording ends here: the server exited while handling a request. The
        transport then closes the connection (stdio: exits with ``exit_code``)."""
        self.exit_code: int | None = None

    @property
    def session(self) -> Session:
        """The recorded session being played (with several candidates: the current choice)."""
        return self.choice.session

    @property
    def matcher(self) -> Any:
        return self.choice.matcher

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Play what the server sent before the client said anything (banners, early notices)."""
        self._spawn(self._play_followers(self._followers(-1), None))

    async def aclose(self) -> None:
        tasks = [*self._tasks.values(), *self._background]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for fut in self._waiting.values():
            fut.cancel()
        if self.live is not None:
            await self.live.aclose()

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until every answer in progress has been sent."""
        pending = [*self._tasks.values(), *self._background]
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    # --- incoming ---------------------------------------------------------------------------

    async def receive(self, raw: bytes) -> None:
        """Handle one message from the client."""
        if self.ended.is_set():
            return  # the recorded server has exited: nobody is listening
        c = wire.classify(raw)
        if c.kind == wire.REQUEST:
            redacted = self._redactor.redact(raw)
            match_obj = c.obj if redacted == raw else wire.classify(redacted).obj
            if self.timing is None and self.live is None:
                # answered inline: a task per request only when the answer must wait
                await self._answer(c.obj, wire.id_text(c.obj.get("id")), match_obj, inline=True)
            else:
                self._start_request(c.obj, match_obj)
        elif c.kind == wire.NOTIFICATION:
            await self._notification(c.obj)
        elif c.kind in (wire.RESPONSE, wire.ERROR):
            await self._client_answer(c)
        elif c.kind == wire.BATCH:
            for item in c.obj:
                await self.receive(_dumps(item))
        elif not raw.strip():
            return
        elif c.obj is None:
            await self._send(error_response(None, -32700, "Parse error: not JSON"), None)
        else:
            await self._send(error_response(None, -32600, "Invalid Request"), None)

    def _start_request(self, obj: dict[str, Any], match_obj: dict[str, Any]) -> None:
        key = wire.id_text(obj.get("id"))
        self._track(key, self._answer(obj, key, match_obj))

    def _track(self, key: str, coro: Any) -> None:
        """Run an answer as a task the client can cancel (notifications/cancelled)."""
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._tasks[key] = task

        def forget(t: asyncio.Task[None]) -> None:
            if self._tasks.get(key) is t:
                del self._tasks[key]

        task.add_done_callback(forget)

    async def _answer(self, obj: dict[str, Any], key: str, match_obj: dict[str, Any],
                      inline: bool = False) -> None:
        started = time.monotonic()
        self.stats.requests += 1
        rid = obj.get("id")
        try:
            found = self.choice.match(match_obj)
        except NoMatchError as e:
            await self._unmatched(obj, e)
            return
        except Exception as e:  # noqa: BLE001 - e.g. a custom matcher raised: answer, not hang
            self.stats.unmatched.append({"method": obj.get("method"), "id": rid})
            self._log(f"mcprec: matching request id={wire.id_text(rid)} {obj.get('method')} "
                      f"failed: {e!r}")
            await self._send(error_response(rid, INTERNAL_ERROR,
                                            f"mcprec replay: matching failed: {e!r}"), key)
            return
        self._announce()
        self.stats.matched += 1
        if found.repeated:
            self.stats.repeated += 1
        if inline and self._must_wait(found.request.seq):
            self._track(key, self._play_request(found, rid, key, obj, started))
            return
        await self._play_request(found, rid, key, obj, started)

    def _must_wait(self, seq: int) -> bool:
        """Whether answering a request involves waiting (for the client, or for a cause)."""
        script = self._handling(seq)
        if not script or script[-1].reply_to != seq:
            return True  # unanswered: the ending may wait for a cancellation
        return any(m.kind == wire.REQUEST or m.waits_for is not None for m in script)

    def _announce(self) -> None:
        """Say which recorded session this client got, when there was a choice to make."""
        s = self.session
        if self.choice.total < 2 or self._announced is s:
            return
        who = f" to client {self._label}" if self._label else ""
        if self._announced is None:
            self._log(f"mcprec: replaying session {s.name!r}{who} (chosen among "
                      f"{self.choice.total} recorded sessions by the client's traffic; "
                      f"{self.choice.remaining} match so far)")
        else:
            self._log(f"mcprec: the client's requests match session {s.name!r} now, not "
                      f"{self._announced.name!r}; replaying it{who}")
        self._announced = s

    async def _play_request(self, found: Match, rid: Any, key: str, obj: dict[str, Any],
                            started: float) -> None:
        req = found.request
        token = _progress_token(obj)
        script = self._handling(req.seq)
        answered = bool(script) and script[-1].reply_to == req.seq
        if script and script[-1].http:
            self.modes[key] = script[-1].http.get("content_type") or ""
            status = script[-1].http.get("status")
            if script[-1].http.get("synthetic") and isinstance(status, int):
                self.statuses[key] = status
        elif len(script) > 1:
            self.modes[key] = "sse"
        play = _Play(key, req)
        causes = {m.waits_for for m in script if m.waits_for is not None}
        play.expects_cancel = any(
            (c := self._message(seq)) is not None and c.method == CANCELLED for seq in causes)
        if not answered and self._recorded_cancel(req) is not None:
            play.expects_cancel = True
        self._plays[key] = play
        try:
            await self._play(script, (started, req.t_ns), rid, token, related=key, play=play)
            if not answered:
                await self._unanswered(play, obj, key)
        finally:
            if self._plays.get(key) is play:
                del self._plays[key]
        # what the server then sent on its own (e.g. list_changed) comes after the answer
        followers = self._followers(req.seq)
        if followers and not found.repeated:
            self._spawn(self._play_followers(followers, (started, req.t_ns)))

    # --- requests the recording did not answer ---------------------------------------------

    async def _unanswered(self, play: _Play, obj: dict[str, Any], key: str) -> None:
        """End a request as the recording ended it (see the module's docstring)."""
        rid = obj.get("id")
        method = obj.get("method")
        req = play.request
        if method == "ping":  # the documented answer; nothing else could have been recorded
            await self._send(_dumps({"jsonrpc": "2.0", "id": rid, "result": {}}), key)
            return
        cancel = self._recorded_cancel(req)
        if cancel is not None:
            if await self._wait_notification(play, cancel):
                return  # cancelled now as then: no answer, as the spec asks
            reason = "the client cancelled it in the recording, and has not now"
        else:
            s = self.session
            exit_code = s.exit_code if s.transport == "stdio" else None
            if exit_code is not None:
                self._unanswered_note(obj, f"the server exited with {exit_code}")
                self._end(exit_code)
                return
            if self._dropped_stream(req):
                self._unanswered_note(obj, "the upstream dropped the stream")
                await self._send(b"", key)
                return
            reason = ("the session was cut off (recording incomplete)"
                      if s.status != "complete" else "the session ended before the server "
                      "answered it")
        self._unanswered_note(obj, reason)
        await self._send(error_response(
            rid, UNANSWERED_CODE,
            f"mcprec replay: no response was recorded for this request: {reason}",
            {"mcprec": "unanswered", "reason": reason, "session": self.session.name}), key)

    def _unanswered_note(self, obj: dict[str, Any], reason: str) -> None:
        self.stats.matched -= 1
        self.stats.unanswered.append({"method": obj.get("method"), "id": obj.get("id"),
                                      "reason": reason})
        self._log(f"mcprec: request id={wire.id_text(obj.get('id'))} {obj.get('method')} has no "
                  f"recorded response in session {self.session.name!r}: {reason}")

    def _end(self, exit_code: int | None) -> None:
        if self.ended.is_set():
            return
        self._flush_stderr(None)
        self.exit_code = exit_code
        self.ended.set()

    def _recorded_cancel(self, req: Message) -> Message | None:
        """The client's recorded cancellation of ``req``, if it cancelled it."""
        for note in self._client_notes(CANCELLED):
            if note.seq > req.seq and isinstance(note.json, dict):
                params = note.json.get("params")
                if isinstance(params, dict) and wire.id_text(params.get("requestId")) == (
                        req.rpc_id):
                    return note
        return None

    def _dropped_stream(self, req: Message) -> bool:
        """Whether the recording proxy saw the upstream drop this request's stream."""
        if self.session.transport == "stdio":
            return False
        for m in self._followers_after(req.seq):
            if m.http is not None and m.http.get("synthetic") and "dropped" in str(
                    m.http.get("error", "")):
                return True
        return False

    def _followers_after(self, seq: int) -> list[Message]:
        out: list[Message] = []
        nxt = seq
        # the drop is noted as a message on its own, after whatever client message came last
        for m in self.cassette.messages(self.session, after_seq=seq):
            if m.direction == wire.CLIENT_TO_SERVER:
                nxt = m.seq
            elif m.follows is not None and m.follows >= nxt:
                out.append(m)
        return out

    # --- causes -----------------------------------------------------------------------------

    async def _wait_cause(self, play: _Play, m: Message) -> None:
        """Hold ``m`` until the client message it waited for in the recording has come."""
        assert m.waits_for is not None
        cause = self._message(m.waits_for)
        if cause is None or cause.direction != wire.CLIENT_TO_SERVER:
            return
        if cause.kind in (wire.RESPONSE, wire.ERROR):
            await play.answer_event(cause.seq).wait()  # the server waited for it, unbounded
        elif cause.kind == wire.NOTIFICATION:
            await self._wait_notification(play, cause)

    async def _wait_notification(self, play: _Play, cause: Message) -> bool:
        """Wait for the client to send what it sent then (a cancellation, a list change), but
        not forever: a client that does not send it is waiting for the answer. True if sent."""
        ev = play.cancelled if cause.method == CANCELLED else play.notified_event(
            cause.method or "")
        recorded_wait = max(0, cause.t_ns - play.request.t_ns) / 1e9
        limit = min(CAUSE_WAIT_MAX_S, max(CAUSE_WAIT_MIN_S, 2 * recorded_wait))
        try:
            await asyncio.wait_for(ev.wait(), limit)
            return True
        except asyncio.TimeoutError:
            self._log(f"mcprec: request id={play.key} {play.request.method}: the recording "
                      f"shows the client sending {cause.method} here; it has not within "
                      f"{limit:.1f} s, so replay goes on")
            return False

    # --- unmatched --------------------------------------------------------------------------

    async def _unmatched(self, obj: dict[str, Any], e: NoMatchError) -> None:
        method = obj.get("method")
        rid = obj.get("id")
        if self.live is not None:
            self.stats.forwarded += 1
            try:
                await self.live.forward(obj, self)
            except (McprecError, OSError) as failure:  # the real server did not start, or died
                self.stats.unmatched.append({"method": method, "id": rid})
                self._log(f"mcprec: {e}; the real server could not answer it: {failure}")
                await self._send(
                    error_response(rid, NO_MATCH_CODE, f"mcprec replay: {e}; the real server "
                                   f"could not answer it: {failure}"),
                    wire.id_text(rid),
                )
            return
        if method in EMPTY_RESULT_METHODS:
            await self._send(_dumps({"jsonrpc": "2.0", "id": rid, "result": {}}), wire.id_text(rid))
            return
        synthesized = self._synthesize(obj)
        if synthesized is not None:
            await self._send(synthesized, wire.id_text(rid))
            return
        self.stats.unmatched.append({"method": method, "id": rid})
        self._log(f"mcprec: {e.report}")
        await self._send(
            error_response(rid, NO_MATCH_CODE, f"mcprec replay: {e}",
                           {"mcprec": "no_match", "report": e.report}),
            wire.id_text(rid),
        )

    def _synthesize(self, obj: dict[str, Any]) -> bytes | None:
        """Bridge the protocol eras when the recording is of the other one.

        A stateless (2026-07-28) client probing with ``server/discover`` a recording of an
        ``initialize``-era server gets -32601 at once, as that server answered, so it falls back
        to ``initialize``. An ``initialize``-era client replaying a stateless recording gets an
        ``initialize`` result built from the recorded ``server/discover`` result.
        """
        method = obj.get("method")
        rid = obj.get("id")
        if method == "server/discover":
            return error_response(rid, -32601, "Method not found", "server/discover")
        if method != "initialize":
            return None
        recorded = self.cassette.requests(self.session, "server/discover")
        answer = self.cassette.answer(self.session, recorded[0].seq) if recorded else None
        recorded_answer = answer.json if answer is not None else None
        result = recorded_answer.get("result") if isinstance(recorded_answer, dict) else None
        if not isinstance(result, dict):
            return None
        out = {k: v for k, v in result.items()
               if k not in ("supportedVersions", "resultType", "ttlMs", "cacheScope", "_meta")}
        meta: dict[str, Any] = result["_meta"] if isinstance(result.get("_meta"), dict) else {}
        info = meta.get("io.modelcontextprotocol/serverInfo") or result.get("serverInfo")
        if info is not None:
            out["serverInfo"] = info
        out.setdefault("capabilities", {})
        # the client speaks a session-based revision: answer in the one it offered
        params: dict[str, Any] = obj["params"] if isinstance(obj.get("params"), dict) else {}
        versions = result.get("supportedVersions") or []
        out["protocolVersion"] = params.get("protocolVersion") or (
            versions[0] if versions else "2025-11-25")
        return _dumps({"jsonrpc": "2.0", "id": rid, "result": out})

    # --- notifications and answers from the client ------------------------------------------

    async def _notification(self, obj: dict[str, Any]) -> None:
        method = obj.get("method")
        if method == CANCELLED:
            params = obj.get("params") or {}
            key = wire.id_text(params.get("requestId")) if isinstance(params, dict) else ""
            play = self._plays.get(key)
            if play is not None and play.expects_cancel:
                play.cancelled.set()  # the recording goes on after the cancellation
            else:
                task = self._tasks.get(key)
                if task is not None:
                    task.cancel()
        elif isinstance(method, str):
            for play in self._plays.values():
                play.notified_event(method).set()
        if self.live is not None and await self.live.client_message(obj):
            return
        recorded = self._next_recorded_notification(str(method))
        if recorded is not None:
            followers = self._followers(recorded.seq)
            if followers:
                self._spawn(self._play_followers(followers, (time.monotonic(), recorded.t_ns)))

    def _handling(self, seq: int) -> list[Message]:
        return self.matcher.handling(seq)  # type: ignore[no-any-return]

    def _followers(self, seq: int) -> list[Message]:
        sid = self.session.id
        anything = self._any_followers.get(sid)
        if anything is None:
            anything = self._any_followers[sid] = self.cassette.has_followers(self.session)
        if not anything:
            return []
        found = self._followers_cache.get((sid, seq))
        if found is None:
            found = self._followers_cache[(sid, seq)] = self.cassette.followers(self.session, seq)
        return found

    def _message(self, seq: int) -> Message | None:
        k = (self.session.id, seq)
        if k not in self._messages:
            self._messages[k] = self.cassette.message(self.session, seq)
        return self._messages[k]

    def _client_notes(self, method: str) -> list[Message]:
        k = (self.session.id, method)
        notes = self._notes.get(k)
        if notes is None:
            notes = self._notes[k] = self.cassette.client_messages(
                self.session, wire.NOTIFICATION, method)
        return notes

    def _next_recorded_notification(self, method: str) -> Message | None:
        notes = self._client_notes(method)
        i = self._notes_next.get(method, 0)
        if i >= len(notes):
            return None
        self._notes_next[method] = i + 1
        return notes[i]

    async def _client_answer(self, c: wire.Classified) -> None:
        fut = self._waiting.pop(c.rpc_id or "", None)
        if fut is not None and not fut.done():
            fut.set_result(c.obj)
        elif self.live is not None:
            await self.live.client_message(c.obj)

    # --- playing ----------------------------------------------------------------------------

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(
            coro)  # type: ignore[arg-type]
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def fresh_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def request_client(self, obj: dict[str, Any], related: str | None) -> dict[str, Any]:
        """Send a server-to-client request with a fresh id and wait for the client's answer."""
        fut = await self._ask(obj, related)
        return await fut

    async def _ask(self, obj: dict[str, Any], related: str | None
                   ) -> asyncio.Future[dict[str, Any]]:
        new_id = self.fresh_id()
        obj = {**obj, "id": new_id}
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[wire.id_text(new_id)] = fut
        await self._send(_dumps(obj), related)
        return fut

    async def send(self, data: bytes, related: str | None) -> None:
        await self._send(data, related)

    async def _play_followers(self, messages: list[Message],
                              clock: tuple[float, int] | None) -> None:
        await self._play(messages, clock, None, None)

    async def _play(
        self,
        messages: list[Message],
        clock: tuple[float, int] | None,
        rid: Any,
        token: Any,
        related: str | None = None,
        play: _Play | None = None,
    ) -> None:
        for m in messages:
            if self.ended.is_set():
                return
            if play is not None and m.waits_for is not None:
                await self._wait_cause(play, m)
            if self.timing is not None and clock is not None:
                due = clock[0] + max(0, m.t_ns - clock[1]) / 1e9 * self.timing
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            self._flush_stderr(m.t_ns)
            if m.http is not None and m.http.get("synthetic"):
                # a failure the recording proxy answered itself (e.g. 502): as it answered
                if rid is not None and m.kind in (wire.RESPONSE, wire.ERROR):
                    await self._send(_with_id(m, rid), related)
                continue
            size = m.truncated
            if size is not None:
                await self._play_truncated(m, size, rid, related)
                continue
            if m.kind in (wire.RESPONSE, wire.ERROR):
                await self._send(_with_id(m, rid), related)
                continue
            if m.kind == wire.NOTIFICATION:
                obj = m.json
                if obj.get("method") == "notifications/progress":
                    if token is None:
                        continue  # the client did not ask for progress this time
                    params = obj.get("params")
                    if isinstance(params, dict):
                        obj = {**obj, "params": {**params, "progressToken": token}}
                    await self._send(_dumps(obj), related)
                elif rid is not None and _SUBSCRIPTION_KEY in (obj.get("params") or {}).get(
                        "_meta", {}):
                    params = obj["params"]
                    meta = {**params["_meta"], _SUBSCRIPTION_KEY: rid}
                    await self._send(_dumps({**obj, "params": {**params, "_meta": meta}}), related)
                else:
                    await self._send(m.raw, related)  # as recorded, byte for byte
                continue
            if m.kind == wire.REQUEST:
                fut = await self._ask(m.json, related)
                self._spawn(self._await_client_answer(m, fut, play, related))
                continue
            await self._send(m.raw, related)  # invalid / batch: as recorded

    async def _await_client_answer(self, m: Message, fut: asyncio.Future[dict[str, Any]],
                                   play: _Play | None, related: str | None) -> None:
        """The client's answer to a replayed server request: release what waited for it, then
        play what the server sent on its own after it."""
        answer = await fut
        self.client_answers.append((m, answer))
        recorded = self.cassette.answer(self.session, m.seq)
        if recorded is None:
            return
        if play is not None:
            play.answer_event(recorded.seq).set()
        for f in self._followers(recorded.seq):
            if f.kind == wire.REQUEST:
                inner = await self._ask(f.json, related)
                self._spawn(self._await_client_answer(f, inner, None, related))
            else:
                await self._send(f.raw, related)

    async def _play_truncated(self, m: Message, size: int, rid: Any, related: str | None) -> None:
        """A message recorded cut short (``--max-message-size``) is never sent as broken JSON:
        an answer becomes an error that says so; anything else is left out, noted."""
        what = (f"the recorded {'answer' if rid is not None else 'message'} was truncated at "
                f"{len(m.raw):,} of {size:,} bytes (--max-message-size); re-record with a "
                "larger limit to replay it")
        if m.direction == wire.SERVER_TO_CLIENT and m.reply_to is not None and rid is not None:
            self.stats.matched -= 1
            self.stats.unanswered.append({"method": m.method, "id": rid, "reason": what})
            self._log(f"mcprec: request id={wire.id_text(rid)} {m.method}: {what}")
            await self._send(error_response(rid, INTERNAL_ERROR, f"mcprec replay: {what}",
                                            {"mcprec": "truncated", "size": size}), related)
        else:
            self._log(f"mcprec: seq {m.seq} {m.method or m.kind} left out: {what}")

    def _flush_stderr(self, upto_ns: int | None) -> None:
        """Replay the server's recorded stderr up to a point in the recording (None: all)."""
        if self._server_stderr is None:
            return
        sid = self.session.id
        lines = self._stderr_lines.get(sid)
        if lines is None:
            lines = self._stderr_lines[sid] = list(self.cassette.stderr(self.session))
        i = self._stderr_next.get(sid, 0)
        while i < len(lines) and (upto_ns is None or lines[i].t_ns <= upto_ns):
            self._server_stderr(lines[i].line)
            i += 1
        self._stderr_next[sid] = i

    def unplayed(self) -> list[Message]:
        if self._unplayed is not None:
            return self._unplayed
        return self.matcher.unplayed()  # type: ignore[no-any-return]

    def freeze(self) -> None:
        """Take the unplayed list now, so that ``report()`` works after the cassette closes."""
        self._unplayed = self.matcher.unplayed()

    def report(self) -> dict[str, Any]:
        """What was played and what was not (for ``--report`` and the pytest plugin)."""
        return {
            "session": self.session.name,
            "requests": self.stats.requests,
            "matched": self.stats.matched,
            "repeated": self.stats.repeated,
            "forwarded": self.stats.forwarded,
            "unmatched": self.stats.unmatched,
            "unanswered": self.stats.unanswered,
            "unplayed": [{"seq": m.seq, "method": m.method} for m in self.unplayed()],
        }


def _with_id(m: Message, rid: Any) -> bytes:
    """The recorded answer ``m`` with the client's id, its numbers exactly as recorded."""
    return wire.dumps({**m.json, "id": rid})


def _progress_token(obj: dict[str, Any]) -> Any:
    params = obj.get("params")
    if isinstance(params, dict):
        meta = params.get("_meta")
        if isinstance(meta, dict):
            return meta.get("progressToken")
    return None


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def replayable(cassette: Cassette, session: Session) -> bool:
    """Whether a session has client requests to answer."""
    return session.message_count > 0 and cassette.count_requests(session) > 0


def check_replayable(cassette: Cassette, session: Session) -> None:
    """Refuse sessions with nothing to replay, with a message that says so."""
    if session.message_count == 0:
        raise ReplayError(
            f"session {session.name!r} in {cassette.path} recorded no messages; nothing to replay "
            "(record it again, or pick another with --session)"
        )
    if cassette.count_requests(session) == 0:
        raise ReplayError(
            f"session {session.name!r} in {cassette.path} holds no client requests to answer"
        )


def candidates(cassette: Cassette, session: str | None) -> list[Session]:
    """The recorded sessions a replay may serve: the one named, or every replayable session
    (verify runs left out), the latest first. Raises the usual errors when there is none."""
    if session is not None:
        s = cassette.session(session)
        check_replayable(cassette, s)
        return [s]
    every = cassette.sessions_latest_first()
    references = [s for s in every if "verify_of" not in s.tags] or every
    found = [s for s in references if replayable(cassette, s)]
    if not found:
        check_replayable(cassette, cassette.session(None))  # raises the one-line reason
    return found or [cassette.session(None)]
