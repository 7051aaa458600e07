"""The pytest marker's protocol_version= and max_gap=: what `mcprec replay --protocol-version`
and `--max-gap` do, for a test that replays through the plugin."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.plugin_helpers import INNER_ARGS, no_mode_from_the_environment  # noqa: F401 - autouse
from test_replay_versions import OLD, record_old_client

pytest_plugins = ["pytester"]

INNER = '''
import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client


@pytest.mark.mcprec(cassette={cassette!r}, timing="recorded", max_gap="20ms"{marker})
def test_versions(mcprec_server):
    async def main():
        async with stdio_client(mcprec_server.params) as (read, write):
            async with ClientSession(read, write) as s:
                init = await s.initialize()
                await s.list_tools()
                return init.protocol_version
    assert {check}
'''


@pytest.fixture(scope="module")
def old_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pacing") / "old.db"
    record_old_client(path)
    return path


@pytest.mark.parametrize("marker, check", [
    ("", f"anyio.run(main) == {OLD!r}"),
    (", protocol_version='rewrite'", f"anyio.run(main) != {OLD!r}"),
])
def test_marker_protocol_version(pytester: pytest.Pytester, old_recording: Path, marker: str,
                                 check: str) -> None:
    """Under the marker, the SDK client gets the recorded version, or its own with
    protocol_version='rewrite' (and max_gap= is taken with timing='recorded')."""
    pytester.makepyfile(test_inner=INNER.format(cassette=str(old_recording), marker=marker,
                                                check=check))
    result = pytester.runpytest_subprocess(*INNER_ARGS)
    result.assert_outcomes(passed=1)


def test_marker_bad_protocol_version_fails_in_one_line(pytester: pytest.Pytester,
                                                       old_recording: Path) -> None:
    """An unknown protocol_version= fails the test with one line naming the choices."""
    pytester.makepyfile(test_inner=INNER.format(cassette=str(old_recording),
                                                marker=", protocol_version='newest'",
                                                check="anyio.run(main)"))
    result = pytester.runpytest_subprocess(*INNER_ARGS)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*protocol_version is 'newest'; choose recorded or rewrite*"])
