"""The real server behind a replay in ``new_episodes`` mode.

Started on the first request the recording cannot answer, initialized with the recorded client's
``initialize``, then used for every unmatched request. What the client and the real server say
to each other from then on is appended to the replayed session, as the client saw it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from typing import TYPE_CHECKING, Any

import orjson

from .. import wire
from ..cassette import Cassette, Session
from ..record.writer import SessionWriter
from ..errors import ReplayError, ServerStartError
from ..transports.stdio import end_process

if TYPE_CHECKING:
    from .engine import AsyncPlayback

INIT_TIMEOUT_S = 30.0


class LiveServer:
    def __init__(self, argv: list[str], cassette: Cassette, session: Session, *,
                 redact: Any = None) -> None:
        self.argv = argv
        self.cassette = cassette
        self.session = session
        self.redact = redact
        """The rules given (None: the defaults and the config); the session's manifest adds
        its own before anything is appended."""
        self._proc: asyncio.subprocess.Process | None = None
        self._starting: asyncio.Lock | None = None
        self._ids = itertools.count(1)
        # live id -> (client id, future for the live answer)
        self._pending: dict[str, tuple[Any, asyncio.Future[dict[str, Any]]]] = {}
        self._by_client: dict[str, str] = {}
        self._reader: asyncio.Task[None] | None = None
        self._writer: SessionWriter | None = None
        self._engine: AsyncPlayback | None = None

    # --- engine hooks -----------------------------------------------------------------------

    async def forward(self, obj: dict[str, Any], engine: AsyncPlayback) -> None:
        self._engine = engine
        await self._ensure_started()
        client_id = obj.get("id")
        related = wire.id_text(client_id)
        self._record(wire.CLIENT_TO_SERVER, wire.dumps(obj))
        answer = await self._call(obj)
        out = wire.dumps({**answer, "id": client_id})
        self._record(wire.SERVER_TO_CLIENT, out)
        await engine.send(out, related)

    async def client_message(self, obj: dict[str, Any]) -> bool:
        """Pass the client's notifications on to a running live server; True if consumed."""
        if self._proc is None:
            return False
        if obj.get("method") == "notifications/cancelled":
            params = obj.get("params") or {}
            live_id = self._by_client.get(wire.id_text(params.get("requestId")))
            if live_id is None:
                return False
            obj = {**obj, "params": {**params, "requestId": orjson.loads(live_id)}}
        self._record(wire.CLIENT_TO_SERVER, wire.dumps(obj))
        await self._write(obj)
        return False

    async def aclose(self) -> None:
        if self._proc is not None:
            await end_process(self._proc)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        if self._writer is not None:
            self._writer.close(status=self.session.status)

    # --- internals --------------------------------------------------------------------------

    async def _ensure_started(self) -> None:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._proc is not None:
                return
            try:
                self._proc = await asyncio.create_subprocess_exec(
                    *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                    limit=1 << 30,
                )
            except OSError as e:
                raise ServerStartError(f"cannot start live server {self.argv[0]}: {e}") from e
            self._reader = asyncio.get_running_loop().create_task(self._read())
            self._writer = _append_writer(self.cassette, self.session, self.redact)
            init = self.cassette.requests(self.session, "initialize")
            if init:
                try:
                    await asyncio.wait_for(self._call(init[0].json), INIT_TIMEOUT_S)
                except asyncio.TimeoutError as e:
                    raise ReplayError(
                        f"live server {self.argv[0]} did not answer initialize in "
                        f"{INIT_TIMEOUT_S:.0f} s"
                    ) from e
                await self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def _call(self, obj: dict[str, Any]) -> dict[str, Any]:
        if self._reader is not None and self._reader.done():
            raise ReplayError(f"live server {self.argv[0]} has exited; it cannot answer "
                              f"{obj.get('method')}")
        live_id = next(self._ids)
        key = wire.id_text(live_id)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[key] = (obj.get("id"), fut)
        if "id" in obj:
            self._by_client[wire.id_text(obj["id"])] = key
        await self._write({**obj, "id": live_id})
        try:
            return await fut
        finally:
            self._pending.pop(key, None)

    async def _write(self, obj: dict[str, Any]) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            return
        if proc.stdin.is_closing():
            return
        proc.stdin.write(wire.dumps(obj) + b"\n")
        with contextlib.suppress(ConnectionError):
            await proc.stdin.drain()

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
        while line := await stdout.readline():
            c = wire.classify(line.rstrip(b"\r\n"))
            if c.kind in (wire.RESPONSE, wire.ERROR):
                entry = self._pending.get(c.rpc_id or "")
                if entry is not None and not entry[1].done():
                    entry[1].set_result(c.obj)
            elif c.kind == wire.NOTIFICATION and self._engine is not None:
                data = line.rstrip(b"\r\n")
                self._record(wire.SERVER_TO_CLIENT, data)
                await self._engine.send(data, None)
            elif c.kind == wire.REQUEST and self._engine is not None:
                asyncio.get_running_loop().create_task(self._relay_server_request(c.obj))
        for _, fut in list(self._pending.values()):
            if not fut.done():
                fut.set_exception(ReplayError(f"live server {self.argv[0]} exited"))

    async def _relay_server_request(self, obj: dict[str, Any]) -> None:
        assert self._engine is not None
        self._record(wire.SERVER_TO_CLIENT, wire.dumps(obj))
        answer = await self._engine.request_client(obj, None)
        reply = {**answer, "id": obj.get("id")}
        self._record(wire.CLIENT_TO_SERVER, wire.dumps(reply))
        await self._write(reply)

    def _record(self, direction: str, raw: bytes) -> None:
        if self._writer is not None:
            self._writer.message(direction, raw)


def _append_writer(cassette: Cassette, session: Session, redact: Any = None) -> SessionWriter:
    """A writer that continues ``session``: later seqs, and times after its last message,
    redacted by the rules given plus those the session was recorded with (its manifest, keyed
    by the same salt), so that live traffic reaches the disk as the recording did."""
    from ..redact.manifest import redactor_like

    own = Cassette.open(cassette.path)
    rules = redactor_like(redact, own, session)
    last_seq, last_t = own.last_position(session)
    start = time.monotonic_ns() - (last_t + 1_000_000)
    return SessionWriter(own, session, clock_start_ns=start, first_seq=last_seq + 1,
                         redact=rules)
