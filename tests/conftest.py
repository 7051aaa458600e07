"""Fixtures: the interpreter, the mcprec command, a cassette path, real MCP peers, an SDK client."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from support.helpers import EVERYTHING_DIR, EVERYTHING_VERSION, MCPREC, REPO, SDK_SERVER, ClientRun, run_client


# --- markers: node, browser, slow (docs/contributing.md: the fast subset) ---------------------

NODE_MODULES = frozenset({
    "test_http_everything", "test_record_everything", "test_replay_everything",
    "test_http_ts_progress", "test_typescript_example", "test_http_task_status",
    "test_replay_tasks", "test_replay_writes", "test_conformance", "test_lint_real",
    "test_http_probe",
})
"""Modules whose every test runs a Node peer; elsewhere a test that takes the
``everything_server`` fixture is marked by it."""
BROWSER_MODULES = frozenset({
    "test_view_browser", "test_view_timeline", "test_severity_pages", "test_verify_reports",
})
SLOW_MODULES = frozenset(
    line.strip() for line in (Path(__file__).parent / "slow.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#"))
"""Modules beyond the fast subset, one a line in tests/slow.txt (measured: each takes long
or starts many processes); Node and browser tests are slow too."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
        fixtures = getattr(item, "fixturenames", ())
        node = module in NODE_MODULES or any("everything" in f for f in fixtures)
        browser = module in BROWSER_MODULES
        if node:
            item.add_marker(pytest.mark.node)
        if browser:
            item.add_marker(pytest.mark.browser)
        if node or browser or module in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


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
    installed = json.loads((EVERYTHING_DIR / "package.json").read_text())["version"]
    if installed != EVERYTHING_VERSION:
        pytest.fail(
            f"@modelcontextprotocol/server-everything {installed} is installed, the tests expect "
            f"{EVERYTHING_VERSION}: run `npm ci` in {REPO}",
            pytrace=False,
        )
    return ["node", str(index), "stdio"]


@pytest.fixture(scope="session")
def mcp_client() -> Callable[..., ClientRun]:
    """``mcp_client(argv, scenario, env=..., cwd=..., roots=...)``: drive a server with the SDK."""
    return run_client


# --- replay tests: real sessions recorded once per test run ----------------------------------


@pytest.fixture(scope="session")
def sdk_recordings(tmp_path_factory: pytest.TempPathFactory) -> object:
    """Two sessions of tests/peers/sdk_server.py recorded through `mcprec record`, in parallel.

    ``.main``: tools, identical counter calls, a slow call with progress, sampling, resources,
    prompts and ping. ``.extra``: lists paged by 5, and a slow call the client cancels.
    Each is a ``replay_helpers.Recording`` (cassette, session name, what the live client saw).
    """
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    from support.replay_helpers import SDK, PAGE_SIZE, extra_scenario, main_scenario, record

    tmp = tmp_path_factory.mktemp("sdk-recordings")
    with ThreadPoolExecutor(2) as pool:
        main = pool.submit(record, tmp / "main.db", "main", SDK, main_scenario)
        extra = pool.submit(record, tmp / "extra.db", "extra", SDK, extra_scenario,
                            env={"MCPREC_TEST_SERVER_PAGE_SIZE": str(PAGE_SIZE)})
        return SimpleNamespace(main=main.result(), extra=extra.result())
