"""The pytest plugin with stdio: `@pytest.mark.mcprec(server=[...])` + `mcprec_server`, run in
pytester, recording with --mcprec-mode=once and replaying in the default mode none."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers import SDK_SERVER

pytest_plugins = ["pytester"]

# the hypothesis plugin takes ~1 s to set up in every in-process run, and is not used here
INNER_ARGS = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")

INNER = '''
import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client

SERVER = {server!r}


def run(server_params, calls):
    async def main():
        async with stdio_client(server_params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                return [(await s.call_tool(name, args)).structured_content for name, args in calls]
    return anyio.run(main)


@pytest.mark.mcprec(server=SERVER, assert_all_played={assert_all_played!r})
def test_tools(mcprec_server):
    assert run(mcprec_server.params, {calls!r}) == {expected!r}
'''

ADD = ("add", {"a": 2, "b": 3})
COUNTER = ("counter", {})
BOTH = [ADD, COUNTER, COUNTER]
BOTH_RESULTS = [{"result": 5}, {"result": "call 1"}, {"result": "call 2"}]
SDK = [sys.executable, str(SDK_SERVER)]


def inner_test(pytester: pytest.Pytester, *, server: list[str], calls: list = BOTH,
               expected: list = BOTH_RESULTS, assert_all_played: bool = True) -> Path:
    """Write tests/test_inner.py; return the cassette path the plugin derives for its test."""
    tests = pytester.path / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "test_inner.py").write_text(INNER.format(
        server=server, calls=calls, expected=expected, assert_all_played=assert_all_played))
    return tests / "cassettes" / "test_inner" / "test_tools.db"


def test_once_mode_records_then_default_mode_replays_without_the_server(
        pytester: pytest.Pytester) -> None:
    """once records <test dir>/cassettes/<module>/<test>.db; plain pytest replays it serverless."""
    cassette = inner_test(pytester, server=SDK)
    pytester.runpytest("tests", "--mcprec-mode=once", *INNER_ARGS).assert_outcomes(passed=1)
    assert cassette.is_file()
    inner_test(pytester, server=["false"])
    pytester.runpytest("tests", *INNER_ARGS).assert_outcomes(passed=1)


@pytest.fixture
def main_cassette(pytester: pytest.Pytester, sdk_recordings: SimpleNamespace) -> None:
    """The main SDK recording (add, counter three times and more) at the inner test's cassette."""
    cassette = inner_test(pytester, server=["false"])
    cassette.parent.mkdir(parents=True)
    shutil.copy(sdk_recordings.main.cassette, cassette)


@pytest.mark.usefixtures("main_cassette")
def test_assert_all_played_fails_when_a_recorded_request_is_not_replayed(
        pytester: pytest.Pytester) -> None:
    """A replay that leaves recorded requests unplayed fails, naming them."""
    inner_test(pytester, server=["false"], calls=[ADD], expected=[{"result": 5}])
    result = pytester.runpytest("tests", *INNER_ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*recorded request(s) were never played*",
                                 "*unplayed: seq * tools/call*"])


@pytest.mark.usefixtures("main_cassette")
def test_without_assert_all_played_unplayed_requests_are_fine(pytester: pytest.Pytester) -> None:
    """The same partial replay passes when assert_all_played is not asked for."""
    inner_test(pytester, server=["false"], calls=[ADD], expected=[{"result": 5}],
               assert_all_played=False)
    pytester.runpytest("tests", *INNER_ARGS).assert_outcomes(passed=1)


def test_default_mode_without_a_cassette_fails_clearly(pytester: pytest.Pytester) -> None:
    """With no cassette recorded yet, the test fails saying how to record one."""
    inner_test(pytester, server=["false"])
    result = pytester.runpytest("tests", *INNER_ARGS)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*mcprec: no cassette at *test_tools.db*--mcprec-mode=once*"])
