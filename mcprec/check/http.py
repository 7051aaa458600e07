"""The Streamable HTTP checks: requests a well-behaved client never sends (a foreign Host or
Origin, no session id, a stale one, an unsupported protocol version) and resumption.

They go straight to the server, not through the recording proxy (which checks Host and Origin
itself, and sends its own session headers), in a direct session of their own that is ended
with a DELETE. Each request is bounded by the timeout and each response read is capped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .. import wire
from .model import FAIL, PASS, SKIP
from .probe import ProbeSession, Verdict

FOREIGN = "mcprec-rebind.example"
_MAX_BODY = 1 << 20


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    messages: list[dict[str, Any]] = field(default_factory=list)
    event_ids: list[str] = field(default_factory=list)
    error: str | None = None
    """Why no HTTP answer came."""

    def describe(self) -> str:
        return self.error or f"HTTP {self.status}"


class Direct:
    """Raw HTTP to the server."""

    def __init__(self, url: str, headers: dict[str, str], timeout: float, protocol: str) -> None:
        import httpx

        self.url = url
        self.extra = headers
        self.timeout = timeout
        self.protocol = protocol
        self.sid: str | None = None
        self.version: str | None = None
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
                                      trust_env=False)
        self._next = 0

    def headers(self, *, sid: bool = True, version: bool = True,
                **over: str) -> dict[str, str]:
        h = {**self.extra, "content-type": "application/json",
             "accept": "application/json, text/event-stream"}
        if sid and self.sid:
            h["mcp-session-id"] = self.sid
        if version and self.version:
            h["mcp-protocol-version"] = self.version
        h.update(over)
        return h

    def request(self, method: str, params: dict[str, Any] | None = None) -> bytes:
        self._next += 1
        return wire.dumps({"jsonrpc": "2.0", "id": f"mcprec-check-{self._next}", "method": method,
                           **({"params": params} if params is not None else {})})

    def initialize(self) -> bytes:
        from .probe import _version

        return self.request("initialize", {
            "protocolVersion": self.protocol, "capabilities": {},
            "clientInfo": {"name": "mcprec-check", "version": _version()}})

    async def post(self, body: bytes, headers: dict[str, str]) -> Answer:
        try:
            return await asyncio.wait_for(self._post(body, headers), self.timeout)
        except asyncio.TimeoutError:
            return Answer(0, {}, error=f"no answer within {self.timeout:g} s")

    async def _post(self, body: bytes, headers: dict[str, str]) -> Answer:
        import httpx

        from ..transports.sse import SSEParser

        try:
            async with self.http.stream("POST", self.url, content=body, headers=headers) as resp:
                answer = Answer(resp.status_code, {k.lower(): v for k, v in resp.headers.items()})
                ctype = answer.headers.get("content-type", "")
                size = 0
                if ctype.startswith("text/event-stream"):
                    parser = SSEParser()
                    async for chunk in resp.aiter_bytes():
                        size += len(chunk)
                        for event in parser.feed(chunk):
                            if event.id:
                                answer.event_ids.append(event.id)
                            _add(answer, event.data)
                        if size > _MAX_BODY or any("method" not in m for m in answer.messages):
                            break  # the answer is in (or enough was read)
                    return answer
                data = b""
                async for chunk in resp.aiter_bytes():
                    data += chunk
                    if len(data) > _MAX_BODY:
                        break
                if "json" in ctype:
                    _add(answer, data)
                return answer
        except httpx.HTTPError as e:
            return Answer(0, {}, error=f"{type(e).__name__}: {e}".rstrip(": "))

    async def delete(self, sid: str) -> int:
        """DELETE session ``sid``: the status (0: no answer)."""
        import httpx

        try:
            resp = await self.http.delete(self.url, headers={**self.headers(),
                                                             "mcp-session-id": sid})
        except httpx.HTTPError:
            return 0
        return resp.status_code

    async def forget(self, answer: Answer) -> None:
        """End a session a probe opened by mistake (a server that accepted it)."""
        sid = answer.headers.get("mcp-session-id")
        if sid:
            with contextlib.suppress(Exception):
                await self.http.delete(self.url, headers={**self.headers(), "mcp-session-id": sid})

    async def close(self) -> None:
        if self.sid:
            with contextlib.suppress(Exception):
                await self.http.delete(self.url, headers=self.headers())
        await self.http.aclose()


def _add(answer: Answer, data: bytes | str | None) -> None:
    if not data:
        return
    with contextlib.suppress(ValueError):
        obj = json.loads(data)
        if isinstance(obj, dict):
            answer.messages.append(obj)


def _ok(status: int) -> bool:
    return 200 <= status < 300


async def http_checks(s: ProbeSession, url: str, headers: dict[str, str]) -> None:
    """The HTTP checks, each a result of ``s``."""
    d = Direct(url, headers, s.o.timeout, s.o.protocol)
    try:
        opened = await d.post(d.initialize(), d.headers())
        result = next((m.get("result") for m in opened.messages if "result" in m), None)
        if not _ok(opened.status) or not isinstance(result, dict):
            why = f"could not open a direct session: initialize got {opened.describe()}"
            for check in ("http.origin", "http.host", "http.session-missing",
                          "http.session-stale", "http.protocol-version", "http.resumption"):
                s.add(check, FAIL, why)
            return
        d.sid = opened.headers.get("mcp-session-id")
        version = result.get("protocolVersion")
        d.version = version if isinstance(version, str) else None
        await d.post(wire.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                     d.headers())

        async def origin() -> Verdict:
            a = await d.post(d.initialize(), d.headers(sid=False, version=False,
                                                       origin=f"http://{FOREIGN}"))
            await d.forget(a)
            if a.status == 403:
                return PASS, f"Origin http://{FOREIGN}: 403"
            if 400 <= a.status < 500:
                return PASS, f"Origin http://{FOREIGN}: {a.status} (the spec says 403)"
            return FAIL, f"Origin http://{FOREIGN}: {a.describe()}, not 403"

        async def host() -> Verdict:
            port = urlsplit(url).port
            foreign = f"{FOREIGN}:{port}" if port else FOREIGN
            a = await d.post(d.initialize(), d.headers(sid=False, version=False, host=foreign))
            await d.forget(a)
            if 400 <= a.status < 500:
                return PASS, f"Host {foreign}: {a.status}"
            return FAIL, f"Host {foreign}: {a.describe()} (a DNS-rebinding page could reach it)"

        async def missing() -> Verdict:
            if not d.sid:
                return SKIP, "the server gives no session id (stateless)"
            a = await d.post(d.request("ping"), d.headers(sid=False))
            if a.status == 400:
                return PASS, "no Mcp-Session-Id: 400"
            if 400 <= a.status < 500:
                return PASS, f"no Mcp-Session-Id: {a.status} (the spec says 400)"
            return FAIL, f"no Mcp-Session-Id: {a.describe()}, not 400"

        async def stale() -> Verdict:
            if not d.sid:
                return SKIP, "the server gives no session id (stateless)"
            other = await d.post(d.initialize(), d.headers(sid=False))
            sid = other.headers.get("mcp-session-id")
            if not sid:
                return FAIL, f"a second initialize got {other.describe()} and no session id"
            ended = await d.delete(sid)
            if ended == 405:
                return SKIP, "the server does not let clients end a session (DELETE: 405)"
            if not _ok(ended):
                return FAIL, f"DELETE of a session: HTTP {ended}"
            a = await d.post(d.request("ping"), {**d.headers(), "mcp-session-id": sid})
            if a.status == 404:
                return PASS, "a request in an ended session: 404"
            return FAIL, (f"a request in an ended session: {a.describe()}, not 404 (on 404 a "
                          "client starts a new session)")

        async def version_header() -> Verdict:
            a = await d.post(d.request("ping"),
                             {**d.headers(), "mcp-protocol-version": "1999-01-01"})
            if a.status == 400:
                return PASS, "MCP-Protocol-Version 1999-01-01: 400"
            return FAIL, f"MCP-Protocol-Version 1999-01-01: {a.describe()}, not 400"

        async def resumption() -> Verdict:
            a = await d.post(d.request("ping"), d.headers(accept="text/event-stream, "
                                                                 "application/json"))
            if not a.event_ids:
                how = "JSON" if "json" in a.headers.get("content-type", "") else "events"
                return SKIP, f"ping was answered with {how} without event ids: no resumption"
            return await _resume(d, a.event_ids[0])

        for check, fn in (("http.origin", origin), ("http.host", host),
                          ("http.session-missing", missing), ("http.session-stale", stale),
                          ("http.protocol-version", version_header),
                          ("http.resumption", resumption)):
            await s.one(check, fn)
    finally:
        await d.close()


async def _resume(d: Direct, event_id: str) -> Verdict:
    import httpx

    headers = {**d.headers(accept="text/event-stream"), "last-event-id": event_id}
    headers.pop("content-type", None)

    async def get() -> Verdict:
        async with d.http.stream("GET", d.url, headers=headers) as resp:
            ctype = resp.headers.get("content-type", "")
            if resp.status_code == 405:
                return SKIP, "the server has no GET stream (405)"
            if resp.status_code == 200 and ctype.startswith("text/event-stream"):
                return PASS, f"GET with Last-Event-ID {event_id}: 200, an event stream"
            return FAIL, f"GET with Last-Event-ID {event_id}: HTTP {resp.status_code} {ctype}"

    try:
        return await asyncio.wait_for(get(), d.timeout)
    except (httpx.HTTPError, asyncio.TimeoutError) as e:
        return FAIL, f"GET with Last-Event-ID {event_id}: {type(e).__name__}"
