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



def test_verify_answers_the_failed_probe_as_recorded(tmp_path: Path) -> None:
    """verify re-sends the failed probe: the live HTTP 400 (JSON with no id) is its answer, as
    in the recording, not a wait for a JSON-RPC answer that never comes."""
    import time

    from support.helpers import run_mcprec

    cassette = tmp_path / "probe.db"
    upstream = start_everything("streamableHttp")
    try:
        proxy = start_proxy(upstream.url, cassette, session="s1")
        try:
            run_sync(lambda: _probing_client(proxy.url))
        finally:
            proxy.stop()
        started = time.monotonic()
        out = run_mcprec("verify", str(cassette), "-s", "s1", "--target", upstream.url,
                         "--timeout", "10")
        took = time.monotonic() - started
    finally:
        upstream.stop()
    text = out.stdout.decode() + out.stderr.decode()
    assert out.returncode in (0, 1) and "did not answer" not in text, text
    assert took < 9, text
    with open_cassette(cassette) as c:
        run = [s for s in c.sessions() if s.tags.get("verify_of") == "s1"][0]
        first = list(c.messages(run))[:2]
    assert first[0].method == "server/discover"
    assert first[1].kind == "error" and first[1].rpc_id == first[0].rpc_id
    assert first[1].http is not None and first[1].http.get("synthetic")
    assert first[1].json["error"]["message"].startswith("HTTP 400")


def test_verify_of_an_initialize_era_http_session_passes_three_times(tmp_path: Path) -> None:
    """verify against the unchanged server-everything over HTTP exits 0, 3 runs of 3: the
    GET stream opens once ``initialized`` is accepted (as the SDK clients open it, so the
    tools/list_changed sent before it is lost alike) and ``initialized`` reaches the server
    before ``tools/list``."""
    from support.helpers import run_mcprec

    cassette = tmp_path / "probe.db"
    upstream = start_everything("streamableHttp")
    try:
        proxy = start_proxy(upstream.url, cassette, session="s1")
        try:
            run_sync(lambda: _probing_client(proxy.url))
        finally:
            proxy.stop()
        for _ in range(3):
            out = run_mcprec("verify", str(cassette), "-s", "s1", "--target", upstream.url,
                             "--timeout", "10")
            text = out.stdout.decode() + out.stderr.decode()
            assert out.returncode == 0, text
    finally:
        upstream.stop()


def test_the_first_post_of_the_http_client_is_not_slowed_by_imports() -> None:
    """Opening the HTTP client imports what httpx loads on its first request, so that verify's
    first latency (initialize, server/discover) is the server's and not ~40 ms of imports."""
    import subprocess
    import sys

    code = ("import asyncio, sys\n"
            "from mcprec.transports.http_client import StreamableHTTPClient\n"
            "async def main():\n"
            "    c = StreamableHTTPClient('http://127.0.0.1:9/mcp', timeout=5)\n"
            "    await c.open()\n"
            "    before = set(sys.modules)\n"
            "    try:\n"
            "        await c.post(b'{}', None)\n"
            "    except Exception:\n"
            "        pass\n"
            "    await c.close()\n"
            "    print(sorted(m for m in set(sys.modules) - before if m.startswith(('anyio', 'sniffio'))))\n"
            "asyncio.run(main())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode().strip() == "[]", out.stdout.decode()
