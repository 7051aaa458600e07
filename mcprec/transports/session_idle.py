"""Ending the sessions of HTTP clients that went away without a ``DELETE``.

A long-running server (the recording proxy, ``replay --http``) sees thousands of client sessions;
a client that vanishes without ending its session would keep what the session holds forever.
``IdleSessions`` counts each session's requests in flight (an open GET stream is one) and ends a
session that has had none for ``idle`` seconds, as the MCP SDK's servers do
(``session_idle_timeout``): a request being served holds the session, and the countdown starts
again when the last one completes. Sessions are kept in the order they were last active, so a
sweep looks at the expired ones alone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from .. import _log

K = TypeVar("K", bound=Hashable)

DEFAULT_SESSION_IDLE_S = 600.0
"""``--session-idle``'s default: 10 minutes."""


class IdleSessions(Generic[K]):
    """Last activity and requests in flight per session; ``on_idle(key)`` for each expired one.

    ``idle`` None: sessions never expire (nothing is tracked). The sweeper is a task of the
    running loop, started at the first ``enter``; ``aclose`` stops it."""

    def __init__(self, idle: float | None, on_idle: Callable[[K], Any]) -> None:
        self.idle = idle
        self._on_idle = on_idle
        self._seen: OrderedDict[K, float] = OrderedDict()  # idle sessions, least recent first
        self._busy: dict[K, int] = {}  # sessions with requests in flight, and how many
        self._task: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._seen) + len(self._busy)

    def enter(self, key: K) -> None:
        """A request of session ``key`` begins (a new session: its first)."""
        if self.idle is None:
            return
        self._seen.pop(key, None)
        self._busy[key] = self._busy.get(key, 0) + 1
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._sweep())

    def leave(self, key: K) -> None:
        """A request of ``key`` completed; its countdown starts when it was the last."""
        if self.idle is None:
            return
        n = self._busy.get(key)
        if n is None:
            return  # forgotten meanwhile (ended)
        if n > 1:
            self._busy[key] = n - 1
            return
        del self._busy[key]
        self._seen[key] = asyncio.get_running_loop().time()

    def forget(self, key: K) -> None:
        """Session ``key`` ended (a DELETE): no more countdown."""
        self._seen.pop(key, None)
        self._busy.pop(key, None)

    def expired(self, now: float) -> list[K]:
        """The sessions idle since before ``now - idle``, forgotten here."""
        assert self.idle is not None
        out: list[K] = []
        limit = now - self.idle
        while self._seen:
            key, t = next(iter(self._seen.items()))
            if t > limit:
                break
            del self._seen[key]
            out.append(key)
        return out

    async def _sweep(self) -> None:
        assert self.idle is not None
        loop = asyncio.get_running_loop()
        every = min(max(self.idle / 4, 0.01), 30.0)
        while True:
            await asyncio.sleep(every)
            for key in self.expired(loop.time()):
                try:
                    done = self._on_idle(key)
                    if asyncio.iscoroutine(done):
                        await done
                except Exception as e:  # noqa: BLE001 - one line; the sweeper goes on
                    _log.warning("http", f"ending an idle session failed: "
                                 f"{type(e).__name__}: {e}")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._seen.clear()
        self._busy.clear()
