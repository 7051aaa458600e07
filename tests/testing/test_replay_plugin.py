"""The pytest plugin with stdio: `@pytest.mark.mcprec(server=[...])` + `mcprec_server`, run in
pytester, recording with --mcprec-mode=once and replaying in the default mode none; a test fails
when its replay had a request with no recorded match, or when it recorded nothing."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from support.helpers import PEERS, copy_cassette
from mcprec.matching import MatchOptions
from mcprec.testing import replay_server
from support.plugin_helpers import INNER_ARGS, SDK
from support.plugin_helpers import no_mode_from_the_environment  # noqa: F401 - autouse here too

pytest_plugins = ["pytester"]

INNER = '''
import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client

SERVER = {server!r}


def run(server_params, calls):
    """Each call's structured result, or "error": a client that swallows errors."""
    async def call(s, name, args):
        try:
            return (await s.call_tool(name, args)).structured_content
        except Exception:
            return "error"

    async def main():
        async with stdio_client(server_params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                return [await call(s, name, args) for name, args in calls]
    return anyio.run(main)


@pytest.mark.mcprec(server=SERVER{marker})
def test_tools(mcprec_server):
    assert run(mcprec_server.params, {calls!r}) == {expected!r}
'''


ADD = ("add", {"a": 2, "b": 3})
COUNTER = ("counter", {})
BOTH = [ADD, COUNTER, COUNTER]
BOTH_RESULTS = [{"result": 5}, {"result": "call 1"}, {"result": "call 2"}]


def inner_test(pytester: pytest.Pytester, *, server: list[str], calls: list = BOTH,
               expected: list = BOTH_RESULTS, assert_all_played: bool = True,
               **marker: Any) -> Path:
    """Write tests/test_inner.py; return the cassette path the plugin derives for its test."""
    tests = pytester.path / "tests"
    tests.mkdir(exist_ok=True)
    marker["assert_all_played"] = assert_all_played
    (tests / "test_inner.py").write_text(INNER.format(
        server=server, calls=calls, expected=expected,
        marker="".join(f", {k}={v!r}" for k, v in marker.items())))
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
    copy_cassette(sdk_recordings.main.cassette, cassette)


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


# --- the launch: only what differs from the defaults ------------------------------------------


@pytest.mark.parametrize(("settings", "expected"), [
    ({}, ["--report", "R"]),
    ({"session": "s"}, ["--session", "s", "--report", "R"]),
    ({"mode": "once", "server": ["srv"]}, ["--mode", "once", "--report", "R", "--", "srv"]),
    ({"server": ["srv"]}, ["--report", "R"]),
    ({"timing": "0.5"}, ["--timing", "0.5", "--report", "R"]),
    ({"options": MatchOptions(repeat="error", strict_order=True, ignore=("params.x",))},
     ["--repeat", "error", "--strict-order", "--ignore", "params.x", "--report", "R"]),
    ({"allow_unmatched": True}, ["--report", "R", "--allow-unmatched"]),
], ids=["defaults", "session", "recording", "server-unused", "timing", "matching", "allow"])
def test_launch_gives_only_what_differs_from_the_defaults(
        settings: dict[str, Any], expected: list[str], tmp_path: Path) -> None:
    """The replay command line says no default out loud, nor a server that replay never uses."""
    rs = replay_server(tmp_path / "c.db", report_path=tmp_path / "r.json", **settings)
    assert rs.args == ["-m", "mcprec", "replay", str(tmp_path / "c.db"),
                       *[str(tmp_path / "r.json") if a == "R" else a for a in expected]]


def test_launch_overrules_a_mode_in_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    """With $MCPREC_MODE set, a replay-only launch says --mode none, which the replay would
    otherwise take from the environment."""
    monkeypatch.setenv("MCPREC_MODE", "all")
    assert replay_server(tmp_path / "c.db").args[4:] == ["--mode", "none"]


FAST_PATH = '''
import json
import subprocess
import sys

import pytest

INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"}}}).encode() + b"\\n"


@pytest.mark.mcprec(server=["python", "server.py"])  # for the recording modes only
def test_tools(mcprec_server):
    out = subprocess.run([sys.executable, "-X", "importtime", *mcprec_server.args], input=INIT,
                         capture_output=True, timeout=60, check=False)
    assert json.loads(out.stdout.splitlines()[0])["id"] == 1
    imported = [line.rsplit("|", 1)[-1].strip() for line in out.stderr.decode().splitlines()
                if line.startswith("import time:")]
    assert "mcprec._entry" in imported
    assert "click" not in imported and "mcprec.cli" not in imported
'''


@pytest.mark.usefixtures("main_cassette")
def test_plugin_launch_takes_the_click_free_entry(pytester: pytest.Pytester) -> None:
    """A replay launched by the plugin with the default settings starts without loading click."""
    (pytester.path / "tests" / "test_inner.py").write_text(FAST_PATH)
    pytester.runpytest("tests", *INNER_ARGS).assert_outcomes(passed=1)


# --- strict by default ----------------------------------------------------------------------

TYPO = ("add", {"a": 20, "b": 3})


@pytest.mark.usefixtures("main_cassette")
def test_unmatched_request_fails_the_test_naming_the_closest_recorded_one(
        pytester: pytest.Pytester) -> None:
    """A client that swallows the no-match error does not pass: the failure names the request
    and how the closest recorded one differs (in the message itself, not only in stderr)."""
    inner_test(pytester, server=["false"], calls=[ADD, TYPO], expected=[{"result": 5}, "error"],
               assert_all_played=False)
    # in a process of its own: an in-process run shares this one's stderr capture
    result = pytester.runpytest_subprocess("tests", "--show-capture=no", *INNER_ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*mcprec: 1 request(s) had no recorded match in *test_tools.db*allow_unmatched=True*",
        "*no recorded response matches request id=* tools/call*",
        "*closest recorded requests:*",
        "*1. seq * tools/call*",
        "*params.arguments.a: recorded 2, got 20*",
    ])


@pytest.mark.usefixtures("main_cassette")
def test_allow_unmatched_accepts_the_unmatched_request(pytester: pytest.Pytester) -> None:
    """The marker's allow_unmatched=True lets the same test pass."""
    inner_test(pytester, server=["false"], calls=[ADD, TYPO], expected=[{"result": 5}, "error"],
               assert_all_played=False, allow_unmatched=True)
    pytester.runpytest("tests", *INNER_ARGS).assert_outcomes(passed=1)


CLIENT_FIXTURE = '''
import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client


@pytest.fixture
async def client(mcprec_server):
    async with stdio_client(mcprec_server.params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            yield s


@pytest.mark.anyio
@pytest.mark.mcprec(cassette="cassettes/test_inner/test_tools.db")
async def test_tools(client):
    assert (await client.call_tool("add", {"a": 2, "b": 3})).structured_content == {"result": 5}
    try:
        await client.call_tool("add", {"a": 20, "b": 3})
    except Exception:
        pass  # swallowed
'''


@pytest.mark.usefixtures("main_cassette")
def test_unmatched_request_of_a_client_held_by_a_fixture_fails_at_teardown(
        pytester: pytest.Pytester) -> None:
    """A client session that outlives the test body (a fixture's) is checked when it has ended:
    an error at teardown, with the same report."""
    (pytester.path / "tests" / "test_inner.py").write_text(CLIENT_FIXTURE)
    result = pytester.runpytest_subprocess("tests", "--show-capture=no", *INNER_ARGS)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_tools*",
                                 "*1 request(s) had no recorded match*",
                                 "*params.arguments.a: recorded 2, got 20*"])


CAUSAL = [sys.executable, str(PEERS / "causal_server.py")]

CRASH = '''
import json
import subprocess

import pytest

LINES = [
    {{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {{
        "protocolVersion": "2025-06-18", "capabilities": {{}},
        "clientInfo": {{"name": "t", "version": "1"}}}}}},
    {{"jsonrpc": "2.0", "method": "notifications/initialized"}},
    {{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {{"name": "crash"}}}},
]


@pytest.mark.mcprec(server={server!r})
def test_tools(mcprec_server):
    out = subprocess.run(mcprec_server.argv, input=b"".join(
        json.dumps(line).encode() + b"\\n" for line in LINES), capture_output=True, timeout=60)
    assert out.returncode == 42
    assert [json.loads(line)["id"] for line in out.stdout.splitlines()] == [1]
'''


def test_requests_the_recording_never_answered_are_not_unmatched(
        pytester: pytest.Pytester) -> None:
    """A call the recorded server died in replays as it ended live (no answer, exit 42), and
    the test passes: the recording holds no answer for it, which is not a miss."""
    tests = pytester.mkdir("tests")
    (tests / "test_inner.py").write_text(CRASH.format(server=CAUSAL))
    pytester.runpytest("tests", "--mcprec-mode=once", *INNER_ARGS).assert_outcomes(passed=1)
    (tests / "test_inner.py").write_text(CRASH.format(server=["false"]))
    pytester.runpytest("tests", *INNER_ARGS).assert_outcomes(passed=1)


SILENT = '''
import subprocess
import pytest


@pytest.mark.mcprec(server={server!r})
def test_tools(mcprec_server):
    subprocess.run(mcprec_server.argv, input=b"", timeout=60, check=False)
'''


def test_a_recording_that_recorded_nothing_fails_and_is_not_kept(
        pytester: pytest.Pytester) -> None:
    """A recording run whose client sent nothing fails, and leaves no cassette to replay."""
    cassette = inner_test(pytester, server=SDK)
    (pytester.path / "tests" / "test_inner.py").write_text(SILENT.format(server=SDK))
    result = pytester.runpytest("tests", "--mcprec-mode=once", *INNER_ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*mcprec: the test recorded nothing into *test_tools.db*"])
    assert not cassette.exists()


def test_check_replay_after_an_in_process_replay(sdk_recordings: SimpleNamespace) -> None:
    """check_replay on replay_streams' report fails on the unmatched request, and passes with
    allow_unmatched."""
    import anyio
    from mcp import ClientSession
    from mcp.shared.exceptions import MCPError

    from mcprec.testing import check_replay, replay_streams

    async def main() -> Any:
        async with replay_streams(sdk_recordings.main.cassette) as replay:
            async with ClientSession(replay.read, replay.write) as s:
                await s.initialize()
                with pytest.raises(MCPError):
                    await s.call_tool(*TYPO)
        return replay

    replay = anyio.run(main)
    report = replay.report()
    with pytest.raises(AssertionError, match=r"1 request\(s\) had no recorded match(.|\n)*"
                                             r"id=\d+ tools/call"):
        check_replay(report)
    with pytest.raises(AssertionError, match=r"1 request\(s\) had no recorded match"):
        replay.check()
    check_replay(report, allow_unmatched=True)
    replay.settings = replay.settings.replace(allow_unmatched=True)
    replay.check()


@pytest.mark.usefixtures("main_cassette")
def test_marker_faults_make_the_replay_misbehave(pytester: pytest.Pytester) -> None:
    """faults=[...] in the marker: the first add fails and a retrying agent gets the answer on
    its second try; an injected fault is not an unmatched request."""
    inner_test(pytester, server=["false"], calls=[ADD, ADD], expected=["error", {"result": 5}],
               assert_all_played=False, faults=["tools/call:add error=-32000:busy nth=1"])
    pytester.runpytest("tests", *INNER_ARGS).assert_outcomes(passed=1)
