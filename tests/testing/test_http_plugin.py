"""The pytest plugin's `mcprec_http_server` fixture with `@pytest.mark.mcprec(cassette=...)`, run
in pytester against a cassette recorded through the HTTP proxy: replay, strictness (a request
with no recorded match fails the test at teardown), a missing cassette; and in the recording
modes, the fixture as a recording proxy in front of the real HTTP server."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from support.helpers import copy_cassette, dump
from support.http_helpers import run_http_session, run_sync, start_proxy, start_sdk_http
from support.plugin_helpers import INNER_ARGS
from support.plugin_helpers import no_mode_from_the_environment  # noqa: F401 - autouse here too

pytest_plugins = ["pytester"]


async def scenario(s: Any, run: Any) -> None:
    run.results["add"] = dump(await s.call_tool("add", {"a": 2, "b": 3}))
    run.results["echo"] = dump(await s.call_tool("echo", {"text": "hi"}))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """initialize, add(2, 3) and echo('hi') recorded through the proxy as session 'plugin'."""
    cas = tmp_path_factory.mktemp("plugin") / "plugin.db"
    upstream = start_sdk_http("--json-response")
    try:
        proxy = start_proxy(upstream.url, cas, session="plugin")
        try:
            run = run_sync(lambda: run_http_session(proxy.url, scenario))
        finally:
            proxy.stop()
    finally:
        upstream.stop()
    return SimpleNamespace(cassette=cas, run=run)


CLIENT = '''
import anyio
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def call_add(url, *, echo=True):
    async def main():
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                result = await s.call_tool("add", {"a": 2, "b": 3})
                if echo:
                    assert (await s.call_tool("echo", {"text": "hi"})).content[0].text == "hi"
                return result.structured_content
    return anyio.run(main)


def call_swallowing(url, name, args):
    """The tool's structured result, or "error": a client that swallows errors."""
    async def main():
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                try:
                    return (await s.call_tool(name, args)).structured_content
                except Exception:
                    return "error"
    return anyio.run(main)
'''


def test_fixture_serves_marker_cassette(pytester: pytest.Pytester, recorded: SimpleNamespace
                                        ) -> None:
    """A test marked with an absolute cassette path gets a live replay URL and its answers."""
    pytester.makepyfile(CLIENT + f'''

@pytest.mark.mcprec(cassette={str(recorded.cassette)!r}, assert_all_played=True)
def test_add(mcprec_http_server):
    assert mcprec_http_server.url.startswith("http://127.0.0.1:")
    assert call_add(mcprec_http_server.url) == {{"result": 5}}
''')
    result = pytester.runpytest(*INNER_ARGS)
    result.assert_outcomes(passed=1)


def test_fixture_resolves_relative_cassette(pytester: pytest.Pytester,
                                            recorded: SimpleNamespace) -> None:
    """A relative cassette path is taken from the test file's directory."""
    (pytester.path / "cassettes").mkdir()
    copy_cassette(recorded.cassette, pytester.path / "cassettes" / "add.db")
    pytester.makepyfile(CLIENT + '''

@pytest.mark.mcprec(cassette="cassettes/add.db", session="plugin")
def test_add(mcprec_http_server):
    assert call_add(mcprec_http_server.url) == {"result": 5}
''')
    result = pytester.runpytest(*INNER_ARGS)
    result.assert_outcomes(passed=1)


def test_fixture_assert_all_played_fails_on_unplayed(pytester: pytest.Pytester,
                                                     recorded: SimpleNamespace) -> None:
    """With assert_all_played, a recorded request the test never made fails the test."""
    pytester.makepyfile(CLIENT + f'''

@pytest.mark.mcprec(cassette={str(recorded.cassette)!r}, assert_all_played=True)
def test_add(mcprec_http_server):
    assert call_add(mcprec_http_server.url, echo=False) == {{"result": 5}}
''')
    result = pytester.runpytest(*INNER_ARGS)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*1 recorded request(s) were never played*",
                                 "*unplayed: seq * tools/call*"])


def test_fixture_missing_cassette_fails_clearly(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """A missing cassette fails the test with a one-line hint, not a traceback."""
    missing = tmp_path / "nope.db"
    pytester.makepyfile(f'''
import pytest

@pytest.mark.mcprec(cassette={str(missing)!r})
def test_x(mcprec_http_server):
    pass
''')
    result = pytester.runpytest(*INNER_ARGS)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*mcprec: no cassette at {missing}*"])
    result.stdout.no_fnmatch_line("*Traceback*")


def test_unmatched_request_fails_at_teardown_naming_the_closest_recorded_one(
        pytester: pytest.Pytester, recorded: SimpleNamespace) -> None:
    """A request with no recorded match fails the test when the replay stops, with the near-miss
    report taken from the replay's own stderr."""
    pytester.makepyfile(CLIENT + f'''

@pytest.mark.mcprec(cassette={str(recorded.cassette)!r})
def test_add(mcprec_http_server):
    assert call_swallowing(mcprec_http_server.url, "add", {{"a": 20, "b": 3}}) == "error"
''')
    result = pytester.runpytest(*INNER_ARGS)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([
        "*ERROR at teardown of test_add*",
        "*mcprec: 1 request(s) had no recorded match in *plugin.db*",
        "*no recorded response matches request id=* tools/call (session 'plugin'*",
        "*closest recorded requests:*",
        "*params.arguments.a: recorded 2, got 20*",
    ])


def test_allow_unmatched_accepts_it(pytester: pytest.Pytester, recorded: SimpleNamespace
                                    ) -> None:
    """allow_unmatched=True in the marker lets the same test pass."""
    pytester.makepyfile(CLIENT + f'''

@pytest.mark.mcprec(cassette={str(recorded.cassette)!r}, allow_unmatched=True)
def test_add(mcprec_http_server):
    assert call_swallowing(mcprec_http_server.url, "add", {{"a": 20, "b": 3}}) == "error"
''')
    pytester.runpytest(*INNER_ARGS).assert_outcomes(passed=1)


def test_skip_missing_skips_a_test_without_its_cassette(pytester: pytest.Pytester,
                                                        tmp_path: Path) -> None:
    """--mcprec-skip-missing turns the missing-cassette failure into a skip naming the path."""
    missing = tmp_path / "nope.db"
    pytester.makepyfile(f'''
import pytest

@pytest.mark.mcprec(cassette={str(missing)!r})
def test_x(mcprec_http_server):
    pass
''')
    result = pytester.runpytest("--mcprec-skip-missing", "-rs", *INNER_ARGS)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"*mcprec: no cassette at {missing}*"])


# --- recording through the proxy ----------------------------------------------------------------


def sessions(cassette: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(cassette)) as db:
        return [name for (name,) in db.execute("SELECT name FROM sessions ORDER BY id")]


def test_once_records_the_target_through_the_proxy_then_replays(pytester: pytest.Pytester
                                                                ) -> None:
    """In mode once the fixture is a recording proxy in front of the marker's target; plain
    pytest then replays the recording with the server gone."""
    upstream = start_sdk_http("--json-response")
    try:
        pytester.makepyfile(test_add=CLIENT + f'''

@pytest.mark.mcprec(target={upstream.url!r})
def test_add(mcprec_http_server):
    assert call_add(mcprec_http_server.url) == {{"result": 5}}
''')
        pytester.runpytest("--mcprec-mode=once", *INNER_ARGS).assert_outcomes(passed=1)
    finally:
        upstream.stop()
    cassette = pytester.path / "cassettes" / "test_add" / "test_add.db"
    assert sessions(cassette) == ["default"]
    pytester.runpytest(*INNER_ARGS).assert_outcomes(passed=1)


def test_all_re_records_with_the_target_from_a_fixture(pytester: pytest.Pytester) -> None:
    """Mode all records again, replacing the session, with the URL from a mcprec_real_target
    fixture; a test whose client sent nothing fails and keeps nothing."""
    upstream = start_sdk_http("--json-response")
    try:
        pytester.makeconftest(f'''
import pytest

@pytest.fixture
def mcprec_real_target():
    return {upstream.url!r}
''')
        pytester.makepyfile(test_add=CLIENT + '''

def test_add(mcprec_http_server):
    assert call_add(mcprec_http_server.url) == {"result": 5}


def test_nothing(mcprec_http_server):
    pass
''')
        for _ in range(2):
            result = pytester.runpytest("--mcprec-mode=all", *INNER_ARGS)
            result.assert_outcomes(passed=2, errors=1)
            result.stdout.fnmatch_lines(["*ERROR at teardown of test_nothing*",
                                         "*mcprec: the test recorded nothing into *test_nothing.db*"])
    finally:
        upstream.stop()
    cassettes = pytester.path / "cassettes" / "test_add"
    assert sessions(cassettes / "test_add.db") == ["default"]
    assert sorted(p.name for p in cassettes.iterdir()) == ["test_add.db"]


def test_recording_without_a_target_fails_clearly(pytester: pytest.Pytester) -> None:
    """A recording mode with no real HTTP server to record fails at set-up saying how to give it."""
    pytester.makepyfile(CLIENT + '''

def test_add(mcprec_http_server):
    pass
''')
    result = pytester.runpytest("--mcprec-mode=once", *INNER_ARGS)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*mcprec: recording *test_add.db needs the real HTTP server; "
                                 "give its URL with @pytest.mark.mcprec(target=URL)*"])
