"""mcprec's HTTP servers subclass uvicorn's private httptools protocol (``http_serve``): these
tests fail, saying what broke, when an installed uvicorn no longer fits it."""

from __future__ import annotations

import asyncio
import inspect
import re
import sys
from importlib.metadata import version
from typing import Any

import httpx
import pytest
from packaging.specifiers import SpecifierSet

from support.helpers import REPO
from mcprec.transports import http_serve

WHY = ("mcprec.transports.http_serve subclasses uvicorn's private "
       "uvicorn.protocols.http.httptools_impl.HttpToolsProtocol, so that a response's head and "
       "body leave in one write; uvicorn {v} ")
FIX = ("; adapt _http_protocol() in http_serve.py to this uvicorn (or pin uvicorn in "
       "pyproject.toml to the range it was checked against)")


def _pinned_range() -> SpecifierSet:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        tomllib = pytest.importorskip("tomli")
    with open(REPO / "pyproject.toml", "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    spec = next(d for d in deps if re.match(r"uvicorn\b", d))
    return SpecifierSet(spec[len("uvicorn"):].split(";")[0].strip())


def test_installed_uvicorn_is_in_the_pinned_range() -> None:
    """The uvicorn installed is one pyproject.toml's range was checked against."""
    installed = version("uvicorn")
    pinned = _pinned_range()
    assert any(s.operator in ("<", "<=", "==", "~=") for s in pinned), \
        f"pyproject.toml must bound uvicorn from above (its private API is used), got {pinned!s}"
    assert installed in pinned, (
        WHY.format(v=installed) + f"is outside the range pinned in pyproject.toml ({pinned})"
        + ": when the other tests in this file pass against it, widen the pin")


def test_private_protocol_has_what_the_subclass_uses() -> None:
    """``HttpToolsProtocol`` still exists, with ``connection_made`` setting ``transport`` and
    ``loop`` set from construction, and each request's cycle writing through ``transport``."""
    v = version("uvicorn")
    try:
        from uvicorn.protocols.http import httptools_impl
    except ImportError as e:
        pytest.fail(WHY.format(v=v) + f"has no such module ({e})" + FIX)
    cls = getattr(httptools_impl, "HttpToolsProtocol", None)
    assert cls is not None, WHY.format(v=v) + "has no HttpToolsProtocol" + FIX
    made = inspect.getsource(cls.connection_made)
    assert re.search(r"self\.transport\s*=\s*transport\b", made), \
        WHY.format(v=v) + "no longer sets self.transport in connection_made" + FIX
    init = inspect.getsource(cls.__init__)
    assert re.search(r"self\.loop\s*=", init), \
        WHY.format(v=v) + "no longer sets self.loop in __init__" + FIX
    whole = inspect.getsource(httptools_impl)
    assert re.search(r"transport\s*=\s*self\.transport\b", whole), \
        WHY.format(v=v) + "no longer hands self.transport to the request cycle" + FIX
    proto = http_serve._http_protocol()
    assert isinstance(proto, type) and issubclass(proto, cls), \
        WHY.format(v=v) + f"gave {proto!r} instead of the subclass" + FIX


def test_responses_leave_through_the_coalescing_transport(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """A response served by ``serve_app`` is written through mcprec's transport, unchanged."""
    writes: list[bytes] = []
    original = http_serve._CoalescingTransport.write

    def spy(self: Any, data: bytes) -> None:
        writes.append(bytes(data))
        original(self, data)

    monkeypatch.setattr(http_serve._CoalescingTransport, "write", spy)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await http_serve.send_simple(send, 200, b'{"ok": true}')

    async def main() -> httpx.Response:
        sock = http_serve.bind("127.0.0.1", 0)
        url = http_serve.url_of(sock, "/")
        ready, stop = asyncio.Event(), asyncio.Event()
        server = asyncio.get_running_loop().create_task(
            http_serve.serve_app(app, sock, on_ready=ready.set, stop=stop))
        try:
            await asyncio.wait_for(ready.wait(), 10)
            async with httpx.AsyncClient() as client:
                return await client.get(url)
        finally:
            stop.set()
            await asyncio.wait_for(server, 10)

    resp = asyncio.run(main())
    assert resp.status_code == 200 and resp.json() == {"ok": True}
    assert writes, (WHY.format(v=version("uvicorn"))
                    + "wrote the response without going through _CoalescingTransport" + FIX)
    assert b"".join(writes).endswith(b'{"ok": true}')
