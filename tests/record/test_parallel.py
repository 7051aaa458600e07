"""Many processes on one cassette: ``pytest -n 4`` with tests that share a cassette, some
replaying it and some recording into it at the same time."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from support.helpers import REPO, SDK_SERVER

from mcprec.cassette import Cassette

INNER = '''
import asyncio, sys
import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client
from mcp import StdioServerParameters
from mcprec.testing import replay_server, replay_streams

CASSETTE = {cassette!r}
SERVER = [sys.executable, {server!r}]


async def _calls(params):
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            out = []
            for i in range(3):
                res = await s.call_tool("add", {{"a": i, "b": 1}})
                out.append(res.content[0].text)
            return out


@pytest.mark.parametrize("n", range(4))
def test_replay_subprocess(n):
    rs = replay_server(CASSETTE, session="base")
    assert asyncio.run(_calls(rs.params)) == ["1", "2", "3"]


@pytest.mark.parametrize("n", range(2))
def test_replay_in_process(n):
    async def go():
        async with replay_streams(CASSETTE, session="base") as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                return (await s.call_tool("add", {{"a": 5, "b": 5}})).content[0].text
    assert asyncio.run(go()) == "10"


@pytest.mark.parametrize("n", range(4))
def test_record_into_the_same_cassette(n):
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "mcprec", "record", "-c", CASSETTE, "-s", f"rec-{{n}}", "--", *SERVER])
    assert asyncio.run(_calls(params)) == ["1", "2", "3"]
'''


async def _record_base(cassette: Path) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "mcprec", "record", "-c", str(cassette), "-s", "base", "--",
        sys.executable, str(SDK_SERVER)])
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            for i in range(3):
                await s.call_tool("add", {"a": i, "b": 1})
            await s.call_tool("add", {"a": 5, "b": 5})


def test_pytest_n4_shares_one_cassette(tmp_path: Path) -> None:
    """Under ``pytest -n 4``, 6 tests replay one cassette while 4 record into it: all pass,
    no 'database is locked', and every recording is complete."""
    import asyncio

    cassette = tmp_path / "shared.db"
    asyncio.run(_record_base(cassette))
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "test_inner.py").write_text(textwrap.dedent(INNER.format(
        cassette=str(cassette), server=str(SDK_SERVER))))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "4", "-q", "-p", "no:cacheprovider",
         "-W", "ignore::DeprecationWarning", str(inner)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "10 passed" in proc.stdout
    assert "locked" not in proc.stdout + proc.stderr
    with Cassette.open(cassette) as c:
        sessions = {s.name: s for s in c.sessions()}
        for n in range(4):
            s = sessions[f"rec-{n}"]
            assert s.status == "complete", s
            answers = [m for m in c.messages(s) if m.method == "tools/call" and m.kind == "response"]
            assert [a.json["result"]["content"][0]["text"] for a in answers] == ["1", "2", "3"]
