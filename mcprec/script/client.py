"""mcprec as an MCP client: initialize, play a scenario's steps, answer the server's requests.

The client speaks JSON-RPC over a ``Link`` (the tap's pipes, or Streamable HTTP through the
recording proxy: see ``links``); it records nothing itself. Whatever it sends and receives
passes through the same recording machinery as any other client's traffic.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .. import wire
from ..errors import McprecError
from .examples import object_example, table
from .scenario import ClientSettings, Scenario, Step

METHOD_NOT_FOUND = -32601


class Link(Protocol):
    """Carries the client's messages to the server. The link hands what comes back to
    ``ScriptedClient.received``, and calls ``ScriptedClient.lost`` when the server is gone."""

    async def send(self, raw: bytes) -> None: ...


class StepFailed(McprecError):
    """A step of a scenario went wrong: an error answer, no answer, or a result where an
    error was expected. ``where`` says which step (or ``initialize``)."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where} failed: {reason}")
        self.where = where
        self.reason = reason


class ServerGone(Exception):
    """The connection to the server ended while an answer was awaited."""


@dataclass
class StepOutcome:
    step: Step
    detail: str
    """``a result``, ``an error -32602: ...``, ``cancelled``, ``slept``..."""


def verdict(answer: dict[str, Any]) -> tuple[bool, str]:
    """Whether an answer is an error (a JSON-RPC error, or a tool result with ``isError``),
    and a one-line summary of it."""
    error = answer.get("error")
    if isinstance(error, dict):
        return True, f"an error {error.get('code')}: {error.get('message')}"
    result = answer.get("result")
    if isinstance(result, dict) and result.get("isError") is True:
        texts = [c.get("text") for c in result.get("content") or []
                 if isinstance(c, dict) and isinstance(c.get("text"), str)]
        return True, f"a tool error: {texts[0] if texts else '(no text)'}"
    return False, "a result"


class ScriptedClient:
    """One client session. ``link`` is set before the first request (links need the client to
    hand it incoming messages, and the client needs the link to send)."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self.link: Link | None = None
        self.server_result: dict[str, Any] = {}
        """The server's answer to initialize."""
        self.server_requests: Counter[str] = Counter()
        self.progress: Counter[str] = Counter()
        """Progress notifications received, by the JSON text of their token."""
        self._next_id = 1
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._gone: str | None = None

    # --- what comes from the server ------------------------------------------------------------

    async def received(self, raw: bytes) -> None:
        """One message from the server."""
        c = wire.classify(raw)
        if c.kind == wire.BATCH:
            for item in c.obj:
                await self.received(wire.dumps(item))
        elif c.kind in (wire.RESPONSE, wire.ERROR) and c.rpc_id is not None:
            fut = self._waiting.pop(c.rpc_id, None)
            if fut is not None and not fut.done():
                fut.set_result(c.obj)
        elif c.kind == wire.REQUEST and c.method is not None:
            self.server_requests[c.method] += 1
            await self._send(self.answer(c.obj))
        elif c.kind == wire.NOTIFICATION and c.method == "notifications/progress":
            token = wire.progress_token(c.obj.get("params"), "progressToken")
            if token is not None:
                self.progress[token] += 1

    def lost(self, why: str) -> None:
        """The server is gone: every awaited answer fails with ``why``."""
        if self._gone is None:
            self._gone = why
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(ServerGone(why))
        self._waiting.clear()

    def answer(self, request: dict[str, Any]) -> bytes:
        """The client's answer to a request from the server, as the scenario's [client] says:
        a method it has no answer for is "method not found", as from a client without that
        capability."""
        rid, method = request.get("id"), request.get("method")
        params = table(request, "params")
        s = self.settings
        result: Any = None
        if method == "ping":
            result = {}
        elif method == "roots/list" and s.roots is not None:
            result = {"roots": s.roots}
        elif method == "sampling/createMessage" and s.sampling is not None:
            result = s.sampling
        elif method == "elicitation/create" and s.elicitation is not None:
            result = dict(s.elicitation)
            if result["action"] == "accept" and "content" not in result and \
                    params.get("mode", "form") == "form":
                result["content"] = object_example(params.get("requestedSchema"))
        if result is None:
            return wire.error_message(rid, METHOD_NOT_FOUND, f"mcprec script: no answer to "
                                      f"{method} (see [client] in the scenario)")
        return wire.dumps({"jsonrpc": "2.0", "id": rid, "result": result})

    # --- what goes to the server ---------------------------------------------------------------

    async def _send(self, raw: bytes) -> None:
        assert self.link is not None, "connect a link first"
        await self.link.send(raw)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self._send(wire.dumps({"jsonrpc": "2.0", "method": method,
                                     **({"params": params} if params is not None else {})}))

    async def send_request(self, method: str, params: dict[str, Any] | None = None, *,
                           progress: bool = False) -> tuple[int, asyncio.Future[dict[str, Any]]]:
        """Send a request; its id and the future of its answer."""
        rid = self._next_id
        self._next_id += 1
        if progress:  # the request id as the token, as the SDKs do
            params = dict(params or {})
            params["_meta"] = {**(params.get("_meta") or {}), "progressToken": rid}
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if self._gone is not None:
            fut.set_exception(ServerGone(self._gone))
            return rid, fut
        self._waiting[wire.id_text(rid)] = fut
        await self._send(wire.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                     **({"params": params} if params is not None else {})}))
        return rid, fut

    async def request(self, method: str, params: dict[str, Any] | None = None, *,
                      timeout: float, where: str | None = None) -> dict[str, Any]:
        """Send a request and return its result; any error is ``StepFailed``."""
        _, fut = await self.send_request(method, params)
        answer = await self._wait(fut, timeout, where or method)
        failed, summary = verdict(answer)
        if failed:
            raise StepFailed(where or method, f"the server answered with {summary}")
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    async def _wait(self, fut: asyncio.Future[dict[str, Any]], timeout: float,
                    where: str) -> dict[str, Any]:
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            raise StepFailed(where, f"no answer within {timeout:g} s") from None
        except ServerGone as e:
            raise StepFailed(where, f"the server went away before answering ({e})") from None

    def awaits(self, rid: str | None) -> bool:
        """Whether the answer to the request with this id (its JSON text) is still awaited."""
        return rid is not None and rid in self._waiting

    def forget(self, rid: int) -> None:
        """Stop waiting for an answer (the request was cancelled)."""
        self._waiting.pop(wire.id_text(rid), None)

    # --- a session -------------------------------------------------------------------------------

    async def initialize(self, protocol: str, timeout: float) -> dict[str, Any]:
        """The handshake: initialize, then notifications/initialized."""
        s = self.settings
        self.server_result = await self.request("initialize", {
            "protocolVersion": protocol, "capabilities": s.capabilities_offered(),
            "clientInfo": {"name": s.name, "version": s.version},
        }, timeout=timeout, where="initialize")
        await self.notify("notifications/initialized")
        return self.server_result

    async def play(self, scenario: Scenario,
                   on_step: Callable[[StepOutcome], Awaitable[None] | None] | None = None,
                   ) -> list[StepOutcome]:
        """Initialize, then every step in order; the first failure raises ``StepFailed``."""
        await self.initialize(scenario.protocol, scenario.timeout)
        outcomes: list[StepOutcome] = []
        later: list[tuple[Step, asyncio.Future[dict[str, Any]]]] = []

        async def done(step: Step, detail: str) -> None:
            outcome = StepOutcome(step, detail)
            outcomes.append(outcome)
            if on_step is not None:
                pending = on_step(outcome)
                if pending is not None:
                    await pending

        for step in scenario.steps:
            if step.kind == "sleep":
                await asyncio.sleep(step.seconds)
                await done(step, "slept")
            elif step.kind == "notify":
                await self.notify(step.method, step.params)
                await done(step, "sent")
            else:
                rid, fut = await self.send_request(step.method, step.params,
                                                   progress=step.progress)
                if step.cancel_after is not None:
                    await done(step, await self._cancel(rid, fut, step))
                elif step.wait:
                    await done(step, self._check(step, await self._wait(fut, step.timeout,
                                                                        step.describe())))
                else:
                    later.append((step, fut))
        for step, fut in later:
            await done(step, self._check(step, await self._wait(fut, step.timeout,
                                                                step.describe())))
        return outcomes

    async def _cancel(self, rid: int, fut: asyncio.Future[dict[str, Any]], step: Step) -> str:
        assert step.cancel_after is not None
        try:
            await asyncio.wait_for(asyncio.shield(fut), step.cancel_after)
        except asyncio.TimeoutError:
            self.forget(rid)
            await self.notify("notifications/cancelled", {
                "requestId": rid, "reason": f"mcprec script: {step.describe()} cancel_after"})
            return "cancelled"
        except ServerGone as e:
            raise StepFailed(step.describe(), f"the server went away ({e})") from None
        return "answered before cancel_after; not cancelled"

    def _check(self, step: Step, answer: dict[str, Any]) -> str:
        failed, summary = verdict(answer)
        if failed and step.expect == "result":
            raise StepFailed(step.describe(), f"the server answered with {summary}")
        if not failed and step.expect == "error":
            raise StepFailed(step.describe(), "expected an error, got a result")
        if step.progress:
            n = self.progress[wire.id_text(answer.get("id"))]
            summary += f", {n} progress notification{'s' if n != 1 else ''}"
        return summary
