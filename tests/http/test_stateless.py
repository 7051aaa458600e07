"""The stateless 2026-07-28 revision: record a client that starts with ``server/discover`` and
carries its details in ``_meta``, then replay to clients of both eras."""

from __future__ import annotations

import asyncio
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from support.helpers import SDK_SERVER

from mcprec.cassette import open_cassette

MCPREC = [sys.executable, "-m", "mcprec"]


async def _drive(argv: list[str], mode: str) -> dict[str, Any]:
    from mcp import StdioServerParameters
    from mcp.client import Client

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        async with Client(StdioServerParameters(command=argv[0], args=argv[1:]),
                          mode=mode) as c:  # type: ignore[arg-type]
            tools = await c.list_tools()
            result = await c.call_tool("add", {"a": 2, "b": 3})
    return {"tools": sorted(t.name for t in tools.tools),
            "add": result.model_dump(mode="json", exclude_unset=True,
                                     exclude={"result_type"})}


@pytest.fixture(scope="module")
def stateless(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A session recorded from the SDK's Client in auto mode (it probes server/discover)."""
    cassette = tmp_path_factory.mktemp("stateless") / "s.db"
    live = asyncio.run(_drive([*MCPREC, "record", "-c", str(cassette), "-s", "auto", "--",
                               sys.executable, str(SDK_SERVER)], "auto"))
    return cassette, live


def test_session_row_reads_the_meta_envelope(stateless: tuple[Path, dict[str, Any]]) -> None:
    """With no initialize, client and server details come from the _meta envelope and stamp."""
    cassette, _ = stateless
    with open_cassette(cassette) as c:
        s = c.session("auto")
        methods = [m.method for m in c.messages(s) if m.kind == "request"]
    assert methods[0] == "server/discover" and "initialize" not in methods
    assert s.protocol_version == "2026-07-28"
    assert s.server_info == {"name": "mcprec-test-server", "version": "1.0.0"}
    assert s.client_info is not None and s.client_info.get("name")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_replay_serves_both_eras(stateless: tuple[Path, dict[str, Any]], mode: str) -> None:
    """A stateless recording replays to a stateless client and to an initialize-era one."""
    cassette, live = stateless
    replayed = asyncio.run(_drive([*MCPREC, "replay", str(cassette)], mode))
    assert replayed == live


def test_legacy_recording_serves_a_probing_client(tmp_path: Path) -> None:
    """A client that probes server/discover first gets -32601 from the replay of an
    initialize-era recording, at once, and falls back to initialize as with the real server."""
    import time

    cassette = tmp_path / "legacy.db"
    live = asyncio.run(_drive([*MCPREC, "record", "-c", str(cassette), "--", sys.executable,
                               str(SDK_SERVER)], "legacy"))
    started = time.monotonic()
    replayed = asyncio.run(_drive([*MCPREC, "replay", str(cassette)], "auto"))
    assert replayed == live
    assert time.monotonic() - started < 8  # no 10 s probe timeout
