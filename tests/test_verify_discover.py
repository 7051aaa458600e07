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

from helpers import MCPREC, SDK_SERVER, copy_cassette, run_mcprec

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
