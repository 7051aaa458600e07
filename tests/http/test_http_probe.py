"""A client that probes ``server/discover`` first (the Python SDK 2.x ``Client`` in auto mode)
against an initialize-era HTTP server: the failed probe goes with the session that follows it,
so ``record -s s1`` then ``replay -s s1`` serves the same client identically."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from support.http_helpers import run_sync, start_everything, start_proxy, start_replay

from mcprec.cassette import open_cassette


async def _probing_client(url: str) -> dict[str, Any]:
    from mcp.client import Client

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        async with Client(url, mode="auto") as c:  # type: ignore[arg-type]
            tools = await c.list_tools()
            echo = await c.call_tool("echo", {"message": "hi"})
    return {"tools": sorted(t.name for t in tools.tools),
            "echo": echo.model_dump(mode="json", exclude_unset=True)}


def test_a_failed_probe_does_not_take_the_session_name(tmp_path: Path) -> None:
    """One session named s1 holds the probe and the conversation; its replay is identical."""
    cassette = tmp_path / "probe.db"
    upstream = start_everything("streamableHttp")
    try:
        proxy = start_proxy(upstream.url, cassette, session="s1")
        try:
            live = run_sync(lambda: _probing_client(proxy.url))
        finally:
            proxy.stop()
    finally:
        upstream.stop()
    with open_cassette(cassette) as c:
        names = [s.name for s in c.sessions_latest_first(stats=False)]
        methods = [m.method for m in c.messages(c.session("s1")) if m.kind == "request"]
    assert names == ["s1"]
    assert methods[:2] == ["server/discover", "initialize"]
    replay = start_replay(cassette, "s1")
    try:
        replayed = run_sync(lambda: _probing_client(replay.url))
    finally:
        replay.stop()
    assert replayed == live
