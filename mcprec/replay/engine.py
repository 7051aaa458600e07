"""The replay engine: one recorded session played as a server to one client, over any transport.

The transport hands every client message to ``receive()`` and sends what the engine gives to
``send``. For each request the engine finds the recorded one (see ``matching``), then plays what
the server did while handling it, in recorded order: notifications (progress tokens rewritten to
the client's), server-to-client requests (fresh ids; the engine waits for the client's answer),
and the response (with the client's id). Messages the server sent on its own are played after the
client message they followed in the recording.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


from .. import wire
from ..cassette import Cassette, Message, Session
from ..errors import McprecError, NoMatchError, ReplayError
from ..matching import Match, Matcher, MatchOptions
from ..redact import Redactor, default_redactor

Send = Callable[[bytes, "str | None"], Awaitable[None]]
"""``send(message_bytes, related)``: deliver one message to the client. ``related`` is the id
text of the client request it belongs to (HTTP routes it onto that request's stream), or None."""

NO_MATCH_CODE = -32000
# 2026-07-28: events of subscriptions/listen carry the listen request's id here
_SUBSCRIPTION_KEY = "io.modelcontextprotocol/subscriptionId"
# Answered with an empty result when nothing was recorded for them: their result carries nothing.
EMPTY_RESULT_METHODS = frozenset(
    {"ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)


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
    forwarded: int = 0


def _dumps(obj: Any) -> bytes:
    return wire.dumps(obj)


def error_response(rid: Any, code: int, message: str, data: Any = None) -> bytes:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return _dumps({"jsonrpc": "2.0", "id": rid, "error": err})


class ReplaySession:
    """Plays one recorded session to one client."""

    def __init__(
        self,
        cassette: Cassette,
        session: Session,
        send: Send,
        *,
        options: MatchOptions | None = None,
        timing: float | None = None,
        live: LiveFallback | None = None,
        log: Callable[[str], None] | None = None,
        redact: Redactor | None = None,
    ) -> None:
        self.cassette = cassette
        self.session = session
        self.matcher = Matcher(cassette, session, options)
        self.timing = timing
        self.live = live
        self.stats = ReplayStats()
        # the recording was redacted: redact incoming requests alike, so that they still match
        self._redactor = redact if redact is not None else default_redactor()
        self._send = send
        self._log = log or _stderr
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._next_id = 0
        self._notes: dict[str, list[Message]] = {}
        self._notes_next: dict[str, int] = {}
        self.modes: dict[str, str] = {}
        """Per client request id text: how the recorded answer came over HTTP (json or sse)."""
        self._followers_cache: dict[int, list[Message]] = {}
        self._any_followers: bool | None = None
        self._unplayed: list[Message] | None = None
        self.client_answers: list[tuple[Message, dict[str, Any]]] = []

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Play what the server sent before the client said anything (banners, early notices)."""
        self._spawn(self._play(self._followers(-1), None, None, None))

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
            found = self.matcher.match(match_obj)
        except NoMatchError as e:
            await self._unmatched(obj, e)
            return
        except Exception as e:  # noqa: BLE001 - e.g. a custom matcher raised: answer, not hang
            self.stats.unmatched.append({"method": obj.get("method"), "id": rid})
            self._log(f"mcprec: matching request id={wire.id_text(rid)} {obj.get('method')} "
                      f"failed: {e!r}")
            await self._send(error_response(rid, -32603, f"mcprec replay: matching failed: {e!r}"),
                             key)
            return
        self.stats.matched += 1
        if found.repeated:
            self.stats.repeated += 1
        if inline and any(m.kind == wire.REQUEST for m in self._handling(found.request.seq)):
            self._track(key, self._play_request(found, rid, key, obj, started))
            return
        await self._play_request(found, rid, key, obj, started)

    async def _play_request(self, found: Match, rid: Any, key: str, obj: dict[str, Any],
                            started: float) -> None:
        req = found.request
        token = _progress_token(obj)
        script = self._handling(req.seq)
        if script and script[-1].http:
            self.modes[key] = script[-1].http.get("content_type") or ""
        elif len(script) > 1:
            self.modes[key] = "sse"
        await self._play(script, (started, req.t_ns), rid, token, related=key)
        # what the server then sent on its own (e.g. list_changed) comes after the answer
        followers = self._followers(req.seq)
        if followers and not found.repeated:
            self._spawn(self._play(followers, (started, req.t_ns), None, None))

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

    async def _notification(self, obj: dict[str, Any]) -> None:
        method = obj.get("method")
        if method == "notifications/cancelled":
            params = obj.get("params") or {}
            task = self._tasks.get(wire.id_text(params.get("requestId")))
            if task is not None:
                task.cancel()
        if self.live is not None and await self.live.client_message(obj):
            return
        recorded = self._next_recorded_notification(str(method))
        if recorded is not None:
            followers = self._followers(recorded.seq)
            if followers:
                self._spawn(self._play(followers, (time.monotonic(), recorded.t_ns), None, None))

    def _handling(self, seq: int) -> list[Message]:
        return self.matcher.handling(seq)

    def _followers(self, seq: int) -> list[Message]:
        if self._any_followers is None:
            self._any_followers = self.cassette.has_followers(self.session)
        if not self._any_followers:
            return []
        found = self._followers_cache.get(seq)
        if found is None:
            found = self._followers_cache[seq] = self.cassette.followers(self.session, seq)
        return found

    def _next_recorded_notification(self, method: str) -> Message | None:
        notes = self._notes.get(method)
        if notes is None:
            notes = self._notes[method] = self.cassette.client_messages(
                self.session, wire.NOTIFICATION, method
            )
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
        new_id = self.fresh_id()
        obj = {**obj, "id": new_id}
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[wire.id_text(new_id)] = fut
        await self._send(_dumps(obj), related)
        return await fut

    async def send(self, data: bytes, related: str | None) -> None:
        await self._send(data, related)

    async def _play(
        self,
        messages: list[Message],
        clock: tuple[float, int] | None,
        rid: Any,
        token: Any,
        related: str | None = None,
    ) -> None:
        for m in messages:
            if m.http is not None and m.http.get("synthetic"):
                continue  # a transport failure noted by the recorder, not a message
            if self.timing is not None and clock is not None:
                due = clock[0] + max(0, m.t_ns - clock[1]) / 1e9 * self.timing
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
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
                answer = await self.request_client(m.json, related)
                recorded = self.cassette.answer(self.session, m.seq)
                self.client_answers.append((m, answer))
                if recorded is not None:
                    for f in self._followers(recorded.seq):
                        await self._play_one_raw(f, related)
                continue
            await self._send(m.raw, related)  # invalid / batch: as recorded

    async def _play_one_raw(self, m: Message, related: str | None) -> None:
        if m.kind == wire.REQUEST:
            await self.request_client(m.json, related)
        else:
            await self._send(m.raw, related)

    def unplayed(self) -> list[Message]:
        if self._unplayed is not None:
            return self._unplayed
        return self.matcher.unplayed()

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
