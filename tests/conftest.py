"""Fixtures: the interpreter, the mcprec command, a cassette path, real MCP peers, an SDK client."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import EVERYTHING_DIR, EVERYTHING_VERSION, MCPREC, REPO, SDK_SERVER, ClientRun, run_client


# --- plain paths and commands -----------------------------------------------------------------


@pytest.fixture(scope="session")
def python() -> str:
    """The interpreter of the venv the tests run in."""
    return sys.executable


@pytest.fixture(scope="session")
def mcprec_cmd() -> list[str]:
    """How to run the mcprec CLI."""
    return list(MCPREC)


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    """A path for a cassette that does not exist yet."""
    return tmp_path / "test.db"


@pytest.fixture(scope="session")
def sdk_server() -> list[str]:
    """The argv of tests/peers/sdk_server.py."""
    return [sys.executable, str(SDK_SERVER)]


@pytest.fixture(scope="session")
def everything_server() -> list[str]:
    """The argv of @modelcontextprotocol/server-everything in stdio mode (installed by npm)."""
    index = EVERYTHING_DIR / "dist" / "index.js"
    if not index.is_file():
        pytest.fail(
            f"{index} is missing: run `npm ci` in {REPO} to install the Node test peers "
            f"(@modelcontextprotocol/server-everything {EVERYTHING_VERSION})",
            pytrace=False,
        )
    return ["node", str(index), "stdio"]


@pytest.fixture(scope="session")
def mcp_client() -> Callable[..., ClientRun]:
    """``mcp_client(argv, scenario, env=..., cwd=..., roots=...)``: drive a server with the SDK."""
    return run_client
