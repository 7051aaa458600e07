"""The replay engine driven from asyncio: HTTP serving, the live fallback, in-process replay.

``Playback`` (``playback.py``) decides what to send and when; this driver sends it with the
transport's ``send`` coroutine, wakes it at its deadlines, and gives the live fallback of
``new_episodes`` the awaitable hooks it needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .. import _log, wire
from ..cassette import Cassette, Message, Session
from ..cassette.models import StoredText
from ..errors import McprecError, NoMatchError
from ..matching import MatchOptions
from .playback import (
    EMPTY_RESULT_METHODS, NO_MATCH_CODE, Playback, ReplayStats, candidates, check_replayable,
    error_response,
)

if TYPE_CHECKING:
    from ..faults.rules import Faults

__all__ = ["EMPTY_RESULT_METHODS", "NO_MATCH_CODE", "AsyncPlayback", "LiveFallback",
           "ReplaySession", "ReplayStats", "Send", "candidates", "check_replayable",
           "error_response"]

Send = Callable[[bytes, "str | None"], Awaitable[None]]
"""``send(message_bytes, related)``: deliver one message to the client (see
``playback.Outgoing``)."""
SendStored = Callable[[StoredText, "str | None"], Awaitable[None]]
"""``send_stored(text, related)``: deliver one large recorded answer to the client as it is
read from the cassette (``text.pieces()``)."""


class LiveFallback(Protocol):
    """Where unmatched requests go in ``new_episodes`` mode (a real server, started lazily)."""

    async def forward(self, obj: dict[str, Any], engine: AsyncPlayback) -> None: ...

    async def client_message(self, obj: dict[str, Any]) -> bool: ...

    async def aclose(self) -> None: ...


class AsyncPlayback:
    """Plays one recorded session (or the one of several that matches) to one client."""

    def __init__(
        self,
        cassette: Cassette,
        session: Session | Sequence[Session],
        send: Send,
        *,
        options: MatchOptions | None = None,
        timing: float | None = None,
        live: LiveFallback | None = None,
        redact: Any = None,
        server_stderr: Callable[[str], None] | None = None,
        label: str = "",
        faults: Faults | None = None,
        transport: str = "stdio",
        protocol_version: str = "recorded",
        max_gap: float | None = None,
        notices: set[str] | None = None,
        send_stored: SendStored | None = None,
        answer_gap: float = 0.0,
    ) -> None:
        """``send_stored``: how the driver sends a large recorded answer as it reads it from the
        cassette; without it, such an answer is read whole and given to ``send``.
        ``answer_gap``: seconds an answer waits after the notifications the recorded server
        wrote before it, when the driver cannot see the client read them (a socket): a client
        that handles an answer at once but notifications a tick later (the TypeScript SDK
        over legacy SSE) reads them apart, as it did from the live server."""
        self.live = live
        self.playback = Playback(cassette, session, options=options, timing=timing,
                                 redact=redact, server_stderr=server_stderr, label=label,
                                 unmatched=self._forward if live is not None else None,
                                 faults=faults, transport=transport,
                                 protocol_version=protocol_version, max_gap=max_gap,
                                 notices=notices)
        self._send = send
        self._send_stored = send_stored
        self._answer_gap = answer_gap
        self._flushing = asyncio.Lock() if answer_gap else None
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.ended = asyncio.Event()
        """Set when the recording ends here (the server exited while handling a request)."""

    # --- what the playback knows ------------------------------------------------------------

    @property
    def cassette(self) -> Cassette:
        return self.playback.cassette

    @property
    def session(self) -> Session:
        return self.playback.session

    @property
    def matcher(self) -> Any:
        return self.playback.matcher

    @property
    def stats(self) -> ReplayStats:
        return self.playback.stats

    @property
    def modes(self) -> dict[str, str]:
        return self.playback.modes

    @property
    def statuses(self) -> dict[str, int]:
        return self.playback.statuses

    @property
    def exit_code(self) -> int | None:
        return self.playback.exit_code

    @property
    def status_only(self) -> dict[str, int]:
        return self.playback.status_only

    @property
    def malformed(self) -> set[str]:
        return self.playback.malformed

    @property
    def gone(self) -> bool:
        return self.playback.gone

    def unplayed(self) -> list[Message]:
        return self.playback.unplayed()

    def freeze(self) -> None:
        self.playback.freeze()

    def report(self) -> dict[str, Any]:
        return self.playback.report()

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Play what the server sent before the client said anything (banners, early notices)."""
        self.playback.start()
        await self._flush()

    async def aclose(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self.live is not None:
            await self.live.aclose()

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until every answer in progress has been sent."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout)

    # --- incoming ---------------------------------------------------------------------------

    async def receive(self, raw: bytes) -> None:
        """Handle one message from the client."""
        if self.live is not None and await self._to_live(raw):
            return
        self.playback.receive(raw)
        await self._flush()

    async def _to_live(self, raw: bytes) -> bool:
        """Notifications reach a running live server too; answers to its requests go to it."""
        c = wire.classify(raw)
        assert self.live is not None
        if c.kind == wire.NOTIFICATION:
            if c.method == "notifications/cancelled":
                self.playback.receive(raw)
                await self._flush()
                await self.live.client_message(c.obj)
                return True
            return await self.live.client_message(c.obj)
        if c.kind in (wire.RESPONSE, wire.ERROR) and not self.playback.client_answer(
                c.rpc_id or "", c.obj):
            await self.live.client_message(c.obj)
            await self._flush()
            return True
        if c.kind in (wire.RESPONSE, wire.ERROR):
            await self._flush()
            return True
        return False

    # --- outgoing ---------------------------------------------------------------------------

    async def send(self, data: bytes, related: str | None) -> None:
        await self._send(data, related)

    async def request_client(self, obj: dict[str, Any], related: str | None) -> dict[str, Any]:
        """Send a server-to-client request with a fresh id and wait for the client's answer."""
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

        def answered(answer: dict[str, Any]) -> None:
            if not fut.done():
                fut.set_result(answer)

        self.playback.ask(obj, related, answered)
        await self._flush()
        return await fut

    async def _flush(self) -> None:
        """Send what the playback has for the client, and wake it at its next deadline."""
        p = self.playback
        if self._flushing is not None:
            async with self._flushing:  # an answer held for its gap keeps its place in line
                while True:
                    writes = p.take_writes()
                    if not writes:
                        break
                    for drain, out in writes:
                        if drain:
                            await asyncio.sleep(self._answer_gap)
                        await self._send_all(out)
        while True:
            out = p.take()
            if not out:
                break
            await self._send_all(out)
        if p.ended and not self.ended.is_set():
            self.ended.set()
        self._schedule()
        if p.busy or self._tasks:
            self._idle.clear()
        else:
            self._idle.set()

    async def _send_all(self, out: list[tuple[bytes | StoredText, str | None]]) -> None:
        for data, related in out:
            if not isinstance(data, StoredText):
                await self._send(data, related)
            elif self._send_stored is not None:
                await self._send_stored(data, related)
            else:
                await self._send(bytes(data), related)

    def _schedule(self) -> None:
        deadline = self.playback.next_deadline()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if deadline is None:
            return
        # the playback's clock is time.monotonic; a loop's own clock may differ (uvloop)
        delay = max(0.0, deadline - time.monotonic())
        self._timer = asyncio.get_running_loop().call_later(delay, self._wake)

    def _wake(self) -> None:
        self._timer = None
        self.playback.tick()
        self._spawn(self._flush())

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(
            coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- the live fallback ------------------------------------------------------------------

    def _forward(self, obj: dict[str, Any], e: NoMatchError) -> bool:
        self._idle.clear()
        self._spawn(self._forward_live(obj, e))
        return True

    async def _forward_live(self, obj: dict[str, Any], e: NoMatchError) -> None:
        assert self.live is not None
        rid = obj.get("id")
        try:
            await self.live.forward(obj, self)
        except (McprecError, OSError) as failure:  # the real server did not start, or died
            self.stats.unmatched.append({"method": obj.get("method"), "id": rid})
            self.stats.forwarded -= 1
            _log.warning("replay", f"{e}; the real server could not answer it: {failure}")
            await self._send(
                error_response(rid, NO_MATCH_CODE, f"mcprec replay: {e}; the real server "
                               f"could not answer it: {failure}"),
                wire.id_text(rid),
            )
        finally:
            if not self.playback.busy and len(self._tasks) <= 1:
                self._idle.set()


ReplaySession = AsyncPlayback
"""The former name of ``AsyncPlayback`` ("session" means a recorded session everywhere else)."""
