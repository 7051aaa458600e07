"""The view's HTTP side: an ASGI app serving the page and its JSON API (docs/view.md).

Only GET. Host and Origin are checked as every mcprec listener checks them (``Trust``), and a
request another site's page makes (``Sec-Fetch-Site: cross-site``) is refused as well: the
page and its API answer the local browser tab that loaded them, nothing else. Every answer
carries a Content-Security-Policy that allows the page's own files and API only.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import traceback
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

import orjson

from ..errors import McprecError, SessionNotFoundError, UsageError
from ..transports.http_serve import Trust
from .data import PAGE_MAX, ViewData
from .page import LIVE_CSP, asset, live_page

Send = Callable[[dict[str, Any]], Awaitable[None]]

_SECURITY = [
    (b"content-security-policy", LIVE_CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
_SESSION = re.compile(r"/api/sessions/(\d+)(?:/(timeline|locate|filter)|/messages/(\d+)(?:/(during|raw))?)?")


def dumps(data: Any) -> bytes:
    try:
        return orjson.dumps(data)
    except TypeError:  # an integer past 64 bits in a diff: exact, slower
        return json.dumps(data, ensure_ascii=False).encode("utf-8", "replace")


class ViewApp:
    """Serves one cassette's view. A diff runs in a thread of its own (with a connection of its
    own when ``data.reopen`` gives one), so the page stays responsive meanwhile."""

    def __init__(self, data: ViewData, *, bound_host: str = "127.0.0.1",
                 allowed_hosts: tuple[str, ...] = (), allowed_origins: tuple[str, ...] = ()
                 ) -> None:
        self.data = data
        self.trust = Trust(bound_host, allowed_hosts, allowed_origins)
        self._page = live_page(f"mcprec view: {data.cassette.path.name}")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        if scope["type"] != "http":
            return
        refused = self.trust.refusal(scope)
        if refused is None and _cross_site(scope):
            refused = (403, "mcprec: requests from other sites are not allowed")
        if refused is not None:
            await _json(send, refused[0], {"error": refused[1]})
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _json(send, 405, {"error": "mcprec view is read-only: GET and HEAD only"},
                        [(b"allow", b"GET, HEAD")])
            return
        if scope["method"] == "HEAD":
            send = _headless(send)
        try:
            await self._route(scope, send)
        except SessionNotFoundError as e:
            await _json(send, 404, {"error": str(e)})
        except (UsageError, ValueError, OverflowError) as e:
            await _json(send, 400, {"error": str(e)})
        except McprecError as e:
            await _json(send, 500, {"error": str(e)})
        except Exception as e:  # a bug: said on stderr, and to the page in one line
            traceback.print_exc(file=sys.stderr)
            await _json(send, 500, {"error": f"mcprec view failed: {type(e).__name__}: {e}"})

    async def _route(self, scope: dict[str, Any], send: Send) -> None:
        path: str = scope["path"]
        args = {k: v[-1] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()}
        if path in ("/", "/index.html"):
            await _reply(send, 200, self._page, b"text/html; charset=utf-8")
        elif path.startswith("/static/"):
            found = asset(path[len("/static/"):])
            if found is None:
                await _json(send, 404, {"error": f"no such file: {path}"})
            else:
                await _reply(send, 200, found[0], found[1])
        elif path == "/api/cassette":
            await _json(send, 200, self.data.cassette_info())
        elif path == "/api/sessions":
            await _json(send, 200, self.data.sessions())
        elif path == "/api/search":
            await _json(send, 200, self.data.search(
                args.get("q", ""), args.get("cursor"), _int(args, "limit", 50)))
        elif path == "/api/diff":
            await self._diff(args, send)
        elif (m := _SESSION.fullmatch(path)) is not None:
            await self._session(m, args, send)
        else:
            await _json(send, 404, {"error": f"no such page: {path}"})

    async def _session(self, m: re.Match[str], args: dict[str, str], send: Send) -> None:
        sid = _number(m.group(1), "session")
        what, sub = m.group(2), m.group(4)
        seq = None if m.group(3) is None else _number(m.group(3), "message")
        if what == "timeline":
            await _json(send, 200, self.data.timeline(
                sid, _int(args, "start", 0), _int(args, "count", 100), cap=PAGE_MAX))
        elif what == "filter":
            await _json(send, 200, self.data.filter(sid, args.get("q", "")[:2000]))
        elif what == "locate":
            await _json(send, 200, self.data.locate(sid, _int(args, "seq", 0)))
        elif seq is None:
            await _json(send, 200, self.data.session(sid))
        elif sub == "during":
            await _json(send, 200, self.data.during(sid, seq))
        elif sub == "raw":
            await _reply(send, 200, self.data.raw(sid, seq), b"application/octet-stream",
                         [(b"content-disposition", _attachment(
                             f"{self.data.session_of(sid).name}-{seq}.json"))])
        else:
            await _json(send, 200, self.data.message(sid, seq))

    async def _diff(self, args: dict[str, str], send: Send) -> None:
        a, b = _int(args, "a", -1), _int(args, "b", -1)
        if a < 0 or b < 0:
            raise UsageError("give two sessions to compare: /api/diff?a=ID&b=ID")
        ignore = tuple(p for p in args.get("ignore", "").split("\n") if p.strip())
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(
            None, lambda: self.data.diff(a, b, ignore, reopen=self.data.reopen))
        await _json(send, 200, result)


def _cross_site(scope: dict[str, Any]) -> bool:
    for k, v in scope["headers"]:
        if k == b"sec-fetch-site":
            return v not in (b"same-origin", b"none")
    return False


_MAX = 2**63 - 1  # SQLite's integers: anything past them names nothing


def _number(text: str, what: str) -> int:
    n = int(text)
    if n > _MAX:
        raise SessionNotFoundError(f"no {what} {text[:40]}{'…' if len(text) > 40 else ''}")
    return n


def _int(args: dict[str, str], name: str, default: int) -> int:
    value = args.get(name)
    if value is None or value == "":
        return default
    try:
        n = int(value)
    except ValueError:
        raise UsageError(f"{name} must be a whole number, got {value[:40]!r}") from None
    if not -_MAX <= n <= _MAX:
        raise UsageError(f"{name} is out of range, got {value[:40]!r}")
    return n


def _attachment(name: str) -> bytes:
    """A Content-Disposition for a download named ``name``: a plain ASCII name without quotes,
    backslashes or control characters (a session name may hold CR/LF), and the exact name in
    RFC 5987's filename* form."""
    from urllib.parse import quote

    plain = "".join(c if " " <= c <= "~" and c not in '"\\' else "_" for c in name)
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(name, safe='')}".encode()


def _headless(send: Send) -> Send:
    """``send`` for a HEAD request: the headers of the GET answer, no body."""
    async def head(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            message = {"type": "http.response.body", "body": b""}
        await send(message)
    return head


async def _reply(send: Send, status: int, body: bytes, content_type: bytes,
                 extra: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type),
                            (b"content-length", str(len(body)).encode()),
                            *_SECURITY, *(extra or [])]})
    await send({"type": "http.response.body", "body": body})


async def _json(send: Send, status: int, data: Any,
                extra: list[tuple[bytes, bytes]] | None = None) -> None:
    await _reply(send, status, dumps(data), b"application/json", extra)

