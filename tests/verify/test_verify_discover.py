"""Server facts of a stateless (2026-07-28) session come from `server/discover`: diff and verify
see a version bump there as they see one in `initialize`."""

from __future__ import annotations

import asyncio
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from support.helpers import MCPREC, SDK_SERVER, copy_cassette, run_mcprec

SERVER = [sys.executable, str(SDK_SERVER)]


async def _drive(argv: list[str], env: dict[str, str]) -> None:
    from mcp import StdioServerParameters
    from mcp.client import Client

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        params = StdioServerParameters(command=argv[0], args=argv[1:],
                                       env={**os.environ, **env})
        async with Client(params, mode="auto") as c:  # probes server/discover
            await c.list_tools()
            await c.call_tool("add", {"a": 2, "b": 3})


def record(cassette: Path, session: str, version: str) -> None:
    asyncio.run(_drive([*MCPREC, "record", "-c", str(cassette), "-s", session, "--", *SERVER],
                       {"MCPREC_TEST_SERVER_VERSION": version}))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Sessions "v1" (version 1.0.0) and "v5" (5.0.0) of the SDK server, both stateless."""
    cassette = tmp_path_factory.mktemp("discover") / "d.db"
    record(cassette, "v1", "1.0.0")
    record(cassette, "v5", "5.0.0")
    return cassette


def test_diff_reports_the_version_from_server_discover(recorded: Path) -> None:
    """diff of two stateless sessions names the serverInfo version change."""
    out = run_mcprec("diff", f"{recorded}:v1", f"{recorded}:v5")
    text = out.stdout.decode()
    assert out.returncode == 1, text + out.stderr.decode()
    assert "server/discover" in text or "serverInfo" in text
    assert "1.0.0" in text and "5.0.0" in text


@pytest.mark.parametrize("version, code", [("1.0.0", 0), ("5.0.0", 1)])
def test_verify_sees_the_version_of_server_discover(recorded: Path, tmp_path: Path,
                                                    version: str, code: int) -> None:
    """verify against the unchanged server: exit 0; against the same server at 5.0.0: exit 1,
    with the version named."""
    cassette = copy_cassette(recorded, tmp_path / "d.db")
    out = run_mcprec("verify", str(cassette), "-s", "v1", "--", *SERVER,
                     env={"MCPREC_TEST_SERVER_VERSION": version})
    text = out.stdout.decode()
    assert out.returncode == code, text + out.stderr.decode()
    if code:
        assert "serverInfo" in text and "5.0.0" in text


def test_verify_a_stateless_http_server_sends_the_recorded_protocol_headers(
        tmp_path: Path) -> None:
    """A 2026-07-28 session recorded over HTTP (the SDK's Client against its stateless server):
    verify sends each request's MCP-Protocol-Version, Mcp-Method and Mcp-Name as recorded, and
    the unchanged server verifies equal (exit 0)."""
    from support.http_helpers import start_proxy, start_sdk_http

    cassette = tmp_path / "h.db"
    server = start_sdk_http("--stateless", "--json-response")
    try:
        proxy = start_proxy(server.url, cassette, "s")
        try:
            async def drive() -> None:
                from mcp.client import Client

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    async with Client(proxy.url, mode="2026-07-28") as c:
                        await c.list_tools()
                        await c.call_tool("add", {"a": 2, "b": 3})

            asyncio.run(drive())
        finally:
            proxy.stop()
        from mcprec.cassette import open_cassette

        with open_cassette(cassette) as c:
            sent = [m for m in c.messages(c.session("s")) if m.kind == "request"]
        assert sent and "initialize" not in [m.method for m in sent]
        assert any("mcp-method" in {k.lower() for k in (m.http or {}).get("headers", {})}
                   for m in sent)
        out = run_mcprec("verify", str(cassette), "-s", "s", "--target", server.url)
        text = out.stdout.decode()
        assert out.returncode == 0, text + out.stderr.decode()
        with open_cassette(cassette) as c:
            run = [s for s in c.sessions() if s.tags.get("verify_of") == "s"][0]
            again = [m for m in c.messages(run) if m.kind == "request"]
        for m in again:
            headers = {k.lower(): v for k, v in (m.http or {}).get("headers", {}).items()}
            assert headers.get("mcp-protocol-version") == "2026-07-28", m.method
            assert headers.get("mcp-method") == m.method
    finally:
        server.stop()
